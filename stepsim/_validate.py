"""Argument checks shared by every public function.

Each check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind,
wrong value) with a message that names the argument and shows the offending value, so a
user never sees a numba traceback or gets a silently wrong answer. Kernels never
validate; their public wrappers call these first.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int``; it must be an integer (bool is refused) within bounds."""
    # exact int first: the ABC check below costs ~1 us, and kernels are called every step
    if type(value) is not int and (
        isinstance(value, bool) or not isinstance(value, numbers.Integral)
    ):
        raise TypeError(f"{name} must be an integer, got {_show(value)} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_real(
    name: str,
    value,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` within [minimum, maximum] (ends open on request)."""
    if type(value) is not float and (
        isinstance(value, bool) or not isinstance(value, numbers.Real)
    ):
        raise TypeError(
            f"{name} must be a real number, got {_show(value)} ({type(value).__name__})"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value < minimum or (min_open and value == minimum)):
        bracket = "(" if min_open else "["
        upper = "inf" if maximum is None else maximum
        close = ")" if (max_open or maximum is None) else "]"
        raise ValueError(f"{name} must be in {bracket}{minimum}, {upper}{close}, got {value}")
    if maximum is not None and (value > maximum or (max_open and value == maximum)):
        bracket = "(" if min_open else "["
        lower = "-inf" if minimum is None else minimum
        close = ")" if max_open else "]"
        raise ValueError(f"{name} must be in {bracket}{lower}, {maximum}{close}, got {value}")
    return value


def check_beta(name: str, value) -> float:
    """A decay rate: a real number in [0, 1)."""
    return check_real(name, value, minimum=0.0, maximum=1.0, max_open=True)


def check_fraction(name: str, value) -> float:
    """A fraction of a run: a real number in [0, 1]."""
    return check_real(name, value, minimum=0.0, maximum=1.0)


def check_step_or_fraction(name: str, value) -> int | float:
    """A point in a run: an integer >= 0 is a step, any other real a fraction in [0, 1].

    Returns a Python ``int`` or ``float``, so callers can branch on the type: NumPy
    scalars (np.int64(5), np.float32(0.5)) mean what their Python equivalents mean.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a step (int >= 0) or a fraction of the run (float in "
                        f"[0, 1]), got {_show(value)}")
    if isinstance(value, numbers.Integral):
        return check_int(name, value, minimum=0)
    value = float(value)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} as a float is a fraction of the run and must be in [0, 1], "
                         f"got {value} (pass an int for a number of steps)")
    return value


def check_open_unit(name: str, value) -> float:
    """A real number strictly inside (0, 1), e.g. beta2 where 1/(1 - beta2) is used."""
    return check_real(name, value, minimum=0.0, maximum=1.0, min_open=True, max_open=True)


def check_choice(name: str, value, choices) -> str:
    """``value`` must be one of the strings in ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {sorted(choices)}, got {_show(value)}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {sorted(choices)}")
    return value


def check_nm(n, m, *, n_name: str = "n", m_name: str = "m") -> tuple[int, int]:
    """An N:M ratio: integers with 1 <= n <= m."""
    m = check_int(m_name, m, minimum=1)
    n = check_int(n_name, n, minimum=1)
    if n > m:
        raise ValueError(
            f"{n_name} must be <= {m_name} (an N:M mask keeps N of every M), got {n}:{m}"
        )
    return n, m


def check_float_array(name: str, array, *, dtypes=FLOAT_DTYPES) -> np.ndarray:
    """``array`` must be a NumPy array of one of ``dtypes`` (no silent conversions)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(array).__name__}")
    if array.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} must have dtype in ({names}), got {array.dtype}")
    return array


def check_same_layout(reference_name: str, reference: np.ndarray, **others: np.ndarray) -> None:
    """Every array in ``others`` must have the shape and dtype of ``reference``."""
    for name, other in others.items():
        if not isinstance(other, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray, got {type(other).__name__}")
        if other.shape != reference.shape:
            raise ValueError(
                f"{name} has shape {other.shape} but {reference_name} has shape {reference.shape}"
            )
        if other.dtype != reference.dtype:
            raise TypeError(
                f"{name} has dtype {other.dtype} but {reference_name} has dtype {reference.dtype}"
            )


def check_c_contiguous(name: str, array: np.ndarray) -> None:
    """In-place kernels need C-contiguous memory (a copy would silently drop the update)."""
    if not array.flags.c_contiguous:
        raise ValueError(
            f"{name} must be C-contiguous (it is updated in place, so a copy would lose the "
            f"update); pass np.ascontiguousarray({name}) and keep that array"
        )
    if not array.flags.writeable:
        raise ValueError(f"{name} must be writeable (it is updated in place)")


def normalize_axis(axis, ndim: int, name: str = "axis") -> int:
    """Return ``axis`` as a non-negative index into an array of ``ndim`` dimensions."""
    axis = check_int(name, axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array with {ndim} dimension(s)")
    return axis % ndim
