"""Transposable N:M masks: every row and every column of a 2-D weight is N:M.

A mask Pi is transposable when both W * Pi and its transpose are N:M, so the backward
product (which multiplies by W^T) can use the sparse format too (Hu et al., ICML 2024,
arXiv 2404.01847; Hubara et al., NeurIPS 2021). The weight is cut into M x M
blocks; in each block every row and every column keeps N entries. Among the masks that
do, the one kept here maximises the kept sum of |w| per block:

* **2:4 — exact.** All 90 patterns with 2 per row and 2 per column of a 4x4 block are
  scored (the sum of their |w|, in float64, in index order) and the best is kept; ties go
  to the lexicographically smallest pattern (numba kernel
  :func:`stepsim.core._transposable_kernels.transposable_24`; brute-force reference
  :func:`stepsim.core.reference.transposable_24_brute`).
* **Other N:M — approximate, stated:** N rounds of a maximum-weight perfect matching
  (Hungarian algorithm, :func:`scipy.optimize.linear_sum_assignment`) between the block's
  rows and columns, each round on the entries not yet kept. It always succeeds (after r
  rounds the untaken entries form an (M - r)-regular bipartite graph, which has a perfect
  matching, König) and is exact for N = 1 and N = M; for other N it is a greedy over
  matchings, not guaranteed optimal (its kept sum is checked against the exact 2:4 kernel
  in the tests, where it may only be lower or equal).

**A weight of more than two dimensions is taken as its GEMM matrix** ``(shape[0],
prod(shape[1:]))``, the matrix its products multiply by: for a 1-D conv weight stored
(out, k, in) with the input channels innermost (:mod:`stepsim.nn.conv`), W = (out, k * in)
in ``out = cols @ W.T`` (im2col). Transposable then means: in every M x M block of W, every
row keeps N (the forward product's N:M: groups of M input channels at one kernel tap, the
weight's own N:M groups) and every column keeps N (groups of M output channels at one
(tap, input channel): the N:M of W^T, which the input-gradient product ``dcols = dout @
W`` reduces over). It needs out and in divisible by M (so a block's columns lie within one
tap); the weight must be grouped along its last axis (its ``ParamSpec`` axis -1).

A transposable mask needs such a weight with both GEMM dimensions M divides; a weight the
mask is not transposable for is an error, not a silent fallback.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from stepsim._ground.validate import check_float_array, check_nm


@functools.cache
def patterns_24() -> np.ndarray:
    """(90, 8) int64: flat indices (r*4 + c) of the 2:4 transposable patterns of a 4x4
    block, each ascending, the patterns in lexicographic order."""
    out = [combo for combo in itertools.combinations(range(16), 8)
           if _two_per_line(combo)]
    return np.array(out, dtype=np.int64)


def _two_per_line(combo) -> bool:
    rows, cols = [0] * 4, [0] * 4
    for idx in combo:
        rows[idx // 4] += 1
        cols[idx % 4] += 1
    return all(r == 2 for r in rows) and all(c == 2 for c in cols)


def gemm_shape(shape) -> tuple[int, int]:
    """The shape of a weight's GEMM matrix (module docstring): (shape[0], prod(shape[1:]));
    a Linear weight (out, in) is its own, a 1-D conv weight (out, k, in) gives (out, k * in)."""
    return (int(shape[0]), int(np.prod(shape[1:], dtype=np.int64)))


def transposable_shape_ok(shape, m: int) -> bool:
    """A weight of ``shape`` (grouped along its last axis) can take a transposable N:M
    mask: 2 or more dimensions, its first (out) and last (in) divisible by M."""
    return len(shape) >= 2 and shape[0] % m == 0 and shape[-1] % m == 0


def check_transposable_shape(name: str, shape, m: int) -> None:
    """A transposable N:M mask needs a weight of 2 or more dimensions whose first and last
    dimensions M divides (:func:`transposable_shape_ok`)."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"{name}: a transposable N:M mask needs a weight of 2 or more "
                         f"dimensions (its GEMM matrix (shape[0], prod(shape[1:]))), got "
                         f"shape {shape}")
    if not transposable_shape_ok(shape, m):
        which = "both dimensions" if len(shape) == 2 else "the first and last dimensions"
        raise ValueError(f"{name}: a transposable N:M mask needs {which} of shape {shape} "
                         f"divisible by m = {m} (M x M blocks; stepsim never pads)")


def transposable_mask(w: np.ndarray, n: int, m: int) -> np.ndarray:
    """Bool mask of ``w`` whose GEMM matrix has every row and column N:M (module docstring).

    Parameters
    ----------
    w : float32/float64 ndarray (R, C), or (R, ..., C) taken as its GEMM matrix
        (R, prod(...) * C); R and C divisible by m
    n, m : int, 1 <= n <= m

    Returns
    -------
    bool ndarray of w's shape: n True in every row and every column of every m x m block
    of the GEMM matrix.

    Raises
    ------
    TypeError / ValueError
        Another dtype, fewer than 2 dimensions, R or C not divisible by m, N > M, NaN in w.
    """
    check_float_array("w", w)
    n, m = check_nm(n, m)
    check_transposable_shape("w", w.shape, m)
    if np.isnan(w).any():
        raise ValueError(f"w contains {int(np.isnan(w).sum())} NaN value(s); a transposable "
                         "mask of NaN weights is undefined")
    return transposable_mask_trusted(w, n, m)


def transposable_mask_trusted(w, n, m):
    """:func:`transposable_mask` for trusted arguments (the training loop's entry)."""
    if w.ndim > 2:
        return transposable_mask_trusted(w.reshape(gemm_shape(w.shape)), n, m).reshape(w.shape)
    if n == m:
        return np.ones(w.shape, dtype=bool)
    if (n, m) == (2, 4):
        from stepsim.core import _transposable_kernels as k

        out = np.empty(w.shape, dtype=np.uint8)
        if w.size:
            k.transposable_24(np.ascontiguousarray(w), patterns_24(), out)
        return out.view(bool)
    return _matching_rounds(w, n, m)


def _matching_rounds(w, n, m):
    """General N:M: n rounds of maximum-weight perfect matching per m x m block."""
    from scipy.optimize import linear_sum_assignment

    a = np.abs(w.astype(np.float64))
    out = np.zeros(w.shape, dtype=bool)
    taken_cost = np.inf
    for bi in range(0, w.shape[0], m):
        for bj in range(0, w.shape[1], m):
            cost = -a[bi:bi + m, bj:bj + m].copy()
            kept = out[bi:bi + m, bj:bj + m]
            for _ in range(n):
                rows, cols = linear_sum_assignment(np.where(kept, taken_cost, cost))
                kept[rows, cols] = True
    return out


def is_transposable(mask: np.ndarray, n: int, m: int) -> bool:
    """True when a bool ``mask`` of 2 or more dimensions (its GEMM matrix, module
    docstring) keeps at most n of every m consecutive entries along both its rows and its
    columns (so W * mask and its transpose are both N:M)."""
    mask = np.asarray(mask, dtype=bool)
    if not transposable_shape_ok(mask.shape, m):
        return False
    mask = mask.reshape(gemm_shape(mask.shape))
    rows = mask.reshape(mask.shape[0], -1, m).sum(axis=2)
    cols = mask.T.reshape(mask.shape[1], -1, m).sum(axis=2)
    return bool(rows.max(initial=0) <= n and cols.max(initial=0) <= n)
