"""IEEE float bit patterns as unsigned integers (no numba: safe to import anywhere).

For a float viewed as an unsigned integer, ``bits & abs_mask`` orders exactly as |x|
does for every non-NaN value (+0 and -0 both give 0), a pattern equal to ``inf_bits`` is
an infinity and one above it a NaN. Masks compare magnitudes this way, and the optimizer
kernels find non-finite gradients with one integer max.
"""

from __future__ import annotations

import numpy as np

# unsigned view dtype -> (magnitude mask, +inf pattern)
MAGNITUDE_BITS = {
    np.dtype(np.uint16): (np.uint16(0x7FFF), np.uint16(0x7C00)),
    np.dtype(np.uint32): (np.uint32(0x7FFFFFFF), np.uint32(0x7F800000)),
    np.dtype(np.uint64): (np.uint64(0x7FFFFFFFFFFFFFFF), np.uint64(0x7FF0000000000000)),
}

#: itemsize -> the unsigned integer dtype of that width
UNSIGNED_BY_ITEMSIZE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                        8: np.dtype(np.uint64)}


def unsigned_view(array: np.ndarray) -> np.ndarray:
    """``array`` viewed as unsigned integers of its itemsize (1, 2, 4 or 8 bytes), no copy:
    values copied through it keep their exact bits (NaN payloads, -0.0).

    Raises TypeError naming the dtype for other itemsizes (e.g. complex128, strings).
    """
    try:
        bits = UNSIGNED_BY_ITEMSIZE[array.dtype.itemsize]
    except KeyError:
        raise TypeError(f"no unsigned integer view for dtype {array.dtype} "
                        f"(itemsize {array.dtype.itemsize}; need 1, 2, 4 or 8)") from None
    return array.view(bits)
