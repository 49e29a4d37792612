"""The 2:4 compressed operand of NVIDIA's sparse tensor cores, bit-exact with CUTLASS.

``compress_2to4(dense) -> (values, meta)`` produces exactly the bytes of CUTLASS's
layout — the one PyTorch's ``sparse_semi_structured_from_dense_cutlass`` emits
(``torch/sparse/_semi_structured_conversions.py``, after CUTLASS's ``reorder_meta``):

* **values** ``(m, k/2)``, the dtype of ``dense``: per group of 4 columns the two kept
  elements, lower column first (float32/tf32: one element of every *pair*, the 1:2 rule).
  Copied as bits (NaN payloads and ``-0.0`` survive).
* **meta** ``(m, k/16)`` ``uint16`` for float16/bfloat16, ``(m, k/8)`` ``uint16`` for
  float32, ``(m, k/32)`` ``uint32`` for int8: one 4-bit nibble ``i0 | i1 << 2`` per
  group (per pair for float32), packed lowest group in the lowest bits, then the words
  permuted by CUTLASS's ``reorder_meta`` into ``ColumnMajorInterleaved<2>``. ``meta`` is
  that flat buffer viewed as ``(m, ncols)``. CUTLASS declares the words ``uint16_t`` /
  ``uint32_t``; torch returns the same bytes as ``int16`` / ``int32``
  (``meta.view(np.int16)`` gives torch's array; :func:`decompress_2to4` accepts both).

Supported ``dense`` dtypes: ``float16``, ``ml_dtypes.bfloat16`` (NumPy has no bfloat16 of
its own; ml_dtypes is JAX's dtype package and a stepsim dependency), ``uint16`` taken as the
raw bits of a 16-bit float (fp16 and bf16 share the non-zero test ``bits & 0x7FFF``, so the
layout does not depend on which it is), ``int8``, and ``float32`` (stored for tf32 mma.sp,
1:2 pairs).

Both directions run as one serial numba pass (``impl="numba"``, default) with a vectorised
NumPy reference (``impl="numpy"``); the tests check they produce the same bytes, and the
NumPy encoder uses torch's own boolean expressions, so the truncation of invalid groups
(``truncate=True``) matches torch too.

Shape rules: m a multiple of 32 (16 for int8), k a multiple of 32
(float16/bfloat16), 64 (int8) or 16 (float32). These are the multiples for which torch's
converter works: it needs an even number of meta columns because the reorder swaps column
pairs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = [
    "VALID_NIBBLES",
    "VALID_NIBBLES_TF32",
    "Compressed24",
    "LayoutSpec",
    "compress_2to4",
    "decompress_2to4",
    "layout_spec",
    "meta_offsets",
    "meta_rowmajor",
    "nibbles_2to4",
    "reorder_meta",
]

#: The six nibbles PTX names meaningful for ``mma.sp::ordered_metadata`` (LAYOUT.md 3.2).
VALID_NIBBLES = (0x4, 0x8, 0x9, 0xC, 0xD, 0xE)
#: The two meaningful nibbles of tf32 (1:2 pairs): indices (0,1) and (2,3).
VALID_NIBBLES_TF32 = (0x4, 0xE)


@dataclass(frozen=True)
class LayoutSpec:
    """Everything the layout depends on for one element type.

    name: "float16" | "bfloat16" | "uint16" (16-bit float bits) | "int8" | "float32".
    bits_dtype: unsigned view used to copy values as bits. nonzero_mask: the bits that must
    be non-zero for an element to count as non-zero (drops the sign bit, so -0.0 is zero).
    group: dense columns per nibble (4, or 2 for float32 pairs). kept: values per group.
    meta_dtype: the (unsigned) metadata word. nibbles_per_word: Q (4 or 8).
    m_multiple / k_multiple: shape rules. instruction: the sm80 mma.sp it feeds.
    k_step: dense columns of A per instruction; rows_per_chunk: rows per 128-byte meta chunk.
    """

    name: str
    bits_dtype: np.dtype
    nonzero_mask: int
    group: int
    kept: int
    meta_dtype: np.dtype
    nibbles_per_word: int
    m_multiple: int
    k_multiple: int
    instruction: str
    k_step: int
    rows_per_chunk: int

    @property
    def cols_per_word(self) -> int:
        """Dense columns covered by one metadata word."""
        return self.group * self.nibbles_per_word

    @property
    def valid_nibbles(self) -> tuple:
        """The nibbles mma.sp accepts for this dtype (tf32 pairs have only two)."""
        return VALID_NIBBLES_TF32 if self.group == 2 else VALID_NIBBLES

    def meta_cols(self, k: int) -> int:
        return k // self.cols_per_word


def _spec16(name, bits_dtype=np.uint16):
    return LayoutSpec(name, np.dtype(bits_dtype), 0x7FFF, 4, 2, np.dtype(np.uint16), 4, 32, 32,
                      "mma.sp m16n8k32 (fp32 accumulate)", 32, 32)


_SPECS = {
    "float16": _spec16("float16"),
    "bfloat16": _spec16("bfloat16"),
    "uint16": _spec16("uint16"),
    "int8": LayoutSpec("int8", np.dtype(np.uint8), 0xFF, 4, 2, np.dtype(np.uint32), 8, 16, 64,
                       "mma.sp m16n8k64 (int32 accumulate)", 64, 16),
    "float32": LayoutSpec("float32", np.dtype(np.uint32), 0x7FFFFFFF, 2, 1, np.dtype(np.uint16),
                          4, 32, 16, "mma.sp m16n8k16 tf32 (fp32 accumulate)", 16, 32),
}


def layout_spec(dtype) -> LayoutSpec:
    """The :class:`LayoutSpec` of a dense dtype (float16, bfloat16, uint16, int8, float32)."""
    dtype = np.dtype(dtype)
    name = dtype.name
    if name not in _SPECS:
        raise TypeError(
            f"the 2:4 layout supports dense dtypes float16, bfloat16 (ml_dtypes), uint16 "
            f"(raw 16-bit float bits), int8 and float32 (tf32), got {dtype}"
        )
    return _SPECS[name]


def _check_dense(dense) -> LayoutSpec:
    if not isinstance(dense, np.ndarray):
        raise TypeError(f"dense must be a numpy.ndarray, got {type(dense).__name__}")
    spec = layout_spec(dense.dtype)
    if not dense.dtype.isnative:
        raise TypeError(f"dense must be in native byte order, got dtype {dense.dtype.str!r}; "
                        f"use dense.astype(dense.dtype.newbyteorder('='))")
    if dense.ndim != 2:
        raise ValueError(f"dense must be 2-D (m, k), got shape {dense.shape}")
    m, k = dense.shape
    if m % spec.m_multiple or k % spec.k_multiple or m == 0 or k == 0:
        raise ValueError(
            f"dense has shape (m, k) = {dense.shape}; the {spec.name} 2:4 layout needs m a "
            f"positive multiple of {spec.m_multiple} and k a positive multiple of "
            f"{spec.k_multiple} ({spec.cols_per_word} dense columns per meta word and an even "
            f"number of meta columns for CUTLASS's reorder: the shape rules in "
            f"stepsim.sparse24.layout's docstring)"
        )
    return spec


@dataclass(frozen=True, eq=False)
class Compressed24:
    """A 2:4 operand kept together: values (m, k/2) and CUTLASS meta; see the module doc.

    tensor_shape: the weight's own shape when the operand is its GEMM matrix (m, k) =
    (shape[0], prod(shape[1:])) -- a 1-D conv weight (out, taps, in), input channels
    innermost, is the operand (out, taps * in) -- else None (the weight is the matrix)."""

    values: np.ndarray
    meta: np.ndarray
    tensor_shape: tuple | None = None

    def __post_init__(self):
        if self.tensor_shape is not None:
            shape = tuple(int(d) for d in self.tensor_shape)
            if len(shape) < 3 or (shape[0], int(np.prod(shape[1:]))) != self.shape:
                raise ValueError(f"tensor_shape {shape} is not a weight of 3 or more "
                                 f"dimensions whose GEMM matrix (shape[0], prod(shape[1:])) "
                                 f"is the operand's shape {self.shape}")
            object.__setattr__(self, "tensor_shape", shape)

    @classmethod
    def from_dense(cls, dense: np.ndarray, *, truncate: bool = False) -> Compressed24:
        """The operand of a 2-D ``dense``, or of the GEMM matrix of a weight of 3 or more
        dimensions grouped along its last axis (``tensor_shape`` records its shape)."""
        if isinstance(dense, np.ndarray) and dense.ndim > 2:
            matrix = dense.reshape(dense.shape[0], -1)
            return cls(*compress_2to4(matrix, truncate=truncate), tensor_shape=dense.shape)
        return cls(*compress_2to4(dense, truncate=truncate))

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def shape(self) -> tuple:
        """The dense shape (m, k)."""
        return (self.values.shape[0], 2 * self.values.shape[1])

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + self.meta.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return int(self.shape[0] * self.shape[1] * self.values.dtype.itemsize)

    def to_dense(self) -> np.ndarray:
        """The dense operand (m, k): the GEMM matrix."""
        return decompress_2to4(self.values, self.meta)

    def to_tensor(self) -> np.ndarray:
        """The dense weight in its own shape (``tensor_shape``, else the operand's)."""
        dense = self.to_dense()
        return dense if self.tensor_shape is None else dense.reshape(self.tensor_shape)

    def __repr__(self) -> str:
        return (f"Compressed24(shape={self.shape}, dtype={self.dtype}, values "
                f"{self.values.nbytes} B + meta {self.meta.nbytes} B ({self.meta.dtype}) = "
                f"{self.nbytes} B vs dense {self.dense_nbytes} B)")


# --------------------------------------------------------------------------- offsets
@functools.lru_cache(maxsize=32)
def meta_offsets(m: int, ncols: int, word_bytes: int) -> np.ndarray:
    """Flat index in ``meta`` of every row-major word ``M[r, c]``: an (m, ncols) int64 array.

    CUTLASS's ``reorder_meta`` followed by ``ColumnMajorInterleaved<2>`` with leading
    dimension 2m (LAYOUT.md 3.5), written as the procedure, not the closed form (the tests
    check one against the other). ``word_bytes`` is 2 (16-bit words) or 4 (int8's words).
    Cached per shape; the returned array is read-only.
    """
    group, interweave = (32, 4) if word_bytes == 2 else (16, 2)
    r = np.arange(m, dtype=np.int64)[:, None]
    c = np.arange(ncols, dtype=np.int64)[None, :]
    dr = np.broadcast_to(r // group * group + (r % 8) * interweave + (r % group) // 8, (m, ncols))
    dc = np.broadcast_to(c, (m, ncols))
    # swap the off-diagonal of every 2x2 block
    top_right = (dr % 2 == 0) & (dc % 2 == 1)
    bottom_left = (dr % 2 == 1) & (dc % 2 == 0)
    shift = top_right.astype(np.int64) - bottom_left.astype(np.int64)
    dr = dr + shift
    dc = dc - shift
    out = (dc // 2) * (2 * m) + dr * 2 + dc % 2
    out.setflags(write=False)
    return out


def reorder_meta(words: np.ndarray) -> np.ndarray:
    """Row-major meta words ``M`` (m, ncols) -> CUTLASS's reordered buffer, same shape/dtype."""
    m, ncols = words.shape
    flat = np.empty(m * ncols, dtype=words.dtype)
    flat[meta_offsets(m, ncols, words.dtype.itemsize).ravel()] = words.ravel()
    return flat.reshape(m, ncols)


def meta_rowmajor(meta: np.ndarray) -> np.ndarray:
    """Inverse of :func:`reorder_meta`: the row-major words ``M[r, c]`` of a meta buffer."""
    m, ncols = meta.shape
    return np.ascontiguousarray(meta).ravel()[meta_offsets(m, ncols, meta.dtype.itemsize)]


# --------------------------------------------------------------------------- compress
def _group_indices(nz: np.ndarray):
    """(i0, i1) of every group of 4 from its non-zero flags nz (..., 4), torch's encoder.

    These boolean expressions are the ones PyTorch/CUTLASS use (minimised with Espresso):
    for 2 non-zeros they give the pair, for fewer they fill with zero elements, for more
    they silently drop the excess (the truncation table in LAYOUT.md 3.2).
    """
    m0, m1, m3 = nz[..., 0], nz[..., 1], nz[..., 3]
    expr0 = m0 & m1
    expr1 = ~m0 & m1
    expr2 = ~m0 & ~m1
    i0 = expr1.astype(np.uint8) | (expr2.astype(np.uint8) << 1)
    i1 = (expr0 | expr2 | m3).astype(np.uint8) | ((expr1 | ~m1).astype(np.uint8) << 1)
    return i0, i1


def _bad_group_error(r, g, spec, dense, nz):
    cols = slice(spec.group * g, spec.group * (g + 1))
    what = "pair" if spec.group == 2 else "group"
    rule = "1:2 (tf32 keeps one of every 2)" if spec.group == 2 else "2:4"
    return ValueError(
        f"dense is not {rule} sparse: row {r}, {what} {g} (columns {cols.start}..{cols.stop - 1}) "
        f"has {int(nz[r, cols].sum())} non-zeros {dense[r, cols].tolist()}; apply an N:M mask "
        f"first (stepsim.apply_nm) or pass truncate=True for torch's silent truncation"
    )


def _pack_words(nibbles: np.ndarray, spec: LayoutSpec) -> np.ndarray:
    """Nibbles (m, groups) uint8 -> row-major words (m, ncols): lowest group in lowest bits."""
    m, groups = nibbles.shape
    q = spec.nibbles_per_word
    parts = nibbles.reshape(m, groups // q, q).astype(spec.meta_dtype)
    shifts = (4 * np.arange(q)).astype(spec.meta_dtype)
    return np.bitwise_or.reduce(parts << shifts, axis=-1)


def _compress_numpy(bits, spec, truncate):
    """NumPy reference: (values bits (m, k/2), row-major words, first bad (row, group) or None)."""
    m, k = bits.shape
    nz = (bits & spec.bits_dtype.type(spec.nonzero_mask)) != 0
    grouped_bits = bits.reshape(m, k // spec.group, spec.group)
    grouped_nz = nz.reshape(grouped_bits.shape)
    if not truncate:
        count = grouped_nz.sum(axis=-1)
        if (count > spec.kept).any():
            return None, None, tuple(int(i) for i in np.argwhere(count > spec.kept)[0])
    if spec.group == 4:
        i0, i1 = _group_indices(grouped_nz)
        picks = np.stack((i0, i1), axis=-1).astype(np.intp)
        values_bits = np.take_along_axis(grouped_bits, picks, axis=-1).reshape(m, k // 2)
        nibbles = i0 | (i1 << 2)
    else:  # float32 / tf32: 1:2 pairs
        second = ~grouped_nz[..., 0]  # keep x1 only when x0 is zero
        values_bits = np.where(second, grouped_bits[..., 1], grouped_bits[..., 0])
        nibbles = np.where(second, np.uint8(0xE), np.uint8(0x4))
    return np.ascontiguousarray(values_bits), _pack_words(nibbles.astype(np.uint8), spec), None


def _code_tables(spec):
    """Per non-zero code (bit j = element j non-zero): picks, nibble, count — derived from
    the same encoder as the NumPy path (torch's expressions), so both agree by construction
    of the table and the tests check them against each other."""
    codes = np.arange(2**spec.group)
    flags = ((codes[:, None] >> np.arange(spec.group)) & 1).astype(bool)
    count = flags.sum(axis=1).astype(np.int64)
    if spec.group == 4:
        i0, i1 = _group_indices(flags)
        picks = np.stack((i0, i1), axis=-1).astype(np.int64)
        nibble = (i0 | (i1 << 2)).astype(np.uint8)
    else:
        second = ~flags[:, 0]
        picks = second.astype(np.int64)[:, None]
        nibble = np.where(second, 0xE, 0x4).astype(np.uint8)
    return picks, nibble, count


def compress_2to4(dense: np.ndarray, *, truncate: bool = False, impl: str = "numba"):
    """Compress a 2:4-sparse (m, k) matrix into CUTLASS's (values, meta) operand.

    dense: 2-D float16 / bfloat16 / uint16 (16-bit float bits) / int8 / float32 array, shape
    rules in the module docstring. Non-zero means ``x != 0`` (``-0.0`` is zero; NaN and Inf
    are non-zero). Float32 follows the tf32 1:2 rule: at most one non-zero per column pair.
    truncate: False (default) refuses a group with more than 2 non-zeros (a float32 pair
    with 2) with a ValueError naming the first such row and group; True drops the excess
    exactly as torch's converter does (LAYOUT.md 3.2 table).
    impl: "numba" (one parallel pass) or "numpy" (the vectorised reference); same bytes.
    Returns (values (m, k/2) of dense's dtype, meta (m, ncols) uint16 or uint32 (int8)).
    """
    from stepsim._ground.validate import check_choice

    spec = _check_dense(dense)
    check_choice("impl", impl, ("numba", "numpy"))
    m, k = dense.shape
    bits = np.ascontiguousarray(dense).view(spec.bits_dtype)
    if impl == "numpy":
        values_bits, words, bad = _compress_numpy(bits, spec, truncate)
    else:
        from stepsim.sparse24 import _kernels

        picks, nibble, count = _code_tables(spec)
        values_bits = np.empty((m, k // 2), dtype=spec.bits_dtype)
        words = np.empty((m, spec.meta_cols(k)), dtype=spec.meta_dtype)
        bad_rows = np.empty(m, dtype=np.int64)
        limit = 2**spec.group if truncate else spec.kept
        _kernels.compress_rows(bits, spec.bits_dtype.type(spec.nonzero_mask), spec.group,
                               spec.kept, picks, nibble, count, limit, spec.nibbles_per_word,
                               values_bits, words, bad_rows)
        hit = np.flatnonzero(bad_rows >= 0)
        bad = (int(hit[0]), int(bad_rows[hit[0]])) if hit.size else None
    if bad is not None:
        nz = (bits & spec.bits_dtype.type(spec.nonzero_mask)) != 0
        raise _bad_group_error(*bad, spec, dense, nz)
    return values_bits.view(dense.dtype), reorder_meta(words)


# --------------------------------------------------------------------------- decompress
def check_operands(values, meta) -> LayoutSpec:
    for name, arr in (("values", values), ("meta", meta)):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray, got {type(arr).__name__}")
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    spec = layout_spec(values.dtype)
    for name, arr in (("values", values), ("meta", meta)):
        if not arr.dtype.isnative:
            raise TypeError(f"{name} must be in native byte order, got dtype {arr.dtype.str!r}")
    allowed = (spec.meta_dtype, np.dtype(spec.meta_dtype.name.replace("uint", "int")))
    if meta.dtype not in allowed:
        raise TypeError(
            f"meta for {spec.name} values must be {allowed[0]} (or {allowed[1]} as torch "
            f"returns it), got {meta.dtype}"
        )
    m, half_k = values.shape
    k = 2 * half_k
    if m % spec.m_multiple or k % spec.k_multiple or m == 0:
        raise ValueError(
            f"values has shape {values.shape}, i.e. a dense (m, k) = ({m}, {k}); the "
            f"{spec.name} layout needs m a positive multiple of {spec.m_multiple} and k a "
            f"positive multiple of {spec.k_multiple}"
        )
    if meta.shape != (m, spec.meta_cols(k)):
        raise ValueError(
            f"meta has shape {meta.shape} but values {values.shape} needs "
            f"{(m, spec.meta_cols(k))} ({spec.cols_per_word} dense columns per meta word)"
        )
    return spec


def nibbles_2to4(meta: np.ndarray, spec: LayoutSpec, *, check: bool = True) -> np.ndarray:
    """Per-group nibbles (m, k/group) uint8 of a meta buffer, in dense group order.

    check: refuse nibbles PTX does not allow (names row, group and value), so corrupt
    metadata is reported instead of decoding to overlapping indices.
    """
    words = meta_rowmajor(meta.view(spec.meta_dtype))
    m, ncols = words.shape
    q = spec.nibbles_per_word
    shifts = (4 * np.arange(q)).astype(spec.meta_dtype)
    nib = ((words[:, :, None] >> shifts) & spec.meta_dtype.type(0xF)).astype(np.uint8)
    nib = nib.reshape(m, ncols * q)
    if check:
        bad = ~np.isin(nib, spec.valid_nibbles)
        if bad.any():
            r, g = (int(i) for i in np.argwhere(bad)[0])
            raise nibble_error(r, g, nib[r, g], spec)
    return nib


def column_indices(meta: np.ndarray, spec: LayoutSpec) -> np.ndarray:
    """Dense column of every stored value: (m, k/2) int64, from the metadata alone."""
    nib = nibbles_2to4(meta, spec)
    m, groups = nib.shape
    if spec.group == 4:
        slots = np.stack((nib & 3, nib >> 2), axis=-1).astype(np.int64)  # (m, groups, 2)
        base = 4 * np.arange(groups, dtype=np.int64)[None, :, None]
        return (base + slots).reshape(m, 2 * groups)
    return 2 * np.arange(groups, dtype=np.int64)[None, :] + (nib == 0xE)


def nibble_error(r, g, nib, spec):
    return ValueError(
        f"meta holds nibble {int(nib):#x} for row {r}, group {g}; only "
        f"{[hex(v) for v in spec.valid_nibbles]} are meaningful for {spec.name} mma.sp"
    )


def decompress_2to4(values: np.ndarray, meta: np.ndarray, *, impl: str = "numba") -> np.ndarray:
    """Rebuild the dense (m, k) matrix from (values, meta): CUTLASS's ``uncompress``.

    Each value's bits are written at the column its metadata names; everything else is +0.
    So ``decompress_2to4(*compress_2to4(x))`` equals x bit for bit except that a ``-0.0``
    the layout did not store comes back as ``+0.0`` (a stored filler ``-0.0`` survives).
    Raises ValueError on mismatched shapes and on nibbles PTX does not allow.
    impl: "numba" (one parallel pass) or "numpy" (the vectorised reference).
    """
    from stepsim._ground.validate import check_choice

    spec = check_operands(values, meta)
    check_choice("impl", impl, ("numba", "numpy"))
    m, half_k = values.shape
    vbits = np.ascontiguousarray(values).view(spec.bits_dtype)
    dense_bits = np.zeros((m, 2 * half_k), dtype=spec.bits_dtype)
    if impl == "numpy":
        cols = column_indices(meta, spec)
        np.put_along_axis(dense_bits, cols, vbits, axis=1)
        return dense_bits.view(values.dtype)
    from stepsim.sparse24 import _kernels

    words = meta_rowmajor(meta.view(spec.meta_dtype))
    valid = np.zeros(16, dtype=bool)
    valid[list(spec.valid_nibbles)] = True
    bad_rows = np.empty(m, dtype=np.int64)
    _kernels.decompress_rows(vbits, words, spec.group, spec.nibbles_per_word, valid, dense_bits,
                             bad_rows)
    hit = np.flatnonzero(bad_rows >= 0)
    if hit.size:
        r, g = int(hit[0]), int(bad_rows[hit[0]])
        q = spec.nibbles_per_word
        raise nibble_error(r, g, (int(words[r, g // q]) >> (4 * (g % q))) & 0xF, spec)
    return dense_bits.view(values.dtype)
