"""Masked selects in place: ``np.where(keep, x, pruned)`` without its temporaries.

The in-place forms of the recipes' pieces (:mod:`stepsim.recipes.transforms`,
:mod:`stepsim.recipes.lean`, DominoSearch's penalty) apply their masks through these. Each
writes ``out = x`` where ``keep`` is True and a pruned value elsewhere, with the NumPy
expression's arithmetic on pruned entries (its order and dtype), so the bits are those of
the pure piece's ``np.where`` (tests/recipes/test_lean_step.py); a select, not a multiply
by the mask (``-w * 0`` would give -0 where ``np.where`` gives +0).

Arrays: C-contiguous, any shape, all of one size; ``keep`` bool; scalars in ``x``'s dtype
(a Python float would turn a float32 loop into float64); ``out`` may be ``x`` itself. The
numba kernels (:mod:`stepsim.core._step_kernels`) load at the first call, never at import.
No argument checks: the training step calls these on arrays it made itself.
"""

from __future__ import annotations

import numpy as np

_kernels = None  # stepsim.core._step_kernels once loaded (it imports numba)


def _load():
    global _kernels
    if _kernels is None:
        from stepsim.core import _step_kernels

        _kernels = _step_kernels
    return _kernels


def where_zero(x: np.ndarray, keep: np.ndarray, out: np.ndarray) -> None:
    """out = x where keep, else 0 (``np.where(keep, x, 0)``: Pi * w, ASP's masks)."""
    (_kernels or _load()).where_zero(x.reshape(-1), keep.reshape(-1), out.reshape(-1))


def where_scaled(x: np.ndarray, keep: np.ndarray, a, out: np.ndarray) -> None:
    """out = x where keep, else x * a (``np.where(keep, x, x * a)``: a decaying scale)."""
    (_kernels or _load()).where_scaled(x.reshape(-1), keep.reshape(-1), a, out.reshape(-1))


def where_add_scaled(x: np.ndarray, y: np.ndarray, keep: np.ndarray, c,
                     out: np.ndarray) -> None:
    """out = x where keep, else x + c * y (SR-STE's gradient term, c = lam)."""
    (_kernels or _load()).where_add_scaled(x.reshape(-1), y.reshape(-1), keep.reshape(-1), c,
                                           out.reshape(-1))


def where_sub_scaled(x: np.ndarray, y: np.ndarray, keep: np.ndarray, c,
                     out: np.ndarray) -> None:
    """out = x where keep, else x - c * y (SR-STE after the optimizer, c = lr * lam)."""
    (_kernels or _load()).where_sub_scaled(x.reshape(-1), y.reshape(-1), keep.reshape(-1), c,
                                           out.reshape(-1))


def add_where_scaled(x: np.ndarray, y: np.ndarray, keep: np.ndarray, c,
                     out: np.ndarray) -> None:
    """out = x + (c * y where keep, else 0) (DominoSearch's penalty,
    ``x + np.where(keep, c * y, 0)``)."""
    (_kernels or _load()).add_where_scaled(x.reshape(-1), y.reshape(-1), keep.reshape(-1), c,
                                           out.reshape(-1))


def count_changed(a: np.ndarray, b: np.ndarray) -> int:
    """How many entries of two bool arrays of one shape differ (``np.count_nonzero(a !=
    b)`` without its temporary)."""
    return int((_kernels or _load()).count_changed(a.reshape(-1), b.reshape(-1)))
