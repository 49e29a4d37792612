"""numba kernels for Adam(W) and momentum SGD. Private: call :mod:`stepsim.core.optim`.

Each kernel makes one pass over memory and updates in place. Adam also reduces the
statistics the switch criteria need in that pass. To keep both halves vectorised it
works in blocks of ``BLOCK`` elements: a strict element-wise loop updates a block (and
keeps the block's old v in a small L1-resident scratch array), then a reduction helper
sums the block's statistics in float64, in a fixed lane order (the same bits on every
CPU), while it is still in cache. Per-block sums go to ``partial`` and are added in
block order, so the statistics do not depend on the number of threads. One call updates
every parameter of a model (:func:`adam`, multi-tensor); ``adam_serial`` is the same
driver compiled for one thread.

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
            mi = b1 * m[i] + c1 * gi
            m[i] = mi
            vi = b2 * vo + c2 * (gi * gi)
            v[i] = vi
            w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in)
                                                          + eps_out))
        return _count_bad(g, v_old) if bad else (0, 0)
    bad_g = 0
    bad_v = 0
    for i in range(w.shape[0]):
        gi = g[i]
        vo = v[i]
        bad_g += (gi - gi) != 0
        bad_v += not vo >= 0
        mi = b1 * m[i] + c1 * gi
        m[i] = mi
        vi = b2 * vo + c2 * (gi * gi)
        v[i] = vi
        w[i] = w[i] * decay - lr * ((mi * inv_bc1) / (np.sqrt(vi * inv_bc2 + eps_in) + eps_out))
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
    vector is lane j of the sum, the same additions in the same order (3x faster than the
    scalar loop measured here). The tail (fewer than 8 entries) is added to lanes 0..r-1
    below. The count of zeros is kept as a float64 sum (exact below 2**53) so every lane is
    the same type.
    """
    acc = np.zeros((4, LANES))  # dv_l1, v_l1, v_l2sq, zeros
    raw = scale_prev == 1.0 and scale_new == 1.0
    n = v.shape[0]
    full = n - n % LANES
    _lanes8(v, v_old, full, scale_prev, scale_new, raw, acc)
    for i in range(full, n):
        lane = i - full  # = i % LANES
        vn = np.float64(v[i])
        vo = np.float64(v_old[i])
        if not raw:
            vn *= scale_new
            vo *= scale_prev
        d = abs(vn - vo)
        acc[0, lane] += d
        acc[1, lane] += vn
        acc[2, lane] += vn * vn
        acc[3, lane] += 1.0 if d == 0.0 else 0.0
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
        from numba.core import cgutils

        av, ao, n, sp, sn, is_raw, aacc = args
        elem = context.get_value_type(signature.args[0].dtype)
        dbl, i64 = ir.DoubleType(), ir.IntType(64)
        vec_e, vec_d = ir.VectorType(elem, LANES), ir.VectorType(dbl, LANES)
        v_ptr = context.make_array(signature.args[0])(context, builder, av).data
        o_ptr = context.make_array(signature.args[1])(context, builder, ao).data
        acc_ptr = context.make_array(signature.args[6])(context, builder, aacc).data
        acc_vp = builder.bitcast(acc_ptr, vec_d.as_pointer())
        start = [builder.load(builder.gep(acc_vp, [ir.Constant(i64, r)]), align=8)
                 for r in range(4)]
        sp = context.cast(builder, sp, signature.args[3], types.float64)
        sn = context.cast(builder, sn, signature.args[4], types.float64)
        n = context.cast(builder, n, signature.args[2], types.int64)
        raw_b = context.cast(builder, is_raw, signature.args[5], types.boolean)
        raw_i1 = builder.icmp_unsigned("!=", raw_b, ir.Constant(raw_b.type, 0))

        def splat(x):
            out = ir.Constant(vec_d, ir.Undefined)
            for k in range(LANES):
                out = builder.insert_element(out, x, ir.Constant(ir.IntType(32), k))
            return out

        sp_v, sn_v = splat(sp), splat(sn)
        zero_v, one_v = ir.Constant(vec_d, [0.0] * LANES), ir.Constant(vec_d, [1.0] * LANES)
        fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec_d, [vec_d]),
                                              f"llvm.fabs.v{LANES}f64")
        entry = builder.block
        head = builder.append_basic_block("lanes8.head")
        body = builder.append_basic_block("lanes8.body")
        done = builder.append_basic_block("lanes8.done")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(i64)
        accs = [builder.phi(vec_d) for _ in range(4)]
        i.add_incoming(ir.Constant(i64, 0), entry)
        for a, s in zip(accs, start):
            a.add_incoming(s, entry)
        builder.cbranch(builder.icmp_signed("<", i, n), body, done)
        builder.position_at_end(body)
        align = context.get_abi_sizeof(elem)
        x = builder.load(builder.bitcast(builder.gep(v_ptr, [i]), vec_e.as_pointer()),
                         align=align)
        y = builder.load(builder.bitcast(builder.gep(o_ptr, [i]), vec_e.as_pointer()),
                         align=align)
        if elem != dbl:
            x, y = builder.fpext(x, vec_d), builder.fpext(y, vec_d)
        vn = builder.select(raw_i1, x, builder.fmul(x, sn_v))
        vo = builder.select(raw_i1, y, builder.fmul(y, sp_v))
        d = builder.call(fabs, [builder.fsub(vn, vo)])
        zero = builder.select(builder.fcmp_ordered("==", d, zero_v), one_v, zero_v)
        new = [builder.fadd(accs[0], d), builder.fadd(accs[1], vn),
               builder.fadd(accs[2], builder.fmul(vn, vn)), builder.fadd(accs[3], zero)]
        i.add_incoming(builder.add(i, ir.Constant(i64, LANES)), builder.block)
        for a, b in zip(accs, new):
            a.add_incoming(b, builder.block)
        builder.branch(head)
        builder.position_at_end(done)
        for r, a in enumerate(accs):
            builder.store(a, builder.gep(acc_vp, [ir.Constant(i64, r)]), align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _pointer_to(typingctx, address, like):
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
    allocation per block cost ~10% of a step at 2^24, and a thread id would make the
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
            w = carray(_pointer_to(table[i, 0], b1), sizes[i])[lo:hi]
            g = carray(_pointer_to(table[i, 1], b1), sizes[i])[lo:hi]
            m = carray(_pointer_to(table[i, 2], b1), sizes[i])[lo:hi]
            v = carray(_pointer_to(table[i, 3], b1), sizes[i])[lo:hi]
            if freeze_v:
                bad_g, bad_v = _adam_block_frozen_v(w, g, m, v, b1, c1, inv_bc1, inv_bc2,
                                                    eps_in, eps_out, lr, decay)
                v_old = v
            else:  # v_old kept also without statistics: a flag in the loop, not two counts
                v_old = scratch[t, : hi - lo]  # (which stopped the loop's vectorisation)
                bad_g, bad_v = _adam_block(w, g, m, v, v_old, True, b1, c1, b2, c2,
                                           inv_bc1, inv_bc2, eps_in, eps_out, lr, decay)
            bad[b, 0] = bad_g
            bad[b, 1] = bad_v
            if with_stats:
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
        w = carray(_pointer_to(table[i, 0], lr), sizes[i])[lo:hi]
        g = carray(_pointer_to(table[i, 1], lr), sizes[i])[lo:hi]
        buf = carray(_pointer_to(table[i, 2], lr), sizes[i])[lo:hi]
        bad[b] = _sgdm_block(w, g, buf, lr, momentum, weight_decay, nesterov)
    return -1, bad.sum()


sgdm_serial = njit(serial_twin(sgdm, "sgdm_serial"))
