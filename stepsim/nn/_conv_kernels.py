"""numba kernels for the 1-D convolution's gather and scatter (im2col / col2im). Private:
call :func:`stepsim.nn.conv.conv1d_forward` and :func:`stepsim.nn.conv.conv1d_backward`,
which validate.

Activations are channels-last, x (B, L, C) C-contiguous, and the column matrix is
cols (B, L_out, K, C) C-contiguous, i.e. the (B * L_out, K * C) matrix whose row (b, j)
holds the K input positions ``j * stride + t - padding`` (t = 0..K-1) that output position
j of sample b reads, each a contiguous run of C channels; a position outside [0, L) (the
zero padding) reads zeros. Their NumPy references are :func:`stepsim.nn.conv.im2col_reference`
and :func:`stepsim.nn.conv.col2im_reference`; the tests compare them bit for bit (a gather
is a copy; the scatter adds each position's contributions in the references' order, j
ascending then t ascending). Serial loops, as the other nn kernels (PERF_NOTES, "Threads").
"""

from __future__ import annotations

from stepsim._ground.jit import njit


@njit
def im2col(x, k, stride, padding, cols):
    """Gather: cols (B, L_out, K, C)[b, j, t, :] = x (B, L, C)[b, j * stride + t -
    padding, :], or 0 where that position is padding."""
    batch, length, channels = x.shape
    l_out = cols.shape[1]
    zero = x.dtype.type(0)
    for b in range(batch):
        for j in range(l_out):
            start = j * stride - padding
            for t in range(k):
                src = start + t
                if 0 <= src < length:
                    for c in range(channels):
                        cols[b, j, t, c] = x[b, src, c]
                else:
                    for c in range(channels):
                        cols[b, j, t, c] = zero


@njit
def col2im(dcols, stride, padding, dx):
    """Scatter-add, the adjoint of :func:`im2col`: dx (B, L, C) = 0, then
    dx[b, j * stride + t - padding, :] += dcols (B, L_out, K, C)[b, j, t, :] for every j
    ascending, t ascending, skipping padding positions."""
    batch, length, channels = dx.shape
    l_out, k = dcols.shape[1], dcols.shape[2]
    zero = dx.dtype.type(0)
    for b in range(batch):
        for i in range(length):
            for c in range(channels):
                dx[b, i, c] = zero
        for j in range(l_out):
            start = j * stride - padding
            for t in range(k):
                src = start + t
                if 0 <= src < length:
                    for c in range(channels):
                        dx[b, src, c] += dcols[b, j, t, c]
