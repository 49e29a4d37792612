"""N:M Linear products from the kept weights (stepsim.nn.nm_linear): the numba kernels give
the bits of their NumPy references, the references agree with the dense product of the
masked weight to rounding, packing and the dispatch rule behave, and a training step hands
the models the masks that let them take the sparse products (and the same ones on the pure
and the lean path)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import sparse_linear_case

from stepsim.nn import nm_linear as NL


def _masked(w, mask):
    return np.where(mask, w, w.dtype.type(0))


def _close_to_dense(got, x, wd):
    """|got - x @ wd.T| within the error bound of a sum of products in got's dtype:
    terms * eps * sum |x| |w| (each output sums at most ``terms`` products)."""
    eps = np.finfo(got.dtype).eps
    exact = x.astype(np.float64) @ wd.astype(np.float64).T
    bound = np.abs(x).astype(np.float64) @ np.abs(wd).astype(np.float64).T
    terms = max(wd.shape[1], 1)
    assert np.all(np.abs(got - exact) <= 2 * terms * eps * bound + np.finfo(got.dtype).tiny)


@settings(deadline=None)
@given(sparse_linear_case())
def test_sparse_products_give_the_bits_of_their_references(case):
    x, w, mask, n, m, dy = case
    sw = NL.pack(w, mask, n, m)
    got = NL.product(x, sw)
    want = NL.product_reference(x, sw)
    assert got.dtype == x.dtype and got.shape == (x.shape[0], w.shape[0])
    assert got.tobytes() == want.tobytes()
    got_dx = NL.input_grad(dy, sw)
    want_dx = NL.input_grad_reference(dy, sw)
    assert got_dx.shape == x.shape and got_dx.tobytes() == want_dx.tobytes()


@settings(deadline=None)
@given(sparse_linear_case())
def test_sparse_products_agree_with_the_dense_masked_product(case):
    x, w, mask, n, m, dy = case
    sw = NL.pack(w, mask, n, m)
    wd = _masked(w, mask)
    _close_to_dense(NL.product_reference(x, sw), x, wd)
    _close_to_dense(NL.input_grad_reference(dy, sw), dy, wd.T.copy())
    _close_to_dense(NL.product(x, sw), x, wd)
    _close_to_dense(NL.input_grad(dy, sw), dy, wd.T.copy())


def test_integer_products_are_exact_and_the_rounding_check_can_fail():
    # small integers: every product and sum is exact, so sparse == dense bit for bit
    rng = np.random.default_rng(3)
    w = rng.integers(-3, 4, size=(24, 64)).astype(np.float32)
    mask = np.zeros_like(w, dtype=bool)
    mask[:, ::8] = True  # 1:8, position 0 of every group
    x = rng.integers(-3, 4, size=(70, 64)).astype(np.float32)
    sw = NL.pack(w, mask, 1, 8)
    assert np.array_equal(NL.product(x, sw), x @ _masked(w, mask).T)
    # the tolerance check itself rejects a wrong answer (the unmasked product)
    with pytest.raises(AssertionError):
        _close_to_dense(x @ w.T, x, _masked(w, mask))


@settings(deadline=None)
@given(sparse_linear_case())
def test_pack_keeps_the_masked_entries_in_column_order(case):
    _, w, mask, n, m, _ = case
    sw = NL.pack(w, mask, n, m)
    k = w.shape[1] // m * n
    assert sw.values.shape == sw.columns.shape == (w.shape[0], k)
    assert sw.columns.dtype == np.int32 and sw.values.dtype == w.dtype
    assert np.all(np.diff(sw.columns, axis=1) > 0)
    assert sw.dense().tobytes() == _masked(w, mask).tobytes()
    # W's entries by input column, each column's by increasing output: W.T's rows
    indptr, outputs, values = sw.by_input
    dense_t = np.zeros(w.shape[::-1], w.dtype)
    for c in range(w.shape[1]):
        rows_of_c = outputs[indptr[c]:indptr[c + 1]]
        assert np.all(np.diff(rows_of_c) > 0)
        dense_t[c, rows_of_c] = values[indptr[c]:indptr[c + 1]]
    assert dense_t.tobytes() == sw.dense().T.tobytes()


@settings(deadline=None)
@given(sparse_linear_case())
def test_pack_gives_the_bits_of_its_reference(case):
    _, w, mask, n, m, _ = case
    got, want = NL.pack(w, mask, n, m), NL.pack_reference(w, mask, n, m)
    assert got.columns.tobytes() == want.columns.tobytes()
    assert got.values.tobytes() == want.values.tobytes()


@settings(deadline=None)
@given(st.sampled_from([(1, 2), (2, 4), (1, 4), (3, 4), (1, 8), (2, 8), (1, 16), (5, 16),
                        (2, 3), (1, 6), (3, 12), (2, 32)]),
       st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_pack_finds_the_first_row_whose_groups_do_not_keep_n(nm, rows, groups, seed):
    # masks with a few groups off by one entry (a kept entry dropped, one added, one moved
    # to the next group): pack names the first row with a group that does not keep n
    n, m = nm
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, groups * m)).astype(np.float32)
    mask = np.zeros(w.shape, bool)
    for r in range(rows):
        for g in range(groups):
            mask[r, g * m + rng.choice(m, n, replace=False)] = True
    for _ in range(rng.integers(0, 3)):
        r, c = rng.integers(rows), rng.integers(groups * m)
        mask[r, c] = not mask[r, c]
    counts = mask.reshape(rows, groups, m).sum(axis=2)
    wrong = np.flatnonzero((counts != n).any(axis=1))
    if wrong.size == 0:
        assert NL.pack(w, mask, n, m).dense().tobytes() == _masked(w, mask).tobytes()
    else:
        with pytest.raises(ValueError, match=f"mask row {wrong[0]} is not {n}:{m}"):
            NL.pack(w, mask, n, m)


def test_pack_refuses_what_is_not_an_nm_mask():
    w = np.ones((3, 8), np.float32)
    mask = np.zeros((3, 8), bool)
    mask[:, [0, 4]] = True  # 1:4
    NL.pack(w, mask, 1, 4)
    mask[1, 4], mask[1, 1] = False, True  # row 1: 2 of 8 kept, both in its first group
    with pytest.raises(ValueError, match=r"mask row 1 is not 1:4 .* keep \[2, 0\] entries"):
        NL.pack(w, mask, 1, 4)
    mask[1, 1], mask[1, 4] = False, True
    with pytest.raises(TypeError, match="mask must be a bool array"):
        NL.pack(w, mask.astype(np.uint8), 1, 4)
    with pytest.raises(ValueError, match="not a multiple of m = 3"):
        NL.pack(w, mask, 1, 3)
    with pytest.raises(ValueError, match="w must be 2-d"):
        NL.pack(w.reshape(-1), mask.reshape(-1), 1, 4)
    sw = NL.pack(w, np.tile([True, False, False, False], (3, 2)), 1, 4)
    with pytest.raises(TypeError, match="x has dtype float64 but the weight has float32"):
        NL.product(np.ones((2, 8)), sw)
    with pytest.raises(ValueError, match="its last axis must be 8"):
        NL.product(np.ones((2, 7), np.float32), sw)
    with pytest.raises(ValueError, match="its last axis must be 3"):
        NL.input_grad(np.ones((2, 4), np.float32), sw)


@settings(deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 5), st.integers(0, 5),
       st.sampled_from([np.float32, np.float64]))
def test_block_transpose_moves_every_entry(rows, cols, r0, c0, dtype):
    from stepsim.nn import _nm_kernels as K

    src = np.arange((rows + r0) * (cols + c0), dtype=dtype).reshape(rows + r0, cols + c0)
    dst = np.full((cols + 3, rows + 2), -1, dtype)
    K.transpose_block(src, r0, c0, rows, cols, dst, 3, 2)
    assert np.array_equal(dst[3:, 2:], src[r0:, c0:].T)
    assert np.all(dst[:3] == -1) and np.all(dst[:, :2] == -1)


def test_the_shuffle_network_transposes():
    from stepsim.nn import _nm_kernels as K

    rows = [[10 * i + j for j in range(8)] for i in range(8)]
    assert K.transpose8_model(rows) == [list(col) for col in zip(*rows)]


def test_the_dispatch_rule_reads_shapes_and_nm_only():
    # a quarter of the weights or fewer, inputs 16 wide or more, 2 products an output
    assert not NL.sparse_pays(128, 256, 256, 2, 4)
    assert NL.sparse_pays(128, 256, 256, 1, 4) and NL.sparse_pays(128, 256, 256, 1, 8)
    assert NL.sparse_pays(128, 256, 16, 1, 8)  # 2 products an output
    assert not NL.sparse_pays(128, 256, 16, 1, 16)  # 1
    assert not NL.sparse_pays(128, 256, 10, 1, 4)  # too narrow an input
    assert NL.sparse_pays(1024, 10, 32, 1, 8)
    assert not NL.sparse_pays(0, 10, 32, 1, 8)


def test_weights_for_takes_the_sparse_form_only_where_it_pays():
    rng = np.random.default_rng(0)
    from stepsim.core.masks import nm_mask

    w = rng.standard_normal((64, 128)).astype(np.float32)
    mask = nm_mask(w, 1, 8, axis=-1)
    fwd = NL.ForwardWeights({"w": _masked(w, mask), "b": np.zeros(64, np.float32)},
                            {"w": mask}, {"w": (1, 8)})
    f, b = NL.weights_for(fwd, "w", 32)
    assert isinstance(f, NL.SparseWeight) and b is f  # packed once, used by both
    assert NL.weights_for(fwd, "b", 32)[0] is fwd["b"]
    plain = dict(fwd)
    assert NL.weights_for(plain, "w", 32)[0] is plain["w"]  # no masks: dense
    dense_ratio = NL.ForwardWeights(plain, {"w": nm_mask(w, 2, 4, axis=-1)}, {"w": (2, 4)})
    assert NL.weights_for(dense_ratio, "w", 32)[0] is plain["w"]


def _spy_kernel(monkeypatch):
    """Count the sparse kernel's calls (each call runs the real kernel)."""
    from stepsim.nn import _nm_kernels as K

    calls = []
    real = K.sparse_product

    def counted(*args):
        calls.append(args[-1].shape)
        return real(*args)

    monkeypatch.setattr(K, "sparse_product", counted)
    return calls


def _forward_weights(params, specs, n, m):
    from stepsim.core.masks import nm_mask

    masks = {k: nm_mask(w, n, m, axis=-1) for k, w in params.items() if specs[k].sparse}
    fwd = {k: _masked(w, masks[k]) if k in masks else w for k, w in params.items()}
    return NL.ForwardWeights(fwd, masks, dict.fromkeys(masks, (n, m))), fwd


def _assert_close(a, b, scale):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale)


def test_mlp_with_the_masks_takes_sparse_products_close_to_the_dense_ones(monkeypatch):
    from stepsim.nn.mlp import MLP

    mlp = MLP((64, 96, 96, 10), nm=(1, 8))
    params = mlp.init_params(0)
    with_masks, plain = _forward_weights(params, mlp.specs(), 1, 8)
    x = np.random.default_rng(1).standard_normal((50, 64)).astype(np.float32)
    calls = _spy_kernel(monkeypatch)
    out, cache = mlp.forward(with_masks, x)
    grads = mlp.backward(np.ones_like(out), cache)
    # 3 forward products and layer 2's input gradient (layer 1's is never taken; layer
    # 3's would sum 10 / 8 products an output: dense)
    assert calls == [(50, 96), (50, 96), (50, 10), (50, 96)]
    ref_out, ref_cache = mlp.forward(plain, x)
    ref_grads = mlp.backward(np.ones_like(ref_out), ref_cache)
    _assert_close(out, ref_out, np.abs(ref_out).max())
    assert out.tobytes() != ref_out.tobytes()  # other sums: not OpenBLAS's bits
    for k in grads:
        _assert_close(grads[k], ref_grads[k], np.abs(ref_grads[k]).max())


def test_transformer_with_the_masks_takes_sparse_products_close_to_the_dense_ones(monkeypatch):
    from stepsim.nn import transformer as tr
    from stepsim.problems import make_problem

    problem = make_problem("lm", vocab=16, context=8, width=32, blocks=1, heads=2,
                           batch_size=4, n_test=4, nm=(1, 8))
    params = problem.init_params(np.random.default_rng(0))
    with_masks, plain = _forward_weights(params, problem.specs, 1, 8)
    batch = problem.sample_batch(np.random.default_rng(2))
    calls = _spy_kernel(monkeypatch)
    loss, grads = problem.loss_and_grad(with_masks, batch)
    assert len(calls) >= 6  # the four block products and the head, forward and backward
    ref_loss, ref_grads = problem.loss_and_grad(plain, batch)
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    # (some gradients are sums that cancel to ~1e-12: compared on the scale of all)
    scale = max(np.abs(g).max() for g in ref_grads.values())
    for k in tr.param_shapes(problem.model):
        _assert_close(grads[k], ref_grads[k], scale)
