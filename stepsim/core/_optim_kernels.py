"""numba kernels for Adam(W) and momentum SGD. Private: call :mod:`stepsim.core.optim`.

Each kernel makes one pass over memory and updates in place. Adam also reduces the
statistics the switch criteria need in that pass, in blocks of ``BLOCK`` elements whose
float64 sums run in a fixed lane order (the same bits on every CPU). The usual case
(statistics without log|dv|) updates a block and sums its statistics in one vectorised
loop (:func:`_adam_block_stats`, LLVM vectors written out in :func:`_adam_lanes8`), so the
statistics' float64 work overlaps the update's divisions and memory traffic; the other
cases update a block (keeping its old v in a small scratch array), then sum the block's
statistics while it is still in cache (:func:`_block_stats`). Per-block sums go to
``partial`` and are added in block order, so the statistics do not depend on the number
of threads. One call updates every parameter of a model (:func:`adam`, multi-tensor);
``adam_serial`` is the same driver compiled for one thread.

All scalar arguments arrive already in the arrays' dtype (a Python float would silently
turn a float32 loop into float64), and the element-wise arithmetic is written in the
order of :func:`stepsim.core.reference.adam_step`, so results agree bit for bit with it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray, prange, types
from numba.extending import intrinsic

from stepsim._ground.jit import njit
from stepsim._ground.threads import serial_twin

BLOCK = 4096  # elements a block: 4 arrays x 16 KiB stay in L1/L2 while reduced
N_STATS = 5  # dv_l1, dv_log_sum, dv_zeros, v_l1, v_l2sq


@njit
def _adam_element(w, g, m, v, i, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay):
    """Adam on entry i, in place, in the order of :func:`stepsim.core.reference.adam_step`;
    returns the new v[i]. The one copy of the element-wise update: every block loop calls
    it (numba compiles callee and caller into one LLVM module, which inlines it, so the
    loops still vectorise; the same bits as when it was written out in each loop)."""
    gi = g[i]
    mi = b1 * m[i] + c1 * gi
    m[i] = mi
    vi = b2 * v[i] + c2 * (gi * gi)
    v[i] = vi
    w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in) + eps_out))
    return vi


@njit
def _adam_block(w, g, m, v, v_old, keep_old, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out,
                lr, decay):
    """Adam on one block; v_old receives v before the update if keep_old (for statistics).

    Returns (bad_g, bad_v): how many g are not finite (g - g is 0 only for finite g) and
    how many incoming v are not >= 0 (negative or NaN). With keep_old the loop only ORs
    a flag (a vectorised boolean OR; two integer counts beside float32 arithmetic cost
    ~20% of the step) and counts exactly afterwards, from g and v_old, in the rare block
    whose flag is set; without, the counts run in the loop (v is overwritten, so they
    could not be taken afterwards).
    """
    if keep_old:
        bad = False
        for i in range(w.shape[0]):
            gi = g[i]
            vo = v[i]
            bad |= ((gi - gi) != 0) | (not vo >= 0)
            v_old[i] = vo
            _adam_element(w, g, m, v, i, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                          decay)
        return _count_bad(g, v_old) if bad else (0, 0)
    bad_g = 0
    bad_v = 0
    for i in range(w.shape[0]):
        gi = g[i]
        vo = v[i]
        bad_g += (gi - gi) != 0
        bad_v += not vo >= 0
        _adam_element(w, g, m, v, i, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
    return bad_g, bad_v


@njit
def _count_bad(g, v):
    """(non-finite g, v not >= 0): the counts of :func:`_adam_block`, taken afterwards."""
    bad_g = 0
    bad_v = 0
    for i in range(g.shape[0]):
        bad_g += (g[i] - g[i]) != 0
        bad_v += not v[i] >= 0
    return bad_g, bad_v


@njit
def _adam_block_stats(w, g, m, v, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay,
                      scale_prev, scale_new, out):
    """Adam on one block and the statistics of its dv (without log|dv|), in one pass.

    The arithmetic of :func:`_adam_block` followed by :func:`_block_stats` (log_stats off),
    value for value and sum for sum: entry i of the block goes to lane i % 8 of each
    float64 sum, the lanes are added in the same fixed order, so the bits are those of the
    two passes. Fused because the statistics' float64 adds and conversions then overlap
    the update's square roots and divisions (and, past the caches, its memory traffic)
    instead of running after them: the second pass over v and the copy of the old v cost
    most of the update's own time. Returns (bad_g,
    bad_v) as :func:`_adam_block`, counted exactly in the loop (v is overwritten).
    """
    acc = np.zeros((4, LANES))  # dv_l1, v_l1, v_l2sq, zeros
    bad = np.zeros(2, np.int64)
    raw = scale_prev == 1.0 and scale_new == 1.0
    n = w.shape[0]
    full = n - n % LANES
    _adam_lanes8(w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                 decay, scale_prev, scale_new, raw, acc, bad)
    bad_g = bad[0]
    bad_v = bad[1]
    for i in range(full, n):  # the tail (fewer than 8 entries): lanes 0..n-full-1
        gi = g[i]
        vo = v[i]
        bad_g += (gi - gi) != 0
        bad_v += not vo >= 0
        vi = _adam_element(w, g, m, v, i, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                           decay)
        _tail_stats(acc, i - full, vi, vo, scale_prev, scale_new, raw)
    out[0] = _lanes_total(acc[0])
    out[1] = 0.0
    out[2] = _lanes_total(acc[3])
    out[3] = _lanes_total(acc[1])
    out[4] = _lanes_total(acc[2])
    return bad_g, bad_v


@njit
def _adam_block_frozen_v(w, g, m, v, b1, c1, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay):
    """Adam on one block with v read, never written (STEP phase 2); returns as _adam_block
    (a flag in the loop, the counts afterwards: v is unchanged)."""
    bad = False
    for i in range(w.shape[0]):
        gi = g[i]
        vi = v[i]
        bad |= ((gi - gi) != 0) | (not vi >= 0)
        mi = b1 * m[i] + c1 * gi
        m[i] = mi
        w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in) + eps_out))
    return _count_bad(g, v) if bad else (0, 0)


LANES = 8  # running partial sums per statistic (see _block_stats)


@njit
def _tail_stats(acc, lane, v_new, v_prev, scale_prev, scale_new, raw):
    """Add one entry's dv statistics to ``lane`` of acc (dv_l1, v_l1, v_l2sq, zeros), in
    float64: the tail (fewer than 8 entries) of :func:`_adam_block_stats` and
    :func:`_block_stats`, in the order the 8-lane loops use."""
    vn = np.float64(v_new)
    vd = np.float64(v_prev)
    if not raw:
        vn *= scale_new
        vd *= scale_prev
    d = abs(vn - vd)
    acc[0, lane] += d
    acc[1, lane] += vn
    acc[2, lane] += vn * vn
    acc[3, lane] += 1.0 if d == 0.0 else 0.0


@njit
def _lanes_total(acc):
    """Sum of 8 lanes, pairwise in a fixed order."""
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


@njit
def _block_stats(v, v_old, scale_prev, scale_new, log_stats, out):
    """Float64 statistics of dv = scale_new*v - scale_prev*v_old over one block, into out.

    Sums run in a fixed order, so they give the same bits on every CPU: entry i goes to
    lane i % 8, each lane adds in index order, then the lanes are added pairwise. (A sum
    that LLVM may reassociate would follow the machine's vector width: AVX2 and AVX-512
    gave other last bits.) LLVM will not vectorise eight running sums by itself (it may not
    reassociate, and its SLP pass does not start from loop-carried values), so
    :func:`_lanes8` writes the loop with one 8-wide vector per statistic: lane j of the
    vector is lane j of the sum, the same additions in the same order (several times
    faster than the scalar loop). The tail (fewer than 8 entries) is added to lanes 0..r-1
    below. The count of zeros is kept as a float64 sum (exact below 2**53) so every lane is
    the same type.
    """
    acc = np.zeros((4, LANES))  # dv_l1, v_l1, v_l2sq, zeros
    raw = scale_prev == 1.0 and scale_new == 1.0
    n = v.shape[0]
    full = n - n % LANES
    _lanes8(v, v_old, full, scale_prev, scale_new, raw, acc)
    for i in range(full, n):
        _tail_stats(acc, i - full, v[i], v_old[i], scale_prev, scale_new, raw)  # lane i % 8
    dv_log = 0.0
    if log_stats:  # glibc's scalar log, in index order (no vector log here: stepsim._ground.libm)
        for i in range(n):
            d = abs(np.float64(v[i]) * scale_new - np.float64(v_old[i]) * scale_prev)
            if d != 0.0:
                dv_log += math.log(d)
    out[0] = _lanes_total(acc[0])
    out[1] = dv_log
    out[2] = _lanes_total(acc[3])
    out[3] = _lanes_total(acc[1])
    out[4] = _lanes_total(acc[2])


@intrinsic
def _lanes8(typingctx, v, v_old, full, scale_prev, scale_new, raw, acc):
    """acc (4, 8) float64 += the lane sums of entries 0 .. full-1 of contiguous v, v_old.

    ``full`` is a multiple of 8. Entry i goes to lane i % 8; per entry (in float64, each
    operation an IEEE operation without contraction, as in the scalar loop):
    vn = v (raw) or v * scale_new, vo likewise with scale_prev, d = |vn - vo|; row 0 adds
    d, row 1 vn, row 2 vn * vn, row 3 (d == 0). Written as LLVM IR over <8 x double>
    vectors, one per row, loaded from acc and stored back at the end.
    """
    from llvmlite import ir

    if not (isinstance(v, types.Array) and v.dtype in (types.float32, types.float64)
            and v_old == v and isinstance(acc, types.Array) and acc.dtype == types.float64):
        return None
    sig = types.void(v, v_old, full, scale_prev, scale_new, raw, acc)

    def codegen(context, builder, signature, args):
        av, ao, n, sp, sn, is_raw, aacc = args
        ty = signature.args
        lanes = _Lanes(context, builder, ty[0].dtype, sp, ty[3], sn, ty[4], is_raw, ty[5],
                       aacc, ty[6])
        v_ptr = context.make_array(ty[0])(context, builder, av).data
        o_ptr = context.make_array(ty[1])(context, builder, ao).data

        def body(i, accs):
            x, y = lanes.load(v_ptr, i), lanes.load(o_ptr, i)
            return lanes.add_stats(accs, x, y), []

        lanes.loop(context.cast(builder, n, ty[2], types.int64), body, [])
        return context.get_dummy_value()

    return sig, codegen


class _Lanes:
    """LLVM IR pieces shared by :func:`_lanes8` and :func:`_adam_lanes8`: vectors of
    LANES entries of the arrays' type, the four (LANES,) float64 rows of ``acc`` (loaded
    before the loop, stored after it) and :meth:`add_stats`, the per-entry statistics of
    :func:`_block_stats`. Every operation is a plain IEEE one (no fast-math flags, so no
    contraction or reassociation): lane j does exactly what the scalar loop does to the
    entries of lane j."""

    def __init__(self, context, builder, dtype, sp, sp_ty, sn, sn_ty, is_raw, raw_ty, aacc,
                 acc_ty):
        from llvmlite import ir
        from numba.core import cgutils

        self.ir, self.context, self.builder = ir, context, builder
        self.elem = context.get_value_type(dtype)
        self.dbl, self.i64 = ir.DoubleType(), ir.IntType(64)
        self.vec_e = ir.VectorType(self.elem, LANES)
        self.vec_d = ir.VectorType(self.dbl, LANES)
        self.align = context.get_abi_sizeof(self.elem)
        acc_ptr = context.make_array(acc_ty)(context, builder, aacc).data
        self.acc_vp = builder.bitcast(acc_ptr, self.vec_d.as_pointer())
        self.start = [builder.load(builder.gep(self.acc_vp, [ir.Constant(self.i64, r)]),
                                   align=8) for r in range(4)]
        self.sp_v = self.splat(context.cast(builder, sp, sp_ty, types.float64), self.vec_d)
        self.sn_v = self.splat(context.cast(builder, sn, sn_ty, types.float64), self.vec_d)
        raw_b = context.cast(builder, is_raw, raw_ty, types.boolean)
        self.raw_i1 = builder.icmp_unsigned("!=", raw_b, ir.Constant(raw_b.type, 0))
        self.zero_d = ir.Constant(self.vec_d, [0.0] * LANES)
        self.one_d = ir.Constant(self.vec_d, [1.0] * LANES)
        self.fabs = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vec_d, [self.vec_d]), f"llvm.fabs.v{LANES}f64")

    def splat(self, x, vec):
        out = self.ir.Constant(vec, self.ir.Undefined)
        for k in range(LANES):
            out = self.builder.insert_element(out, x, self.ir.Constant(self.ir.IntType(32), k))
        return out

    def load(self, ptr, i):
        b = self.builder
        return b.load(b.bitcast(b.gep(ptr, [i]), self.vec_e.as_pointer()), align=self.align)

    def store(self, value, ptr, i):
        b = self.builder
        b.store(value, b.bitcast(b.gep(ptr, [i]), self.vec_e.as_pointer()), align=self.align)

    def add_stats(self, accs, x, y):
        """The four rows plus the statistics of new v ``x`` and old v ``y`` (vectors of
        the arrays' type): vn = x (raw) or x * scale_new in float64, vo likewise; d = |vn -
        vo|; rows d, vn, vn * vn, (d == 0)."""
        b = self.builder
        if self.elem != self.dbl:
            x, y = b.fpext(x, self.vec_d), b.fpext(y, self.vec_d)
        vn = b.select(self.raw_i1, x, b.fmul(x, self.sn_v))
        vo = b.select(self.raw_i1, y, b.fmul(y, self.sp_v))
        d = b.call(self.fabs, [b.fsub(vn, vo)])
        zero = b.select(b.fcmp_ordered("==", d, self.zero_d), self.one_d, self.zero_d)
        return [b.fadd(accs[0], d), b.fadd(accs[1], vn), b.fadd(accs[2], b.fmul(vn, vn)),
                b.fadd(accs[3], zero)]

    def loop(self, n, body, extra):
        """for i in 0, 8, .., n - 8: accs, extra = body(i, accs, extra); accs start from
        acc's rows and are stored back after the loop; ``extra`` are further loop-carried
        values (initial values given), returned after the loop."""
        ir, b = self.ir, self.builder
        entry = b.block
        head = b.append_basic_block("lanes8.head")
        loop_body = b.append_basic_block("lanes8.body")
        done = b.append_basic_block("lanes8.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(self.i64)
        i.add_incoming(ir.Constant(self.i64, 0), entry)
        accs = [b.phi(self.vec_d) for _ in range(4)]
        for a, s in zip(accs, self.start):
            a.add_incoming(s, entry)
        carried = [b.phi(x.type) for x in extra]
        for c, x in zip(carried, extra):
            c.add_incoming(x, entry)
        b.cbranch(b.icmp_signed("<", i, n), loop_body, done)
        b.position_at_end(loop_body)
        new, new_extra = body(i, accs) if not extra else body(i, accs, carried)
        i.add_incoming(b.add(i, ir.Constant(self.i64, LANES)), b.block)
        for a, x in zip(accs + carried, list(new) + list(new_extra)):
            a.add_incoming(x, b.block)
        b.branch(head)
        b.position_at_end(done)
        for r, a in enumerate(accs):
            b.store(a, b.gep(self.acc_vp, [ir.Constant(self.i64, r)]), align=8)
        return carried


@intrinsic
def _adam_lanes8(typingctx, w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in,
                 eps_out, lr, decay, scale_prev, scale_new, raw, acc, bad):
    """:func:`_adam_block` on entries 0 .. full-1 (a multiple of 8) of contiguous w, g, m,
    v, with :func:`_lanes8`'s statistics of (new v, old v) added into acc (4, 8) and the
    counts of non-finite g and of old v not >= 0 added into bad (2,) int64.

    LANES entries at a time as LLVM vectors: each element-wise operation is the scalar
    loop's, in its order and type (the scalars have the arrays' dtype), so every entry gets
    the bits the scalar loop gives it; the float64 sums are :func:`_lanes8`'s.
    """
    from llvmlite import ir

    arrays = (w, g, m, v)
    scalars = (b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
    if not (isinstance(v, types.Array) and v.dtype in (types.float32, types.float64)
            and all(a == v for a in arrays) and all(x == v.dtype for x in scalars)
            and isinstance(acc, types.Array) and acc.dtype == types.float64
            and isinstance(bad, types.Array) and bad.dtype == types.int64):
        return None
    sig = types.void(w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                     decay, scale_prev, scale_new, raw, acc, bad)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        ty = signature.args
        (aw, ag, am, av, n, *hyper), (sp, sn, is_raw, aacc, abad) = args[:15], args[15:]
        lanes = _Lanes(context, builder, ty[3].dtype, sp, ty[15], sn, ty[16], is_raw, ty[17],
                       aacc, ty[18])
        ptrs = [context.make_array(t)(context, builder, a).data
                for t, a in zip(ty[:4], (aw, ag, am, av))]
        b1v, c1v, b2v, c2v, ibc1, ibc2, e_in, e_out, lrv, dec = (
            lanes.splat(x, lanes.vec_e) for x in hyper)
        vec_e, i32v = lanes.vec_e, ir.VectorType(ir.IntType(32), LANES)
        zero_e = ir.Constant(vec_e, [0.0] * LANES)
        sqrt = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec_e, [vec_e]),
            f"llvm.sqrt.v{LANES}f{'32' if lanes.elem != lanes.dbl else '64'}")
        no_bad = ir.Constant(i32v, [0] * LANES)

        def body(i, accs, counts):
            b = builder
            wp, gp, mp, vp = ptrs
            gi, vo = lanes.load(gp, i), lanes.load(vp, i)
            bad_g = b.fcmp_unordered("!=", b.fsub(gi, gi), zero_e)  # (gi - gi) != 0
            bad_v = b.fcmp_unordered("<", vo, zero_e)  # not vo >= 0
            counts = [b.add(counts[0], b.zext(bad_g, i32v)),
                      b.add(counts[1], b.zext(bad_v, i32v))]
            mi = b.fadd(b.fmul(b1v, lanes.load(mp, i)), b.fmul(c1v, gi))
            lanes.store(mi, mp, i)
            vi = b.fadd(b.fmul(b2v, vo), b.fmul(c2v, b.fmul(gi, gi)))
            lanes.store(vi, vp, i)
            den = b.fadd(b.call(sqrt, [b.fadd(b.fmul(vi, ibc2), e_in)]), e_out)
            step = b.fmul(lrv, b.fdiv(b.fmul(mi, ibc1), den))
            lanes.store(b.fsub(b.fmul(lanes.load(wp, i), dec), step), wp, i)
            return lanes.add_stats(accs, vi, vo), counts

        counts = lanes.loop(context.cast(builder, n, ty[4], types.int64), body,
                            [no_bad, no_bad])
        bad_ptr = context.make_array(ty[19])(context, builder, abad).data
        for r, c in enumerate(counts):  # a block has < 2**31 entries: int32 lanes suffice
            total = builder.load(builder.gep(bad_ptr, [ir.Constant(lanes.i64, r)]))
            for k in range(LANES):
                lane = builder.extract_element(c, ir.Constant(ir.IntType(32), k))
                total = builder.add(total, builder.sext(lane, lanes.i64))
            builder.store(total, builder.gep(bad_ptr, [ir.Constant(lanes.i64, r)]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def pointer_to(typingctx, address, like):
    """A typed pointer (to elements of ``like``'s type) from an integer address."""
    sig = types.CPointer(like)(address, like)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@njit
def addresses(w, g, m, v):
    """Data addresses of one parameter's four arrays (any shape), for a table row."""
    return w.ctypes.data, g.ctypes.data, m.ctypes.data, v.ctypes.data


@njit
def address(a):
    """The data address of one array (a quarter of ``a.ctypes.data``'s cost in Python)."""
    return a.ctypes.data


@njit
def addresses3(w, g, buf):
    """Data addresses of one parameter's three momentum-SGD arrays, for a table row."""
    return w.ctypes.data, g.ctypes.data, buf.ctypes.data


@njit
def _first_overlap(table, sizes, itemsize):
    """-1 if no written array (every column of ``table`` but column 1, g) shares a byte
    with any other array; else a parameter whose arrays overlap something (the wrapper
    then names the pair). Two g may overlap: they are only read. O(K log K)."""
    cols = table.shape[1]
    start = table.ravel()
    stop = np.empty_like(start)
    for r in range(start.shape[0]):
        stop[r] = start[r] + sizes[r // cols] * itemsize
    end_any = np.iinfo(np.int64).min  # furthest end of any range seen so far
    end_written = np.iinfo(np.int64).min  # ... of a range that is written
    for r in np.argsort(start, kind="mergesort"):
        if stop[r] == start[r]:
            continue  # an empty array touches no memory
        written = r % cols != 1
        if start[r] < (end_any if written else end_written):
            return r // cols
        end_any = max(end_any, stop[r])
        if written:
            end_written = max(end_written, stop[r])
    return -1


@njit
def _block_table(sizes):
    """(first_block, owner): parameter i owns blocks first_block[i]:first_block[i+1] of
    BLOCK elements (a block never spans two parameters); owner[b] is block b's parameter."""
    k = sizes.shape[0]
    first_block = np.zeros(k + 1, np.int64)
    for i in range(k):
        first_block[i + 1] = first_block[i] + (sizes[i] + BLOCK - 1) // BLOCK
    owner = np.empty(first_block[k], np.int64)
    for i in range(k):
        owner[first_block[i]:first_block[i + 1]] = i
    return first_block, owner


@njit(parallel=True)
def adam(table, sizes, itemsize, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
              decay, freeze_v, with_stats, log_stats, scale_prev, scale_new, scratch, per_param):
    """One Adam(W) step over K parameters at once, in place.

    table (K, 4) int64: the data addresses of parameter i's w, g, m, v (C-contiguous
    arrays of ``sizes[i]`` elements of b1's dtype, ``itemsize`` bytes each; the wrapper has
    checked every one and holds them alive). A table rather than a tuple of arrays: numba
    would compile a tuple kernel once per K (seconds each); this compiles once per dtype.
    m = b1*m + c1*g; v = b2*v + c2*g*g (skipped if freeze_v);
    w = w*decay - lr * (m*inv_bc1) / (sqrt(v*inv_bc2 + eps_in) + eps_out).
    All parameters are cut into one list of blocks of BLOCK elements (a block never spans
    two parameters), and each of the parallel tasks walks a contiguous run of it, keeping
    the old v of its current block in its own row of scratch (tasks, BLOCK or 1) (an
    allocation per block slowed the step, and a thread id would make the
    kernel uncacheable).
    per_param (K, N_STATS) float64, if with_stats, receives each parameter's statistics of
    dv = scale_new*v_new - scale_prev*v_old: sum|dv|, sum log|dv| over dv != 0 (0 unless
    log_stats), count of dv == 0, sum scale_new*v_new and sum (scale_new*v_new)^2. They
    are summed block by block in order within a parameter: the order of a per-parameter
    step, so the bits are the same whatever the thread count (the wrapper adds the
    parameters up in order, as ``AdamStats.combine`` does).
    Returns (overlap, bad_g, bad_v): overlap is -1, or a parameter whose arrays overlap
    another's (then nothing was written); bad_g counts non-finite g, bad_v incoming v that
    are not >= 0.
    """
    k = sizes.shape[0]
    overlap = _first_overlap(table, sizes, itemsize)
    if overlap >= 0:
        return overlap, 0, 0
    first_block, owner = _block_table(sizes)
    blocks = first_block[k]
    partial = np.zeros((blocks if with_stats else 0, N_STATS))
    bad = np.zeros((blocks, 2), np.int64)
    tasks = max(1, min(scratch.shape[0], blocks))
    per_task = (blocks + tasks - 1) // tasks
    for t in prange(tasks):
        for b in range(t * per_task, min((t + 1) * per_task, blocks)):
            i = owner[b]
            lo = (b - first_block[i]) * BLOCK
            hi = min(lo + BLOCK, sizes[i])
            w = carray(pointer_to(table[i, 0], b1), sizes[i])[lo:hi]
            g = carray(pointer_to(table[i, 1], b1), sizes[i])[lo:hi]
            m = carray(pointer_to(table[i, 2], b1), sizes[i])[lo:hi]
            v = carray(pointer_to(table[i, 3], b1), sizes[i])[lo:hi]
            if freeze_v:
                bad_g, bad_v = _adam_block_frozen_v(w, g, m, v, b1, c1, inv_bc1, inv_bc2,
                                                    eps_in, eps_out, lr, decay)
                v_old = v
            elif with_stats and not log_stats:  # update and statistics in one pass
                bad_g, bad_v = _adam_block_stats(w, g, m, v, b1, c1, b2, c2, inv_bc1, inv_bc2,
                                                 eps_in, eps_out, lr, decay, scale_prev,
                                                 scale_new, partial[b])
                v_old = v  # unused: the statistics are taken
            else:  # v_old kept also without statistics: a flag in the loop, not two counts
                v_old = scratch[t, : hi - lo]  # (which stopped the loop's vectorisation)
                bad_g, bad_v = _adam_block(w, g, m, v, v_old, True, b1, c1, b2, c2,
                                           inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
            bad[b, 0] = bad_g
            bad[b, 1] = bad_v
            if with_stats and (freeze_v or log_stats):
                _block_stats(v, v_old, scale_prev, scale_new, log_stats, partial[b])
    if with_stats:
        for i in range(k):
            per_param[i, :] = 0.0
            for b in range(first_block[i], first_block[i + 1]):
                for s in range(N_STATS):
                    per_param[i, s] += partial[b, s]
    return -1, bad[:, 0].sum(), bad[:, 1].sum()


adam_serial = njit(serial_twin(adam, "adam_serial"))


@njit
def _sgdm_block(w, g, buf, lr, momentum, weight_decay, nesterov):
    bad_g = 0
    for i in range(w.shape[0]):
        gi = g[i]
        d = gi + weight_decay * w[i]
        b = momentum * buf[i] + d
        buf[i] = b
        w[i] = w[i] - lr * ((d + momentum * b) if nesterov else b)
        bad_g += not np.isfinite(gi)
    return bad_g


@njit(parallel=True)
def sgdm(table, sizes, itemsize, lr, momentum, weight_decay, nesterov):
    """One momentum-SGD step over K parameters at once, in place (PyTorch's rule, no
    dampening): table (K, 3) int64 holds the addresses of parameter i's w, g, buf (as
    :func:`adam`'s table, ``sizes[i]`` elements of lr's dtype each).

    d = g + weight_decay*w; buf = momentum*buf + d; w -= lr*(nesterov ? d + momentum*buf : buf).
    Returns (overlap, bad_g): overlap is -1 or a parameter whose arrays overlap another's
    (then nothing was written); bad_g counts non-finite g.
    """
    overlap = _first_overlap(table, sizes, itemsize)
    if overlap >= 0:
        return overlap, 0
    first_block, owner = _block_table(sizes)
    blocks = owner.shape[0]
    bad = np.zeros(blocks, np.int64)
    for b in prange(blocks):
        i = owner[b]
        lo = (b - first_block[i]) * BLOCK
        hi = min(lo + BLOCK, sizes[i])
        w = carray(pointer_to(table[i, 0], lr), sizes[i])[lo:hi]
        g = carray(pointer_to(table[i, 1], lr), sizes[i])[lo:hi]
        buf = carray(pointer_to(table[i, 2], lr), sizes[i])[lo:hi]
        bad[b] = _sgdm_block(w, g, buf, lr, momentum, weight_decay, nesterov)
    return -1, bad.sum()


sgdm_serial = njit(serial_twin(sgdm, "sgdm_serial"))
