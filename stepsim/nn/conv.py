"""1-D convolution, forward and backward by hand (CS231n style), its products single GEMMs.

Layout. Activations are channels-last, x (B, L, C_in) -> out (B, L_out, C_out) with
``L_out = (L + 2 * padding - K) // stride + 1``; a weight is stored (C_out, K, C_in),
input channels innermost -- cuDNN's channels-last filter layout (KRSC) and the one apex
ASP masks in -- so its N:M groups of M input channels at one kernel tap run along the
last axis (``ParamSpec(n, m, axis=-1)``), and the weight's **GEMM matrix** is the free
reshape ``wmat = w.reshape(C_out, K * C_in)`` (in innermost). torch's ``nn.Conv1d``
stores the same weight as ``w.transpose(0, 2, 1)`` (C_out, C_in, K) and takes x as
``x.transpose(0, 2, 1)`` (B, C_in, L).

The computation is im2col: ``cols`` (B * L_out, K * C_in) gathers the K input positions
``j * stride + t - padding`` each output position j reads (zeros for padding), and then

* forward product       ``out = cols @ wmat.T (+ b)``          (:func:`forward_product`)
* input-gradient product ``dcols = dout @ wmat``, then dx = col2im(dcols)
                                                            (:func:`input_grad_product`)
* weight-gradient product ``dwmat = dout.T @ cols``          (:func:`weight_grad_product`)

each one BLAS call on 2-d operands: the conv is a Linear layer on the column matrix, so
the first two are the products of an N:M Linear (:mod:`stepsim.nn.nm_linear`): an N:M
weight's groups of M input channels at a tap are runs of M columns of ``wmat``, and given
its :class:`~stepsim.nn.nm_linear.SparseWeight` (``matrices=`` of :func:`conv1d_forward`,
from :func:`~stepsim.nn.nm_linear.weights_for` with the conv's rule :func:`sparse_pays`)
they run on the kept entries, on the Linear's kernels, in their fixed order. The
weight-gradient product stays dense (SR-STE and STEP need the dense gradient). The gather
and its adjoint, the scatter-add, run on numba kernels (:mod:`stepsim.nn._conv_kernels`);
their NumPy references are :func:`im2col_reference` and :func:`col2im_reference`.

Computations run in the input's dtype (float32 or float64; mixed dtypes are a
``TypeError``); layers never mask weights (a recipe hands the forward weights Pi * w).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import check_int
from stepsim.nn import layers as L
from stepsim.nn import nm_linear


def output_length(length: int, k: int, stride: int, padding: int) -> int:
    """L_out = (length + 2 padding - k) // stride + 1, the output positions of a 1-D conv."""
    return (length + 2 * padding - k) // stride + 1


def check_geometry(length: int, k: int, stride, padding) -> tuple[int, int]:
    """(stride, padding) checked: integers, stride >= 1, padding >= 0, and the kernel fits
    the padded input (length + 2 padding >= k); a ValueError/TypeError naming the value
    otherwise."""
    stride = check_int("stride", stride, minimum=1)
    padding = check_int("padding", padding, minimum=0)
    if length + 2 * padding < k:
        raise ValueError(f"kernel size {k} exceeds the padded input length {length} + 2 * "
                         f"{padding}: no output position")
    return stride, padding


# ----------------------------------------------------------------------- gather / scatter
def im2col_reference(x: np.ndarray, k: int, stride: int, padding: int) -> np.ndarray:
    """NumPy reference of the gather: x (B, L, C) -> cols (B, L_out, K, C), C-contiguous,
    ``cols[b, j, t] = x[b, j * stride + t - padding]`` (zeros where that is padding)."""
    batch, length, channels = x.shape
    l_out = output_length(length, k, stride, padding)
    padded = np.zeros((batch, length + 2 * padding, channels), x.dtype)
    padded[:, padding:padding + length] = x
    cols = np.empty((batch, l_out, k, channels), x.dtype)
    for t in range(k):
        cols[:, :, t] = padded[:, t:t + (l_out - 1) * stride + 1:stride]
    return cols


def col2im_reference(dcols: np.ndarray, length: int, stride: int, padding: int) -> np.ndarray:
    """NumPy reference of the scatter-add (the adjoint of the gather): dcols (B, L_out, K, C)
    -> dx (B, length, C), each position's contributions added j ascending, t ascending."""
    batch, l_out, k, channels = dcols.shape
    padded = np.zeros((batch, length + 2 * padding, channels), dcols.dtype)
    for j in range(l_out):
        for t in range(k):
            padded[:, j * stride + t] += dcols[:, j, t]
    return np.ascontiguousarray(padded[:, padding:padding + length])


def im2col(x: np.ndarray, k: int, stride: int, padding: int) -> np.ndarray:
    """The gather on its kernel: x (B, L, C) C-contiguous -> cols (B, L_out, K, C)."""
    from stepsim.nn import _conv_kernels as K

    batch, length, channels = x.shape
    cols = np.empty((batch, output_length(length, k, stride, padding), k, channels), x.dtype)
    K.im2col(x, k, stride, padding, cols)
    return cols


def col2im(dcols: np.ndarray, length: int, stride: int, padding: int) -> np.ndarray:
    """The scatter-add on its kernel: dcols (B, L_out, K, C) C-contiguous -> dx (B, length, C)."""
    from stepsim.nn import _conv_kernels as K

    batch, _l_out, _k, channels = dcols.shape
    dx = np.empty((batch, length, channels), dcols.dtype)
    K.col2im(dcols, stride, padding, dx)
    return dx


# ----------------------------------------------------------------------------- products
def forward_product(cols2: np.ndarray, wmat) -> np.ndarray:
    """cols2 (R, K*C_in) @ wmat (C_out, K*C_in).T -> (R, C_out): the forward product, on
    OpenBLAS for a dense wmat, on the kept entries for a SparseWeight."""
    return nm_linear.product(cols2, wmat)


def input_grad_product(dout2: np.ndarray, wmat) -> np.ndarray:
    """dout2 (R, C_out) @ wmat (C_out, K*C_in) -> dcols (R, K*C_in): the input-gradient
    product, dense or on the kept entries as :func:`forward_product`."""
    return nm_linear.input_grad(dout2, wmat)


def weight_matrices(matrices, w: np.ndarray) -> tuple:
    """(forward, backward): the matrices a conv's two products multiply by -- ``matrices``
    as given (from :func:`~stepsim.nn.nm_linear.weights_for`), or w's dense (C_out, K*C_in)
    matrix for both when None; a ValueError unless each is w's matrix shape."""
    if matrices is None:
        wmat = w.reshape(w.shape[0], -1)
        return wmat, wmat
    want = (w.shape[0], w.shape[1] * w.shape[2])
    for which, m in zip(("forward", "backward"), matrices):
        if not isinstance(m, (np.ndarray, nm_linear.SparseWeight)):
            raise TypeError(f"matrices' {which} weight must be an ndarray or a SparseWeight, "
                            f"got {type(m).__name__}")
        if tuple(m.shape) != want or m.dtype != w.dtype:
            raise ValueError(f"matrices' {which} weight must be w's {want} matrix of dtype "
                             f"{w.dtype}, got {tuple(m.shape)} {m.dtype}")
    return tuple(matrices)


def weight_grad_product(dout2: np.ndarray, cols2: np.ndarray) -> np.ndarray:
    """dout2 (R, C_out).T @ cols2 (R, K*C_in) -> dwmat (C_out, K*C_in), C-contiguous."""
    return np.ascontiguousarray(dout2.T @ cols2)


# When a conv's product runs on the kept entries: the Linear's rule
# (:func:`stepsim.nn.nm_linear.sparse_pays`), an eighth of the weights kept or fewer, an
# input at least MIN_WIDTH wide and at least MIN_WORK multiply-adds in the dense product.
# Read from the crossover table of ``stepsim bench --only train`` at the MNIST-1D CNN's
# shapes and from whole SR-STE steps there (1 thread, interleaved): at 16 channels and
# batch 64 (column matrices (16, 48) of 320-640 rows) the forward product alone was faster
# sparse at a quarter or less, the input gradient from 16 channels mostly slower, and a
# step with either was slower -- packing the kept weights each step and the kernels'
# per-call costs take more than a product of a few hundred thousand multiply-adds saves;
# at 32 channels and batch 128 a step with both products sparse was faster at 1:8, not
# at 1:4.
MAX_DENSITY = (1, 8)  # n / m at most 1/8
MIN_WIDTH = 32
MIN_WORK = 1 << 20


def sparse_pays(rows: int, outputs: int, width: int, n: int, m: int) -> bool:
    """Whether a conv's product with an n:m weight runs on its kept entries: ``rows`` rows
    of the column matrix (B * L_out), ``width`` entries a row in (the forward product:
    K * C_in; the input gradient: C_out), ``outputs`` out. Shapes and N:M only (the same
    answer on every machine)."""
    most, of = MAX_DENSITY
    return (n * of <= most * m and width >= MIN_WIDTH and rows * outputs * width >= MIN_WORK
            and nm_linear.sparse_pays(rows, outputs, width, n, m))


# ------------------------------------------------------------------------------ the layer
class Conv1dCache(NamedTuple):
    """What the backward pass needs: cols (B, L_out, K, C_in) the gathered input; w
    (C_out, K, C_in) the weight; length L of the input; stride, padding; has_bias; w_back
    the matrix the input-gradient product multiplies by (w's (C_out, K*C_in) or its
    SparseWeight)."""

    cols: np.ndarray
    w: np.ndarray
    length: int
    stride: int
    padding: int
    has_bias: bool
    w_back: object


def check_conv_input(x, w, b, stride, padding) -> tuple[int, int]:
    """The arguments of :func:`conv1d_forward` checked (dtypes, shapes, geometry): the
    (stride, padding) it runs with, or a TypeError/ValueError naming the argument."""
    L.check_float("x", x)
    L.check_same_dtype("x", x, "w", w)
    if w.ndim != 3:
        raise ValueError(f"w must be 3-D (C_out, K, C_in), got shape {w.shape}")
    if x.ndim != 3 or x.shape[2] != w.shape[2]:
        raise ValueError(f"x must be (B, L, C_in) with C_in = w.shape[2] = {w.shape[2]} "
                         f"(channels last), got shape {x.shape}")
    if w.shape[1] < 1 or w.shape[0] < 1:
        raise ValueError(f"w must have at least one output channel and one tap, got shape "
                         f"{w.shape}")
    if b is not None:
        L.check_same_dtype("x", x, "b", b)
        L.check_shape("b", b, (w.shape[0],), "w's C_out")
    return check_geometry(x.shape[1], w.shape[1], stride, padding)


def conv1d_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int = 1,
                   padding: int = 0, matrices=None):
    """1-D convolution (cross-correlation, as torch): out[b, j, o] = b[o] + sum over t, c of
    w[o, t, c] * x[b, j * stride + t - padding, c] (zeros outside the input).

    Parameters
    ----------
    x : ndarray (B, L, C_in), channels last
    w : ndarray (C_out, K, C_in), same dtype as x
    b : ndarray (C_out,) or None (no bias)
    stride : int >= 1
    padding : int >= 0, zeros on both ends
    matrices : None (both products on w's dense matrix), or (forward, backward): what the
        forward and the input-gradient product multiply by, each w's (C_out, K*C_in)
        matrix or its :class:`~stepsim.nn.nm_linear.SparseWeight`
        (:func:`~stepsim.nn.nm_linear.weights_for`)

    Returns
    -------
    out : ndarray (B, L_out, C_out), C-contiguous, L_out = (L + 2 padding - K) // stride + 1
    cache : Conv1dCache
    """
    stride, padding = check_conv_input(x, w, b, stride, padding)
    forward, backward = weight_matrices(matrices, w)
    c_out, k, _ = w.shape
    cols = im2col(np.ascontiguousarray(x), k, stride, padding)
    batch, l_out = cols.shape[:2]
    out = forward_product(cols.reshape(batch * l_out, -1), forward)
    if b is not None:
        out += b
    return (out.reshape(batch, l_out, c_out),
            Conv1dCache(cols, w, x.shape[1], stride, padding, b is not None, backward))


def conv1d_backward(dout: np.ndarray, cache: Conv1dCache, need_dx: bool = True):
    """Gradients of :func:`conv1d_forward`.

    Parameters
    ----------
    dout : ndarray (B, L_out, C_out), upstream gradient
    cache : Conv1dCache from the forward
    need_dx : False skips the input-gradient product (a first layer's input needs none)

    Returns
    -------
    dx : ndarray (B, L, C_in), C-contiguous (None when not need_dx)
    dw : ndarray (C_out, K, C_in), C-contiguous
    db : ndarray (C_out,) (the sum of dout over B and L_out), or None without a bias
    """
    cols, w, length, stride, padding, has_bias, w_back = cache
    L.check_same_dtype("the forward's input", cols, "dout", dout)
    c_out = w.shape[0]
    batch, l_out = cols.shape[:2]
    L.check_shape("dout", dout, (batch, l_out, c_out), "B, L_out, C_out of the forward")
    dout2 = np.ascontiguousarray(dout).reshape(batch * l_out, c_out)
    cols2 = cols.reshape(batch * l_out, -1)
    dw = weight_grad_product(dout2, cols2).reshape(w.shape)
    db = dout2.sum(axis=0) if has_bias else None
    dx = None
    if need_dx:
        dcols = input_grad_product(dout2, w_back)
        dx = col2im(dcols.reshape(cols.shape), length, stride, padding)
    return dx, dw, db
