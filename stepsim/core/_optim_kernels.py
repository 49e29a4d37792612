"""numba kernels for Adam(W) and momentum SGD. Private: call :mod:`stepsim.core.optim`.

Each kernel makes one pass over memory and updates in place. Adam also reduces the
statistics the switch criteria need in that pass, in blocks of ``BLOCK`` elements whose
float64 sums run in a fixed lane order (the same bits on every CPU). The usual case
(statistics without log|dv|) updates a block and sums its statistics in one vectorised
loop (:func:`_adam_block_stats`, LLVM vectors written out in :func:`_adam_lanes16`), so the
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

from stepsim._ground.ir_loops import counted_loop
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
                      scale_prev, scale_new, acc, counts, out):
    """Adam on one block and the statistics of its dv (without log|dv|), in one pass.

    The arithmetic of :func:`_adam_block` followed by :func:`_block_stats` (log_stats off),
    value for value and sum for sum: entry i of the block goes to lane i % 8 of each
    float64 sum, each lane adds in index order and the lanes are added in the same fixed
    order, so the bits are those of the two passes. One pass because the statistics'
    float64 work then overlaps the update's square roots, divisions and memory traffic;
    :func:`_adam_lanes16` runs 16 entries a trip (two 8-lane halves, added in index
    order), which halves the float32 instructions beside the float64 ones.
    acc (3, LANES) float64 and counts (2,) int64 are the caller's scratch (no allocation
    a block). Returns (bad_g, bad_v) as :func:`_adam_block`: bad_v counted in the loop;
    bad_g only when the block's sum of v is not finite — a non-finite g makes its new v
    inf or NaN (c2 > 0), which the float64 sum keeps — and then from g, which the step
    only reads: the loop carries no count for it.
    """
    acc[:, :] = 0.0
    counts[:] = 0
    raw = scale_prev == 1.0 and scale_new == 1.0
    n = w.shape[0]
    full = n - n % WIDE
    _adam_lanes16(w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                  decay, scale_prev, scale_new, raw, acc, counts)
    zeros = counts[0]
    bad_v = counts[1]
    for i in range(full, n):  # the tail (fewer than 16 entries): lane i % 8, in order
        vo = v[i]
        bad_v += not vo >= 0
        vi = _adam_element(w, g, m, v, i, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                           decay)
        zeros += _tail_stats(acc, i % LANES, vi, vo, scale_prev, scale_new, raw)
    out[0] = _lanes_total(acc[0])
    out[1] = 0.0
    out[2] = zeros  # an exact count: the float64 lane sums of 0/1 it replaces are exact
    out[3] = _lanes_total(acc[1])
    out[4] = _lanes_total(acc[2])
    bad_g = 0
    if not np.isfinite(out[3]):
        for i in range(n):
            bad_g += (g[i] - g[i]) != 0
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
    """Add one entry's dv statistics to ``lane`` of acc's rows dv_l1, v_l1, v_l2sq, in
    float64, and return 1 if its dv is 0 (else 0): the tail (fewer than a vector's entries)
    of :func:`_adam_block_stats` and :func:`_block_stats`, in the order their vector loops
    use."""
    vn = np.float64(v_new)
    vd = np.float64(v_prev)
    if not raw:
        vn *= scale_new
        vd *= scale_prev
    d = abs(vn - vd)
    acc[0, lane] += d
    acc[1, lane] += vn
    acc[2, lane] += vn * vn
    return 1 if d == 0.0 else 0


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
    for i in range(full, n):  # lane i % 8
        acc[3, i - full] += _tail_stats(acc, i - full, v[i], v_old[i], scale_prev, scale_new, raw)
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
        lanes = _Lanes(context, builder, ty[0].dtype, sp, ty[3], sn, ty[4], aacc, ty[6])
        raw_b = context.cast(builder, is_raw, ty[5], types.boolean)
        raw_i1 = builder.icmp_unsigned("!=", raw_b, ir.Constant(raw_b.type, 0))
        v_ptr = context.make_array(ty[0])(context, builder, av).data
        o_ptr = context.make_array(ty[1])(context, builder, ao).data

        def body(i, accs):
            x, y = lanes.load(v_ptr, i), lanes.load(o_ptr, i)
            return lanes.add_stats(accs, x, y, raw_i1), []

        lanes.loop(context.cast(builder, n, ty[2], types.int64), body, [])
        return context.get_dummy_value()

    return sig, codegen


class _Lanes:
    """LLVM IR pieces shared by :func:`_lanes8` and :func:`_adam_lanes16`: vectors of
    ``width`` entries of the arrays' type, ``rows`` (LANES,) float64 rows of ``acc`` (loaded
    before the loop, stored after it) and :meth:`add_stats`, the per-entry statistics of
    :func:`_block_stats`. Every operation is a plain IEEE one (no fast-math flags, so no
    contraction or reassociation): lane j does exactly what the scalar loop does to the
    entries of lane j."""

    def __init__(self, context, builder, dtype, sp, sp_ty, sn, sn_ty, aacc, acc_ty, *,
                 width=LANES, rows=4):
        from llvmlite import ir
        from numba.core import cgutils

        self.ir, self.context, self.builder = ir, context, builder
        self.width, self.rows = width, rows
        self.elem = context.get_value_type(dtype)
        self.dbl, self.i64 = ir.DoubleType(), ir.IntType(64)
        self.vec_e = ir.VectorType(self.elem, width)
        self.vec_d = ir.VectorType(self.dbl, LANES)
        self.align = context.get_abi_sizeof(self.elem)
        acc_ptr = context.make_array(acc_ty)(context, builder, aacc).data
        self.acc_vp = builder.bitcast(acc_ptr, self.vec_d.as_pointer())
        self.start = [builder.load(builder.gep(self.acc_vp, [ir.Constant(self.i64, r)]),
                                   align=8) for r in range(rows)]
        self.sp_v = self.splat(context.cast(builder, sp, sp_ty, types.float64), self.vec_d)
        self.sn_v = self.splat(context.cast(builder, sn, sn_ty, types.float64), self.vec_d)
        self.zero_d = ir.Constant(self.vec_d, [0.0] * LANES)
        self.one_d = ir.Constant(self.vec_d, [1.0] * LANES)
        self.fabs = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vec_d, [self.vec_d]), f"llvm.fabs.v{LANES}f64")
        self.popcount = {bits: cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(bits), [ir.IntType(bits)]),
            f"llvm.ctpop.i{bits}") for bits in {LANES, width}}

    def splat(self, x, vec):
        out = self.ir.Constant(vec, self.ir.Undefined)
        for k in range(vec.count):
            out = self.builder.insert_element(out, x, self.ir.Constant(self.ir.IntType(32), k))
        return out

    def load(self, ptr, i):
        b = self.builder
        return b.load(b.bitcast(b.gep(ptr, [i]), self.vec_e.as_pointer()), align=self.align)

    def store(self, value, ptr, i):
        b = self.builder
        b.store(value, b.bitcast(b.gep(ptr, [i]), self.vec_e.as_pointer()), align=self.align)

    def count(self, flags):
        """How many of the (vector of i1) ``flags`` are set, as an i64."""
        b, bits = self.builder, flags.type.count
        mask = b.bitcast(flags, self.ir.IntType(bits))
        return b.zext(b.call(self.popcount[bits], [mask]), self.i64)

    def half(self, x, h):
        """Entries h*LANES .. h*LANES + LANES - 1 of a ``width`` vector."""
        if self.width == LANES:
            return x
        i32 = self.ir.IntType(32)
        picks = self.ir.Constant(self.ir.VectorType(i32, LANES),
                                 list(range(h * LANES, (h + 1) * LANES)))
        return self.builder.shuffle_vector(x, x, picks)

    def dv(self, x, y, raw):
        """(vn, d) in float64 for new v ``x`` and old v ``y`` (LANES entries of the arrays'
        type): vn = x (``raw``, an i1 or a Python bool) or x * scale_new, vo likewise with
        scale_prev, d = |vn - vo|."""
        b = self.builder
        if self.elem != self.dbl:
            x, y = b.fpext(x, self.vec_d), b.fpext(y, self.vec_d)
        if raw is True:
            vn, vo = x, y
        elif raw is False:
            vn, vo = b.fmul(x, self.sn_v), b.fmul(y, self.sp_v)
        else:
            vn = b.select(raw, x, b.fmul(x, self.sn_v))
            vo = b.select(raw, y, b.fmul(y, self.sp_v))
        return vn, b.call(self.fabs, [b.fsub(vn, vo)])

    def add_stats(self, accs, x, y, raw):
        """The four rows plus the statistics of new v ``x`` and old v ``y`` (:meth:`dv`):
        rows d, vn, vn * vn, (d == 0)."""
        b = self.builder
        vn, d = self.dv(x, y, raw)
        zero = b.select(b.fcmp_ordered("==", d, self.zero_d), self.one_d, self.zero_d)
        return [b.fadd(accs[0], d), b.fadd(accs[1], vn), b.fadd(accs[2], b.fmul(vn, vn)),
                b.fadd(accs[3], zero)]

    def add_stats_counted(self, accs, zeros, x, y, raw):
        """Rows d, vn, vn * vn plus :meth:`dv`'s statistics of ``x``, ``y``, and the i64
        ``zeros`` plus how many d are 0 (an integer count is exact, as the float64 lane sums
        of 0s and 1s it stands for)."""
        b = self.builder
        vn, d = self.dv(x, y, raw)
        zeros = b.add(zeros, self.count(b.fcmp_ordered("==", d, self.zero_d)))
        return [b.fadd(accs[0], d), b.fadd(accs[1], vn), b.fadd(accs[2], b.fmul(vn, vn))], zeros

    def loop(self, n, body, extra):
        """for i in 0, width, .., n - width: accs, extra = body(i, accs, extra); accs start
        from acc's rows and are stored back after the loop; ``extra`` are further
        loop-carried values (initial values given), returned after the loop."""
        ir, b, rows = self.ir, self.builder, self.rows

        def trip(i, carried):
            accs, rest = carried[:rows], carried[rows:]
            new, new_extra = body(i, accs) if not extra else body(i, accs, rest)
            return list(new) + list(new_extra)

        done = counted_loop(b, ir.Constant(self.i64, 0), n, self.width,
                            self.start + list(extra), trip)
        for r, a in enumerate(done[:rows]):
            b.store(a, b.gep(self.acc_vp, [ir.Constant(self.i64, r)]), align=8)
        return done[rows:]


WIDE = 2 * LANES  # entries a trip of _adam_lanes16: two halves of LANES
# how far ahead _adam_lanes16 asks for memory: past the caches, one thread streaming four
# arrays is faster with this software prefetch than on the hardware prefetchers alone
# (stepsim bench --only kernels, adam_step at 2^20 and 2^24)
PREFETCH_BYTES = 2048


@intrinsic
def _adam_lanes16(typingctx, w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in,
                  eps_out, lr, decay, scale_prev, scale_new, raw, acc, counts):
    """:func:`_adam_block` on entries 0 .. full-1 (a multiple of WIDE) of contiguous w, g,
    m, v, with :func:`_lanes8`'s statistics of (new v, old v) added into acc (3, 8)
    (rows dv_l1, v_l1, v_l2sq) and, into counts (2,) int64, the number of dv == 0 and of
    old v not >= 0.

    WIDE entries a trip as LLVM vectors: each element-wise operation is the scalar loop's,
    in its order and type (the scalars have the arrays' dtype), so every entry gets the
    bits the scalar loop gives it. The float64 sums take the trip's two halves one after
    the other (entries i..i+7, then i+8..i+15, into lanes 0..7): each lane still adds its
    entries in index order, the order of :func:`_lanes8`. The loop is written twice, for
    raw v and for scaled v, and one is chosen before it (a select in the loop became
    branches). Counts are popcounts of comparison masks, in integers. Each trip also
    prefetches the lines PREFETCH_BYTES ahead in the four arrays.
    """
    from llvmlite import ir

    arrays = (w, g, m, v)
    scalars = (b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
    if not (isinstance(v, types.Array) and v.dtype in (types.float32, types.float64)
            and all(a == v for a in arrays) and all(x == v.dtype for x in scalars)
            and isinstance(acc, types.Array) and acc.dtype == types.float64
            and isinstance(counts, types.Array) and counts.dtype == types.int64):
        return None
    sig = types.void(w, g, m, v, full, b1, c1, b2, c2, inv_bc1, inv_bc2, eps_in, eps_out, lr,
                     decay, scale_prev, scale_new, raw, acc, counts)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        ty = signature.args
        (aw, ag, am, av, n, *hyper), (sp, sn, is_raw, aacc, acounts) = args[:15], args[15:]
        lanes = _Lanes(context, builder, ty[3].dtype, sp, ty[15], sn, ty[16], aacc, ty[18],
                       width=WIDE, rows=3)
        ptrs = [context.make_array(t)(context, builder, a).data
                for t, a in zip(ty[:4], (aw, ag, am, av))]
        b1v, c1v, b2v, c2v, ibc1, ibc2, e_in, e_out, lrv, dec = (
            lanes.splat(x, lanes.vec_e) for x in hyper)
        vec_e = lanes.vec_e
        zero_e = ir.Constant(vec_e, [0.0] * WIDE)
        sqrt = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec_e, [vec_e]),
            f"llvm.sqrt.v{WIDE}f{'32' if lanes.elem != lanes.dbl else '64'}")
        count_zero = ir.Constant(lanes.i64, 0)
        trips = context.cast(builder, n, ty[4], types.int64)

        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()] +
                                            [ir.IntType(32)] * 3), "llvm.prefetch.p0i8")
        itemsize = context.get_abi_sizeof(lanes.elem)
        ahead = [ir.Constant(lanes.i64, (PREFETCH_BYTES + line) // itemsize)
                 for line in range(0, WIDE * itemsize, 64)]  # each cache line of a trip

        def fetch_ahead(i):
            """Ask for the lines PREFETCH_BYTES ahead of this trip in each array (a hint:
            it never faults, past the array's end included, and changes no value)."""
            for ptr, write in zip(ptrs, (1, 0, 1, 1)):
                for offset in ahead:
                    address = builder.bitcast(builder.gep(ptr, [builder.add(i, offset)]),
                                              ir.IntType(8).as_pointer())
                    builder.call(prefetch, [address, ir.Constant(ir.IntType(32), write),
                                            ir.Constant(ir.IntType(32), 3),
                                            ir.Constant(ir.IntType(32), 1)])

        def body(raw):
            def trip(i, accs, counts):
                b = builder
                wp, gp, mp, vp = ptrs
                fetch_ahead(i)
                gi, vo = lanes.load(gp, i), lanes.load(vp, i)
                bad_v = lanes.count(b.fcmp_unordered("<", vo, zero_e))  # not vo >= 0
                mi = b.fadd(b.fmul(b1v, lanes.load(mp, i)), b.fmul(c1v, gi))
                lanes.store(mi, mp, i)
                vi = b.fadd(b.fmul(b2v, vo), b.fmul(c2v, b.fmul(gi, gi)))
                lanes.store(vi, vp, i)
                den = b.fadd(b.call(sqrt, [b.fadd(b.fmul(vi, ibc2), e_in)]), e_out)
                step = b.fmul(lrv, b.fdiv(b.fmul(mi, ibc1), den))
                lanes.store(b.fsub(b.fmul(lanes.load(wp, i), dec), step), wp, i)
                zeros = counts[0]
                for h in range(WIDE // LANES):  # lanes 0..7 take entries i+8h+j in order
                    accs, zeros = lanes.add_stats_counted(accs, zeros, lanes.half(vi, h),
                                                          lanes.half(vo, h), raw)
                return accs, [zeros, b.add(counts[1], bad_v)]
            return trip

        raw_b = context.cast(builder, is_raw, ty[17], types.boolean)
        raw_i1 = builder.icmp_unsigned("!=", raw_b, ir.Constant(raw_b.type, 0))
        results = []
        with builder.if_else(raw_i1) as (then, otherwise):
            for branch, raw_v in ((then, True), (otherwise, False)):
                with branch:
                    results.append((lanes.loop(trips, body(raw_v), [count_zero, count_zero]),
                                    builder.block))
        merged = [builder.phi(lanes.i64) for _ in range(2)]  # phis first in their block
        for r, phi in enumerate(merged):
            for carried, block in results:
                phi.add_incoming(carried[r], block)
        counts_ptr = context.make_array(ty[19])(context, builder, acounts).data
        for r, total in enumerate(merged):
            slot = builder.gep(counts_ptr, [ir.Constant(lanes.i64, r)])
            builder.store(builder.add(builder.load(slot), total), slot)
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
    for r in stable_order(start):
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
def stable_order(keys):
    """The indices that sort int64 ``keys`` (1-D), ties in index order:
    ``np.argsort(keys, kind="stable")``. A bottom-up merge sort written out, because
    numba's own argsort compiled its generic merge sort into every kernel that calls it
    (much of each Adam and SGD-M kernel's compile, for a handful of addresses)."""
    n = keys.shape[0]
    order = np.arange(n)
    spare = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b = lo, mid
            for out in range(lo, hi):  # the left run's entry first on a tie: stable
                if a < mid and (b >= hi or keys[order[a]] <= keys[order[b]]):
                    spare[out] = order[a]
                    a += 1
                else:
                    spare[out] = order[b]
                    b += 1
        order, spare = spare, order
        width *= 2
    return order


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
        acc = np.empty((3, LANES))  # the fused block's sums and counts, once a task
        counts = np.empty(2, np.int64)
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
                                                 scale_new, acc, counts, partial[b])
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
