"""numba kernels for N:M masks. Private: call :mod:`stepsim.core.masks`, which validates.

Magnitudes are compared as unsigned integers: for IEEE floats, ``bits & ~sign`` orders
exactly as ``|x|`` does for every non-NaN value (+0 and -0 both give 0, a tie), and a
NaN is any pattern above the infinity pattern. So one kernel body serves float16,
float32 and float64 (viewed as uint16/32/64), compares without branches, and counts NaNs
in the same pass. Reference: :func:`stepsim.core.reference.nm_mask_groups`.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from stepsim._ground.jit import njit
from stepsim._ground.threads import serial_twin

GROUPS_PER_BLOCK = 2048  # groups of 4 a parallel task handles (32 KiB of float32)


@njit
def _m4_block(bits, n, abs_mask, out):
    """Groups of 4 in one flat block: keep element i iff fewer than n others beat it.

    bits: (4G,) unsigned view of the weights; out: (4G,) uint8 (a bool view), written.
    j beats i when |x_j| > |x_i|, or |x_j| == |x_i| and j < i (ties keep the lower
    index); rank_i counts the elements that beat i. Written flat and branch-free so that
    LLVM vectorises across groups. Returns the largest magnitude pattern seen, which is
    above the infinity pattern iff the block holds a NaN (cheaper than counting NaNs).
    """
    largest = bits[0] & abs_mask
    for gi in range(bits.shape[0] // 4):
        j = 4 * gi
        a0 = bits[j] & abs_mask
        a1 = bits[j + 1] & abs_mask
        a2 = bits[j + 2] & abs_mask
        a3 = bits[j + 3] & abs_mask
        largest = max(largest, max(max(a0, a1), max(a2, a3)))
        c01 = a0 >= a1  # 0 beats 1
        c02 = a0 >= a2
        c03 = a0 >= a3
        c12 = a1 >= a2
        c13 = a1 >= a3
        c23 = a2 >= a3
        out[j] = 3 - (c01 + c02 + c03) < n
        out[j + 1] = c01 + 2 - (c12 + c13) < n
        out[j + 2] = c02 + c12 + 1 - c23 < n
        out[j + 3] = c03 + c13 + c23 < n
    return largest


@njit(parallel=True)
def mask_m4(bits, n, abs_mask, inf_bits, out):
    """N:4 mask over flat arrays: bits (4G,) unsigned view, out (4G,) uint8, written.

    Returns how many blocks hold a NaN (0 means none; the wrapper then finds them).
    """
    size = bits.shape[0]
    step = 4 * GROUPS_PER_BLOCK
    blocks_with_nan = 0
    for b in prange((size + step - 1) // step):
        lo = b * step
        hi = min(lo + step, size)
        blocks_with_nan += _m4_block(bits[lo:hi], n, abs_mask, out[lo:hi]) > inf_bits
    return blocks_with_nan


@njit
def _m8_block(bits, n, abs_mask, out):
    """Groups of 8 in one flat block, as :func:`_m4_block`: element i is kept iff fewer
    than n others beat it. c{i}{j} (i < j) = 1 if element i beats element j (|x_i| >= |x_j|);
    element i's rank is the count of j < i with c{j}{i} plus the count of j > i without
    c{i}{j}. Unrolled (28 compares a group) so that LLVM vectorises across groups with
    interleaved loads; a loop over pairs, or M = 16, would not vectorise."""
    largest = bits[0] & abs_mask
    for gi in range(bits.shape[0] // 8):
        j = 8 * gi
        a0, a1, a2, a3 = bits[j] & abs_mask, bits[j + 1] & abs_mask, bits[j + 2] & abs_mask, \
            bits[j + 3] & abs_mask
        a4, a5, a6, a7 = bits[j + 4] & abs_mask, bits[j + 5] & abs_mask, \
            bits[j + 6] & abs_mask, bits[j + 7] & abs_mask
        largest = max(largest, max(max(max(a0, a1), max(a2, a3)),
                                   max(max(a4, a5), max(a6, a7))))
        c01, c02, c03, c04 = a0 >= a1, a0 >= a2, a0 >= a3, a0 >= a4
        c05, c06, c07 = a0 >= a5, a0 >= a6, a0 >= a7
        c12, c13, c14, c15, c16, c17 = a1 >= a2, a1 >= a3, a1 >= a4, a1 >= a5, a1 >= a6, a1 >= a7
        c23, c24, c25, c26, c27 = a2 >= a3, a2 >= a4, a2 >= a5, a2 >= a6, a2 >= a7
        c34, c35, c36, c37 = a3 >= a4, a3 >= a5, a3 >= a6, a3 >= a7
        c45, c46, c47 = a4 >= a5, a4 >= a6, a4 >= a7
        c56, c57 = a5 >= a6, a5 >= a7
        c67 = a6 >= a7
        out[j] = 7 - (c01 + c02 + c03 + c04 + c05 + c06 + c07) < n
        out[j + 1] = 6 + c01 - (c12 + c13 + c14 + c15 + c16 + c17) < n
        out[j + 2] = 5 + (c02 + c12) - (c23 + c24 + c25 + c26 + c27) < n
        out[j + 3] = 4 + (c03 + c13 + c23) - (c34 + c35 + c36 + c37) < n
        out[j + 4] = 3 + (c04 + c14 + c24 + c34) - (c45 + c46 + c47) < n
        out[j + 5] = 2 + (c05 + c15 + c25 + c35 + c45) - (c56 + c57) < n
        out[j + 6] = 1 + (c06 + c16 + c26 + c36 + c46 + c56) - c67 < n
        out[j + 7] = (c07 + c17 + c27 + c37 + c47 + c57 + c67) < n
    return largest


@njit(parallel=True)
def mask_m8(bits, n, abs_mask, inf_bits, out):
    """N:8 mask over flat arrays, as :func:`mask_m4`: bits (8G,) unsigned view, out (8G,)
    uint8, written. Returns how many blocks hold a NaN."""
    size = bits.shape[0]
    step = 8 * GROUPS_PER_BLOCK
    blocks_with_nan = 0
    for b in prange((size + step - 1) // step):
        lo = b * step
        hi = min(lo + step, size)
        blocks_with_nan += _m8_block(bits[lo:hi], n, abs_mask, out[lo:hi]) > inf_bits
    return blocks_with_nan


# ---------------------------------------------------------------------------- any M
# Groups of M != 4 are cut into blocks of about ELEMS_PER_BLOCK elements. A block is first
# transposed to t (M, G) - row i holds the i-th element of every group - so that every
# later loop runs along the groups, contiguous, and LLVM vectorises it across groups (a
# group's own M elements would need shuffles). The magnitudes are signed integers there
# (bits & abs_mask is >= 0), which leaves -1 free as a "taken" sentinel and lets CPUs
# without unsigned vector compares (AVX2) compare them directly.
ELEMS_PER_BLOCK = 4096  # t of a float32 block is 16 KiB: it stays in L1 across the M passes


@njit
def _transpose_in(bits, abs_mask, t, t8):
    """t[i, g] = |x| bits of element i of group g; returns the largest pattern (NaN check).

    For M = 16 or 32 in two vectorised passes through t8 (8, G*M/8): first the data as
    rows of 8 (an unrolled stride-8 loop, which LLVM turns into vector loads and
    shuffles), then each of those rows split by M/8. A direct stride-M gather is scalar
    and cost most of a mask; other M take it."""
    m, groups = t.shape
    largest = bits[0] & abs_mask
    if m == 16 or m == 32:
        for r in range(t8.shape[1]):
            j = 8 * r
            a0, a1, a2, a3 = bits[j] & abs_mask, bits[j + 1] & abs_mask, \
                bits[j + 2] & abs_mask, bits[j + 3] & abs_mask
            a4, a5, a6, a7 = bits[j + 4] & abs_mask, bits[j + 5] & abs_mask, \
                bits[j + 6] & abs_mask, bits[j + 7] & abs_mask
            largest = max(largest, max(max(max(a0, a1), max(a2, a3)),
                                       max(max(a4, a5), max(a6, a7))))
            t8[0, r], t8[1, r], t8[2, r], t8[3, r] = a0, a1, a2, a3
            t8[4, r], t8[5, r], t8[6, r], t8[7, r] = a4, a5, a6, a7
        for k in range(8):
            src = t8[k]
            if m == 16:
                r0, r1 = t[k], t[8 + k]
                for g in range(groups):
                    r0[g], r1[g] = src[2 * g], src[2 * g + 1]
            else:
                r0, r1, r2, r3 = t[k], t[8 + k], t[16 + k], t[24 + k]
                for g in range(groups):
                    r0[g], r1[g] = src[4 * g], src[4 * g + 1]
                    r2[g], r3[g] = src[4 * g + 2], src[4 * g + 3]
        return largest
    for i in range(m):
        row = t[i]
        for g in range(groups):
            a = bits[g * m + i] & abs_mask
            row[g] = a
            largest = max(largest, a)
    return largest


@njit
def _transpose_out(kept, k8, out):
    """out[g*M + i] = kept[i, g]: the inverse of :func:`_transpose_in` (bytes)."""
    m, groups = kept.shape
    if m == 16 or m == 32:
        for k in range(8):
            dst = k8[k]
            if m == 16:
                r0, r1 = kept[k], kept[8 + k]
                for g in range(groups):
                    dst[2 * g], dst[2 * g + 1] = r0[g], r1[g]
            else:
                r0, r1, r2, r3 = kept[k], kept[8 + k], kept[16 + k], kept[24 + k]
                for g in range(groups):
                    dst[4 * g], dst[4 * g + 1] = r0[g], r1[g]
                    dst[4 * g + 2], dst[4 * g + 3] = r2[g], r3[g]
        for r in range(k8.shape[1]):
            j = 8 * r
            out[j], out[j + 1], out[j + 2], out[j + 3] = k8[0, r], k8[1, r], k8[2, r], k8[3, r]
            out[j + 4], out[j + 5], out[j + 6], out[j + 7] = k8[4, r], k8[5, r], k8[6, r], \
                k8[7, r]
        return
    for i in range(m):
        row = kept[i]
        for g in range(groups):
            out[g * m + i] = row[g]


@njit
def _count_beaters(t, i, lo, hi, ties_beat, rank):
    """rank[g] += how many elements j in [lo, hi) of group g beat element i: |x_j| >= |x_i|
    if ties_beat (j < i: ties keep the lower index) else |x_j| > |x_i|. Four rows a pass
    so the running ranks are loaded and stored a quarter as often."""
    ti = t[i]
    j = lo
    while j + 4 <= hi:
        t0, t1, t2, t3 = t[j], t[j + 1], t[j + 2], t[j + 3]
        if ties_beat:  # loop-invariant: compiled as two loops
            for g in range(rank.shape[0]):
                x = ti[g]
                rank[g] += (np.int32(t0[g] >= x) + np.int32(t1[g] >= x)) + (
                    np.int32(t2[g] >= x) + np.int32(t3[g] >= x))
        else:
            for g in range(rank.shape[0]):
                x = ti[g]
                rank[g] += (np.int32(t0[g] > x) + np.int32(t1[g] > x)) + (
                    np.int32(t2[g] > x) + np.int32(t3[g] > x))
        j += 4
    while j < hi:
        tj = t[j]
        if ties_beat:
            for g in range(rank.shape[0]):
                rank[g] += np.int32(tj[g] >= ti[g])
        else:
            for g in range(rank.shape[0]):
                rank[g] += np.int32(tj[g] > ti[g])
        j += 1


@njit
def _rank_block(t, n, rank, kept):
    """Keep element i of a group iff fewer than n elements of its group beat it (as in
    _m4_block). O(M) compares an element, whatever n. kept: (M, G) uint8, written."""
    m, groups = t.shape
    for i in range(m):
        rank[:] = 0
        _count_beaters(t, i, 0, i, True, rank)
        _count_beaters(t, i, i + 1, m, False, rank)
        row = kept[i]
        for g in range(groups):
            row[g] = rank[g] < n


@njit
def _argmax_rows(t, j, rows, ties_win, best_val, best_idx):
    """Fold rows j .. j+rows-1 (rows <= 4) of t, in order, into the running arg-max
    (best_val, best_idx) of every group: a row wins on > (or >= if ties_win). Four rows a
    pass keep the running values in registers for all four."""
    t0, t1, t2, t3 = t[j], t[j + min(1, rows - 1)], t[j + min(2, rows - 1)], \
        t[j + min(3, rows - 1)]
    for g in range(best_val.shape[0]):
        bv, bi = best_val[g], best_idx[g]
        for r, x in ((0, t0[g]), (1, t1[g]), (2, t2[g]), (3, t3[g])):
            if r < rows:
                better = (x >= bv) if ties_win else (x > bv)
                bv = x if better else bv
                bi = j + r if better else bi
        best_val[g], best_idx[g] = bv, bi


@njit
def _select_block(t, n, best_val, best_idx, kept):
    """Keep n by n rounds of arg-max, or drop M-n by rounds of arg-min, whichever is fewer:
    O(min(n, M-n)) compares an element. A taken element is set to -1, below every
    magnitude. Arg-max with a strict > takes the lowest index among equals (ties keep the
    lower index); arg-min runs on abs_mask - |x| with >=, so among equal magnitudes it
    drops the highest index - the same rule from the other side."""
    m, groups = t.shape
    keep_directly = 2 * n <= m
    if not keep_directly:  # flip the order: the smallest magnitude becomes the largest
        top = t.dtype.type(np.iinfo(t.dtype).max)
        for i in range(m):
            row = t[i]
            for g in range(groups):
                row[g] = top - row[g]
    for _ in range(n if keep_directly else m - n):
        best_val[:] = t[0]
        best_idx[:] = 0
        j = 1
        while j < m:
            rows = min(4, m - j)
            if keep_directly:  # loop-invariant: compiled as separate loops
                _argmax_rows(t, j, rows, False, best_val, best_idx)
            else:
                _argmax_rows(t, j, rows, True, best_val, best_idx)
            j += rows
        for g in range(groups):
            t[best_idx[g], g] = -1
    for i in range(m):
        row, kept_row = t[i], kept[i]
        for g in range(groups):
            kept_row[g] = (row[g] < 0) == keep_directly


def use_rank(n: int, m: int) -> bool:
    """Rank (M compares an element) or rounds of selection (~3 min(n, M-n))?"""
    return 3 * min(n, m - n) > m


@njit
def _scratch(m, groups, dtype):
    """One task's scratch for blocks of ``groups`` groups of m: t (m, groups) magnitudes,
    t8 (8, groups*m/8) for the two-pass transposes (M = 16, 32), kept and k8 likewise in
    bytes, best_val and counts (groups,)."""
    rows8 = groups * m // 8 if m % 8 == 0 else 0
    return (np.empty((m, groups), dtype), np.empty((8, rows8), dtype),
            np.empty((m, groups), np.uint8), np.empty((8, rows8), np.uint8),
            np.empty(groups, dtype), np.empty(groups, np.int32))


@njit
def mask_groups(bits, m, n, abs_mask, inf_bits, by_rank, out):
    """N:M mask for any M: bits (G*M,) signed-integer view of the weights, out (G*M,)
    uint8, written. by_rank: :func:`use_rank`. One thread, blocks of ``block_groups(m)``
    groups in turn on one scratch; several threads run it on disjoint runs of blocks
    (:func:`stepsim.core.masks._mask_of_groups`). Not a ``parallel=True`` kernel: numba's
    parallel pass compiled the blocks' code again for every dtype, several times this
    kernel's compile, on every fresh install and in every test run. Returns how many
    blocks hold a NaN."""
    size = bits.shape[0]
    per_block = block_groups(m)
    step = per_block * m
    t, t8, kept, k8, best_val, counts = _scratch(m, per_block, bits.dtype)
    blocks_with_nan = 0
    for lo in range(0, size, step):
        hi = min(lo + step, size)
        groups = (hi - lo) // m
        if groups < per_block:  # the last, shorter block: C-contiguous scratch of its size
            t, t8, kept, k8, best_val, counts = _scratch(m, groups, bits.dtype)
        largest = _transpose_in(bits[lo:hi], abs_mask, t, t8)
        blocks_with_nan += largest > inf_bits
        if by_rank:
            _rank_block(t, n, counts, kept)
        else:
            _select_block(t, n, best_val, counts, kept)
        _transpose_out(kept, k8, out[lo:hi])
    return blocks_with_nan


@njit
def block_groups(m):
    """Groups of m a block of :func:`mask_groups` holds: about ELEMS_PER_BLOCK entries."""
    return max(1, ELEMS_PER_BLOCK // m)


# one thread: the same drivers compiled without parallel=True run inline (see serial_twin);
# mask_groups is serial only (its docstring)
mask_m4_serial = njit(serial_twin(mask_m4, "mask_m4_serial"))
mask_m8_serial = njit(serial_twin(mask_m8, "mask_m8_serial"))
