"""numba kernels that apply a mask inside a training step, in place or into a workspace
buffer, and the step's finiteness check (:func:`has_non_finite`). Private:
:mod:`stepsim.recipes.lean` calls them (the NumPy definitions they must match bit for bit
are the pure pieces of :mod:`stepsim.recipes.transforms`).
:func:`first_non_finite` runs the finiteness check over many arrays in one call.

Arrays are flat and C-contiguous; ``keep`` is the mask (bool), True where an entry is kept.
Each kernel writes ``out[i] = x[i]`` where the mask keeps and a pruned value elsewhere —
what ``np.where(keep, x, pruned)`` computes, without its temporaries (``pruned`` is a
full-size array there, and so is the product inside it). The arithmetic on pruned entries
is the NumPy expression's, in its order and dtype, so the bits are the same; ``out`` may
be ``x`` itself. A select, not a multiply by the mask: ``-w * 0`` would give -0 where
``np.where`` gives +0.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from stepsim._ground.jit import njit
from stepsim.core._optim_kernels import pointer_to


@njit
def where_zero(x, keep, out):
    """out = x where keep, else 0 (``np.where(keep, x, 0)``)."""
    zero = out.dtype.type(0)
    for i in range(x.shape[0]):
        out[i] = x[i] if keep[i] else zero


@njit
def where_scaled(x, keep, a, out):
    """out = x where keep, else x * a (``np.where(keep, x, x * a)``, a in x's dtype)."""
    for i in range(x.shape[0]):
        xi = x[i]
        out[i] = xi if keep[i] else xi * a


@njit
def where_add_scaled(x, y, keep, c, out):
    """out = x where keep, else x + c * y (SR-STE's gradient term, c = lam)."""
    for i in range(x.shape[0]):
        xi = x[i]
        out[i] = xi if keep[i] else xi + c * y[i]


@njit
def where_sub_scaled(x, y, keep, c, out):
    """out = x where keep, else x - c * y (SR-STE after the optimizer, c = lr * lam)."""
    for i in range(x.shape[0]):
        xi = x[i]
        out[i] = xi if keep[i] else xi - c * y[i]


@njit
def add_where_scaled(x, y, keep, c, out):
    """out = x + (c * y where keep, else 0) (DominoSearch's penalty:
    ``x + np.where(keep, c * y, 0)``; x + 0 as NumPy adds it, so -0 becomes +0 there too)."""
    zero = out.dtype.type(0)
    for i in range(x.shape[0]):
        out[i] = x[i] + (c * y[i] if keep[i] else zero)


@njit
def count_changed(a, b):
    """How many entries of two bool arrays differ (``np.count_nonzero(a != b)``)."""
    count = 0
    for i in range(a.shape[0]):
        count += a[i] != b[i]
    return count


@njit
def has_non_finite(x):
    """True if the flat array x holds a NaN or an infinity (``not np.isfinite(x).all()``).

    ``x - x`` is 0 for every finite value and NaN for NaN and +-inf; the flag is ORed over
    the whole array without an early exit, so the loop vectorises: one pass at memory speed
    (fit checks every gradient and weight once a step, faster than a NumPy sum)."""
    bad = False
    for i in range(x.shape[0]):
        bad |= (x[i] - x[i]) != 0
    return bad


@njit
def first_non_finite(table):
    """The index of the first array (in order) that holds a NaN or an infinity, or -1.

    table (K, 3) int64: row i is array i's data address, its number of elements and 1 if
    it is float64 (0: float32); the arrays are C-contiguous and held alive by the caller.
    A table rather than a tuple of arrays: one compiled kernel for any number of arrays,
    and one call a step for all the gradients (or all the weights) instead of one per
    array, whose dispatch cost more than the pass itself on small arrays. Each array is
    checked by :func:`has_non_finite`; the arrays after the first bad one are not read."""
    for i in range(table.shape[0]):
        if table[i, 2]:
            bad = has_non_finite(carray(pointer_to(table[i, 0], np.float64(0)), table[i, 1]))
        else:
            bad = has_non_finite(carray(pointer_to(table[i, 0], np.float32(0)), table[i, 1]))
        if bad:
            return i
    return -1
