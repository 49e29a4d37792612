"""Bench section: fit's training steps beside PyTorch, where their time goes, and where the
sparse products of N:M layers pay.

First the ratios the targets are about (:func:`_ratio_rows`), each with where its step's
time goes (:func:`_fit_breakdown`: products dense and sparse, element-wise, optimizer,
masks, batch, Python, each part timed on its own): digits dense and SR-STE at every N:M
of the table, ``lm`` at ``paper_checks/lm.md``'s settings and at the problem's defaults
(dense, SR-STE 2:4 and 1:8), the lm section's model, regression and the ``mnist1d`` CNN
(the problem's defaults, dense and SR-STE 2:4, 1:4 and 1:8; the torch prototype's 3x32
channels at batch 128, dense and SR-STE 1:8, where the convolutions take the sparse
products): rounds of N steps
exactly as :func:`stepsim.fit` runs them (its lean step, its checks, its trace;
:class:`FitSteps`) alternate with rounds of N steps of the same model in PyTorch
(``--torch``: nn.Linear/nn.Conv1d/the lm peer, ``torch.optim.Adam(fused=True)``, SR-STE by topk
masks and a straight-through autograd function, its products dense with the masked
weight), run in a separate process (:mod:`stepsim.bench._torch_peer`) so that numba keeps
its own threading layer here. Both sides on one thread, timed by their thread's CPU time;
a ratio > 1 means stepsim is faster. An SR-STE case is also timed beside torch's *dense*
step of the same model, in the same rounds (what torch pays for SR-STE at best: its
products multiply by the masked dense weight), and the targets table (:data:`TARGETS`,
issue #36's) says for each whether it is MET or MISSED.

Then the crossover table (:func:`stepsim.bench._products.crossover_rows`): each sparse
layer's forward product and input gradient (the CNN's convolutions on their column
matrices), dense against sparse, at several N:M, with the choice the model's rule
(:func:`stepsim.nn.nm_linear.sparse_pays`, :func:`stepsim.nn.conv.sparse_pays`) makes there.

Then the digits MLP (``make_problem("digits")``: 64-256-256-10, ReLU, batch 128, Adam lr
1e-3, float32), dense and in STEP's sparse phase (recipe ``step`` after its switch: 2:4
masks recomputed every step, Adam with v frozen), and where a step's time goes, each part
timed on its own in the same run:
``products dense`` / ``products sparse`` (the matrix products of forward and backward on
OpenBLAS / on kept weights: :mod:`stepsim.bench._products`), ``element-wise`` (the rest of
loss_and_grad: ReLU, softmax, bias sums, copies), ``optimizer``
(fit's in-place update: Adam and its statistics), ``masks`` (the forward weights: N:M masks
and masked weights; none when dense), ``batch`` (sampling), and ``python`` (the step minus
those parts: fit's checks, the trace, dispatch).

Threads: stepsim rows run under :func:`stepsim._ground.threads.training_threads` (numba kernels on
one thread, BLAS as the policy decides); the policy's effect is the last table: full
``fit`` runs with and without it. Without ``--quick`` a 5,000-step dense ``fit`` on digits
is timed (the target is under 30 s on 2 cores).
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

TITLE = "train: digits MLP 64-256-256-10, batch 128, Adam (float32) — steps/s beside PyTorch"

SWITCH_AFTER = 20  # dense steps before the sparse phase's rows are timed
LR = 1e-3
PROBLEM_OPTIONS: dict = {}  # make_problem("digits", **PROBLEM_OPTIONS); tests shrink the model




def run(bench) -> None:
    from stepsim._ground.threads import training_threads
    from stepsim.problems.registry import make_problem
    from stepsim.recipes import make_recipe

    _ratio_rows(bench)
    from stepsim.bench._products import crossover_rows

    with training_threads(kernels=1, blas=1):  # both sides on the calling thread
        crossover_rows(bench)
    problem = make_problem("digits", **PROBLEM_OPTIONS)
    reps = 5 if bench.quick else 15
    number = 20 if bench.quick else 50
    with training_threads() as threads:
        bench.print(f"  threads: numba {threads['numba']}, BLAS {threads['blas']} "
                    f"({threads['why']})")
        dense = FitSteps(problem, make_recipe("dense", lr=LR), 10**5)
        sparse = FitSteps(problem, make_recipe("step", lr=LR, switch_at=SWITCH_AFTER), 10**5)
        sparse.run(SWITCH_AFTER)  # its dense phase; the switch fires after step SWITCH_AFTER
        if sparse.state.phase != 1:
            raise RuntimeError(f"recipe step did not switch after step {SWITCH_AFTER}")
        for loop in (dense, sparse):  # compile / load kernels outside any timing
            loop.run(3)
        impls = {"dense": partial(dense.run, 1), "sparse": partial(sparse.run, 1)}
        bench.print("  wall clock:")
        t = bench.compare(impls, repeats=reps, number=number)
        _emit_steps(bench, t, "wall")
        # CPU time of the calling thread: on a shared machine, the work a step costs without
        # the time it spent descheduled. Only for single-threaded runs (all work on this
        # thread): stepsim under the policy with BLAS on 1 thread.
        clock = "wall"
        if threads["blas"] == 1 or _blas_threads() == 1:
            clock = "cpu"
            bench.print("  CPU time of the calling thread (every run here on one thread):")
            t = bench.compare(impls, repeats=reps, number=number, clock=time.thread_time)
            _emit_steps(bench, t, "cpu")
        for loop, label in ((dense, "dense"), (sparse, "sparse")):
            _fit_breakdown(bench, f"{label} ({clock})", loop, number, rounds=reps,
                           clock=time.thread_time if clock == "cpu" else time.perf_counter)
        _optimizer_rows(bench, dense.params, reps, clock)
    _fit_runs(bench, problem)


# the train ratios: (case, problem, its options, recipe, recipe options, torch peer kind);
# the lm sizes are paper_checks/lm.md's settings, the problem's defaults (a smaller held-out
# set: it is not timed) and the lm bench section's model
LM_MD = {"vocab": 16, "order": 2, "temperature": 0.7, "context": 32, "width": 32, "blocks": 2,
         "heads": 2, "batch_size": 32, "n_test": 64}  # paper_checks/lm.md's model
RATIO_CASES = (
    ("digits dense", "digits", {}, "dense", {}, "digits"),
    ("digits SR-STE 2:4", "digits", {}, "sr-ste", {}, "digits-srste"),
    *((f"digits SR-STE {n}:{m}", "digits", {"nm": (n, m)}, "sr-ste", {}, "digits-srste")
      for n, m in ((1, 4), (2, 8), (1, 8), (1, 16))),
    ("lm (lm.md) 2x32 ctx32 b32", "lm", LM_MD, "dense", {}, "lm"),
    *((f"lm (lm.md) SR-STE {n}:{m}", "lm", {**LM_MD, "nm": (n, m)}, "sr-ste", {}, "lm-srste")
      for n, m in ((2, 4), (1, 8))),
    ("lm defaults 2x64 ctx32 b32", "lm", {"n_test": 64}, "dense", {}, "lm"),
    *((f"lm defaults SR-STE {n}:{m}", "lm", {"n_test": 64, "nm": (n, m)}, "sr-ste", {},
       "lm-srste") for n, m in ((2, 4), (1, 8))),
    ("lm 2x128 ctx64 b32", "lm", {"vocab": 64, "order": 2, "context": 64, "width": 128,
                                  "blocks": 2, "heads": 4, "batch_size": 32, "n_test": 64},
     "dense", {}, "lm"),
    ("regression", "regression", {}, "dense", {}, "regression"),
    ("mnist1d CNN 3x16 b64 dense", "mnist1d", {}, "dense", {}, "mnist1d"),
    ("mnist1d CNN 3x16 b64 SR-STE 2:4", "mnist1d", {}, "sr-ste", {}, "mnist1d-srste"),
    *((f"mnist1d CNN 3x16 b64 SR-STE {n}:{m}", "mnist1d", {"nm": (n, m)}, "sr-ste", {},
       "mnist1d-srste") for n, m in ((1, 4), (1, 8))),
    ("mnist1d CNN 3x32 b128 dense", "mnist1d", {"channels": (32, 32, 32), "batch_size": 128},
     "dense", {}, "mnist1d"),
    ("mnist1d CNN 3x32 b128 SR-STE 1:8", "mnist1d", {"channels": (32, 32, 32),
                                                     "batch_size": 128, "nm": (1, 8)},
     "sr-ste", {}, "mnist1d-srste"),
)
QUICK_PROBLEM = {"digits": {"hidden": (32,), "batch_size": 16},
                 "mnist1d": {"channels": (8, 8), "batch_size": 16, "n_train": 400,
                             "n_validation": 100, "n_test": 100},
                 "lm": {"vocab": 16, "order": 2, "context": 16, "width": 32, "blocks": 1,
                        "heads": 2, "batch_size": 8, "n_test": 16}}


class FitSteps:
    """Steps exactly as :func:`stepsim.training.fit` runs them: fit's own run
    (:class:`stepsim.training.FitRun`: its lean step, its checks of the problem's answer
    and of the weights, its trace, what follows a step: switches included), on one problem
    and recipe; ``run(n)`` runs n (step numbers wrap around after ``total_steps``)."""

    def __init__(self, problem, recipe, total_steps: int, seed: int = 0):
        from stepsim.training import FitRun

        self.problem, self.recipe, self.total = problem, recipe, total_steps
        self.fit_run = FitRun(problem, recipe, total_steps, rng=seed)
        self.k = 0

    # what the breakdown reads of the run
    ctx = property(lambda self: self.fit_run.ctx)
    stepper = property(lambda self: self.fit_run.stepper)
    state = property(lambda self: self.fit_run.state)
    params = property(lambda self: self.fit_run.params)
    batch_rng = property(lambda self: self.fit_run.batch_rng)
    trace = property(lambda self: self.fit_run.trace)

    def run(self, n: int) -> None:
        fit_run = self.fit_run
        for _ in range(n):
            self.k = k = self.k % self.total + 1
            stats = fit_run.step(k)
            if stats is None:
                raise FloatingPointError(fit_run.message)
            fit_run.after_step(k, stats)


def _ratio_rows(bench) -> None:
    """Training steps of fit beside PyTorch: for each case, rounds of N stepsim steps (here,
    fit's thread policy: numba and BLAS on one thread) and N torch steps (in the peer
    process, torch on one thread), interleaved; the ratio of each round pair, median and
    spread. Both sides run on their calling thread only, so each is timed by that thread's
    CPU time (on a shared machine, wall time also counts the time a process waited for a
    core). Without ``--torch`` only stepsim's steps/s."""
    from stepsim._ground.threads import training_threads
    from stepsim.bench._torch_peer import start_or_none
    from stepsim.problems.registry import make_problem
    from stepsim.recipes import make_recipe

    peer = start_or_none(bench, threads=1)
    rounds = 5 if bench.quick else 15
    results = []
    bench.print("  fit's steps beside PyTorch (1 thread each, CPU time, interleaved rounds; "
                "ratio > 1: stepsim faster):")
    try:
        with training_threads(kernels=1, blas=1):
            for case, name, options, recipe_name, recipe_options, kind in RATIO_CASES:
                if bench.quick:
                    options = {**options, **QUICK_PROBLEM.get(name, {})}
                problem = make_problem(name, **options)
                recipe = make_recipe(recipe_name, lr=LR, **recipe_options)
                calls = _calls_per_round(problem, recipe, bench.quick)
                steps = FitSteps(problem, recipe, total_steps=10 ** 5)
                steps.run(3)  # kernels loaded, buffers made, outside the timings
                dense_kind = kind.removesuffix("-srste") if kind != kind.removesuffix(
                    "-srste") else None  # an SR-STE case is also timed beside torch dense
                if peer is not None:
                    peer.build(case, kind, problem=options, lr=LR)
                    if dense_kind:
                        peer.build(case + " [dense]", dense_kind, problem=options, lr=LR)
                ours, theirs, ratios, dense, dense_ratios = [], [], [], [], []
                for r in range(rounds):
                    first_ours = r % 2 == 0  # alternate who goes first
                    if peer is not None and not first_ours:
                        theirs.append(peer.time(case, calls, "cpu") / calls)
                        if dense_kind:
                            dense.append(peer.time(case + " [dense]", calls, "cpu") / calls)
                    t0 = time.thread_time()
                    steps.run(calls)
                    ours.append((time.thread_time() - t0) / calls)
                    if peer is not None and first_ours:
                        theirs.append(peer.time(case, calls, "cpu") / calls)
                        if dense_kind:
                            dense.append(peer.time(case + " [dense]", calls, "cpu") / calls)
                    if peer is not None:
                        ratios.append(theirs[-1] / ours[-1])
                        if dense_kind:
                            dense_ratios.append(dense[-1] / ours[-1])
                _emit_ratio(bench, case, ours, theirs, ratios)
                if dense:
                    results.append(_emit_dense_ratio(bench, case, name, options, ours, dense,
                                                     dense_ratios))
                _fit_breakdown(bench, case, steps, calls, rounds=3 if bench.quick else 5)
    finally:
        if peer is not None:
            peer.close()
    if results:
        _report_targets(bench, results)


# Issue #36's targets, 1 thread: an SR-STE step against torch's *dense* step of the same
# model (what torch pays for SR-STE: its products multiply by the masked dense weight).
# (problem, N:M or None for every N:M) -> the least ratio that meets the target.
TARGETS = {("lm", (1, 8)): 2.0, ("lm", (2, 4)): 1.3, ("digits", None): 1.3,
           ("mnist1d", None): 1.3}


def _target_for(name: str, options: dict):
    nm = tuple(options.get("nm", (2, 4)))
    return TARGETS.get((name, nm), TARGETS.get((name, None)))


def _emit_dense_ratio(bench, case, name, options, ours, dense, ratios) -> dict:
    """The row of an SR-STE case beside torch's dense step (interleaved with it, round by
    round); returns what the targets table reads."""
    from stepsim.bench import SPREAD_LIMIT, Timing

    r, t_dense = Timing.of(ratios), Timing.of(dense)
    row = bench.emit("train", f"fit step {case}", "torch dense 1 thread (peer)", t_dense,
                     units=1, unit="step", partner=Timing.of(ours),
                     ratio=f"{1 / t_dense:7.0f} steps/s; stepsim's SR-STE step is "
                           f"{float(r):.2f}x it (rounds {min(ratios):.2f}-{max(ratios):.2f})",
                     vs_torch_dense=float(r), vs_torch_dense_spread=r.spread,
                     vs_torch_dense_rounds=list(ratios))
    return {"case": case, "target": _target_for(name, options), "ratio": float(r),
            "low": min(ratios), "high": max(ratios),
            "reliable": row["reliable"] and r.spread <= SPREAD_LIMIT}


def _report_targets(bench, results) -> None:
    """The targets table: each SR-STE case's step against torch's dense step, its target,
    and MET / MISSED (UNRELIABLE when the rounds' ratios spread more than 25%)."""
    bench.print("  targets (SR-STE step against torch's dense step of the same model, "
                "1 thread each; issue #36):")
    for row in results:
        if row["target"] is None:
            continue
        verdict = ("UNRELIABLE" if not row["reliable"] else
                   "MET" if row["ratio"] >= row["target"] else "MISSED")
        bench.print(f"    {row['case']:<34} {row['ratio']:5.2f}x torch dense (rounds "
                    f"{row['low']:.2f}-{row['high']:.2f}), target >= {row['target']:.1f}x: "
                    f"{verdict}")
        bench.rows.append({"section": "train", "case": f"target {row['case']}",
                           "target": row["target"], "vs_torch_dense": row["ratio"],
                           "verdict": verdict})


def _fit_breakdown(bench, case, steps: FitSteps, calls: int, rounds: int,
                   clock=time.thread_time) -> None:
    """Where one fit step of ``case`` goes, each part timed on its own (``clock``: thread
    CPU time unless said, median of ``rounds`` runs of ``calls`` repeats, the parts and the
    whole step interleaved round by round) on the step's own arrays:
    ``products dense`` and ``products sparse`` (the matrix products of loss_and_grad on
    OpenBLAS and on the kept weights of masked layers, replayed with the same shapes and
    operand layouts: :func:`stepsim.bench._products.replay`), ``element-wise``
    (loss_and_grad minus those), ``optimizer`` (the lean step's update: gradient pieces,
    the optimizer with its statistics, after-update pieces; in place, so repeating it
    keeps training on one gradient), ``masks`` (the lean step's forward: the N:M masks and
    Pi * w), ``pack`` (the kept weights of masked layers packed for the sparse products:
    values + columns, and by input where an input gradient takes them; before, this was
    part of ``python``), ``batch`` (sampling) and ``python`` (the step minus all those:
    fit's checks of the answer, the trace, dispatch)."""
    from stepsim.bench._products import replay

    problem, ctx = steps.problem, steps.ctx
    k = steps.k
    batch = problem.sample_batch(np.random.default_rng(1))
    fwd, state = steps.stepper.forward(steps.state, steps.params, k, ctx)
    _, grads = problem.loss_and_grad(fwd, batch)
    grads = {name: g.copy() for name, g in grads.items()}  # the update only reads them
    products = replay(problem, fwd, batch)
    parts = {
        "batch": lambda: problem.sample_batch(steps.batch_rng),
        "masks": lambda: steps.stepper.forward(state, steps.params, k, ctx),
        "loss_and_grad": lambda: problem.loss_and_grad(fwd, batch),
        "optimizer": lambda: steps.stepper.update(state, steps.params, grads, k, ctx),
        **({"pack": fwd.repacked} if getattr(fwd, "packed_keys", ()) else {}),
    }
    parts.update(_product_parts(products))
    parts["step"] = partial(steps.run, 1)
    took = _interleaved(parts, calls, rounds, clock)
    step_seconds = took["step"]
    _report_parts(bench, f"{case}: step", f"fit step {case} parts", _shares(took, step_seconds),
                  step_seconds)


def _report_parts(bench, heading: str, case: str, shares: dict, step_seconds: float) -> None:
    """Print a step's parts (``heading`` 123 us = part 45 us (37%), ...) and keep them as a
    row named ``case``."""
    text = ", ".join(f"{name} {1e6 * v:.0f} us ({100 * v / step_seconds:.0f}%)"
                     for name, v in shares.items())
    bench.print(f"    {heading} {1e6 * step_seconds:.0f} us = {text}")
    bench.rows.append({"section": "train", "case": case, "parts_seconds": shares,
                       "step_seconds": step_seconds})


def _product_parts(products) -> dict:
    """The timed parts of :func:`stepsim.bench._products.replay`'s functions: "products
    dense" and "products sparse" (the latter only when the step takes sparse products)."""
    if products is None:
        return {}
    dense, sparse = products
    return {"products dense": dense, **({"products sparse": sparse} if sparse else {})}


def _interleaved(parts: dict, calls: int, rounds: int, clock) -> dict:
    """Median seconds a call of each of ``parts``, timed round by round in turn (so that a
    busy machine's phases hit them alike), after one untimed call each."""
    runs = {name: [] for name in parts}
    for fn in parts.values():
        fn()
    for _ in range(rounds):  # the parts and the whole step interleaved, round by round, so
        for name, fn in parts.items():  # that a busy machine's phases hit them alike
            t0 = clock()
            for _ in range(calls):
                fn()
            runs[name].append((clock() - t0) / calls)
    return {name: float(np.median(r)) for name, r in runs.items()}


def _shares(took: dict, step_seconds: float) -> dict:
    """A step split into products (dense, sparse), element-wise (loss_and_grad minus its
    products), optimizer, masks, pack (when the step packs kept weights), batch and python
    (what is left)."""
    shares = {name: took[name] for name in ("products dense", "products sparse") if name in took}
    if shares:
        shares["element-wise"] = max(took["loss_and_grad"] - sum(shares.values()), 0.0)
    else:
        shares["loss_and_grad"] = took["loss_and_grad"]
    for name in ("optimizer", "masks", "pack", "batch"):
        if name in took:
            shares[name] = took[name]
    shares["python"] = max(step_seconds - sum(shares.values()), 0.0)
    return shares


def _calls_per_round(problem, recipe, quick: bool) -> int:
    """Steps a round: about 0.1 s of stepsim (0.03 s with --quick)."""
    steps = FitSteps(problem, recipe, total_steps=1000)
    steps.run(2)
    t0 = time.perf_counter()
    steps.run(3)
    per = max((time.perf_counter() - t0) / 3, 1e-6)
    return max(2, int((0.03 if quick else 0.1) / per))


def _emit_ratio(bench, case, ours, theirs, ratios) -> None:
    from stepsim.bench import Timing

    t_ours = Timing.of(ours)
    extra = {"ratio": f"{1 / t_ours:7.0f} steps/s"}
    if ratios:
        r = Timing.of(ratios)
        t_theirs = Timing.of(theirs)
        extra = {"ratio": f"{1 / t_ours:7.0f} steps/s, {float(r):.2f}x PyTorch (rounds "
                          f"{min(ratios):.2f}-{max(ratios):.2f})",
                 "vs_torch": float(r), "vs_torch_spread": r.spread,
                 "vs_torch_rounds": list(ratios), "partner": t_theirs}
        bench.emit("train", f"fit step {case}", "torch 1 thread (peer)", t_theirs, units=1,
                   unit="step", ratio=f"{1 / t_theirs:7.0f} steps/s")
    bench.emit("train", f"fit step {case}", "stepsim fit", t_ours, units=1, unit="step",
               **extra)


def _emit_steps(bench, t, clock):
    """Rows for the steps in ``t`` (name -> seconds), stepsim's as a ratio to PyTorch's best."""
    best_torch = min((v for k, v in t.items() if k.startswith("torch")), default=None)
    for name, case in (("dense", "dense step"), ("sparse", "STEP sparse-phase step")):
        text = f"{1 / t[name]:7.0f} steps/s"
        extra = {}
        if best_torch is not None:
            extra["vs_torch"] = best_torch / t[name]
            extra["partner"] = best_torch
            text += f", {extra['vs_torch']:.2f}x PyTorch's best steps/s"
        bench.emit("train", case, f"stepsim ({clock})", t[name], units=1, unit="step",
                   ratio=text, clock=clock, **extra)
    for name in t:
        if name.startswith("torch"):
            bench.emit("train", "dense step", f"{name} ({clock})", t[name], units=1,
                       unit="step", ratio=f"{1 / t[name]:7.0f} steps/s", clock=clock)


def _blas_threads():
    """Threads the loaded BLAS uses now (threadpoolctl), or None if unknown."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return None
    counts = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None


def _optimizer_rows(bench, params, reps, clock):
    """One Adam step on the model's arrays: one multi-tensor call and one call per array,
    in place on copies, statistics on (torch's fused Adam: the kernels section)."""
    from stepsim.core.optim import AdamStats, adam_apply, adam_hyper
    from stepsim.core.optim_many import adam_apply_many

    rng = np.random.default_rng(0)
    ws = [w.copy() for w in params.values()]
    gs = [rng.standard_normal(w.shape).astype(w.dtype) for w in ws]
    ms = [np.zeros_like(w) for w in ws]
    vs = [np.full_like(w, 1e-3) for w in ws]
    hyper = adam_hyper(step=10, lr=1e-9)
    impls = {
        "adam_apply_many": lambda: adam_apply_many(ws, gs, ms, vs, hyper),
        "adam_apply per array": lambda: AdamStats.combine(
            [adam_apply(w, g, m, v, hyper) for w, g, m, v in zip(ws, gs, ms, vs)]),
    }
    t = bench.compare(impls, repeats=reps, number=20,
                      clock=time.thread_time if clock == "cpu" else None)
    size = sum(w.size for w in ws)
    for name, seconds in t.items():
        bench.emit("train", f"Adam step, {len(ws)} arrays", f"{name} ({clock})", seconds,
                   units=size, ratio=f"{1e6 * seconds:6.1f} us a step, "
                   f"{t['adam_apply_many'] / seconds:.2f}x adam_apply_many's time", clock=clock)


def _fit_runs(bench, problem):
    """Whole fit runs: dense digits with fit's thread policy (numba kernels inline, BLAS on
    one thread) and with every core for both, as numba and OpenBLAS default to."""
    import os

    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    dense = make_recipe("dense")
    cores = os.cpu_count() or 1
    steps = 300 if bench.quick else 5000
    fit(problem, dense, 5, rng=0, progress=False)  # load kernels outside the timing
    # without the policy a step can take far longer on a busy machine: fewer steps there
    for label, threads in (("thread policy", {}),
                           ("all cores for numba and BLAS", {"threads": cores,
                                                             "blas_threads": None})):
        if threads:
            steps = 30 if bench.quick else 200
        t0 = time.perf_counter()
        result = fit(problem, dense, steps, rng=0, progress=False, **threads)
        seconds = time.perf_counter() - t0
        acc = result.metrics.get("test_accuracy", float("nan"))
        bench.emit("train", f"fit dense {steps} steps", label, seconds, units=steps,
                   unit="step", ratio=f"{seconds:6.1f} s total, test accuracy {acc:.3f}",
                   total_seconds=seconds, test_accuracy=acc)
