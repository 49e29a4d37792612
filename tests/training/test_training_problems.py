"""fit on the new problems: a dense digits MLP learns; sparse recipes end exactly N:M."""

import numpy as np
import pytest

from stepsim.core.masks import nm_mask
from stepsim.problems import make_problem
from stepsim.recipes import criteria, make_recipe
from stepsim.training import fit


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """One BLAS thread: on a loaded 2-core machine OpenBLAS's spinning threads made these
    small matmuls 10-20x slower (222 vs 13-19 ms a step measured); results are the same."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):
        yield


@pytest.fixture(scope="module")
def digits():
    return make_problem("digits")  # 64-256-256-10, batch 128, float32


def test_dense_digits_mlp_reaches_95_percent(digits):
    result = fit(digits, make_recipe("dense"), 150, rng=0, threads=1, progress=False)
    assert result.initial_metrics["test_accuracy"] < 0.3
    assert result.metrics["test_accuracy"] >= 0.95
    assert result.trace.loss[-20:].mean() < 0.1 * result.trace.loss[0]


@pytest.mark.parametrize("nm", [(2, 4), (1, 8)])
@pytest.mark.parametrize("name", ["ste", "sr-ste", "asp", "step"])
def test_sparse_recipes_on_digits_end_exactly_nm(digits, name, nm):
    steps = 40
    recipe = make_recipe(name, lr=1e-3, **({"prune_at": 0.5} if name == "asp" else {}))
    crit = None
    if name == "step":
        crit = criteria.make_criterion("fixed-fraction", fraction=0.5)
    result = fit(digits, recipe, steps, rng=1, nm=nm, criterion=crit, threads=1,
                 progress=False)
    if name in ("asp", "step"):
        assert result.switch_step == 20 and result.trace.phase[-1] == 1
    n, m = nm
    for key, spec in digits.specs.items():
        w = result.weights[key]
        if not spec.sparse:
            np.testing.assert_array_equal(w, result.dense_weights[key])
            continue
        groups = w.reshape(w.shape[0], -1, m)
        assert np.all(np.count_nonzero(groups, axis=-1) == n), key
        if name != "asp":  # STE family: Pi_T is the N:M mask of w_T
            dense = result.dense_weights[key]
            np.testing.assert_array_equal(w, np.where(nm_mask(dense, n, m), dense, 0))
    assert result.metrics["test_accuracy"] > 0.5  # it trained, sparse
