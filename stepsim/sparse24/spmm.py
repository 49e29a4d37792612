"""Reference sparse matmul reading the 2:4 operand the way ``mma.sp`` does, and tile inspection.

:func:`spmm_2to4` computes ``A @ B`` from CUTLASS's (values, meta) without decompressing A:
the metadata is read as the 32 lanes' ``mma.sp`` registers of every 128-byte chunk
(LAYOUT.md 3.5), each 16-row tile takes its indices from the lanes its sparsity selector
names (3.6), and the product runs k-step by k-step (one ``mma.sp`` each):

* float16 / bfloat16: m16n8k32, products exact in float32, float32 accumulation;
* int8: m16n8k64, int32 accumulation (wraps modulo 2**32 like the hardware; the result is
  bit-exact with a dense integer matmul because integer addition is associative);
* float32: m16n8k16 tf32. Tensor cores multiply tf32 (10-bit mantissa) operands. ``tf32=``
  chooses how inputs are rounded first: ``"rna"`` (default) is ``cvt.rna.tf32.f32``
  (round to nearest, ties away from zero), the conversion CUTLASS/cuBLAS-style kernels
  apply; ``"rz"`` truncates the 13 low mantissa bits (what an mma reading an unconverted
  float32 register sees); ``"none"`` keeps full float32 (a plain float32 model). This is a
  modelling choice, not a measured hardware fact.

Accumulation model: within one k-step the products are summed in slot order (stored-value
order) into a float32 partial, then added to the float32 accumulator. Real tensor cores
add the products of one mma with wider internal alignment, in an order NVIDIA does not
specify, so results agree with hardware within float32 rounding (the tests bound the error
against a float64 dense product), and bit for bit only for int8.

:func:`explain_tile` prints, for one 128-byte metadata chunk, each lane's register (hex),
which rows and columns its halves describe, which lanes the selector uses, and the A
fragments (values) each lane holds — what a kernel author needs to debug a wrong result.
:func:`locate_element` follows one dense element through the format (LAYOUT.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepsim.sparse24.layout import (
    LayoutSpec,
    check_operands,
    meta_offsets,
    nibble_error,
)

__all__ = [
    "ElementLocation",
    "TileExplanation",
    "explain_tile",
    "lane_registers",
    "locate_element",
    "round_tf32",
    "spmm_2to4",
]

_TF32_MODES = ("rna", "rz", "none")


def round_tf32(x: np.ndarray, mode: str = "rna") -> np.ndarray:
    """float32 array rounded to tf32 (1 sign, 8 exponent, 10 mantissa bits), as float32.

    mode "rna": to nearest, ties away from zero (``cvt.rna.tf32.f32``); "rz": toward zero
    (drop the 13 low bits); "none": unchanged. Inf and NaN pass through unchanged.
    """
    from stepsim._ground.validate import check_choice

    check_choice("tf32", mode, _TF32_MODES)
    x = np.asarray(x)
    if x.dtype.kind not in "fiu" and x.dtype.name != "bfloat16":
        raise TypeError(f"x must be a real numeric array, got dtype {x.dtype}")
    x = x.astype(np.float32, copy=False)
    if mode == "none":
        return x.copy()
    bits = x.view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    add = np.uint32(0x1000) if mode == "rna" else np.uint32(0)
    # Sign-magnitude: adding half an ulp to the magnitude then truncating rounds ties away
    # from zero; a carry into the exponent is the correct rounding (up to inf on overflow).
    rounded = (bits + add) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).view(np.float32)


# --------------------------------------------------------------------------- lane view
def lane_registers(meta: np.ndarray) -> np.ndarray:
    """The meta buffer as ``mma.sp`` registers: (P, R, 32) uint32, [column pair, row block, lane].

    One (p, R) chunk is 128 contiguous bytes; its 32-bit word L is lane L's metadata
    register (LAYOUT.md 3.5). R counts 32-row blocks (16-bit words) or 16-row blocks (int8).
    """
    m, ncols = meta.shape
    little = np.ascontiguousarray(meta).astype(meta.dtype.newbyteorder("<"), copy=False)
    regs = little.ravel().view(np.uint8).view("<u4").astype(np.uint32)
    # a chunk holds one column pair of words: 128 / (2 * word bytes) rows, i.e. 32 rows of
    # 16-bit words or 16 of int8's 32-bit words (LayoutSpec.rows_per_chunk; tests check both)
    rows_per_chunk = 64 // meta.dtype.itemsize
    return regs.reshape(ncols // 2, m // rows_per_chunk, 32)


def _words_from_registers(regs: np.ndarray, spec: LayoutSpec) -> np.ndarray:
    """Row-major meta words M (m, ncols) as each tile's selected lanes deliver them."""
    n_pairs, n_blocks, _ = regs.shape
    b = np.arange(8)
    if spec.meta_dtype.itemsize == 2:
        # m16n8k32 (fp16/bf16) and m16n8k16 (tf32): the tile of rows 16t..16t+15 of a
        # 32-row block uses sparsity selector t, i.e. lanes 4b + 2t + cj (T0,T1 or T2,T3);
        # the low half of the register holds row b, the high half row b + 8.
        words = np.empty((n_blocks, 2, 2, 8, n_pairs, 2), dtype=np.uint32)  # R,t,half,b,p,cj
        for t in (0, 1):
            for cj in (0, 1):
                lane_regs = regs[:, :, 4 * b + 2 * t + cj]  # (P, R, 8)
                words[:, t, 0, :, :, cj] = (lane_regs & 0xFFFF).transpose(1, 2, 0)
                words[:, t, 1, :, :, cj] = (lane_regs >> 16).transpose(1, 2, 0)
        out = words.reshape(n_blocks * 32, n_pairs * 2)
    else:
        # m16n8k64 int8: selector 0, all four lanes: lane 4b + 2cj + a holds row 8a + b.
        words = np.empty((n_blocks, 2, 8, n_pairs, 2), dtype=np.uint32)  # R, a, b, p, cj
        for a in (0, 1):
            for cj in (0, 1):
                words[:, a, :, :, cj] = regs[:, :, 4 * b + 2 * cj + a].transpose(1, 2, 0)
        out = words.reshape(n_blocks * 16, n_pairs * 2)
    return out.astype(spec.meta_dtype)


def _columns_from_registers(meta: np.ndarray, spec: LayoutSpec) -> np.ndarray:
    """Dense column (m, k/2) of every stored value, decoded through the lane registers."""
    words = _words_from_registers(lane_registers(meta.view(spec.meta_dtype)), spec)
    m, ncols = words.shape
    q = spec.nibbles_per_word
    nib = (words[:, :, None] >> (4 * np.arange(q)).astype(spec.meta_dtype)) & 0xF
    nib = nib.reshape(m, ncols * q).astype(np.int64)
    # Corrupt metadata (a nibble PTX does not define) would silently read the wrong columns
    # of B; refuse it as decompress_2to4 does. A 16-entry table lookup: one cheap pass.
    valid = np.zeros(16, dtype=bool)
    valid[list(spec.valid_nibbles)] = True
    bad = ~valid[nib]
    if bad.any():
        r, g = (int(i) for i in np.argwhere(bad)[0])
        raise nibble_error(r, g, nib[r, g], spec)
    groups = ncols * q
    if spec.group == 4:
        slots = np.stack((nib & 3, nib >> 2), axis=-1)
        return (4 * np.arange(groups)[None, :, None] + slots).reshape(m, 2 * groups)
    # tf32 pairs: 0x4 -> first element, 0xE -> second (the hardware reads the 8-byte pair
    # as four 16-bit halves, and 0xE names halves 2 and 3).
    return 2 * np.arange(groups)[None, :] + (nib >> 3)


def _check_b(values, b, spec):
    if not isinstance(b, np.ndarray):
        raise TypeError(f"b must be a numpy.ndarray, got {type(b).__name__}")
    if spec.name == "uint16":
        raise TypeError("spmm_2to4 needs typed values (float16 or bfloat16), not raw uint16 bits")
    if b.dtype != values.dtype:
        raise TypeError(f"b must have the dtype of values ({values.dtype}), got {b.dtype}")
    k = 2 * values.shape[1]
    if b.ndim != 2 or b.shape[0] != k:
        raise ValueError(f"b must be 2-D with {k} rows (the dense k of A), got shape {b.shape}")


def _spmm_numpy(vals, cols, b, slots, out):
    """NumPy reference of ``_kernels.spmm_steps`` (same operations in the same order)."""
    steps = vals.shape[1] // slots
    for p in range(steps):
        partial = np.zeros_like(out)
        for s in range(p * slots, (p + 1) * slots):
            partial += vals[:, s, None] * b[cols[:, s], :]
        out += partial
    return out


def spmm_2to4(values: np.ndarray, meta: np.ndarray, b: np.ndarray, *, tf32: str = "rna",
              impl: str = "numba") -> np.ndarray:
    """``A @ b`` for A given as CUTLASS's 2:4 operand (values, meta), computed as mma.sp does.

    values (m, k/2), meta: from :func:`compress_2to4` (float16, bfloat16, int8, float32).
    b: (k, n) of the same dtype as values. tf32: rounding of float32 inputs ("rna", "rz",
    "none"; see the module docstring). impl: "numba" (default) or "numpy" (the reference).
    Returns (m, n) float32 (int32 for int8).
    Raises ValueError on metadata nibbles PTX does not define (naming row, group, value),
    like :func:`decompress_2to4`.
    """
    from stepsim._ground.validate import check_choice

    spec = check_operands(values, meta)
    _check_b(values, b, spec)
    check_choice("impl", impl, ("numba", "numpy"))
    check_choice("tf32", tf32, _TF32_MODES)
    cols = _columns_from_registers(meta, spec)
    if spec.name == "int8":
        vals, bb, acc = values.astype(np.int32), b.astype(np.int32), np.int32
    else:
        vals, bb, acc = values.astype(np.float32), b.astype(np.float32), np.float32
        if spec.name == "float32":
            vals, bb = round_tf32(vals, tf32), round_tf32(bb, tf32)
    out = np.zeros((values.shape[0], b.shape[1]), dtype=acc)
    slots = spec.k_step // 2
    if impl == "numpy" or out.size == 0:
        return _spmm_numpy(vals, cols, np.ascontiguousarray(bb), slots, out)
    from stepsim.sparse24 import _kernels

    _kernels.spmm_steps(np.ascontiguousarray(vals), cols, np.ascontiguousarray(bb), slots, out)
    return out


# --------------------------------------------------------------------------- fragments
def _a_fragment_map(spec: LayoutSpec) -> np.ndarray:
    """(32 lanes, n_regs, 2) = (row in the 16-row tile, column of the compressed tile).

    PTX maps the compressed A tile of a sparse mma like the dense A tile of half the k
    (PTX 9.7.14.6.2; for m16n8k32 f16 also checked in NVIDIA's forum and in LAYOUT.md's
    worked example): m16n8k32 f16/bf16 = dense m16n8k16 map, m16n8k64 s8 = dense m16n8k32
    s8 map, m16n8k16 tf32 = dense m16n8k8 tf32 map. groupID = lane >> 2, tig = lane % 4.
    """
    lane = np.arange(32)[:, None]
    gid, tig = lane >> 2, lane % 4
    if spec.name == "int8":
        i = np.arange(16)[None, :]
        row = gid + 8 * ((i // 4) % 2)
        col = tig * 4 + (i & 3) + 16 * (i >= 8)
    elif spec.name == "float32":
        i = np.arange(4)[None, :]
        row = gid + 8 * (i % 2)
        col = tig + 4 * (i >= 2)
    else:
        i = np.arange(8)[None, :]
        row = gid + 8 * ((i // 2) % 2)
        col = tig * 2 + (i & 1) + 8 * (i >= 4)
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def _format_value(v) -> str:
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.4g}"


@dataclass(frozen=True)
class LaneInfo:
    """One lane of a chunk: its metadata register and the A fragments it holds.

    meta_rows: dense rows whose meta words the register holds (low half first for 16-bit
    words; int8 words hold one row). meta_cols: dense columns those words cover.
    supplies: selector whose tile uses this lane's metadata, or None. fragments: per MMA of
    the chunk (selector order), tuples (name, row, dense col, value) of A elements.
    """

    lane: int
    register: int
    meta_rows: tuple
    meta_cols: tuple
    supplies: int | None
    fragments: tuple


@dataclass(frozen=True)
class TileExplanation:
    """One 128-byte metadata chunk (one warp's registers) and the values that go with it."""

    dtype: str
    instruction: str
    row_block: int
    k_step: int
    rows: tuple
    dense_cols: tuple
    meta_flat_words: tuple
    lanes: tuple

    def register(self, lane: int) -> int:
        return self.lanes[lane].register

    def __str__(self) -> str:
        word_hex = 4 if self.dtype != "int8" else 8
        lines = [
            (f"{self.dtype} {self.instruction}: row block {self.row_block} (rows "
            f"{self.rows[0]}-{self.rows[1] - 1}), k-step {self.k_step} (dense cols "
            f"{self.dense_cols[0]}-{self.dense_cols[1] - 1}); meta.ravel()"
            f"[{self.meta_flat_words[0]}:{self.meta_flat_words[1]}]"),
            ("lane  register    selector  metadata describes     [hi|lo]      A fragments per mma "
             f"({'selector 0 | selector 1' if len(self.lanes[0].fragments) == 2 else 'selector 0'})"
             ": name row,col=value"),
        ]
        for li in self.lanes:
            if len(li.meta_rows) == 2:
                what = (f"rows {li.meta_rows[0]},{li.meta_rows[1]} "
                        f"cols {li.meta_cols[0]}-{li.meta_cols[1] - 1}")
                halves = f"{li.register >> 16:04X}|{li.register & 0xFFFF:04X}"
            else:
                what = f"row {li.meta_rows[0]} cols {li.meta_cols[0]}-{li.meta_cols[1] - 1}"
                halves = f"{li.register:0{word_hex}X}"
            sel = "-" if li.supplies is None else str(li.supplies)
            frags = " | ".join(
                " ".join(f"{name} {r},{c}={_format_value(v)}" for name, r, c, v in tile)
                for tile in li.fragments
            )
            lines.append(f"{li.lane:4d}  0x{li.register:08X}  {sel:^8}  {what:<22} "
                         f"[{halves}]  {frags}")
        return "\n".join(lines)

    __repr__ = __str__


def explain_tile(values: np.ndarray, meta: np.ndarray, row_block: int,
                 k_step: int) -> TileExplanation:
    """Lane-by-lane view of one metadata chunk: registers, selectors and A fragments.

    row_block: R, counting 32-row blocks (fp16/bf16/tf32) or 16-row blocks (int8).
    k_step: the meta column pair p = one mma.sp k-step (32 dense cols fp16/bf16, 64 int8,
    16 tf32). Returns a :class:`TileExplanation`; ``print()`` it for the table.
    """
    from stepsim._ground.validate import check_int
    from stepsim.sparse24.layout import column_indices

    spec = check_operands(values, meta)
    m, half_k = values.shape
    rows_per_chunk = spec.rows_per_chunk
    row_block = check_int("row_block", row_block, minimum=0, maximum=m // rows_per_chunk - 1)
    k_step = check_int("k_step", k_step, minimum=0, maximum=2 * half_k // spec.k_step - 1)
    regs = lane_registers(meta.view(spec.meta_dtype))[k_step, row_block]
    cols = column_indices(meta, spec)
    r0, c0 = row_block * rows_per_chunk, k_step * spec.k_step
    cpw = spec.cols_per_word
    frag = _a_fragment_map(spec)
    ncomp = spec.k_step // 2  # compressed columns per k-step
    n_tiles = rows_per_chunk // 16
    lanes = []
    for lane in range(32):
        b, j = lane // 4, lane % 4
        if spec.meta_dtype.itemsize == 2:
            t, cj = j // 2, j % 2
            meta_rows = (r0 + 16 * t + b, r0 + 16 * t + 8 + b)
            supplies = t
        else:
            cj, a = j // 2, j % 2
            meta_rows = (r0 + 8 * a + b,)
            supplies = 0
        meta_cols = (c0 + cj * cpw, c0 + (cj + 1) * cpw)
        tiles = []
        for t in range(n_tiles):
            entries = []
            for i, (ri, ci) in enumerate(frag[lane]):
                r = r0 + 16 * t + int(ri)
                vc = k_step * ncomp + int(ci)
                entries.append((f"a{i}", r, int(cols[r, vc]), values[r, vc].item()))
            tiles.append(tuple(entries))
        lanes.append(LaneInfo(lane, int(regs[lane]), meta_rows, meta_cols, supplies, tuple(tiles)))
    words_per_chunk = 128 // spec.meta_dtype.itemsize
    start = k_step * 2 * m + row_block * words_per_chunk
    return TileExplanation(
        spec.name, spec.instruction, row_block, k_step, (r0, r0 + rows_per_chunk),
        (c0, c0 + spec.k_step), (start, start + words_per_chunk), tuple(lanes),
    )


@dataclass(frozen=True)
class ElementLocation:
    """Where one dense element A[row, col] lives in the compressed operand.

    stored: whether the layout stores this element (a zero may not be stored). group and
    nibble: its group of 4 (pair for tf32) and that group's nibble. slot / values_col: its
    position among the stored values (None if not stored). word_col, word: the row-major
    meta word M[row, word_col]; index_bits: (high, low) bits of the element's index in that
    word (the whole nibble for tf32). flat_index: position of the word in meta.ravel().
    lane / register / register_bits: the mma.sp metadata lane, its 32-bit register and the
    bits there. selector: the sparsity selector of the element's 16-row tile.
    value_lane / value_fragment: the lane and fragment name (a0...) holding its value.
    """

    row: int
    col: int
    stored: bool
    group: int
    nibble: int
    slot: int | None
    values_col: int | None
    value: object
    word_col: int
    word: int
    index_bits: tuple
    flat_index: int
    lane: int
    register: int
    register_bits: tuple
    selector: int
    value_lane: int | None
    value_fragment: str | None

    def __str__(self) -> str:
        hi, lo = self.register_bits
        val = (f"values[{self.row},{self.values_col}] = {_format_value(self.value)} "
               f"(lane {self.value_lane} {self.value_fragment})") if self.stored else "not stored"
        return (
            f"A[{self.row},{self.col}]: group {self.group} nibble {self.nibble:#x}, {val}; "
            f"M[{self.row},{self.word_col}] = {self.word:#x} bits {self.index_bits[0]}:"
            f"{self.index_bits[1]}; meta.ravel()[{self.flat_index}] -> lane {self.lane} "
            f"register {self.register:#010x} bits {hi}:{lo}; sparsity selector {self.selector}"
        )


def locate_element(values: np.ndarray, meta: np.ndarray, row: int, col: int) -> ElementLocation:
    """Follow dense element (row, col) through values, meta words, offsets and lanes."""
    from stepsim._ground.validate import check_int
    from stepsim.sparse24.layout import meta_rowmajor, nibbles_2to4

    spec = check_operands(values, meta)
    m, half_k = values.shape
    row = check_int("row", row, minimum=0, maximum=m - 1)
    col = check_int("col", col, minimum=0, maximum=2 * half_k - 1)
    umeta = meta.view(spec.meta_dtype)
    nib_all = nibbles_2to4(umeta, spec)
    g = col // spec.group
    nibble = int(nib_all[row, g])
    q = spec.nibbles_per_word
    word_col = g // q
    word = int(meta_rowmajor(umeta)[row, word_col])
    base = 4 * (g % q)
    if spec.group == 4:
        picks = (nibble & 3, nibble >> 2)
        slot = picks.index(col % 4) if col % 4 in picks else None
        if slot is not None:
            index_bits = (base + 2 * slot + 1, base + 2 * slot)
        else:
            index_bits = (base + 3, base)
        values_col = 2 * g + slot if slot is not None else None
    else:
        slot = 0 if (col % 2) == (0 if nibble == 0x4 else 1) else None
        index_bits = (base + 3, base)
        values_col = g if slot is not None else None
    flat = int(meta_offsets(m, meta.shape[1], spec.meta_dtype.itemsize)[row, word_col])
    if spec.meta_dtype.itemsize == 2:
        lane, half = (flat % 64) // 2, flat % 2
        selector = (row % 32) // 16
    else:
        lane, half = flat % 32, 0
        selector = 0
    rows_per_chunk = spec.rows_per_chunk
    chunk = flat // (128 // spec.meta_dtype.itemsize)  # chunks are (p, R), R fastest
    n_blocks = m // rows_per_chunk
    reg = int(lane_registers(umeta)[chunk // n_blocks, chunk % n_blocks, lane])
    register_bits = (16 * half + index_bits[0], 16 * half + index_bits[1])
    value_lane = value_fragment = None
    value = None
    if values_col is not None:
        value = values[row, values_col].item()
        frag = _a_fragment_map(spec)
        tile_row, tile_col = row % 16, values_col % (spec.k_step // 2)
        hit = np.argwhere((frag[..., 0] == tile_row) & (frag[..., 1] == tile_col))[0]
        value_lane, value_fragment = int(hit[0]), f"a{int(hit[1])}"
    return ElementLocation(
        row, col, slot is not None, g, nibble, slot, values_col, value, word_col, word,
        index_bits, flat, lane, reg, register_bits, selector, value_lane, value_fragment,
    )
