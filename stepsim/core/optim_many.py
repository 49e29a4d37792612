"""Optimizer steps on many arrays at once: the kernels' table of data addresses.

The engine of :mod:`stepsim.core.optim` (the single-array steps) and of fit's optimizers,
with the hyper-parameters, statistics and checks of :mod:`stepsim.core.optim_hyper`: one
validation pass turns every parameter's arrays into a row of the (K, arrays) address
table, and one kernel launch walks it.

* :func:`adam_apply_many` — one Adam step on every parameter of a model.
* :class:`AdamArrays` — a model's w, m, v validated once, stepped often.
* :func:`sgdm_apply_many` — one momentum-SGD step on every parameter.
* :class:`SGDMArrays` — a model's w, buf validated once, stepped often.

``adam_apply`` and ``sgdm_step`` in :mod:`stepsim.core.optim` run the same engine
(:func:`adam_apply_rows`, :func:`sgdm_apply_rows`) on a table of one row.
"""

from __future__ import annotations

import itertools

import numpy as np

from stepsim._ground.jit import num_threads
from stepsim._ground.validate import check_beta, check_float_array, check_real, check_same_layout
from stepsim.core.optim_hyper import (
    OPT_DTYPES,
    AdamHyper,
    AdamStats,
    check_state,
    kernel_scalars,
    load_kernels,
    sgdm_fits,
)


def _fast_row(arrays, dtype, kernels):
    """One parameter's arrays ((w, g, m, v) or (w, g, buf)) as a row of data addresses, or
    None if a check fails.

    The common case costs a few attribute reads; anything unusual returns None and the
    caller runs the full checks (:func:`check_state`), which name the bad argument.
    g (second) is only read: a non-contiguous g is copied (nothing is lost, it is never
    written) and a read-only one is fine. Returns (row, arrays the kernel reads).
    """
    if not isinstance(arrays[0], np.ndarray):
        return None
    shape = arrays[0].shape
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype:
            return None
    for j, a in enumerate(arrays):
        if j != 1 and not (a.flags.c_contiguous and a.flags.writeable):
            return None
    g = arrays[1]
    if not g.flags.c_contiguous:
        g = np.ascontiguousarray(g)
    if len(arrays) == 4:
        return kernels.addresses(arrays[0], g, arrays[2], arrays[3]), g
    return kernels.addresses3(arrays[0], g, arrays[2]), g


def _labelled(names, params, i):
    """(name, array) pairs of parameter i: "w" for a single parameter, "ws[i]" for many."""
    if len(params) == 1:
        return list(zip(names, params[0]))
    return [(f"{n}s[{i}]", a) for n, a in zip(names, params[i])]


def _address_table(names, params, kernels):
    """Validate parameters, each a tuple of arrays named ``names`` (g second); return
    (table, sizes, keep): the (K, len(names)) int64 data addresses and (K,) sizes the
    kernel walks, and the arrays it reads that the caller must hold alive during the call
    (copies of non-contiguous g)."""
    first = params[0][0]
    dtype = first.dtype if isinstance(first, np.ndarray) else None
    rows, keep = [], []
    for i, arrays in enumerate(params):
        fast = _fast_row(arrays, dtype, kernels) if dtype is not None and dtype in OPT_DTYPES \
            else None
        if fast is None:  # the slow path exists to raise the right error
            labelled = _labelled(names, params, i)
            check_state(labelled)
            if arrays[0].dtype != dtype:
                raise TypeError(f"{labelled[0][0]} has dtype {arrays[0].dtype} but "
                                f"{names[0]}s[0] has dtype {dtype}; all parameters of one "
                                "step must share a dtype")
            fast = _fast_row(arrays, dtype, kernels)
        rows.append(fast[0])
        keep.append(fast[1])
    sizes = np.array([arrays[0].size for arrays in params], dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(-1, len(names)), sizes, keep


def _overlap_error(names, params, index) -> ValueError:
    """The ValueError for parameter ``index``, whose arrays overlap another array."""
    everyone = [pair for i in range(len(params)) for pair in _labelled(names, params, i)]
    mine = {name for name, _ in _labelled(names, params, index)}
    for j, (name_b, b) in enumerate(everyone):
        for name_a, a in everyone[:j]:
            both_g = name_a.startswith(names[1]) and name_b.startswith(names[1])
            if (name_a in mine or name_b in mine) and a.size and b.size and not both_g \
                    and np.shares_memory(a, b):
                return ValueError(f"{name_b} shares memory with {name_a}; "
                                  "each array must be its own")
    return ValueError(f"the arrays of parameter {index} overlap another array")


def _raise_bad_values(names, params, step, bad_g, bad_v, frozen):
    g, v = (names[1], names[3]) if len(params) == 1 else (names[1] + "s", names[3] + "s")
    problems = []
    if bad_g:
        problems.append(f"{g} contains {bad_g} non-finite value(s)")
    if bad_v:
        problems.append(f"{v} contains {bad_v} negative or NaN value(s) (a second moment "
                        "must be >= 0)")
    carried = "w and m" if frozen else "w, m and v"
    raise ValueError(f"{'; '.join(problems)} at step {step}; {carried} now hold them too")


_ADAM_NAMES = ("w", "g", "m", "v")


def _check_sequences(**named) -> None:
    """Each argument must be a list or tuple (one array per parameter); a bare array or a
    generator would be taken apart element by element, or consumed before the checks."""
    for name, value in named.items():
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list or tuple of arrays (one per parameter), "
                            f"got {type(value).__name__}")


def adam_apply_many(ws, gs, ms, vs, hyper: AdamHyper, *, per_param: bool = False):
    """One validated Adam step (:func:`adam_hyper`) on every parameter of a model at once.

    ws, gs, ms, vs: sequences of K arrays; parameter i is (ws[i], gs[i], ms[i], vs[i]),
    four arrays of one shape; all parameters share one dtype (float32/float64). w, m, v
    are updated in place (v untouched when ``hyper.freeze_v``) and must be C-contiguous and
    writeable; g is only read (any layout and flags; a non-contiguous g is copied). No w,
    m or v may share memory with any other array.
    Returns the :class:`AdamStats` of all parameters taken together (None if
    ``hyper.stats`` is off): bit for bit ``AdamStats.combine`` of :func:`adam_apply` on
    each parameter in order, and every array gets the same bits as with those calls.
    With ``per_param=True`` it returns the list of each parameter's AdamStats instead
    (the same bits as :func:`adam_apply` on that parameter; a list of None if stats are off).
    One validation pass and one parallel kernel launch for the whole model, so the
    per-call cost (more than a small array's update) is paid once per step, not per layer.
    Raises ValueError if g holds a non-finite value or v a negative or NaN one (after the
    update, which then carries them into w, m and v), or if arrays overlap (before it).
    """
    _check_sequences(ws=ws, gs=gs, ms=ms, vs=vs)
    if not len(ws) == len(gs) == len(ms) == len(vs):
        raise ValueError(f"ws, gs, ms, vs must hold one array per parameter, got lengths "
                         f"{len(ws)}, {len(gs)}, {len(ms)}, {len(vs)}")
    parts = adam_apply_rows(tuple(zip(ws, gs, ms, vs)), hyper)
    if per_param:
        return parts
    return AdamStats.combine(parts) if hyper.stats else None


def adam_apply_rows(params, hyper) -> list:
    """One Adam step on ``params``, a sequence of (w, g, m, v) tuples, each checked: the
    kernel's run; a list of each parameter's AdamStats (of None when stats are off)."""
    if not isinstance(hyper, AdamHyper):
        raise TypeError(f"hyper must be an AdamHyper (from adam_hyper), got {type(hyper).__name__}")
    if not params:
        return []
    k = load_kernels()
    table, sizes, _alive = _address_table(_ADAM_NAMES, params, k)  # alive: held until return
    dtype = params[0][0].dtype
    per_param = np.empty((len(params), k.N_STATS))
    threads = num_threads()
    tasks = max(1, min(threads, -(-int(sizes.sum()) // k.BLOCK)))
    scratch = np.empty((tasks, k.BLOCK if not hyper.freeze_v else 1), dtype)
    kernel = k.adam if threads > 1 else k.adam_serial  # one thread: inline, no launch
    overlap, bad_g, bad_v = kernel(
        table, sizes, dtype.itemsize, *kernel_scalars(hyper, dtype), hyper.freeze_v,
        hyper.stats, hyper.log_stats, hyper.scale_prev, hyper.scale_new, scratch, per_param)
    if overlap >= 0:
        raise _overlap_error(_ADAM_NAMES, params, int(overlap))
    if bad_g or bad_v:
        _raise_bad_values(_ADAM_NAMES, params, hyper.step, bad_g, bad_v, hyper.freeze_v)
    if not hyper.stats:
        return [None] * len(params)
    return [AdamStats(float(dv_l1), float(dv_log) if hyper.log_stats else float("nan"),
                      int(zeros), float(v_l1), float(v_l2sq), p[0].size)
            for (dv_l1, dv_log, zeros, v_l1, v_l2sq), p in zip(per_param, params)]


class AdamArrays:
    """Adam's arrays of one model (w, m, v of each parameter), validated once, stepped often.

    :func:`adam_apply_many` checks every array at every call. A training run updates the
    same w, m and v in place at every step, so this checks them once (dtype, shape, layout,
    flags; no two may share memory) and keeps their addresses in the kernel's table; a step
    only writes its gradients' addresses into it (a gradient must be an ndarray of its
    parameter's shape and dtype; a non-contiguous one is copied, as adam_apply_many does).
    The scratch rows and the statistics buffer are allocated here, once. The kernel is the
    same, so every array and statistic gets the same bits as with adam_apply_many.
    The arrays must stay alive and must not be re-bound while this is used (update them
    in place, e.g. ``np.copyto``).
    """

    def __init__(self, ws, ms, vs):
        _check_sequences(ws=ws, ms=ms, vs=vs)
        if not len(ws) == len(ms) == len(vs) or not ws:
            raise ValueError(f"ws, ms, vs must hold one array per parameter (at least one), "
                             f"got lengths {len(ws)}, {len(ms)}, {len(vs)}")
        # the table checks of adam_apply_many, with each w standing in for its gradient
        # (read-only role: only its layout matters here; overlaps are checked just below)
        params = tuple(zip(ws, ws, ms, vs))
        k = load_kernels()
        table, sizes, _ = _address_table(_ADAM_NAMES, params, k)
        dtype = ws[0].dtype
        spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, f"{n}s[{i}]")
                       for i, arrays in enumerate(zip(ws, ms, vs))
                       for n, a in zip("wmv", arrays) if a.nbytes)
        for (_, end, name_a), (start, _, name_b) in itertools.pairwise(spans):
            if start < end:
                raise ValueError(f"{name_b} shares memory with {name_a}; each array must be "
                                 "its own")
        self.arrays = tuple(zip(ws, ms, vs))  # held alive: the table points into them
        self.dtype = dtype
        self.shapes = tuple(w.shape for w in ws)
        self._kernels = k
        self._table = table
        self._sizes = sizes
        self._total = int(sizes.sum())
        self._per_param = np.empty((len(ws), k.N_STATS))
        import numba

        self._scratch = np.empty((max(1, numba.config.NUMBA_NUM_THREADS), k.BLOCK), dtype)

    def step(self, gs, hyper: AdamHyper, rows=None) -> list:
        """One step of parameters ``rows`` (indices, default all) with gradients ``gs`` (one
        per row, in order): a list of their AdamStats (of None when ``hyper.stats`` is off),
        as :func:`adam_apply_many` with ``per_param=True``."""
        if not isinstance(hyper, AdamHyper):
            raise TypeError(f"hyper must be an AdamHyper (from adam_hyper), got "
                            f"{type(hyper).__name__}")
        k = self._kernels
        rows = range(len(self.arrays)) if rows is None else rows
        if len(gs) != len(rows):
            raise ValueError(f"got {len(gs)} gradients for {len(rows)} parameters")
        alive = []
        table = self._table
        dtype, shapes, address = self.dtype, self.shapes, k.address
        for r, g in zip(rows, gs):
            if not (type(g) is np.ndarray and g.dtype == dtype and g.flags.c_contiguous
                    and g.shape == shapes[r]):
                g = self._checked_gradient(r, g)
            alive.append(g)  # held until the kernel returns
            table[r, 1] = address(g)
        whole = len(rows) == len(self.arrays)
        sub = table if whole else table[list(rows)]
        sizes = self._sizes if whole else self._sizes[list(rows)]
        per_param = self._per_param[:len(rows)]
        threads = num_threads()
        total = self._total if whole else int(sizes.sum())
        tasks = max(1, min(threads, -(-total // k.BLOCK)))
        kernel = k.adam if threads > 1 else k.adam_serial
        overlap, bad_g, bad_v = kernel(
            sub, sizes, self.dtype.itemsize, *kernel_scalars(hyper, self.dtype),
            hyper.freeze_v, hyper.stats, hyper.log_stats, hyper.scale_prev, hyper.scale_new,
            self._scratch[:tasks], per_param)
        params = [(self.arrays[r][0], g, self.arrays[r][1], self.arrays[r][2])
                  for r, g in zip(rows, alive)] if overlap >= 0 or bad_g or bad_v else None
        if overlap >= 0:
            raise _overlap_error(_ADAM_NAMES, params, int(overlap))
        if bad_g or bad_v:
            _raise_bad_values(_ADAM_NAMES, params, hyper.step, bad_g, bad_v, hyper.freeze_v)
        if not hyper.stats:
            return [None] * len(rows)
        log = hyper.log_stats
        return [AdamStats(float(row[0]), float(row[1]) if log else float("nan"), int(row[2]),
                          float(row[3]), float(row[4]), int(size))
                for row, size in zip(per_param.tolist(), sizes.tolist())]

    def _checked_gradient(self, r, g):
        """Gradient ``r`` as a C-contiguous array, or the error that names what is wrong."""
        name = "g" if len(self.arrays) == 1 else f"gs[{r}]"
        check_float_array(name, g, dtypes=OPT_DTYPES)
        w = self.arrays[r][0]
        check_same_layout("w" if len(self.arrays) == 1 else f"ws[{r}]", w, **{name: g})
        return np.ascontiguousarray(g)


_SGDM_NAMES = ("w", "g", "buf")


def sgdm_apply_many(ws, gs, bufs, *, lr, momentum=0.9, weight_decay=0.0,
                    nesterov=False) -> None:
    """:func:`sgdm_step` on every parameter of a model in one validated call (parameter i
    is (ws[i], gs[i], bufs[i])); the same bits as one call per parameter."""
    _check_sequences(ws=ws, gs=gs, bufs=bufs)
    if not len(ws) == len(gs) == len(bufs):
        raise ValueError(f"ws, gs, bufs must hold one array per parameter, got lengths "
                         f"{len(ws)}, {len(gs)}, {len(bufs)}")
    sgdm_apply_rows(tuple(zip(ws, gs, bufs)), lr, momentum, weight_decay, nesterov)


def sgdm_apply_rows(params, lr, momentum, weight_decay, nesterov):
    """One momentum-SGD step on ``params``, a sequence of (w, g, buf) tuples, each checked."""
    lr, momentum, weight_decay = _sgdm_checked(lr, momentum, weight_decay, nesterov)
    if not params:
        return
    k = load_kernels()
    table, sizes, _alive = _address_table(_SGDM_NAMES, params, k)  # alive: held until return
    _sgdm_run(k, table, sizes, params[0][0].dtype, lr, momentum, weight_decay, nesterov,
              lambda: params)


def _sgdm_checked(lr, momentum, weight_decay, nesterov) -> tuple:
    """SGD-M's hyper-parameters, checked (each ValueError names the argument)."""
    lr = check_real("lr", lr, minimum=0.0)
    momentum = check_beta("momentum", momentum)
    weight_decay = check_real("weight_decay", weight_decay, minimum=0.0)
    if nesterov and momentum == 0.0:
        raise ValueError("nesterov=True needs momentum > 0, got momentum=0.0")
    return lr, momentum, weight_decay


def _sgdm_run(k, table, sizes, dtype, lr, momentum, weight_decay, nesterov, params) -> None:
    """The SGD-M kernel on a checked table; ``params()`` gives the (w, g, buf) tuples that
    name the arrays in an error."""
    sgdm_fits(dtype, lr, momentum, weight_decay)
    dt = dtype.type
    kernel = k.sgdm if num_threads() > 1 else k.sgdm_serial  # one thread: inline
    overlap, bad_g = kernel(table, sizes, dtype.itemsize, dt(lr), dt(momentum),
                            dt(weight_decay), bool(nesterov))
    if overlap >= 0:
        raise _overlap_error(_SGDM_NAMES, params(), int(overlap))
    if bad_g:
        g = "g" if len(sizes) == 1 else "gs"
        raise ValueError(f"{g} contains {bad_g} non-finite value(s); w and buf now hold "
                         "them too")


class SGDMArrays:
    """Momentum SGD's arrays of one model (w, buf of each parameter), validated once,
    stepped often: :class:`AdamArrays` for :func:`sgdm_apply_many` (the same checks once,
    a step writes only its gradients' addresses; the same kernel, so the same bits). The
    arrays must stay alive and must not be re-bound while this is used."""

    def __init__(self, ws, bufs):
        _check_sequences(ws=ws, bufs=bufs)
        if len(ws) != len(bufs) or not ws:
            raise ValueError(f"ws, bufs must hold one array per parameter (at least one), "
                             f"got lengths {len(ws)}, {len(bufs)}")
        params = tuple(zip(ws, ws, bufs))  # each w stands in for its gradient, as AdamArrays
        k = load_kernels()
        table, sizes, _ = _address_table(_SGDM_NAMES, params, k)
        spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, f"{n}s[{i}]")
                       for i, arrays in enumerate(zip(ws, bufs))
                       for n, a in zip(("w", "buf"), arrays) if a.nbytes)
        for (_, end, name_a), (start, _, name_b) in itertools.pairwise(spans):
            if start < end:
                raise ValueError(f"{name_b} shares memory with {name_a}; each array must be "
                                 "its own")
        self.arrays = tuple(zip(ws, bufs))  # held alive: the table points into them
        self.dtype = ws[0].dtype
        self.shapes = tuple(w.shape for w in ws)
        self._kernels = k
        self._table = table
        self._sizes = sizes

    def step(self, gs, *, lr, momentum, weight_decay, nesterov) -> None:
        """One step with gradients ``gs`` (one per parameter, in order), as
        :func:`sgdm_apply_many` (the same checks of the hyper-parameters and errors)."""
        lr, momentum, weight_decay = _sgdm_checked(lr, momentum, weight_decay, nesterov)
        if len(gs) != len(self.arrays):
            raise ValueError(f"got {len(gs)} gradients for {len(self.arrays)} parameters")
        k = self._kernels
        table, dtype, shapes, address = self._table, self.dtype, self.shapes, k.address
        alive = []
        for r, g in enumerate(gs):
            if not (type(g) is np.ndarray and g.dtype == dtype and g.flags.c_contiguous
                    and g.shape == shapes[r]):
                g = self._checked_gradient(r, g)
            alive.append(g)  # held until the kernel returns
            table[r, 1] = address(g)
        _sgdm_run(k, table, self._sizes, dtype, lr, momentum, weight_decay, nesterov,
                  lambda: [(w, g, buf) for (w, buf), g in zip(self.arrays, alive)])

    _checked_gradient = AdamArrays._checked_gradient
