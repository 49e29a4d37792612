"""Every recipe on the MNIST-1D CNN, whose conv weights (out, k, in) group M input channels
at each kernel tap: each trains a few steps, its inference weights are N:M along those
groups, and a transposable recipe's are transposable on the weights' GEMM matrices."""

from __future__ import annotations

import numpy as np
import pytest

from stepsim.core.transposable import gemm_shape, is_transposable, transposable_mask
from stepsim.problems import make_problem
from stepsim.recipes import RECIPES, make_recipe
from stepsim.recipes.transforms import transposable_ok
from stepsim.training import fit

CNN = {"channels": (8, 8, 8), "n_train": 200, "n_validation": 40, "n_test": 50,
       "batch_size": 16}
#: options that make each recipe leave its dense phase inside a 12-step run
OPTIONS = {"asp": {"prune_at": 0.25}, "step": {"switch_at": 4},
           "step-v-updated": {"switch_at": 4}, "layerwise-step": {"switch_at": 4},
           "s-ste-step": {"switch_at": 4}}


def _groups(w, m):
    return np.count_nonzero(w.reshape(-1, m), axis=1)


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("transposable", [False, True])
def test_every_recipe_trains_the_cnn_with_nm_over_input_channels(name, transposable):
    if transposable and name == "dense":
        pytest.skip("dense has no masks (and no transposable option)")
    problem = make_problem("mnist1d", **CNN, nm=(2, 4))
    options = dict(OPTIONS.get(name, {}))
    if transposable:
        options["transposable"] = True
    result = fit(problem, make_recipe(name, lr=3e-3, **options), 12, rng=1, progress=False)
    assert result.success and np.isfinite(result.trace.loss).all()
    if name == "dense":
        assert all(np.count_nonzero(w) == w.size for n, w in result.weights.items()
                   if n.endswith(".w"))
        return
    for pname, spec in problem.specs.items():
        w = result.weights[pname]
        if not spec.sparse:
            continue
        n, m = result.nm[pname]
        assert w.shape[-1] % m == 0
        assert _groups(w, m).max() <= n, pname  # N:M along the input channels at a tap
        if transposable and transposable_ok(w.shape, m, spec.axis):
            assert is_transposable(w != 0, n, m), pname
    assert "conv2.w" in result.nm and "conv1.w" not in result.nm
    if transposable:
        assert is_transposable(result.weights["conv2.w"] != 0, *result.nm["conv2.w"])


def test_a_conv_weights_transposable_mask_is_its_gemm_matrix():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 8)).astype(np.float32)
    mask = transposable_mask(w, 2, 4)
    assert mask.shape == w.shape
    matrix = w.reshape(gemm_shape(w.shape))
    np.testing.assert_array_equal(mask.reshape(8, 24), transposable_mask(matrix, 2, 4))
    assert is_transposable(mask, 2, 4)
    # rows: 2 of every 4 input channels at each tap; columns of the GEMM matrix: 2 of
    # every 4 output channels at each (tap, input channel)
    assert (mask.reshape(8, 3, 2, 4).sum(axis=3) == 2).all()
    assert (mask.reshape(2, 4, 24).sum(axis=1) == 2).all()
    assert not transposable_ok((8, 3, 6), 4) and not transposable_ok((8, 8, 3, 3), 4, axis=1)
