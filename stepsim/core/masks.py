"""N:M structured-sparsity masks (SPEC section 2).

An N:M mask keeps the N largest-magnitude entries in every group of M consecutive
entries along the reduction axis of a weight. For a Linear weight stored (out, in) that
is the last axis (the default ``axis=-1``). Ties keep the lower index, so masks are
deterministic; N == M keeps everything. The axis length must be divisible by M — there is
no silent padding — and NaN weights are an error.

Conv weights (out, in, kh, kw): :func:`nm_mask_conv` groups M consecutive *input
channels* at each (out, kh, kw) position. That is SR-STE's grouping (its code views the
weight as [out, kh, kw, in] and groups the last axis) and apex ASP's (it permutes to
(kh, kw, out, in)); it equals ``nm_mask(w, n, m, axis=1)``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from stepsim._ground.bits import MAGNITUDE_BITS, unsigned_view
from stepsim._ground.jit import num_threads
from stepsim._ground.threads import on_threads, runs_of_blocks
from stepsim._ground.validate import check_float_array, check_memory, check_nm, normalize_axis

_CHECKED_ABOVE = 64 << 20  # bytes: smaller masks are made without asking the system
# entries from which a mask for M != 4, 8 runs on several threads: handing a run of blocks
# to a pool thread costs more than a few blocks' work (the crossover was measured with
# `stepsim bench --only kernels`; see the commit that set it)
THREADS_FROM = 1 << 18

# the kernels for M != 4 compare magnitudes as signed integers (see stepsim.core._mask_kernels)
SIGNED = {np.dtype(np.uint16): np.dtype(np.int16), np.dtype(np.uint32): np.dtype(np.int32),
          np.dtype(np.uint64): np.dtype(np.int64)}


def _validated_groups(w, n, m, axis):
    """Check arguments; return (n, m, axis, moved, groups) with groups a (G, m) view/copy."""
    check_float_array("w", w)
    n, m = check_nm(n, m)
    if w.ndim == 0:
        raise ValueError("w must have at least one dimension, got a 0-d array")
    axis = normalize_axis(axis, w.ndim)
    length = w.shape[axis]
    if length % m:
        raise ValueError(
            f"w.shape[{axis}] = {length} is not divisible by m = {m}: N:M groups of {m} "
            f"consecutive entries must tile the axis exactly (stepsim never pads)"
        )
    moved = _to_last(w, axis)
    # the bool mask, and a contiguous copy of w unless it already runs along the axis (a
    # broadcast view of 10^6 x 10^6 costs nothing until it is copied: refuse it here, in one
    # line, rather than as NumPy's MemoryError); reading the system's memory is slow next
    # to a small mask, so only sizes that could fail are checked
    need = w.size * (1 if moved.flags.c_contiguous else 1 + w.itemsize)
    if need > _CHECKED_ABOVE:
        check_memory(f"the N:M mask of w with shape {w.shape} ({w.dtype})", need)
    groups = np.ascontiguousarray(moved).reshape(-1, m)
    return n, m, axis, moved, groups


def nm_mask(w: np.ndarray, n: int, m: int, axis: int = -1) -> np.ndarray:
    """Boolean N:M mask of ``w``: the ``n`` largest |w| of every ``m`` consecutive entries.

    w: float16/float32/float64 array of any shape; ``w.shape[axis]`` divisible by m.
    n, m: integers, 1 <= n <= m. axis: the axis the groups run along (default: last).
    Returns a C-contiguous bool array of w's shape with exactly n True per group.
    Raises ValueError on NaN in w, on n > m, and on an axis not divisible by m.
    """
    n, m, axis, moved, groups = _validated_groups(w, n, m, axis)
    return _mask_of_groups(w, n, m, axis, moved, groups)


def nm_mask_trusted(w: np.ndarray, n: int, m: int, axis: int) -> np.ndarray:
    """:func:`nm_mask` for trusted arguments: the training loop's entry (``fit`` and
    ``RunContext.make`` checked the dtype, the N:M and that M tiles the axis once per run;
    a step does not check them again). Same kernels, same bits; NaN is still reported."""
    moved = _to_last(w, axis)
    groups = np.ascontiguousarray(moved).reshape(-1, m)
    return _mask_of_groups(w, n, m, axis, moved, groups)


def _to_last(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.moveaxis(a, axis, -1)``, or ``a`` itself when ``axis`` is already the last: the
    usual case (a Linear weight's input axis), where moveaxis, pure Python, would cost
    two calls per mask per step for nothing."""
    return a if axis == -1 or axis == a.ndim - 1 else np.moveaxis(a, axis, -1)


def _mask_of_groups(w, n, m, axis, moved, groups) -> np.ndarray:
    out = np.empty(groups.shape, dtype=bool)
    if groups.size:
        from stepsim.core import _mask_kernels as k

        bits = unsigned_view(groups)
        abs_mask, inf_bits = MAGNITUDE_BITS[bits.dtype]
        threads = num_threads()
        flat_out = out.reshape(-1).view(np.uint8)
        if m in (4, 8):  # unrolled kernels, vectorised across groups
            if m == 4:
                kernel = k.mask_m4 if threads > 1 else k.mask_m4_serial
            else:
                kernel = k.mask_m8 if threads > 1 else k.mask_m8_serial
            found_nan = kernel(bits.reshape(-1), n, abs_mask, inf_bits, flat_out)
        else:
            signed = SIGNED[bits.dtype]
            flat = bits.reshape(-1).view(signed)
            args = (m, n, signed.type(abs_mask), signed.type(inf_bits), k.use_rank(n, m))
            step = max(1, k.ELEMS_PER_BLOCK // m) * m  # a block's entries (block_groups)
            tasks = threads if flat.size >= THREADS_FROM else 1
            found_nan = sum(on_threads(
                [partial(k.mask_groups, flat[lo:hi], *args, flat_out[lo:hi])
                 for lo, hi in runs_of_blocks(flat.size, step, tasks)], tasks))
        if found_nan:
            bad = np.isnan(w)
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"w contains {int(bad.sum())} NaN value(s) (first at index {first});"
                " an N:M mask of NaN weights is undefined"
            )
    mask = out.reshape(moved.shape)
    if axis == -1 or axis == w.ndim - 1:
        return mask  # out's own order: C-contiguous already
    return np.ascontiguousarray(np.moveaxis(mask, -1, axis))


def apply_nm(w: np.ndarray, n: int, m: int, axis: int = -1) -> np.ndarray:
    """A copy of ``w`` with everything outside its N:M mask set to zero (same dtype)."""
    mask = nm_mask(w, n, m, axis)
    return np.where(mask, w, np.zeros((), dtype=w.dtype))


def _check_conv(w):
    check_float_array("w", w)
    if w.ndim != 4:
        raise ValueError(f"a conv weight must be 4-D (out, in, kh, kw), got shape {w.shape}")


def nm_mask_conv(w: np.ndarray, n: int, m: int) -> np.ndarray:
    """N:M mask of a conv weight (out, in, kh, kw), grouping input channels (see module doc)."""
    _check_conv(w)
    return nm_mask(w, n, m, axis=1)


def apply_nm_conv(w: np.ndarray, n: int, m: int) -> np.ndarray:
    """A copy of a conv weight (out, in, kh, kw) with its input-channel N:M mask applied."""
    _check_conv(w)
    return apply_nm(w, n, m, axis=1)
