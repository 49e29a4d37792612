"""numba kernels for N:M masks. Private: call :mod:`stepsim.masks`, which validates.

Magnitudes are compared as unsigned integers: for IEEE floats, ``bits & ~sign`` orders
exactly as ``|x|`` does for every non-NaN value (+0 and -0 both give 0, a tie), and a
NaN is any pattern above the infinity pattern. So one kernel body serves float16,
float32 and float64 (viewed as uint16/32/64), compares without branches, and counts NaNs
in the same pass. Reference: :func:`stepsim.reference.nm_mask_groups`.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from stepsim._jit import njit

# (magnitude mask, +inf pattern) for each unsigned view dtype
MAGNITUDE_BITS = {
    np.dtype(np.uint16): (np.uint16(0x7FFF), np.uint16(0x7C00)),
    np.dtype(np.uint32): (np.uint32(0x7FFFFFFF), np.uint32(0x7F800000)),
    np.dtype(np.uint64): (np.uint64(0x7FFFFFFFFFFFFFFF), np.uint64(0x7FF0000000000000)),
}


@njit(parallel=True)
def mask_m4(bits, n, abs_mask, inf_bits, out):
    """Groups of 4: keep element i iff fewer than n others beat it.

    bits: (G, 4) unsigned view of the weights; out: (G, 4) bool, written.
    j beats i when |x_j| > |x_i|, or |x_j| == |x_i| and j < i (ties keep the lower index).
    Returns the number of NaN entries (the wrapper raises when it is not zero).
    """
    nan_count = 0
    for g in prange(bits.shape[0]):
        a0 = bits[g, 0] & abs_mask
        a1 = bits[g, 1] & abs_mask
        a2 = bits[g, 2] & abs_mask
        a3 = bits[g, 3] & abs_mask
        nan_count += (a0 > inf_bits) + (a1 > inf_bits) + (a2 > inf_bits) + (a3 > inf_bits)
        c01 = a0 >= a1  # 0 beats 1
        c02 = a0 >= a2
        c03 = a0 >= a3
        c12 = a1 >= a2
        c13 = a1 >= a3
        c23 = a2 >= a3
        r0 = (1 - c01) + (1 - c02) + (1 - c03)
        r1 = c01 + (1 - c12) + (1 - c13)
        r2 = c02 + c12 + (1 - c23)
        r3 = c03 + c13 + c23
        out[g, 0] = r0 < n
        out[g, 1] = r1 < n
        out[g, 2] = r2 < n
        out[g, 3] = r3 < n
    return nan_count


@njit(parallel=True)
def mask_select(bits, n, abs_mask, inf_bits, out):
    """Any M: keep n by repeated arg-max, or drop M-n by repeated arg-min.

    bits: (G, M) unsigned view; out: (G, M) bool, written. Cost per group is
    O(min(n, M - n) * M). Arg-max takes the first (lowest) index among equals, so
    ties keep the lower index; arg-min takes the last among equals, so ties drop the
    higher index — the same rule from the other side. Returns the NaN count.
    """
    groups, m = bits.shape
    keep_directly = 2 * n <= m
    nan_count = 0
    for g in prange(groups):
        for j in range(m):
            nan_count += (bits[g, j] & abs_mask) > inf_bits
            out[g, j] = not keep_directly
        rounds = n if keep_directly else m - n
        for _ in range(rounds):
            best = -1
            best_val = bits[g, 0] & abs_mask
            for j in range(m):
                if out[g, j] != keep_directly:  # still a candidate
                    a = bits[g, j] & abs_mask
                    if best < 0:
                        best, best_val = j, a
                    elif keep_directly and a > best_val:
                        best, best_val = j, a
                    elif (not keep_directly) and a <= best_val:
                        best, best_val = j, a
            out[g, best] = keep_directly
    return nan_count
