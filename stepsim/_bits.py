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

_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def unsigned_view(array: np.ndarray) -> np.ndarray:
    """``array`` (float16/32/64, or any 2/4/8-byte dtype) viewed as uint16/32/64 bits."""
    return array.view(_UNSIGNED[array.dtype.itemsize])
