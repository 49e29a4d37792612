"""numba kernels of the 2:4 layout and the reference sparse matmul (imported lazily).

Kernels never validate; the public wrappers in :mod:`.layout` and :mod:`.spmm` check and
prepare the operands. Each kernel has a NumPy reference the tests compare it with bit for
bit: ``layout._compress_numpy`` / the ``impl="numpy"`` path of ``decompress_2to4`` and
``spmm._spmm_numpy``. All kernels are serial: they compile faster, and on a small shared
host parallel kernels lose more to oversubscription than they gain.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground.jit import njit


@njit
def spmm_steps(vals, cols, b, slots, out):
    """out[r, :] += sum over k-steps of (the k-step's partial sum), accumulated in out.dtype.

    vals (m, K2) in the accumulator dtype (float32 or int32): the stored values of A.
    cols (m, K2) int64: dense column of each stored value. b (k, n), accumulator dtype.
    slots: stored values per row per k-step (one mma.sp): 16 (fp16), 32 (int8), 8 (tf32).
    Within a k-step the products are summed in slot order into a zeroed partial, which is
    then added to the accumulator: one mma.sp ``D = A*B + C`` per k-step.
    """
    m = vals.shape[0]
    n = b.shape[1]
    steps = vals.shape[1] // slots
    partial = np.empty(n, dtype=out.dtype)
    for r in range(m):
        for p in range(steps):
            partial[:] = 0
            for s in range(p * slots, (p + 1) * slots):
                a = vals[r, s]
                c = cols[r, s]
                for j in range(n):
                    partial[j] += a * b[c, j]
            for j in range(n):
                out[r, j] += partial[j]


@njit
def compress_rows(bits, nz_mask, group, kept, picks, nibble_of, count_of, limit, q, values,
                  words, bad):
    """One pass over a dense (m, k) bit matrix: stored values, row-major meta words.

    bits (m, k) unsigned view of the dense matrix; nz_mask: bits that make an element
    non-zero (same dtype). group: 4 (2 for float32 pairs); kept: values per group.
    picks (2**group, kept) int64: in-group positions to store for each non-zero code
    (code bit j = element j non-zero); nibble_of / count_of (2**group,): its nibble and
    its number of non-zeros. limit: most non-zeros allowed (count_of > limit = invalid;
    pass 2**group to allow everything). q: nibbles per meta word.
    Writes values (m, k/group*kept), words (m, k/group/q) and bad (m,): the first invalid
    group of each row, or -1.
    """
    m, k = bits.shape
    n_groups = k // group
    for r in range(m):
        bad[r] = -1
        for c in range(n_groups // q):
            word = 0
            for gq in range(q):
                g = c * q + gq
                code = 0
                for j in range(group):  # branch-free: random patterns defeat prediction
                    code |= np.int64((bits[r, g * group + j] & nz_mask) != 0) << j
                if count_of[code] > limit and bad[r] < 0:
                    bad[r] = g
                for s in range(kept):
                    values[r, g * kept + s] = bits[r, g * group + picks[code, s]]
                word |= nibble_of[code] << (4 * gq)
            words[r, c] = word


@njit
def decompress_rows(values, words, group, q, valid, dense, bad):
    """Inverse of :func:`compress_rows`: scatter values to the columns the nibbles name.

    values (m, K) unsigned bits; words (m, ncols) row-major meta words; group: dense columns
    per nibble (4, or 2 for float32 pairs); q: nibbles per word; valid (16,) bool:
    the nibbles allowed; dense (m, k) zeroed output bits; bad (m,): first group of each
    row with a nibble not in valid (that group is not written), or -1.
    """
    m = values.shape[0]
    ncols = words.shape[1]
    for r in range(m):
        bad[r] = -1
        for c in range(ncols):
            word = words[r, c]
            for gq in range(q):
                g = c * q + gq
                nib = (word >> (4 * gq)) & 0xF
                if not valid[nib]:
                    if bad[r] < 0:
                        bad[r] = g
                    continue
                if group == 4:
                    dense[r, 4 * g + (nib & 3)] = values[r, 2 * g]
                    dense[r, 4 * g + (nib >> 2)] = values[r, 2 * g + 1]
                else:
                    dense[r, 2 * g + (nib >> 3)] = values[r, g]
