"""STEP's freeze scope: Algorithm 1 freezes v for every parameter at the switch ("all"); the
public AdamW_STEP only for the N:M-sparse weights ("sparse"), dense parameters keep Adam."""

from __future__ import annotations

import numpy as np
import pytest

from stepsim import make_recipe
from stepsim.problems import make_problem
from stepsim.training import FitRun


def _after_switch(scope: str, steps: int = 12):
    problem = make_problem("digits", hidden=(16,), batch_size=16)
    run = FitRun(problem, make_recipe("step", lr=1e-3, switch_at=5, freeze_scope=scope),
                 steps, rng=0)
    for k in range(1, steps + 1):
        run.after_step(k, run.step(k))
    return problem, run


def test_sparse_scope_freezes_only_the_nm_weights_and_dense_ones_keep_adam():
    problem, run = _after_switch("sparse")
    sparse = {n for n, s in problem.specs.items() if s.sparse}
    assert sparse and sparse != set(problem.specs)  # the MLP has dense biases
    assert set(run.state.opt.frozen) == sparse
    _, every = _after_switch("all")
    assert set(every.state.opt.frozen) == set(problem.specs)
    # the biases' v moved after the switch under "sparse" and not under "all"
    bias = next(n for n in problem.specs if n not in sparse)
    assert not np.array_equal(run.state.opt.v[bias], every.state.opt.v[bias])
    # the sparse weights' frozen v* are the same bits either way until the switch
    w = next(iter(sorted(sparse)))
    assert np.array_equal(run.state.opt.v[w], every.state.opt.v[w])


def test_freeze_scope_is_refused_where_it_means_nothing_or_is_misspelt():
    with pytest.raises(ValueError, match="freeze_scope"):
        make_recipe("step", freeze_scope="dense")
    with pytest.raises(ValueError, match="does not use option.*freeze_scope"):
        make_recipe("step-v-updated", freeze_scope="sparse")
