"""General N:M compressed storage: the n kept values of every group of m plus their indices.

For any N:M (not only the 2:4 the hardware reads), a tensor whose groups of ``m``
consecutive entries along ``axis`` hold at most ``n`` non-zeros is stored as

* ``values``: (groups, n) of the tensor's dtype, bits copied (NaN payloads, -0.0 kept);
* ``indices``: every value's position inside its group, ``ceil(log2 m)`` bits each
  (0 bits for m == 1), packed little-endian into a uint8 bit stream (bit j of index i is
  stream bit ``i * bits + j``; bit stream bit t is bit ``t % 8`` of byte ``t // 8``).

Within a group, indices are increasing. A group with fewer than ``n`` non-zeros is padded
with its lowest-index zero entries (their bits stored too, so a ``-0.0`` there survives);
so the round trip ``decompress_nm(compress_nm(x))`` is lossless: equal bit for bit except
that a ``-0.0`` not stored comes back ``+0.0``. Non-zero means ``x != 0`` (NaN is non-zero).

Bytes: ``values.nbytes + indices.nbytes`` = groups*n*itemsize + ceil(groups*n*bits/8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stepsim._ground.bits import UNSIGNED_BY_ITEMSIZE, unsigned_view

__all__ = ["NMCompressed", "compress_nm", "decompress_nm", "index_bits"]


def index_bits(m: int) -> int:
    """Bits of one in-group index: ceil(log2 m) (0 for m == 1)."""
    return (int(m) - 1).bit_length()


@dataclass(frozen=True)
class NMCompressed:
    """An N:M-compressed tensor. values (groups, n); indices packed uint8; see module doc.

    shape/axis: the dense tensor's shape and the axis the groups run along. dtype: the
    dense dtype (``values.dtype``).
    """

    values: np.ndarray
    indices: np.ndarray
    shape: tuple
    n: int
    m: int
    axis: int

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def bits_per_index(self) -> int:
        return index_bits(self.m)

    @property
    def nbytes(self) -> int:
        """Stored bytes: values plus packed indices."""
        return int(self.values.nbytes + self.indices.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return int(math.prod(self.shape) * self.values.dtype.itemsize)

    def __repr__(self) -> str:
        return (
            f"NMCompressed({self.n}:{self.m}, shape={self.shape}, axis={self.axis}, "
            f"dtype={self.dtype}, values={self.values.nbytes} B + indices "
            f"{self.indices.nbytes} B = {self.nbytes} B vs dense {self.dense_nbytes} B)"
        )


def _pack(idx: np.ndarray, bits: int) -> np.ndarray:
    """Flat int array of indices -> little-endian bit stream of ``bits`` bits each."""
    if bits == 0 or idx.size == 0:
        return np.zeros(0, dtype=np.uint8)
    planes = ((idx[:, None] >> np.arange(bits)) & 1).astype(np.uint8)
    return np.packbits(planes.ravel(), bitorder="little")


def _unpack(stream: np.ndarray, count: int, bits: int) -> np.ndarray:
    if bits == 0:
        return np.zeros(count, dtype=np.int64)
    planes = np.unpackbits(stream, count=count * bits, bitorder="little").reshape(count, bits)
    return planes.astype(np.int64) @ (1 << np.arange(bits, dtype=np.int64))


def compress_nm(dense: np.ndarray, n: int, m: int, axis: int = -1) -> NMCompressed:
    """Store ``dense`` as N:M: at most ``n`` non-zeros in every ``m`` consecutive entries.

    dense: numeric array of any shape (float16/32/64, bfloat16, ints...); shape[axis]
    divisible by m. Raises ValueError naming the first group with more than n non-zeros
    (make valid input with ``stepsim.apply_nm``).
    """
    from stepsim._ground.validate import check_nm, normalize_axis

    if not isinstance(dense, np.ndarray):
        raise TypeError(f"dense must be a numpy.ndarray, got {type(dense).__name__}")
    numeric = dense.dtype.kind in "fiu" or (dense.dtype.kind == "V" and dense.dtype.fields is None)
    if dense.dtype.itemsize not in UNSIGNED_BY_ITEMSIZE or not numeric:
        raise TypeError(f"dense must have a numeric dtype, got {dense.dtype}")
    n, m = check_nm(n, m)
    if dense.ndim == 0:
        raise ValueError("dense must have at least one dimension, got a 0-d array")
    axis = normalize_axis(axis, dense.ndim)
    if dense.shape[axis] % m:
        raise ValueError(f"dense.shape[{axis}] = {dense.shape[axis]} is not divisible by m = {m}")
    moved = np.ascontiguousarray(np.moveaxis(dense, axis, -1))
    groups = moved.reshape(-1, m)
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN compares; NaN is non-zero
        nz = groups != 0
    count = nz.sum(axis=1)
    if (count > n).any():
        g = int(np.argmax(count > n))
        lead = np.unravel_index(g * m, moved.shape)
        where = [int(i) for i in lead]
        start = where[-1]
        where = where[:-1]
        where.insert(axis, slice(start, start + m))
        shown = ", ".join(f"{s.start}:{s.stop}" if isinstance(s, slice) else str(s) for s in where)
        raise ValueError(
            f"dense is not {n}:{m} sparse along axis {axis}: group {g} (dense[{shown}]) has "
            f"{int(count[g])} non-zeros {groups[g].tolist()}; apply an N:M mask first "
            f"(stepsim.apply_nm)"
        )
    # Non-zeros first, then the lowest-index zeros; keep the first n, in increasing order.
    order = np.argsort(~nz, axis=1, kind="stable")[:, :n]
    picks = np.sort(order, axis=1)
    values = np.take_along_axis(unsigned_view(groups), picks, axis=1).view(dense.dtype)
    bits = index_bits(m)
    return NMCompressed(np.ascontiguousarray(values), _pack(picks.ravel(), bits),
                        tuple(int(s) for s in dense.shape), n, m, axis)


def decompress_nm(c: NMCompressed) -> np.ndarray:
    """The dense tensor of an :class:`NMCompressed` (zeros where nothing is stored)."""
    if not isinstance(c, NMCompressed):
        raise TypeError(f"c must be an NMCompressed, got {type(c).__name__}")
    n_groups = c.values.shape[0]
    idx = _unpack(c.indices, n_groups * c.n, c.bits_per_index).reshape(n_groups, c.n)
    if idx.size and int(idx.max()) >= c.m:
        raise ValueError(f"indices hold {int(idx.max())} >= m = {c.m}: corrupt N:M indices")
    if c.n > 1 and (np.diff(idx, axis=1) <= 0).any():
        raise ValueError("indices are not strictly increasing within a group: corrupt N:M indices")
    groups = np.zeros((n_groups, c.m), dtype=unsigned_view(c.values).dtype)
    np.put_along_axis(groups, idx, unsigned_view(c.values), axis=1)
    moved_shape = list(c.shape)
    moved_shape.append(moved_shape.pop(c.axis))
    dense = groups.view(c.values.dtype).reshape(moved_shape)
    return np.ascontiguousarray(np.moveaxis(dense, -1, c.axis))
