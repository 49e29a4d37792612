"""numba kernels for products with sparse weights kept as values + column indices.
Private: call :mod:`stepsim.nn.nm_linear`, which validates and holds the NumPy references.

One kernel serves both products of an N:M Linear layer: :func:`sparse_product`,
``y = x @ S.T`` for a sparse S given by rows (CSR: ``indptr``, ``cols``, ``vals``). The
forward product takes S = W (every row keeps k = in * n / m entries); the input gradient
``dx = dy @ W`` takes S = W.T, W's entries regrouped by column (:func:`transpose_rows`).

**Fixed summation order.** Output entry (r, o) is ``0 + vals[p0] * x[r, cols[p0]] + vals[p1]
* x[r, cols[p1]] + ...`` over row o's entries p0 < p1 < ... in storage order, every
product rounded, then every sum, left to right: no fused multiply-add, no reassociation.
W's rows keep their columns in increasing order and W.T's rows list W's rows in
increasing order, so the sums run over increasing input column (forward) and increasing
output (input gradient). The same bits on every CPU and for any tiling: a tile only
decides which rows of x are computed together, never the order of a sum.

**How.** Rows of x go ``ROW_BYTES`` bytes at a time (32 float32 or 16 float64): a tile of
x is transposed into a small buffer (columns of x become rows of ``ROW_BYTES``, by 8 x 8
register transposes, :func:`transpose_block`), the sparse rows are applied to it with one
vector per output (:func:`_rows_tile`: broadcast a weight, multiply the buffer row its
column names, add; a few outputs interleaved so their sums overlap), and the outputs'
vectors are transposed back into y. Only the n kept weights of a group are ever touched:
the work is rows * out * k multiply-adds plus two transposes of the tile.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from stepsim._ground.ir_loops import counted_loop
from stepsim._ground.jit import njit

ROW_BYTES = 128  # bytes of x's rows a tile takes: 32 float32 or 16 float64 rows


def _interleave(context) -> int:
    """Outputs whose sums :func:`_rows_tile` runs side by side: 4 with AVX-512's 32 vector
    registers, 2 with AVX2's 16 (a tile row of one output takes 128 bytes; more would spill
    the sums to memory). Read from the target numba compiles for (its cache is kept per
    target), it changes the schedule only, never a sum."""
    features = getattr(context.codegen(), "_tm_features", "") or ""
    return 4 if "+avx512f" in features.split(",") else 2


def _splat(builder, x, vec):
    from llvmlite import ir

    i32 = ir.IntType(32)
    one = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(i32, 0))
    return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(i32, vec.count),
                                                        [0] * vec.count))


class _Loops:
    """Counted loops of step 1 in LLVM IR (:func:`stepsim._ground.ir_loops.counted_loop`)
    and i64 constants."""

    def __init__(self, builder):
        from llvmlite import ir

        self.ir, self.b, self.i64 = ir, builder, ir.IntType(64)

    def const(self, value):
        return self.ir.Constant(self.i64, value)

    def loop(self, start, stop, carried, body):
        return counted_loop(self.b, start, stop, 1, carried, body)


@intrinsic
def _rows_tile(typingctx, xt, indptr, cols, vals, yt):
    """yt[o, :] = sum over p in indptr[o] .. indptr[o+1]-1, in order, of vals[p] *
    xt[cols[p], :] (from 0, each product then each sum rounded).

    xt (n_in, L) and yt (n_out, L) are C-contiguous buffers of L = ROW_BYTES / itemsize
    entries a row (L rows of x, transposed); indptr (n_out + 1,) int64, cols int32 and vals
    (the buffers' dtype) as :func:`sparse_product`. Each row of yt is one LLVM vector kept in
    registers across its sum; a few outputs (:func:`_interleave`) run side by side over
    their common length, then each finishes its own entries.
    """
    from llvmlite import ir

    if not (isinstance(xt, types.Array) and xt.dtype in (types.float32, types.float64)
            and yt == xt and vals.dtype == xt.dtype and cols.dtype == types.int32
            and indptr.dtype == types.int64):
        return None
    sig = types.void(xt, indptr, cols, vals, yt)

    def codegen(context, builder, signature, args):
        b = builder
        arrays = [context.make_array(t)(context, b, a) for t, a in zip(signature.args, args)]
        x_ptr, ptr_ptr, col_ptr, val_ptr, y_ptr = (a.data for a in arrays)
        elem = context.get_value_type(signature.args[0].dtype)
        itemsize = context.get_abi_sizeof(elem)
        lanes = ROW_BYTES // itemsize
        vec = ir.VectorType(elem, lanes)
        loops = _Loops(b)
        i64 = loops.i64
        width = loops.const(lanes)
        n_out = b.extract_value(arrays[4].shape, 0)
        zero = ir.Constant(vec, [0.0] * lanes)

        def start(o):
            return b.load(b.gep(ptr_ptr, [o]))

        def add_term(acc, p):
            weight = _splat(b, b.load(b.gep(val_ptr, [p])), vec)
            col = b.sext(b.load(b.gep(col_ptr, [p])), i64)
            row = b.bitcast(b.gep(x_ptr, [b.mul(col, width)]), vec.as_pointer())
            return b.fadd(acc, b.fmul(weight, b.load(row, align=itemsize)))

        def store(acc, o):
            b.store(acc, b.bitcast(b.gep(y_ptr, [b.mul(o, width)]), vec.as_pointer()),
                    align=itemsize)

        def own_rest(o, first, acc):
            """The entries first .. end of row o added to acc, then stored."""
            done = loops.loop(first, start(b.add(o, loops.const(1))), [acc],
                              lambda p, a: [add_term(a[0], p)])
            store(done[0], o)

        side = _interleave(context)
        groups = b.sdiv(n_out, loops.const(side))

        def group(g, _):
            first = b.mul(g, loops.const(side))
            outs = [b.add(first, loops.const(j)) for j in range(side)]
            begins = [start(o) for o in outs]
            ends = [start(b.add(o, loops.const(1))) for o in outs]
            common = b.sub(ends[0], begins[0])
            for s, e in zip(begins[1:], ends[1:]):
                length = b.sub(e, s)
                common = b.select(b.icmp_signed("<", length, common), length, common)
            accs = loops.loop(loops.const(0), common, [zero] * side,
                              lambda q, a: [add_term(acc, b.add(s, q))
                                            for acc, s in zip(a, begins)])
            for o, s, acc in zip(outs, begins, accs):
                own_rest(o, b.add(s, common), acc)
            return []

        loops.loop(loops.const(0), groups, [], group)
        loops.loop(b.mul(groups, loops.const(side)), n_out, [],
                   lambda o, _: own_rest(o, start(o), zero) or [])
        return context.get_dummy_value()

    return sig, codegen


# the 8 x 8 transpose as three rounds of two-input shuffles (lane k of a result takes lane
# idx[k] of the pair, 8.. from the second): pairs of rows, pairs of pairs, then halves
_ROUNDS = (
    (((0, 1), (2, 3), (4, 5), (6, 7)), [0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15]),
    (((0, 2), (1, 3), (4, 6), (5, 7)), [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]),
    (((0, 4), (1, 5), (2, 6), (3, 7)), [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]),
)
# where each round leaves its results: (lo, hi) of pair j go to these rows
_PLACES = (((0, 1), (2, 3), (4, 5), (6, 7)),
           ((0, 1), (2, 3), (4, 5), (6, 7)),
           ((0, 4), (1, 5), (2, 6), (3, 7)))


def transpose8_model(rows: list) -> list:
    """The shuffle rounds of :func:`_transpose8` on Python lists (8 rows of 8): the same
    index arithmetic, testable without LLVM."""
    for pairs, lo, hi, places in ((*r, p) for r, p in zip(_ROUNDS, _PLACES)):
        out = [None] * 8
        for (a, c), (to_lo, to_hi) in zip(pairs, places):
            both = rows[a] + rows[c]
            out[to_lo] = [both[k] for k in lo]
            out[to_hi] = [both[k] for k in hi]
        rows = out
    return rows


@intrinsic
def _transpose8(typingctx, src, si, sj, dst, di, dj):
    """dst[di + j, dj + i] = src[si + i, sj + j] for i, j < 8: eight vector loads, the
    shuffle rounds of :func:`transpose8_model`, eight vector stores. src and dst are 2-d
    arrays of one float dtype with unit column stride (rows may be strided)."""
    from llvmlite import ir

    if not (isinstance(src, types.Array) and src.ndim == 2 and isinstance(dst, types.Array)
            and dst.ndim == 2 and dst.dtype == src.dtype
            and src.dtype in (types.float32, types.float64)):
        return None
    sig = types.void(src, si, sj, dst, di, dj)

    def codegen(context, builder, signature, args):
        b = builder
        ty = signature.args
        a_src = context.make_array(ty[0])(context, b, args[0])
        a_dst = context.make_array(ty[3])(context, b, args[3])
        i64, i32 = ir.IntType(64), ir.IntType(32)
        elem = context.get_value_type(ty[0].dtype)
        itemsize = context.get_abi_sizeof(elem)
        vec = ir.VectorType(elem, 8)
        pitch_src = b.sdiv(b.extract_value(a_src.strides, 0), ir.Constant(i64, itemsize))
        pitch_dst = b.sdiv(b.extract_value(a_dst.strides, 0), ir.Constant(i64, itemsize))
        si_, sj_, di_, dj_ = (context.cast(b, args[k], ty[k], types.int64) for k in (1, 2, 4, 5))

        def at(array, pitch, row, col, k):
            offset = b.add(b.mul(b.add(row, ir.Constant(i64, k)), pitch), col)
            return b.bitcast(b.gep(array.data, [offset]), vec.as_pointer())

        rows = [b.load(at(a_src, pitch_src, si_, sj_, i), align=itemsize) for i in range(8)]
        for (pairs, lo, hi), places in zip(_ROUNDS, _PLACES):
            out = [None] * 8
            for (a, c), (to_lo, to_hi) in zip(pairs, places):
                for to, picks in ((to_lo, lo), (to_hi, hi)):
                    out[to] = b.shuffle_vector(rows[a], rows[c],
                                               ir.Constant(ir.VectorType(i32, 8), picks))
            rows = out
        for j in range(8):
            b.store(rows[j], at(a_dst, pitch_dst, di_, dj_, j), align=itemsize)
        return context.get_dummy_value()

    return sig, codegen


@njit
def transpose_block(src, r0, c0, nrows, ncols, dst, d0, e0):
    """dst[d0 + j, e0 + i] = src[r0 + i, c0 + j] for i < nrows, j < ncols: whole 8 x 8
    blocks by :func:`_transpose8`, eight rows of dst at a time along them (the stores
    then fill dst's lines in order), the edges entry by entry."""
    full_i = nrows - nrows % 8
    full_j = ncols - ncols % 8
    for j in range(0, full_j, 8):
        for i in range(0, full_i, 8):
            _transpose8(src, r0 + i, c0 + j, dst, d0 + j, e0 + i)
    for i in range(0, full_i, 8):
        for j in range(full_j, ncols):
            for ii in range(8):
                dst[d0 + j, e0 + i + ii] = src[r0 + i + ii, c0 + j]
    for i in range(full_i, nrows):
        for j in range(ncols):
            dst[d0 + j, e0 + i] = src[r0 + i, c0 + j]


@njit
def sparse_product(x, indptr, cols, vals, y):
    """y (R, n_out) = x (R, n_in) @ S.T for S (n_out, n_in) given by rows: row o keeps
    vals[indptr[o]:indptr[o+1]] at columns cols[indptr[o]:indptr[o+1]] (int32, each < n_in).
    x and y: 2-d, one float dtype, unit column stride; indptr (n_out + 1,) int64 from 0.
    Sums in the fixed order of the module docstring."""
    rows, n_in = x.shape
    n_out = y.shape[1]
    lanes = ROW_BYTES // x.itemsize
    xt = np.zeros((n_in, lanes), x.dtype)
    yt = np.empty((n_out, lanes), x.dtype)
    for r0 in range(0, rows, lanes):
        t = min(lanes, rows - r0)
        if t < lanes:  # the last, short tile: rows past the end are zeros
            xt[:, :] = 0.0
        transpose_block(x, r0, 0, t, n_in, xt, 0, 0)
        _rows_tile(xt, indptr, cols, vals, yt)
        transpose_block(yt, 0, 0, n_out, t, y, r0, 0)


@njit
def pack_words(w, words, n, per_group, values, cols):
    """The kept entries of the weight w (out, n_in) at an N:M bool mask read as words: values
    (out, k) and cols (out, k) int32, k = n_in * n / m, row by row in increasing column
    order. ``words`` (out, n_in / b) is the mask's bytes as little-endian unsigned words of
    b bytes (b divides m; ``per_group`` = m / b words a group): a kept entry is a byte 1, so
    bit 8 j of a word is byte j and the lowest kept entry of a word is its trailing zeros
    / 8. Each kept entry costs one count of trailing zeros and one clear of the lowest set
    bit; a group's m bytes are read as m / b loads, not m tests of a byte (a test a byte
    mispredicts about once a group). Returns -1, or the first row with a group that does
    not keep exactly n (then the arrays are partial)."""
    out, n_words = words.shape
    width = words.itemsize  # b
    one = np.uint64(1)  # every word widened to uint64 (an int64 with it would be a float)
    for o in range(out):
        at = 0
        for g in range(0, n_words, per_group):
            left = n
            for q in range(g, g + per_group):
                u = np.uint64(words[o, q])
                while u != 0:
                    if left == 0:
                        return o
                    c = q * width + (np.int64(trailing_zeros(u)) >> 3)
                    values[o, at] = w[o, c]
                    cols[o, at] = c
                    at += 1
                    left -= 1
                    u &= u - one
            if left != 0:
                return o
    return -1


@njit
def pack_group_words(w, words, n, values, cols):
    """:func:`pack_words` when a group is one word (m = b: 1, 2, 4 or 8 bytes), without a
    branch on the data: a group's n entries are its word's n lowest set bits, taken one
    after the other (the word's top bit or'ed in first, so that a word with fewer than n
    left still names a column of its own group and a read stays inside w); a word holding
    other than n kept entries sets ``bad``, checked once a row. Same results as
    pack_words (a test compares them)."""
    out, n_words = words.shape
    width = words.itemsize
    one = np.uint64(1)
    top = one << np.uint64(8 * width - 8)
    for o in range(out):
        bad = np.uint64(0)
        for q in range(n_words):
            u = np.uint64(words[o, q])
            for j in range(n):
                bad |= np.uint64(u == 0)
                c = q * width + (np.int64(trailing_zeros(u | top)) >> 3)
                values[o, q * n + j] = w[o, c]
                cols[o, q * n + j] = c
                u &= u - one
            bad |= u
        if bad != 0:
            return o
    return -1


@njit
def transpose_rows(cols, vals, n_in, indptr_t, rows_t, vals_t):
    """The rows of S.T from S's rows of k entries each (cols, vals (n_out, k)): column c of
    S becomes row c, its entries listed by increasing row of S (a counting sort).
    indptr_t (n_in + 1,) int64, rows_t (n_out * k,) int32 and vals_t (n_out * k,) receive it."""
    n_out, k = cols.shape
    indptr_t[:] = 0
    for o in range(n_out):
        for j in range(k):
            indptr_t[cols[o, j] + 1] += 1
    for c in range(n_in):
        indptr_t[c + 1] += indptr_t[c]
    fill = indptr_t[:n_in].copy()
    for o in range(n_out):
        for j in range(k):
            c = cols[o, j]
            at = fill[c]
            rows_t[at] = o
            vals_t[at] = vals[o, j]
            fill[c] = at + 1
