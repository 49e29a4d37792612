"""numba kernels for the transformer's element-wise work. Private: call the wrappers in
:mod:`stepsim.nn.attention` and :mod:`stepsim.nn.transformer`, which validate.

Each kernel has a plain NumPy reference beside its wrapper (``*_reference``); the tests
compare them on random shapes and dtypes. Sums run in a different order than NumPy's
pairwise sums, so results agree to rounding, not bit for bit. The loops are serial: the
arrays of one step are small (~1M entries) and a parallel numba region next to OpenBLAS's
threads on 2 cores costs more than it saves (PERF_NOTES, "Threads: numba vs BLAS").
"""

from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import intrinsic

from stepsim._ground.jit import njit

# --------------------------------------------------------------------------- exp (float32)
# numba has no vectorised exp here (no SVML): math.exp is a scalar libm call per entry,
# far slower than this loop, which LLVM vectorises. exp(x) = 2^k * exp(r) with
# k = round(x / ln 2), r = x - k ln 2 (Cody-Waite split of ln 2, so r is exact to float32),
# exp(r) by its Taylor polynomial of degree 7 on |r| <= ln(2)/2, 2^k built from its bits
# (exponent field k + 127; k >= -126 for x >= -87, so 2^k is a normal float32, exactly the
# value a table of powers held before: same bits, but no gather from a table, which slowed
# the vectorised loop and read outside the table for a NaN input).
# Measured max relative error on [-87, 0]: 1.02e-7 (< 2 float32 ulps); below -87 (results
# under float32's smallest normal, ~1.2e-38) it returns 0; NaN gives NaN.
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_C2, _C3, _C4, _C5, _C6, _C7 = (np.float32(1.0 / math.factorial(i)) for i in range(2, 8))


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of the integer ``bits``."""
    if not isinstance(bits, types.Integer):
        return None
    sig = types.float32(bits)

    def codegen(context, builder, signature, args):
        from llvmlite import ir

        value = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.bitcast(value, ir.FloatType())

    return sig, codegen


@njit(inline="always")
def exp_nonpositive_f32(x):
    """exp(x) for float32 x <= 0 (see above); 0 for x < -87."""
    small = x < np.float32(-87.0)
    x = max(x, np.float32(-87.0))
    k = np.floor(x * _LOG2E + np.float32(0.5))
    r = (x - k * _LN2_HI) - k * _LN2_LO
    one = np.float32(1)
    p = one + r * (one + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * _C7))))))
    biased = np.int32(k) + np.int32(127)  # in [1, 127] for x in [-87, 0]; NaN: p is NaN
    y = p * _f32_from_bits((biased & np.int32(255)) << np.int32(23))
    return np.float32(0) if small else y


# --------------------------------------------------------------------------- causal softmax
# The rows of a causal softmax are short (T <= a few dozen) and each is a chain of
# dependent steps (a running maximum, a row sum), so a loop along one row runs mostly
# scalar. The kernels below take row i of every matrix at once instead: the rows are
# copied into a buffer with the matrices along its contiguous axis, every step of the
# row's arithmetic is then one element-wise pass over the matrices (which LLVM
# vectorises), and each row still gets exactly :func:`softmax_row`'s operations in its
# order (its sum in _row_sum's eight lanes), so the bits are those of the row-by-row code.
ROW_LANES = 8  # _row_sum's running lanes


@njit(inline="always")
def _lane_sums(buf, m, acc, out):
    """out[n] = sum_j buf[j, n] over j < m in :func:`_row_sum`'s lane order (lane l adds
    j = l, l + 8, ... from 0; the lanes pairwise; then the tail, from 0, in order).
    acc: (8, N) scratch."""
    nn = out.shape[0]
    zero = buf.dtype.type(0)
    full = m - m % ROW_LANES
    for lane in range(ROW_LANES):
        for n in range(nn):
            acc[lane, n] = zero
    for j in range(full):
        lane = j % ROW_LANES
        for n in range(nn):
            acc[lane, n] += buf[j, n]
    for n in range(nn):
        out[n] = zero
    for j in range(full, m):
        for n in range(nn):
            out[n] += buf[j, n]
    for n in range(nn):
        out[n] = (((acc[0, n] + acc[1, n]) + (acc[2, n] + acc[3, n]))
                  + ((acc[4, n] + acc[5, n]) + (acc[6, n] + acc[7, n]))) + out[n]


@njit
def causal_softmax(s, scale, fast_exp):
    """In place: s (N, T, T) -> softmax of scale * s[n, i, :i+1] in each row, 0 above it:
    :func:`softmax_row` on every row, computed row i of all N matrices at a time.

    fast_exp: use :func:`exp_nonpositive_f32` (float32 arrays only), else math.exp. The
    exponents are <= 0 after the row maximum is subtracted.
    """
    nn, t, _ = s.shape
    dt = s.dtype
    zero = dt.type(0)
    one = dt.type(1)
    buf = np.empty((t, nn), dt)  # buf[j, n] = s[n, i, j]
    acc = np.empty((ROW_LANES, nn), dt)
    top, total = np.empty(nn, dt), np.empty(nn, dt)
    for i in range(t):
        m = i + 1
        for j in range(m):
            for n in range(nn):
                buf[j, n] = s[n, i, j]
        for n in range(nn):
            top[n] = buf[0, n] * scale
        for j in range(1, m):
            for n in range(nn):
                top[n] = max(top[n], buf[j, n] * scale)
        for j in range(m):
            if fast_exp:
                for n in range(nn):
                    buf[j, n] = exp_nonpositive_f32(buf[j, n] * scale - top[n])
            else:
                for n in range(nn):
                    buf[j, n] = math.exp(buf[j, n] * scale - top[n])
        _lane_sums(buf, m, acc, total)
        for n in range(nn):
            total[n] = one / total[n]
        for j in range(m):
            for n in range(nn):
                buf[j, n] *= total[n]
        for n in range(nn):
            for j in range(m):
                s[n, i, j] = buf[j, n]
            for j in range(m, t):
                s[n, i, j] = zero


@njit(inline="always")
def softmax_row(rows, r, i, scale, fast_exp):
    """Row r of rows (R, T), a causal row of position i: rows[r, :i+1] -> the softmax of
    scale * rows[r, :i+1], rows[r, i+1:] -> 0. The definition of :func:`causal_softmax`'s
    arithmetic, row by row (the tests compare the two bit for bit)."""
    t = rows.shape[1]
    zero = rows.dtype.type(0)
    top = rows[r, 0] * scale
    for j in range(1, i + 1):
        top = max(top, rows[r, j] * scale)
    if fast_exp:
        for j in range(i + 1):
            rows[r, j] = exp_nonpositive_f32(rows[r, j] * scale - top)
    else:
        for j in range(i + 1):
            rows[r, j] = math.exp(rows[r, j] * scale - top)
    inv = rows.dtype.type(1) / _row_sum(rows, r, i + 1)
    for j in range(i + 1):
        rows[r, j] *= inv
    for j in range(i + 1, t):
        rows[r, j] = zero


@njit
def causal_softmax_rows(s, scale, fast_exp):
    """:func:`causal_softmax` computed row by row (:func:`softmax_row`): its reference
    order, kept for the tests."""
    n_mat, t, _ = s.shape
    rows = s.reshape(n_mat * t, t)
    for r in range(n_mat * t):
        softmax_row(rows, r, r % t, scale, fast_exp)


@njit
def causal_softmax_backward(p, dp, scale):
    """In place into dp (N, T, T): dS = (P * (dP - sum_j dP_j P_j)) * scale on the lower
    triangle, 0 above it (scale: the factor the scores were multiplied by inside the
    softmax; 1 gives the softmax's own gradient, bit for bit). Row by row: unlike the
    forward, taking row i of every matrix at once was slower here (measured: its one sum
    does not pay for copying two arrays' rows in and one out)."""
    n_mat, t, _ = p.shape
    prows = p.reshape(n_mat * t, t)
    drows = dp.reshape(n_mat * t, t)
    zero = p.dtype.type(0)
    for r in range(n_mat * t):
        i = r % t
        dot = _row_dot(drows, r, prows, r, i + 1)
        for j in range(i + 1):
            drows[r, j] = (prows[r, j] * (drows[r, j] - dot)) * scale
        for j in range(i + 1, t):
            drows[r, j] = zero


# --------------------------------------------------------------------------- embedding
@njit
def scatter_add_rows(index, rows, out):
    """out[index[i]] += rows[i] for every i, in order (rows (N, D), out (V, D))."""
    for i in range(index.shape[0]):
        target = out[index[i]]
        row = rows[i]
        for j in range(row.shape[0]):
            target[j] += row[j]


# --------------------------------------------------------------------------- LayerNorm
# Row sums in a fixed order, the same bits on every CPU: eight running lanes (lane l adds
# the terms of entries l, l + 8, l + 16, ... in turn, from 0), then the lanes pairwise
# ((0+1)+(2+3))+((4+5)+(6+7)), then the tail (the last n % 8 terms, in order, from 0). No
# reassociation is allowed (stepsim._ground.jit), so LLVM cannot pick an order by vector
# width. A row is addressed by its index in a 2-d array, never as a view: a view is an
# array struct with a reference count, and counting it up and down for each row cost more
# than the row's arithmetic at the LM's widths (LayerNorm more than halved without it).
# One function per term, each written out: numba does not prune a branch on a term kind
# passed as an argument (a shared loop with one was slower).
@njit(inline="always")
def _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail):
    return (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))) + tail


@njit(inline="always")
def _row_sum(a, i, n):
    """sum_j a[i, j] over j < n, in the lane order above."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = tail = a.dtype.type(0)
    full = n - n % 8
    for j in range(0, full, 8):
        s0 += a[i, j]
        s1 += a[i, j + 1]
        s2 += a[i, j + 2]
        s3 += a[i, j + 3]
        s4 += a[i, j + 4]
        s5 += a[i, j + 5]
        s6 += a[i, j + 6]
        s7 += a[i, j + 7]
    for j in range(full, n):
        tail += a[i, j]
    return _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail)


@njit(inline="always")
def _row_sum_sq_dev(a, i, n, mean):
    """sum_j (a[i, j] - mean)^2 over j < n, in the lane order above."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = tail = a.dtype.type(0)
    full = n - n % 8
    for j in range(0, full, 8):
        c0, c1, c2, c3 = a[i, j] - mean, a[i, j + 1] - mean, a[i, j + 2] - mean, a[i, j + 3] - mean
        c4, c5, c6, c7 = (a[i, j + 4] - mean, a[i, j + 5] - mean, a[i, j + 6] - mean,
                          a[i, j + 7] - mean)
        s0 += c0 * c0
        s1 += c1 * c1
        s2 += c2 * c2
        s3 += c3 * c3
        s4 += c4 * c4
        s5 += c5 * c5
        s6 += c6 * c6
        s7 += c7 * c7
    for j in range(full, n):
        c = a[i, j] - mean
        tail += c * c
    return _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail)


@njit(inline="always")
def _row_dot(a, i, b, k, n):
    """sum_j a[i, j] * b[k, j] over j < n (two rows of 2-d arrays), in the lane order."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = tail = a.dtype.type(0)
    full = n - n % 8
    for j in range(0, full, 8):
        s0 += a[i, j] * b[k, j]
        s1 += a[i, j + 1] * b[k, j + 1]
        s2 += a[i, j + 2] * b[k, j + 2]
        s3 += a[i, j + 3] * b[k, j + 3]
        s4 += a[i, j + 4] * b[k, j + 4]
        s5 += a[i, j + 5] * b[k, j + 5]
        s6 += a[i, j + 6] * b[k, j + 6]
        s7 += a[i, j + 7] * b[k, j + 7]
    for j in range(full, n):
        tail += a[i, j] * b[k, j]
    return _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail)


@njit(inline="always")
def _row_dot_vec(a, i, v, n):
    """sum_j a[i, j] * v[j] over j < n (a row and a 1-d vector), in the lane order."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = tail = a.dtype.type(0)
    full = n - n % 8
    for j in range(0, full, 8):
        s0 += a[i, j] * v[j]
        s1 += a[i, j + 1] * v[j + 1]
        s2 += a[i, j + 2] * v[j + 2]
        s3 += a[i, j + 3] * v[j + 3]
        s4 += a[i, j + 4] * v[j + 4]
        s5 += a[i, j + 5] * v[j + 5]
        s6 += a[i, j + 6] * v[j + 6]
        s7 += a[i, j + 7] * v[j + 7]
    for j in range(full, n):
        tail += a[i, j] * v[j]
    return _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail)


@njit(inline="always")
def _row_dot3(a, i, v, c, n):
    """sum_j (a[i, j] * v[j]) * c[i, j] over j < n, in the lane order."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = tail = a.dtype.type(0)
    full = n - n % 8
    for j in range(0, full, 8):
        s0 += (a[i, j] * v[j]) * c[i, j]
        s1 += (a[i, j + 1] * v[j + 1]) * c[i, j + 1]
        s2 += (a[i, j + 2] * v[j + 2]) * c[i, j + 2]
        s3 += (a[i, j + 3] * v[j + 3]) * c[i, j + 3]
        s4 += (a[i, j + 4] * v[j + 4]) * c[i, j + 4]
        s5 += (a[i, j + 5] * v[j + 5]) * c[i, j + 5]
        s6 += (a[i, j + 6] * v[j + 6]) * c[i, j + 6]
        s7 += (a[i, j + 7] * v[j + 7]) * c[i, j + 7]
    for j in range(full, n):
        tail += (a[i, j] * v[j]) * c[i, j]
    return _lanes_total(s0, s1, s2, s3, s4, s5, s6, s7, tail)


@njit(inline="always")
def _layernorm_row(x, i, gamma, beta, eps, inv_d, out, xhat):
    """Row i of :func:`layernorm_forward`: writes out[i] and xhat[i], returns rstd."""
    d = x.shape[1]
    mean = _row_sum(x, i, d) * inv_d
    r = x.dtype.type(1) / np.sqrt(_row_sum_sq_dev(x, i, d, mean) * inv_d + eps)
    for j in range(d):
        h = (x[i, j] - mean) * r
        xhat[i, j] = h
        out[i, j] = h * gamma[j] + beta[j]
    return r


@njit
def layernorm_forward(x, gamma, beta, eps, out, xhat, rstd):
    """Rows of x (N, D): xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps) (biased var),
    out = xhat * gamma + beta; out, xhat (N, D) and rstd (N,) are written."""
    n, d = x.shape
    inv_d = x.dtype.type(1.0 / d)
    for i in range(n):
        rstd[i] = _layernorm_row(x, i, gamma, beta, eps, inv_d, out, xhat)


@njit
def residual_layernorm(h, f, b, has_bias, gamma, beta, eps, out, xhat, rstd):
    """The residual connection, then LayerNorm, row by row in one pass: h (N, D) += f + b
    (in place; b (D,) only if has_bias), then :func:`layernorm_forward` of the new h into
    out, xhat (N, D) and rstd (N,). The bits of ``f += b``, ``h = h + f`` and the plain
    kernel: the same operations on each entry, each row normalised after it is summed."""
    n, d = h.shape
    inv_d = h.dtype.type(1.0 / d)
    for i in range(n):
        if has_bias:
            for j in range(d):
                h[i, j] = h[i, j] + (f[i, j] + b[j])
        else:
            for j in range(d):
                h[i, j] = h[i, j] + f[i, j]
        rstd[i] = _layernorm_row(h, i, gamma, beta, eps, inv_d, out, xhat)


@njit
def layernorm_backward(dout, xhat, rstd, gamma, dx, dgamma, dbeta):
    """dx (N, D) = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * gamma;
    dgamma (D,) = sum_rows dout * xhat and dbeta (D,) = sum_rows dout are written."""
    layernorm_backward_residual(dout, xhat, rstd, gamma, dx, False, dx, dgamma, dbeta,
                                dgamma, False)


@njit
def layernorm_backward_residual(dout, xhat, rstd, gamma, resid, has_resid, dx, dgamma,
                                dbeta, dsum, want_sum):
    """:func:`layernorm_backward`, plus the residual path around the LayerNorm: dx (N, D) =
    resid + LayerNorm's dx if has_resid (dx may be resid itself: written in place), and
    dsum (D,) = the new dx summed over the rows (:func:`rows_sum`, ``dx.sum(axis=0)``'s
    order: the bias gradient of the Linear whose output is that residual stream) if
    want_sum. The bits of the plain kernel, then ``resid + dx``, then ``dx.sum(axis=0)``."""
    n, d = dout.shape
    inv_d = dout.dtype.type(1.0 / d)
    for j in range(d):
        dgamma[j] = 0
        dbeta[j] = 0
    for i in range(n):
        m1 = _row_dot_vec(dout, i, gamma, d) * inv_d
        m2 = _row_dot3(dout, i, gamma, xhat, d) * inv_d
        r = rstd[i]
        for j in range(d):
            dgamma[j] += dout[i, j] * xhat[i, j]
            dbeta[j] += dout[i, j]
            g = (dout[i, j] * gamma[j] - m1 - xhat[i, j] * m2) * r
            dx[i, j] = resid[i, j] + g if has_resid else g
    if want_sum:
        rows_sum(dx, dsum)


# --------------------------------------------------------------------------- GELU (float32)
# Phi(x) = 1 - erfc(x / sqrt 2) / 2 with erfc(y) = t * poly(t) * exp(-y^2), t = 1 / (1 + p y)
# for y >= 0 (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7: the formula torch's vectorised
# float32 erf uses); exp(-x^2 / 2) by exp_nonpositive_f32. float32 constants (numba
# freezes globals with their type), so the arithmetic stays float32.
_P = np.float32(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741,
                                                   -1.453152027, 1.061405429))
_INV_SQRT2 = np.float32(0.7071067811865476)
_INV_SQRT_2PI = np.float32(0.3989422804014327)


@njit(inline="always")
def _normal_cdf(x, e):
    """Phi(x) given e = exp(-x^2 / 2), float32 (A&S 7.1.26)."""
    one = np.float32(1)
    t = one / (one + _P * (abs(x) * _INV_SQRT2))
    poly = t * (_A1 + t * (_A2 + t * (_A3 + t * (_A4 + t * _A5))))
    tail = np.float32(0.5) * poly * e  # = Phi(-|x|)
    return one - tail if x >= 0 else tail


@njit
def gelu_forward(x, out):
    """out = x * Phi(x) over flat float32 arrays."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v * _normal_cdf(v, exp_nonpositive_f32(np.float32(-0.5) * v * v))


@njit
def gelu_backward(dout, x, dx):
    """dx = dout * (Phi(x) + x * phi(x)) over flat float32 arrays."""
    for i in range(x.shape[0]):
        v = x[i]
        e = exp_nonpositive_f32(np.float32(-0.5) * v * v)
        dx[i] = dout[i] * (_normal_cdf(v, e) + v * (e * _INV_SQRT_2PI))


@njit
def bias_gelu(u, b, has_bias, out, slope):
    """The transformer MLP's bias and GELU in one pass over u (R, F) float32: u += b (b
    (F,), if has_bias; in place), out = u * Phi(u) and slope = GELU'(u) = Phi(u) + u phi(u)
    (R, F), each entry the value :func:`gelu_forward` / :func:`gelu_backward` compute for
    it (the bits of ``u += b``, then those kernels: the same expressions). The backward
    then reads the slope instead of computing Phi and exp again."""
    rows, n = u.shape
    for i in range(rows):
        for j in range(n):
            v = u[i, j] + b[j] if has_bias else u[i, j]
            u[i, j] = v
            e = exp_nonpositive_f32(np.float32(-0.5) * v * v)
            cdf = _normal_cdf(v, e)
            out[i, j] = v * cdf
            slope[i, j] = cdf + v * (e * _INV_SQRT_2PI)


@njit
def slope_backward_bias(dout, slope, dx, db, has_bias):
    """dx (R, F) = dout * slope (an activation's backward from its saved derivative: the
    bits of :func:`gelu_backward` with the slope of :func:`bias_gelu`), and db (F,) = dx
    summed over the rows (:func:`rows_sum`: ``dx.sum(axis=0)``'s order) if has_bias: the
    bias gradient of the Linear below it, in the same call."""
    rows, n = dout.shape
    for i in range(rows):
        for j in range(n):
            dx[i, j] = dout[i, j] * slope[i, j]
    if has_bias:
        rows_sum(dx, db)


# --------------------------------------------------------------------------- dense layers
# The MLP's element-wise work and the loss, fused around the matrix products (which stay
# BLAS). Every kernel computes what its NumPy reference in stepsim.nn.layers computes, in
# the same order, so the bits are the same: NumPy's sum over a row (the softmax's total) is
# its pairwise sum (:func:`pairwise_sum`), a sum over the rows (a bias gradient) adds the
# rows in order starting from 0, and maximum(x, 0) gives +0 for -0 (NumPy's AVX2 path).
_PW_BLOCK = 128  # NumPy's PW_BLOCKSIZE


@njit
def pairwise_sum(a):
    """NumPy's pairwise sum of a contiguous 1-d array (``np.add.reduce``'s inner loop), in
    a's dtype: below 8 entries in order; up to 128, eight running sums (entry i to sum
    i % 8) added ((0+1)+(2+3))+((4+5)+(6+7)), then the tail in order; above, the two
    halves (the first a multiple of 8 long) summed apart and added."""
    n = a.shape[0]
    if n < 8:
        res = a.dtype.type(0)
        for i in range(n):
            res += a[i]
        return res
    if n <= _PW_BLOCK:
        r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
        r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
        full = n - n % 8
        for i in range(8, full, 8):
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(full, n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return pairwise_sum(a[:half]) + pairwise_sum(a[half:])


@njit
def softmax_xent(logits, labels, scale, probs, logs, picked, sums):
    """Softmax cross-entropy of rows of logits (R, C) with labels (R,), as
    :func:`stepsim.nn.layers.softmax_cross_entropy` computes it.

    Writes probs (R, C) = (softmax - onehot) * scale (scale = 1/R in logits' dtype), logs
    (R,) = log(sum_j exp(shifted)) and picked (R,) = shifted[label], with shifted = row -
    max(row). exp and log are glibc's, in float64, rounded once to the dtype
    (stepsim._ground.libm). sums: (2,) float64 to receive ``np.sum(logs, dtype=float64)``
    and ``np.sum(picked, dtype=float64)`` (each entry widened, then 0 + the pairwise sum:
    NumPy's order while R fits in its cast buffer, which the caller checks), or (0,) when
    the caller sums them itself. Returns how many labels lie outside [0, C) (then nothing
    is meaningful; the caller raises).
    """
    rows, c = logits.shape
    zero = logits.dtype.type(0)
    one = logits.dtype.type(1)  # a literal 1 would make the arithmetic float64
    for i in range(rows):
        if labels[i] < 0 or labels[i] >= c:
            bad = 0
            for r in range(rows):
                bad += labels[r] < 0 or labels[r] >= c
            return bad
    for i in range(rows):
        row = logits[i]
        p = probs[i]
        top = row[0]
        for j in range(1, c):
            x = row[j]
            if x > top or math.isnan(x):  # np.max: the largest, NaN if any (kept once seen)
                top = x
        for j in range(c):
            p[j] = math.exp(np.float64(row[j] - top))
        total = zero + pairwise_sum(p)  # np.sum: the identity 0, then the row's sum
        logs[i] = math.log(np.float64(total)) if total > 0 else (
            -np.inf if total == 0 else np.nan)
        label = labels[i]
        picked[i] = row[label] - top
        for j in range(c):
            q = p[j] / total
            if j == label:
                q -= one
            p[j] = q * scale
    if sums.shape[0]:
        wide = np.empty(rows, np.float64)
        for k, part in enumerate((logs, picked)):
            for i in range(rows):
                wide[i] = part[i]
            sums[k] = 0.0 + pairwise_sum(wide)
    return 0


@njit
def bias_relu(h, b, has_bias):
    """In place on h (R, D): h = maximum(h + b, 0) (b (D,) added only if has_bias); NaN
    stays NaN and -0 becomes +0, as np.maximum(h, 0) gives."""
    rows, d = h.shape
    zero = h.dtype.type(0)
    for i in range(rows):
        for j in range(d):
            v = h[i, j] + b[j] if has_bias else h[i, j]
            h[i, j] = v if (v > zero or math.isnan(v)) else zero


@njit
def add_bias(h, b):
    """In place on h (R, D): h += b (D,), row by row (the bits of NumPy's ``h += b``)."""
    rows, d = h.shape
    for i in range(rows):
        for j in range(d):
            h[i, j] = h[i, j] + b[j]


@njit
def rows_sum(d, db):
    """db (D,) = the sum of d (R, D) over the rows (``d.sum(axis=0)``): in row order from
    0 (NumPy's inner loop runs along a row), or pairwise when D = 1."""
    rows, n = d.shape
    if n == 1:  # NumPy then sums the one column as a 1-d array: pairwise
        db[0] = d.dtype.type(0) + pairwise_sum(d[:, 0])
        return
    for j in range(n):
        db[j] = d.dtype.type(0)
    for i in range(rows):
        for j in range(n):
            db[j] += d[i, j]


@njit
def relu_backward_bias(d, saved, db, has_bias):
    """In place on d (R, D): d = d * (saved > 0) (a multiply by 1 or 0, as NumPy's
    ``np.multiply(d, saved > 0)``: -0 and NaN where it gives them); db (D,) = the sum
    of the new d over the rows, in row order from 0 (``d.sum(axis=0)``), if has_bias."""
    rows, n = d.shape
    one = d.dtype.type(1)
    zero = d.dtype.type(0)
    for i in range(rows):
        for j in range(n):
            d[i, j] = d[i, j] * (one if saved[i, j] > zero else zero)
    if has_bias:
        rows_sum(d, db)
