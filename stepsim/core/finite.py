"""Which array holds a NaN or an infinity: the training step's finiteness check.

:func:`stepsim.fit` checks every gradient and every weight once a step (a diverged run
stops with a status naming the step and the parameter), so the check is one vectorised
pass per array and one numba call for all of a step's arrays:

* :func:`has_non_finite` — one array.
* :class:`FiniteCheck` — the first of a list of arrays that holds one; it keeps the table of
  the arrays' data addresses while the same arrays come back (the lean step's weights are
  the same arrays every step).

The kernels (:mod:`stepsim.core._step_kernels`) load at the first call, never at import.
"""

from __future__ import annotations

import numpy as np

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_KERNEL_DTYPES = (_F32, _F64)


def has_non_finite(x: np.ndarray) -> bool:
    """Whether x holds a NaN or an infinity: one vectorised pass (a numba kernel) for
    C-contiguous float32/float64 arrays, NumPy's ``isfinite`` for any other."""
    if x.dtype in _KERNEL_DTYPES and x.flags.c_contiguous:
        from stepsim.core import _step_kernels

        return bool(_step_kernels.has_non_finite(x.reshape(-1)))
    return not np.isfinite(x).all()


class FiniteCheck:
    """Which of a list of arrays first holds a NaN or an infinity: one kernel call
    (``_step_kernels.first_non_finite``) over a table of their data addresses when every
    one is a C-contiguous float32/float64 ndarray, else :func:`has_non_finite` per array.
    The table is kept while the same arrays (by identity) come back."""

    def __init__(self):
        self._arrays = ()
        self._table = None

    def first(self, arrays: list) -> int:
        """The index of the first of ``arrays`` with a non-finite value; -1 if none."""
        held = self._arrays
        if len(held) != len(arrays) or any(a is not b for a, b in zip(held, arrays)):
            self._table = _address_table(arrays)
            # held (their addresses are in the table) only when the table is used
            self._arrays = tuple(arrays) if self._table is not None else ()
        if self._table is not None:
            from stepsim.core import _step_kernels

            return int(_step_kernels.first_non_finite(self._table))
        for i, x in enumerate(arrays):
            if has_non_finite(x):
                return i
        return -1


def _address_table(arrays):
    """The (K, 3) table of ``_step_kernels.first_non_finite`` (data address, size, 1 if
    float64) of ``arrays``, or None if one is not a C-contiguous float32/float64 ndarray."""
    from stepsim.core._optim_kernels import address

    table = np.empty((len(arrays), 3), np.int64)
    for i, x in enumerate(arrays):
        if type(x) is not np.ndarray or not x.flags.c_contiguous:
            return None
        dtype = x.dtype
        if dtype != _F32 and dtype != _F64:
            return None
        table[i, 0] = address(x)  # three item writes: a tuple into a row is slower
        table[i, 1] = x.size
        table[i, 2] = dtype == _F64
    return table
