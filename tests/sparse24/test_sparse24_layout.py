"""The CUTLASS 2:4 layout: round trips, nibbles, offsets, LAYOUT.md's worked examples, torch."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepsim.sparse24.layout import (
    VALID_NIBBLES,
    VALID_NIBBLES_TF32,
    Compressed24,
    compress_2to4,
    decompress_2to4,
    layout_spec,
    meta_offsets,
    meta_rowmajor,
    nibbles_2to4,
    reorder_meta,
)
from stepsim.sparse24.spmm import lane_registers, locate_element

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float16), BF16, np.dtype(np.uint16), np.dtype(np.int8), np.dtype(np.float32))
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


# --------------------------------------------------------------------------- strategies
def random_sparse(rng, dtype, m, k, *, overfull=0.0):
    """A valid 2:4 (1:2 for float32) matrix of arbitrary bit patterns (NaN payloads, -0.0,
    Inf, subnormals): random bits everywhere, then all but <= 2 (<= 1) entries of every
    group set to +0 or -0. ``overfull``: fraction of groups left completely random."""
    dtype = np.dtype(dtype)
    spec = layout_spec(dtype)
    ubits = BITS[dtype.itemsize]
    bits = rng.integers(0, np.iinfo(ubits).max, size=(m, k), dtype=ubits, endpoint=True)
    g = spec.group
    groups = bits.reshape(m, k // g, g)
    keep = rng.integers(0, spec.kept + 1, size=groups.shape[:2])  # non-zeros kept per group
    order = np.argsort(rng.random(groups.shape), axis=-1)
    zero_it = np.argsort(order, axis=-1) >= keep[..., None]
    zero_it &= ~(rng.random(groups.shape[:2]) < overfull)[..., None]
    sign = np.where(rng.random(groups.shape) < 0.3, spec.nonzero_mask + 1, 0).astype(ubits)
    if dtype == np.int8:
        sign[:] = 0
    groups[zero_it] = sign[zero_it]
    return groups.reshape(m, k).view(dtype)


@st.composite
def sparse_case(draw, dtypes=DTYPES, overfull=False):
    dtype = draw(st.sampled_from(dtypes))
    spec = layout_spec(dtype)
    m = spec.m_multiple * draw(st.integers(1, 3))
    k = spec.k_multiple * draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return random_sparse(rng, dtype, m, k, overfull=0.3 if overfull else 0.0)


def _bits(a):
    return a.view(BITS[a.dtype.itemsize])


# --------------------------------------------------------------------------- round trips
@given(sparse_case())
def test_round_trip_is_bit_exact_up_to_unstored_negative_zeros(dense):
    values, meta = compress_2to4(dense)
    spec = layout_spec(dense.dtype)
    m, k = dense.shape
    assert values.shape == (m, k // 2) and values.dtype == dense.dtype
    assert meta.shape == (m, k // spec.cols_per_word) and meta.dtype == spec.meta_dtype
    back = decompress_2to4(values, meta)
    assert back.dtype == dense.dtype and back.shape == dense.shape
    b, d = _bits(back), _bits(dense)
    differ = b != d
    # the only allowed difference: an input -0.0 that the layout did not store
    assert np.all(d[differ] == spec.nonzero_mask + 1) and np.all(b[differ] == 0)
    # it really compresses: every non-zero is among the stored values
    nz = (d & spec.nonzero_mask) != 0
    assert np.array_equal((b & spec.nonzero_mask) != 0, nz)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_spec_derived_fields(dtype):
    spec = layout_spec(dtype)
    # tf32 (1:2 pairs) has its own two nibbles; the 2:4 dtypes share PTX's six
    assert spec.valid_nibbles == (VALID_NIBBLES_TF32 if dtype == np.float32 else VALID_NIBBLES)
    # a 128-byte meta chunk holds one column pair of words (lane_registers relies on it)
    assert spec.rows_per_chunk == 128 // (2 * spec.meta_dtype.itemsize)
    assert spec.rows_per_chunk == (16 if dtype == np.int8 else 32)


@given(sparse_case())
def test_only_ptx_nibbles_occur(dense):
    spec = layout_spec(dense.dtype)
    _, meta = compress_2to4(dense)
    nib = nibbles_2to4(meta, spec, check=False)
    allowed = VALID_NIBBLES_TF32 if spec.group == 2 else VALID_NIBBLES
    assert set(np.unique(nib).tolist()) <= set(allowed)


@given(sparse_case(overfull=True))
def test_truncate_keeps_ptx_nibbles_and_stores_a_subset(dense):
    spec = layout_spec(dense.dtype)
    values, meta = compress_2to4(dense, truncate=True)
    nib = nibbles_2to4(meta, spec, check=False)
    allowed = VALID_NIBBLES_TF32 if spec.group == 2 else VALID_NIBBLES
    assert set(np.unique(nib).tolist()) <= set(allowed)
    back = _bits(decompress_2to4(values, meta))
    stored = back != 0
    assert np.array_equal(back[stored], _bits(dense)[stored])


def test_uint16_bits_give_the_fp16_and_bf16_layout():
    rng = np.random.default_rng(3)
    bits = random_sparse(rng, np.uint16, 64, 64)
    v16, m16 = compress_2to4(bits.view(np.float16))
    vbf, mbf = compress_2to4(bits.view(BF16))
    vu, mu = compress_2to4(bits)
    assert np.array_equal(m16, mu) and np.array_equal(mbf, mu)
    assert np.array_equal(v16.view(np.uint16), vu) and np.array_equal(vbf.view(np.uint16), vu)


def test_nan_payloads_and_negative_zero_are_copied_as_bits():
    d = np.zeros((32, 32), dtype=np.uint16)
    d[0, :4] = [0x7D01, 0, 0, 0xFE3F]  # an fp16 sNaN with payload and a negative qNaN
    d[1, :4] = [0, 0, 0x8000, 0x3C00]  # -0.0 then 1.0: 1 non-zero at 3 -> (2,3)
    values, meta = compress_2to4(d.view(np.float16))
    v = values.view(np.uint16)
    assert v[0, :2].tolist() == [0x7D01, 0xFE3F]
    assert v[1, :2].tolist() == [0x8000, 0x3C00]  # filler slot 2 holds the -0.0 bits
    back = decompress_2to4(values, meta).view(np.uint16)
    assert back[0, :4].tolist() == [0x7D01, 0, 0, 0xFE3F]
    assert back[1, :4].tolist() == [0, 0, 0x8000, 0x3C00]


# --------------------------------------------------------------------------- encoding table
# LAYOUT.md 3.2, copied from the document (not from the code): mask (x0..x3) -> (i0, i1)
TABLE = {
    (1, 1, 0, 0): (0, 1), (1, 0, 1, 0): (0, 2), (0, 1, 1, 0): (1, 2), (1, 0, 0, 1): (0, 3),
    (0, 1, 0, 1): (1, 3), (0, 0, 1, 1): (2, 3),
    (1, 0, 0, 0): (0, 2), (0, 1, 0, 0): (1, 2), (0, 0, 1, 0): (2, 3), (0, 0, 0, 1): (2, 3),
    (0, 0, 0, 0): (2, 3),
    (0, 1, 1, 1): (1, 3), (1, 0, 1, 1): (0, 3), (1, 1, 0, 1): (0, 1), (1, 1, 1, 0): (0, 1),
    (1, 1, 1, 1): (0, 1),
}


@pytest.mark.parametrize("dtype", [np.float16, np.int8])
@pytest.mark.parametrize("mask", sorted(TABLE))
def test_encoding_table_including_torch_truncation(mask, dtype):
    spec = layout_spec(dtype)
    d = np.zeros((spec.m_multiple, spec.k_multiple), dtype=dtype)
    d[5, 8:12] = [(7, 6, 5, 4)[i] if mask[i] else 0 for i in range(4)]
    truncate = sum(mask) > 2
    values, meta = compress_2to4(d, truncate=truncate)
    i0, i1 = TABLE[mask]
    assert nibbles_2to4(meta, spec)[5, 2] == i0 | (i1 << 2)
    assert values[5, 4:6].tolist() == [d[5, 8 + i0], d[5, 8 + i1]]


@pytest.mark.parametrize("pair,nibble,kept", [((1.5, 0.0), 0x4, 1.5), ((0.0, 2.5), 0xE, 2.5),
                                              ((0.0, 0.0), 0xE, 0.0), ((1.5, 2.5), 0x4, 1.5)])
def test_tf32_pair_rule(pair, nibble, kept):
    d = np.zeros((32, 16), dtype=np.float32)
    d[3, 6:8] = pair
    values, meta = compress_2to4(d, truncate=True)
    assert nibbles_2to4(meta, layout_spec(np.float32))[3, 3] == nibble
    assert values[3, 3] == kept


# --------------------------------------------------------------------------- offsets
def _closed_form(m, ncols, word_bytes):
    """LAYOUT.md 3.5's closed form, written independently of the procedural offsets."""
    out = np.empty((m, ncols), dtype=np.int64)
    for r in range(m):
        for c in range(ncols):
            p, cj = divmod(c, 2)
            if word_bytes == 2:
                big, rest = divmod(r, 32)
                a, b = divmod(rest, 8)
                out[r, c] = p * 2 * m + 64 * big + 8 * b + 4 * (a // 2) + 2 * cj + a % 2
            else:
                big, rest = divmod(r, 16)
                a, b = divmod(rest, 8)
                out[r, c] = p * 2 * m + 32 * big + 4 * b + 2 * cj + a
    return out


@pytest.mark.parametrize("m,ncols,word_bytes", [(32, 2, 2), (96, 6, 2), (16, 2, 4), (64, 4, 4)])
def test_offsets_match_the_closed_form_and_are_a_permutation(m, ncols, word_bytes):
    off = meta_offsets(m, ncols, word_bytes)
    assert np.array_equal(off, _closed_form(m, ncols, word_bytes))
    assert np.array_equal(np.sort(off.ravel()), np.arange(m * ncols))


# --------------------------------------------------------------------------- LAYOUT.md section 4
def test_worked_example_fp16_element_9_27():
    rng = np.random.default_rng(0)
    d = random_sparse(rng, np.float16, 32, 32).view(np.uint16)
    d &= 0x7BFF  # finite values (rest of the matrix is not given by the document)
    d = d.view(np.float16)
    # row 9, cols 16..31 = groups 4..7 as given in LAYOUT.md section 4
    d[9, 16:32] = np.array([0, 0, 0, 0, 0, .11, .11, 0, 0, 1.0, 0, .734, -.74, 0, 0, 94.6],
                           dtype=np.float16)
    values, meta = compress_2to4(d)
    spec = layout_spec(np.float16)
    assert nibbles_2to4(meta, spec)[9, 4:8].tolist() == [0xE, 0x9, 0xD, 0xC]
    assert values[9, 13] == np.float16(0.734)
    assert meta_rowmajor(meta)[9, 1] == 0xCD9E
    assert meta.reshape(-1)[11] == 0xCD9E and meta[5, 1] == 0xCD9E  # torch's 2-D view
    reg5 = int(lane_registers(meta)[0, 0, 5])
    assert reg5 >> 16 == 0xCD9E and (reg5 >> 26) & 3 == 0b11
    loc = locate_element(values, meta, 9, 27)
    assert (loc.group, loc.nibble, loc.slot, loc.values_col) == (6, 0xD, 1, 13)
    assert loc.index_bits == (11, 10) and loc.word == 0xCD9E and loc.flat_index == 11
    assert (loc.lane, loc.register_bits, loc.selector) == (5, (27, 26), 0)
    assert (loc.value_lane, loc.value_fragment) == (6, "a7")  # lane 6 holds a6,a7 = cols 24..27


def test_worked_example_registers_from_the_documented_words():
    # LAYOUT.md: lane 4b+j holds M[16t+b, cj] (low) and M[16t+8+b, cj] (high), t=j//2, cj=j%2
    documented = [0x99E89C84, 0x9ECC98ED, 0xE89EE989, 0x8D88D44E,
                  0x8444CEEE, 0xCD9ECEE8, 0x9C84ED98, 0xCDEED9EE]
    words = np.zeros((32, 2), dtype=np.uint16)
    for lane, reg in enumerate(documented):
        b, j = divmod(lane, 4)
        t, cj = divmod(j, 2)
        words[16 * t + b, cj] = reg & 0xFFFF
        words[16 * t + 8 + b, cj] = reg >> 16
    assert words[1, 1] == 0xCEE8 and words[9, 1] == 0xCD9E  # the document's own cross-check
    assert words[1, 0] == 0xCEEE and words[9, 0] == 0x8444
    regs = lane_registers(reorder_meta(words))[0, 0]
    assert [int(r) for r in regs[:8]] == documented
    assert np.array_equal(meta_rowmajor(reorder_meta(words)), words)


def test_worked_example_int8_element_10_45():
    rng = np.random.default_rng(1)
    d = random_sparse(rng, np.int8, 16, 64)
    d[10, 44:48] = [86, -31, 0, 0]
    values, meta = compress_2to4(d)
    assert values[10, 23] == -31
    word = int(meta_rowmajor(meta)[10, 1])
    assert (word >> 12) & 0xF == 0x4 and (word >> 14) & 3 == 0b01
    assert meta.reshape(-1)[11] == word
    loc = locate_element(values, meta, 10, 45)
    assert (loc.lane, loc.flat_index, loc.register_bits, loc.selector) == (11, 11, (15, 14), 0)
    # the document's register value for lane 11, placed as M[10, 1]
    words = np.zeros((16, 2), dtype=np.uint32)
    words[10, 1] = 0xD9EE4E9D
    assert lane_registers(reorder_meta(words))[0, 0, 11] == 0xD9EE4E9D


# --------------------------------------------------------------------------- errors
def test_not_2to4_names_row_and_group():
    d = np.zeros((32, 64), dtype=np.float16)
    d[7, 20:23] = 1.0
    with pytest.raises(ValueError, match=r"row 7, group 5 \(columns 20..23\) has 3 non-zeros"):
        compress_2to4(d)
    f = np.zeros((32, 16), dtype=np.float32)
    f[2, 4:6] = [1.0, -2.0]
    with pytest.raises(ValueError, match=r"row 2, pair 2 \(columns 4..5\)"):
        compress_2to4(f)


@pytest.mark.parametrize("dtype,shape", [(np.float16, (32, 16)), (np.float16, (32, 48)),
                                         (np.float16, (16, 32)), (np.int8, (16, 32)),
                                         (np.int8, (16, 96)), (np.int8, (8, 64)),
                                         (np.float32, (32, 8)), (np.float16, (0, 32))])
def test_shape_rules(dtype, shape):
    with pytest.raises(ValueError, match="positive multiple"):
        compress_2to4(np.zeros(shape, dtype=dtype))


def test_bad_types_and_operands():
    with pytest.raises(TypeError, match="dense dtypes"):
        compress_2to4(np.zeros((32, 32), dtype=np.float64))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        compress_2to4([[0.0] * 32] * 32)
    with pytest.raises(ValueError, match="2-D"):
        compress_2to4(np.zeros((2, 32, 32), dtype=np.float16))
    with pytest.raises(TypeError, match="native byte order"):
        compress_2to4(np.zeros((32, 32), dtype=">f2"))
    values, meta = compress_2to4(np.zeros((32, 32), dtype=np.float16))
    with pytest.raises(TypeError, match="meta for float16"):
        decompress_2to4(values, meta.astype(np.uint32))
    with pytest.raises(ValueError, match="meta has shape"):
        decompress_2to4(values, meta[:, :1])
    bad = meta.copy()
    bad.reshape(-1)[11] = 0x0000  # nibble 0x0 is undefined behaviour for mma.sp
    with pytest.raises(ValueError, match=r"nibble 0x0 for row 9, group 4"):
        decompress_2to4(values, bad)
    # torch's signed words are accepted
    assert np.array_equal(decompress_2to4(values, meta.view(np.int16)),
                          np.zeros((32, 32), np.float16))


def test_compressed24_container():
    rng = np.random.default_rng(5)
    d = random_sparse(rng, np.int8, 32, 128)
    c = Compressed24.from_dense(d)
    assert c.shape == (32, 128) and c.nbytes == 32 * 64 + 32 * 4 * 4 and c.dense_nbytes == 4096
    assert np.array_equal(c.to_dense(), d)
    assert "Compressed24(shape=(32, 128)" in repr(c)


# --------------------------------------------------------------------------- torch peer
def _torch_tensor(torch, a):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _no_nans(dtype, a):
    """Replace NaNs (torch's CPU gather/scatter changes 16-bit NaN payloads, LAYOUT.md 5)."""
    a = a.copy()
    if dtype in (np.float16, BF16):
        bad = np.isnan(a.astype(np.float32))
        a[bad] = 1.0
    if dtype == np.float32:
        # torch's f32 to_dense scatters through a float16 view: keep every 16-bit half away
        # from an fp16 signaling-NaN pattern.
        halves = a.view(np.uint16)
        snan = ((halves & 0x7C00) == 0x7C00) & ((halves & 0x03FF) != 0) & ((halves & 0x0200) == 0)
        halves[snan] &= 0x83FF
    return a


@pytest.mark.torch
@given(sparse_case(dtypes=(np.dtype(np.float16), BF16, np.dtype(np.int8), np.dtype(np.float32)),
                   overfull=True))
def test_bit_exact_with_torch_cutlass_conversion(dense):
    torch = pytest.importorskip("torch")
    from torch.sparse._semi_structured_conversions import (
        sparse_semi_structured_from_dense_cutlass,
        sparse_semi_structured_to_dense_cutlass,
    )

    dense = _no_nans(dense.dtype, dense)
    tv, tm = sparse_semi_structured_from_dense_cutlass(_torch_tensor(torch, dense))
    values, meta = compress_2to4(dense, truncate=True)
    tvb = tv.view(torch.int16) if tv.dtype == torch.bfloat16 else tv
    assert np.array_equal(_bits(values), tvb.numpy().view(BITS[values.dtype.itemsize]))
    assert meta.dtype.itemsize == tm.numpy().dtype.itemsize
    assert np.array_equal(meta.view(tm.numpy().dtype), tm.numpy())
    back = sparse_semi_structured_to_dense_cutlass(tv, tm)
    backb = back.view(torch.int16) if back.dtype == torch.bfloat16 else back
    ours = decompress_2to4(values, meta)
    assert np.array_equal(_bits(ours), backb.numpy().view(BITS[values.dtype.itemsize]))


# --------------------------------------------------------------------------- numba vs numpy
@given(sparse_case(overfull=True), st.booleans())
def test_numba_kernels_equal_the_numpy_reference(dense, truncate):
    try:
        expected = compress_2to4(dense, truncate=truncate, impl="numpy")
    except ValueError as exc:
        with pytest.raises(ValueError) as info:
            compress_2to4(dense, truncate=truncate, impl="numba")
        assert str(info.value) == str(exc)
        return
    got = compress_2to4(dense, truncate=truncate, impl="numba")
    assert np.array_equal(_bits(got[0]), _bits(expected[0]))
    assert np.array_equal(got[1], expected[1]) and got[1].dtype == expected[1].dtype
    back_numba = decompress_2to4(*got, impl="numba")
    back_numpy = decompress_2to4(*got, impl="numpy")
    assert np.array_equal(_bits(back_numba), _bits(back_numpy))


def test_numba_decompress_reports_bad_nibbles_like_numpy():
    values, meta = compress_2to4(np.zeros((16, 64), dtype=np.int8))
    bad = meta.copy()
    bad.reshape(-1)[5] ^= 0x00F0_0000  # word 5: b=1, cj=0, a=1 -> row 9, cols 0..31; nibble 5
    messages = []
    for impl in ("numba", "numpy"):
        with pytest.raises(ValueError, match="nibble") as info:
            decompress_2to4(values, bad, impl=impl)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "row 9, group 5" in messages[0]
