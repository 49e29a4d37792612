"""A learning curve's point at step k has the bits of a run of k steps' final metrics —
also where the step multiplies by the kept weights only (N:M products, stepsim.nn.nm_linear):
the evaluation reads the dense Pi * w in both places."""

from __future__ import annotations

import pytest

from stepsim import fit
from stepsim.nn.nm_linear import sparse_pays
from stepsim.problems.registry import make_problem
from stepsim.recipes import make_recipe


@pytest.mark.parametrize("recipe_name, nm", [("sr-ste", (1, 8)), ("dense", None)])
def test_a_curve_point_is_the_final_metrics_of_the_shorter_run(recipe_name, nm):
    problem = make_problem("digits", **({"nm": nm} if nm else {}))
    if nm:  # the step does take the kept-weight products here (else the test proves nothing)
        assert sparse_pays(128, 256, 256, *nm)
    long = fit(problem, make_recipe(recipe_name, lr=1e-3), 40, rng=3, eval_every=20,
               progress=False)
    short = fit(problem, make_recipe(recipe_name, lr=1e-3), 20, rng=3, progress=False)
    at = list(long.curves["step"]).index(20)
    for key, value in short.metrics.items():
        if key in long.curves:
            assert float(long.curves[key][at]) == float(value), key
