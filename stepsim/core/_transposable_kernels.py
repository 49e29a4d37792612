"""numba kernel for transposable 2:4 masks. Private: call :mod:`stepsim.core.transposable`.

Reference: :func:`stepsim.core.reference.transposable_24_brute` (all 12870 subsets of 8 of
a block's 16 entries); the property tests check that both pick the same pattern.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground.jit import njit


@njit
def transposable_24(w, patterns, out):
    """The best of ``patterns`` in every 4x4 block of a 2-D array.

    w: (R, C) float32/float64, R and C multiples of 4. patterns: (P, 8) int64, the flat
    indices r*4 + c of each candidate's 8 kept entries, ascending (the 90 patterns with 2
    per row and 2 per column, in lexicographic order). out: (R, C) uint8, written.
    A pattern's score is the sum of its |w| in float64, added in index order; the first
    pattern with the largest score wins (ties: the lexicographically smallest).
    """
    rows, cols = w.shape
    a = np.empty(16, np.float64)
    for bi in range(rows // 4):
        for bj in range(cols // 4):
            for r in range(4):
                for c in range(4):
                    a[r * 4 + c] = abs(np.float64(w[bi * 4 + r, bj * 4 + c]))
            best = 0
            best_score = -1.0
            for p in range(patterns.shape[0]):
                score = 0.0
                for q in range(8):
                    score += a[patterns[p, q]]
                if score > best_score:
                    best_score = score
                    best = p
            for r in range(4):
                for c in range(4):
                    out[bi * 4 + r, bj * 4 + c] = 0
            for q in range(8):
                idx = patterns[best, q]
                out[bi * 4 + idx // 4, bj * 4 + idx % 4] = 1
