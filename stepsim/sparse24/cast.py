"""Convert weights to a storage dtype without silent overflow.

``astype`` turns a float64 weight of 1e6 into float16 ``inf`` with only a RuntimeWarning;
stored, every later product is inf or NaN. :func:`cast_values` refuses that instead —
naming the largest |value| and the target's range — unless ``saturate=True`` asks for
values beyond the range to be clipped to its largest finite value (what a quantiser with a
fixed scale does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["cast_values", "finite_max"]


def finite_max(dtype) -> float:
    """Largest finite value of a float dtype (float16/32/64 or ml_dtypes' bfloat16)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).max)
    return float(np.finfo(dtype).max)


def cast_values(array: np.ndarray, dtype, *, saturate: bool = False,
                name: str = "array") -> np.ndarray:
    """``array`` as float ``dtype``, refusing values that would become infinite.

    Parameters
    ----------
    array : numpy.ndarray
        Finite values of any real dtype (NaN/inf refused: see ``check_finite_array``).
    dtype : float16, float32, float64 or ml_dtypes.bfloat16
        The storage dtype.
    saturate : bool
        False (default): a finite value that would round to ±inf raises ValueError naming
        the largest |value| and the dtype's range. True: such values become ±(largest
        finite value of ``dtype``).
    name : str
        How messages refer to ``array``.

    Returns
    -------
    numpy.ndarray of ``dtype`` (``array`` itself when it already has it).
    """
    from stepsim._validate import check_finite_array

    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(array).__name__}")
    target = np.dtype(dtype)
    if target.kind != "f" and target.name != "bfloat16":
        raise TypeError(f"cast_values converts to float dtypes, got {target}")
    if array.dtype.kind not in "fiu" and array.dtype.name != "bfloat16":
        raise TypeError(f"{name}: cannot convert dtype {array.dtype} to {target}")
    check_finite_array(name, array)
    if array.dtype == target:
        return array
    limit = finite_max(target)
    with np.errstate(over="ignore"):
        out = array.astype(target)
    overflow = np.isinf(out)  # the input is finite, so every inf here is an overflow
    if overflow.any():
        if not saturate:
            biggest = float(np.max(np.abs(array.astype(np.float64))))
            raise ValueError(
                f"{name}: largest |value| {biggest:.6g} does not fit {target} (finite range "
                f"±{limit:.6g}; {int(overflow.sum())} value(s) would become inf); rescale the "
                f"weights, keep a wider dtype, or saturate to ±{limit:.6g} explicitly "
                f"(--saturate, saturate=True)")
        out[overflow] = np.where(array[overflow] > 0, limit, -limit).astype(target)
    return out
