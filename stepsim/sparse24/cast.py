"""Convert weights to a storage dtype without silent overflow.

``astype`` turns a float64 weight of 1e6 into float16 ``inf`` with only a RuntimeWarning;
stored, every later product is inf or NaN. :func:`cast_values` refuses that instead —
naming the largest |value| and the target's range — unless ``saturate=True`` asks for
values beyond the range to be clipped to its largest finite value (what a quantiser with a
fixed scale does). At the other end, a nonzero weight below the target's smallest subnormal
(1e-9 in float16) would silently become 0 — a weight the N:M mask may keep, stored as a
pruned one; that is refused too, naming the smallest nonzero |value|, unless
``flush_to_zero=True`` accepts it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cast_values", "finite_max", "smallest_subnormal"]


def finite_max(dtype) -> float:
    """Largest finite value of a float dtype (float16/32/64 or ml_dtypes' bfloat16)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).max)
    return float(np.finfo(dtype).max)


def smallest_subnormal(dtype) -> float:
    """Smallest positive value of a float dtype (float16/32/64 or ml_dtypes' bfloat16)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).smallest_subnormal)
    return float(np.finfo(dtype).smallest_subnormal)


def cast_values(array: np.ndarray, dtype, *, saturate: bool = False,
                flush_to_zero: bool = False, name: str = "array") -> np.ndarray:
    """``array`` as float ``dtype``, refusing values that would become infinite or 0.

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
    flush_to_zero : bool
        False (default): a nonzero value that would round to 0 raises ValueError naming
        the smallest nonzero |value| and the dtype's smallest subnormal. True: such values
        become 0.
    name : str
        How messages refer to ``array``.

    Returns
    -------
    numpy.ndarray of ``dtype`` (``array`` itself when it already has it).
    """
    from stepsim._ground.validate import check_finite_array

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
    if not flush_to_zero and array.dtype.kind == "f":
        lost = (out == 0) & (array != 0)
        if lost.any():
            smallest = float(np.min(np.abs(array[lost].astype(np.float64))))
            raise ValueError(
                f"{name}: smallest nonzero |value| {smallest:.6g} underflows to 0 in {target} "
                f"(smallest positive {smallest_subnormal(target):.6g}; {int(lost.sum())} "
                f"value(s) would become 0); rescale the weights, keep a wider dtype, or flush "
                f"them to 0 explicitly (--flush-to-zero, flush_to_zero=True)")
    return out
