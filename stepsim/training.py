"""The training loop shared by every recipe: :func:`fit`, its :class:`Trace` and :class:`FitResult`.

One step k = 1..T (SPEC section 3): draw a minibatch, ask the recipe for the forward
weights (Pi_k * w_k in a sparse phase), take the problem's loss and gradient there, let the
recipe update (optimizer + its gradient/weight pieces), record a row of the trace, and feed
Adam's statistics (per module) to the switch schedule; when it fires for some modules after
step k0 they enter their sparse phase (STEP: v* = v_{k0} of those modules). Recipes without a
dense phase only observe a criterion (its step is still reported). A diverged run is an
outcome, not an error: the first non-finite loss, gradient (checked before the update) or
weight (checked after it) stops the run with a status saying the step, the parameter and
the lr, and NumPy's overflow warnings, which would repeat it for every layer of every
step, are silenced during the run (checks that only read values: no bit of a run that
does not diverge changes).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from stepsim._ground.validate import _show, check_int, check_nm_pair
from stepsim.recipes.criteria import z_sample
from stepsim.recipes.switch import plan_schedule
from stepsim.recipes.switch import schedule_for as _schedule_for  # noqa: F401 (bench/train.py)


@dataclasses.dataclass(frozen=True, repr=False)
class Trace:
    """Per-step record of a run, as preallocated NumPy arrays (row k-1 is step k).

    loss: minibatch loss at the forward weights. v_l1, v_l2: ||v_k||_1, ||v_k||_2 (all
    layers; of vhat when the criterion asked for stats_on="vhat"). dv_l1: ||v_k - v_{k-1}||_1.
    z: Z_k = dv_l1 / d (AutoSwitch Option I). z_geo: exp(mean log|dv| over dv != 0) (Option
    II; nan unless log statistics were on). dv_zeros: coordinates with dv exactly 0. v
    fields are nan under momentum SGD. flips: mask entries changed since the previous step
    (the dense phase counts as all kept). n, m: (T, L) N and M of each sparse layer in force
    (N = M in the dense phase), layers in ``layer_names`` order. phase: 0 dense, 1 sparse
    (1 once any module is sparse). layer_phase: (T, L) the phase of each sparse layer (with
    per-module switching, each layer's switch step is where its column turns 1).
    lr: the learning rate used. mask_size: the mask entries of all sparse parameters (0 for
    a run without any); :attr:`flip_rate` = flips / mask_size per step (Hu et al., ICML
    2024: the fraction of mask entries changed since the previous step). flip_rate is
    derived from the recorded ``flips``, so it is not one of ``ARRAYS`` (the arrays a
    run's digest covers are unchanged); :meth:`FitResult.save` writes it beside them.
    """

    loss: np.ndarray
    v_l1: np.ndarray
    v_l2: np.ndarray
    dv_l1: np.ndarray
    z: np.ndarray
    z_geo: np.ndarray
    dv_zeros: np.ndarray
    flips: np.ndarray
    n: np.ndarray
    m: np.ndarray
    phase: np.ndarray
    lr: np.ndarray
    layer_names: tuple[str, ...]
    layer_phase: np.ndarray | None = None
    mask_size: int = 0

    ARRAYS = ("loss", "v_l1", "v_l2", "dv_l1", "z", "z_geo", "dv_zeros", "flips", "n", "m",
              "phase", "lr", "layer_phase")

    @classmethod
    def empty(cls, steps: int, layer_names, mask_size: int = 0) -> Trace:
        f = lambda: np.full(steps, np.nan)
        layers = len(layer_names)
        return cls(loss=f(), v_l1=f(), v_l2=f(), dv_l1=f(), z=f(), z_geo=f(),
                   dv_zeros=np.zeros(steps, np.int64), flips=np.zeros(steps, np.int64),
                   n=np.zeros((steps, layers), np.int32), m=np.zeros((steps, layers), np.int32),
                   phase=np.zeros(steps, np.int8), lr=f(), layer_names=tuple(layer_names),
                   layer_phase=np.zeros((steps, layers), np.int8), mask_size=int(mask_size))

    @property
    def flip_rate(self) -> np.ndarray:
        """Per step, the fraction of mask entries changed since the previous step (float64;
        nan for a run without sparse parameters). The step a module switches counts its
        pruned entries (the dense phase counts as all kept)."""
        if self.mask_size <= 0:
            return np.full(len(self), np.nan)
        return self.flips / float(self.mask_size)

    def __len__(self):
        return len(self.loss)

    def __repr__(self):
        return f"Trace(steps={len(self)}, layers={list(self.layer_names)})"

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.ARRAYS}

    def head(self, steps: int) -> Trace:
        """The first ``steps`` rows (a run that stopped early)."""
        arrays = {name: getattr(self, name)[:steps] for name in self.ARRAYS}
        return Trace(layer_names=self.layer_names, mask_size=self.mask_size, **arrays)

    @classmethod
    def load_npz(cls, path) -> Trace:
        from stepsim._ground.atomic import check_pair

        check_pair(path)  # refuses an .npz beside the JSON of another run
        with np.load(path) as data:
            arrays = {name: data[name] for name in cls.ARRAYS if name in data}
            if "layer_phase" not in arrays:  # saved before issue 11: one global phase
                arrays["layer_phase"] = np.repeat(arrays["phase"][:, None],
                                                  arrays["n"].shape[1], axis=1)
            names = tuple(str(s) for s in data["layer_names"])
            size = int(data["mask_size"]) if "mask_size" in data else 0  # before issue 24: 0
        return cls(layer_names=names, mask_size=size, **arrays)


STATUS_COMPLETED, STATUS_NON_FINITE = "completed", "non-finite"


@dataclasses.dataclass(frozen=True, repr=False)
class FitResult:
    """The outcome of :func:`fit`.

    weights: inference weights Pi_T * w_T (dense recipes: w_T). dense_weights: w_T.
    trace: the per-step :class:`Trace` (only the completed steps when the run stopped).
    switch_step: the first step after which any module switched (the criterion or the
    recipe's fixed schedule), None if none did (for single-phase recipes: when the
    observing criterion fired). metrics: ``problem.evaluate(weights)``; initial_metrics: at
    the initial weights. nm: name -> final (n, m) of every sparse layer. recipe: the
    :class:`~stepsim.recipes.Recipe`; criterion: the schedule's repr or None; steps (asked
    for), seed (None when a Generator was passed), problem: the problem's repr.
    status: "completed" or "non-finite" (the run diverged: it stopped at ``stopped_at``, also
    ``diverged_at``; ``message`` says which quantity of which parameter went non-finite
    first, and the lr; ``diverged_param`` names that parameter, None when only the loss
    was non-finite). module_switch_steps: module
    (parameter) -> its switch step or None. curves: with ``eval_every``, "step" (the steps
    evaluated, 0 = initial) and one array per metric of ``problem.evaluate`` at the
    weights the model computes with after that step. diagnostics: for a run that froze v
    (STEP), {"g2_over_vstar": {name: {"+1": [median, p99], "+10": ..., "+100": ...}}}:
    g^2 / v* over the parameter's coordinates that many steps after its switch
    (:func:`frozen_v_diagnostics`; read only, it changes no arithmetic).
    """

    weights: dict
    dense_weights: dict
    trace: Trace
    switch_step: int | None
    metrics: dict
    initial_metrics: dict
    nm: dict
    recipe: object
    criterion: str | None
    steps: int
    seed: int | None
    problem: str
    status: str = STATUS_COMPLETED
    message: str = ""
    stopped_at: int | None = None
    module_switch_steps: dict = dataclasses.field(default_factory=dict)
    curves: dict = dataclasses.field(default_factory=dict)
    diverged_param: str | None = None
    diagnostics: dict = dataclasses.field(default_factory=dict)

    @property
    def success(self) -> bool:
        """scipy-like vocabulary: True when every step ran with finite values."""
        return self.status == STATUS_COMPLETED

    @property
    def diverged_at(self) -> int | None:
        """The step at which the run went non-finite (None: it did not diverge)."""
        return None if self.success else self.stopped_at

    def __repr__(self):
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items())
        last = self.trace.loss[-1] if len(self.trace) else float("nan")
        note = "" if self.success else f", status={self.status!r}, stopped_at={self.stopped_at}"
        return (f"FitResult(recipe={self.recipe!r}, steps={self.steps}, seed={self.seed}, "
                f"switch_step={self.switch_step}, final_loss={last:.4g}, "
                f"metrics={{{metrics}}}{note})")

    def summary(self) -> dict:
        """Everything but the large arrays, as JSON-ready values (curves included)."""
        return {
            "recipe": self.recipe.name,
            "recipe_options": {k: v for k, v in self.recipe.options},
            "criterion": self.criterion,
            "steps": self.steps,
            "seed": self.seed,
            "problem": self.problem,
            "status": self.status,
            "message": self.message,
            "stopped_at": self.stopped_at,
            "diverged_param": self.diverged_param,
            "switch_step": self.switch_step,
            "module_switch_steps": dict(self.module_switch_steps),
            "metrics": self.metrics,
            "initial_metrics": self.initial_metrics,
            "nm": {k: list(v) for k, v in self.nm.items()},
            "final_loss": float(self.trace.loss[-1]) if len(self.trace) else None,
            "mask_flips_total": int(self.trace.flips.sum()),
            "curves": {k: np.asarray(v).tolist() for k, v in self.curves.items()},
            "diagnostics": self.diagnostics,
        }

    def save(self, path, *, params: dict | None = None) -> tuple[Path, Path]:
        """Write the summary as JSON (with provenance) and the trace and weights as .npz beside it.

        Returns (json path, npz path); the npz has the trace arrays, ``weights/NAME`` and
        ``curve/NAME`` (the learning curves, when recorded).
        """
        from stepsim._ground.atomic import arrays_digest, savez, uncommit
        from stepsim._ground.provenance import save_json

        path = Path(path)
        npz = path.with_suffix(".npz")
        if npz == path:
            raise ValueError(f"result path {str(path)!r} must not end in .npz: the trace and "
                             "weights go to an .npz beside the JSON")
        run = dict(params or {}, recipe=self.recipe.name, recipe_options=dict(self.recipe.options),
                   criterion=self.criterion, steps=self.steps, problem=self.problem)
        weights = {f"weights/{k}": v for k, v in self.weights.items()}
        curves = {f"curve/{k}": np.asarray(v) for k, v in self.curves.items()}
        arrays = dict(layer_names=np.array(self.trace.layer_names), **self.trace.arrays(),
                      flip_rate=self.trace.flip_rate, mask_size=np.int64(self.trace.mask_size),
                      **weights, **curves)
        # the pair is tied (stepsim._ground.atomic): the JSON records the arrays' digest; old JSON
        # out, arrays next, JSON last, so a JSON that exists commits exactly these arrays
        payload = dict(self.summary(), arrays=npz.name, arrays_sha256=arrays_digest(arrays))
        uncommit(path)
        savez(npz, **arrays)
        save_json(path, payload, params=run, seed=self.seed)
        return path, npz


PROBLEM_API = ("specs", "init_params", "sample_batch", "loss_and_grad", "evaluate", "config")


def _check_problem(problem) -> None:
    missing = [a for a in PROBLEM_API if not hasattr(problem, a)]
    if missing:
        raise TypeError(f"problem must follow the Problem protocol (stepsim.problems.Problem: "
                        f"{', '.join(PROBLEM_API)}); got {type(problem).__name__}, which lacks "
                        f"{missing}")


def _check_rng(rng):
    from numpy.random import Generator, SeedSequence

    if rng is None or isinstance(rng, (Generator, SeedSequence)):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return check_int("rng", int(rng), minimum=0)
    raise TypeError(f"rng must be a non-negative int seed, a numpy Generator, a SeedSequence or "
                    f"None; got {rng!r} ({type(rng).__name__})")


def _check_nm_arg(nm):
    return None if nm is None else check_nm_pair("nm", nm)


def fit(problem, recipe, steps: int, *, rng=None, criterion=None, nm=None,
        log_stats: bool = False, progress: bool = True, threads: int | None = None,
        blas_threads: int | None = 1, eval_every: int | None = None) -> FitResult:
    """Train ``problem`` with ``recipe`` for ``steps`` steps; return a :class:`FitResult`.

    Parameters
    ----------
    problem : Problem
        Follows :class:`stepsim.problems.Problem` (specs, init_params, sample_batch,
        loss_and_grad, evaluate, config).
    recipe : Recipe
        A recipe object (:func:`stepsim.recipes.make_recipe` builds one by name).
    steps : int
        Training steps T >= 1.
    rng : int, Generator, SeedSequence or None
        Split once into an init stream and a batch stream: the same seed gives the same bits.
    criterion : criterion, switch schedule or None
        What ends the dense phase of a two-phase recipe (STEP, ASP, decaying mask): a
        criterion object (:func:`~stepsim.recipes.criteria.make_criterion`; it watches all of v),
        or a schedule (:class:`~stepsim.recipes.switch.SwitchAt`,
        :class:`~stepsim.recipes.switch.SwitchWhen`, e.g. per module). None: the recipe's
        own ``switch_at`` / ``prune_at`` / ``dense_fraction``. A recipe built with an
        explicit one and a schedule here is an error. Single-phase recipes only observe it.
    nm : (n, m) tuple of ints, optional
        Overrides the problem's N:M for every sparse parameter.
    log_stats : bool
        Always reduce sum log|dv| (Trace.z_geo); on anyway when the criterion needs it.
    progress : bool
        A progress bar on stderr (tty only).
    threads : int, optional
        numba threads for the kernels during the run (default 1; restored after). With
        one thread the kernels run inline, so no idle numba worker spins against BLAS's
        threads (a 1024-1024-32 step measured 4-10x faster than numba and BLAS both on
        2 threads). Results do not depend on it.
    blas_threads : int or None
        BLAS threads for the problem's matmuls during the run (default 1; restored after;
        None leaves BLAS as it is). OpenBLAS's bits can depend on its thread count for
        some shapes, so a fixed default keeps "same seed, same bits" across machines with
        different core counts and across sweep workers; raise it for large models.
    eval_every : int, optional
        Record ``problem.evaluate`` every K steps (and at step 0) into ``FitResult.curves``.

    Returns
    -------
    FitResult
        A non-finite loss, gradient or weight stops the run (it diverged):
        ``status="non-finite"``, ``stopped_at`` (= ``diverged_at``) the step,
        ``diverged_param`` and ``message`` which parameter went non-finite first, and the lr.
    """
    from stepsim._ground.malloc import keep_freed_memory
    from stepsim._ground.portability import warn_if_not_portable
    from stepsim._ground.progress import Progress
    from stepsim._ground.threads import training_threads
    from stepsim.core.sparsity import _with_nm
    from stepsim.recipes import Recipe
    from stepsim.recipes.lean import LeanStep
    from stepsim.recipes.recipe import RunContext
    from stepsim.recipes.switch import StepStats

    _check_problem(problem)
    warn_if_not_portable()
    if not isinstance(recipe, Recipe):
        hint = f": build it with make_recipe({recipe!r})" if isinstance(recipe, str) else ""
        raise TypeError(f"recipe must be a Recipe object{hint}; got {type(recipe).__name__}")
    steps = check_int("steps", steps, minimum=1)
    rng = _check_rng(rng)
    nm = _check_nm_arg(nm)
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every, minimum=1)
    threads = 1 if threads is None else check_int("threads", threads, minimum=1)
    if blas_threads is not None:
        blas_threads = check_int("blas_threads", blas_threads, minimum=1)
    schedule, observed, watched = plan_schedule(recipe, criterion, steps)
    crit_obj = getattr(criterion, "criterion", criterion)
    # everything that computes (init, evaluate, the steps) under one thread policy, so the
    # same seed gives the same bits whatever the machine's core count; a divergence is
    # reported once, by the status, not by NumPy warnings for every layer of every step
    with training_threads(kernels=threads, blas=blas_threads), \
            np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        seed = int(rng) if isinstance(rng, int) else None
        init_rng, batch_rng = np.random.default_rng(rng).spawn(2)

        specs = dict(problem.specs)
        if nm is not None:  # checked above, once (_check_nm_arg)
            specs = _with_nm(specs, *nm)
        params = problem.init_params(init_rng)
        stats_on = crit_obj.stats_on if watched else "v"
        log = bool(log_stats) or bool(watched and crit_obj.needs_log)
        ctx = RunContext.make(params, specs, steps, stats_on=stats_on, log_stats=log)
        initial_metrics = dict(problem.evaluate(params))
        state = recipe.init(params, ctx)
        layer_names = list(ctx.sparse_names)
        trace = Trace.empty(steps, layer_names,
                            sum(params[k].size for k in layer_names) if recipe.sparse else 0)
        modules = tuple(params)

        sstate = schedule.init(steps, modules) if schedule is not None else None
        ostate = observed.init(steps, modules) if observed is not None else None
        if sstate is not None and schedule.at_start(sstate):
            params, state = recipe.switch(state, params, 0, ctx, schedule.at_start(sstate))
        curves = {"step": [0], **{k: [v] for k, v in initial_metrics.items()}} if eval_every else {}
        # the same step in place on buffers owned by this run (stepsim.recipes.lean); None
        # when a piece of the recipe has no in-place form: then the recipe's pure methods
        lean = LeanStep.make(recipe, params, state, ctx)
        keep_freed_memory()  # a step's freed temporaries stay for the next (stepsim._ground.malloc)
        if lean is not None:
            params = lean.params
        stepper = lean or recipe

        status, message, stopped, kept, where = STATUS_COMPLETED, "", None, steps, None
        diagnostics = {}
        with Progress(steps, f"fit {recipe.name}", force=None if progress else False) as bar:
            for k in range(1, steps + 1):
                batch = problem.sample_batch(batch_rng)
                fwd, state = stepper.forward(state, params, k, ctx)
                loss, grads = _checked_answer(problem, problem.loss_and_grad(fwd, batch), fwd)
                bad, where = _first_non_finite(loss, grads)
                lr = recipe.optimizer.lr_at(k, steps)  # once a step: the update and the trace
                if bad is None:
                    params, state, parts = stepper.update(state, params, grads, k, ctx, lr=lr)
                    frozen_v_diagnostics(diagnostics, k, grads, state)
                    stats = StepStats(parts, _total(parts, modules))
                    _record(trace, k - 1, loss, stats.total, state, layer_names, lr)
                    bad, where = _first_non_finite_weight(params)
                    kept = k
                else:
                    kept = k - 1
                if bad is not None:
                    status, stopped = STATUS_NON_FINITE, k
                    message = (f"diverged at step {k}: {bad} (lr {lr:g}); the run stopped "
                               f"(trace holds steps 1..{kept})")
                    break
                if ostate is not None:
                    ostate, _ = observed.update(ostate, k, stats)
                if sstate is not None:
                    sstate, fired = schedule.update(sstate, k, stats)
                    if fired:
                        params, state = recipe.switch(state, params, k, ctx, fired)
                        if lean is not None:
                            params = lean.adopt(params)
                if eval_every and k % eval_every == 0:
                    now, _ = recipe.forward(state, params, k + 1, ctx)
                    curves["step"].append(k)
                    for key, value in problem.evaluate(now).items():
                        curves.setdefault(key, []).append(value)
                bar.update(1)

        if stopped is not None:
            trace = trace.head(kept)
        elif recipe.sparse:
            message = recipe.masker.report(state.masker_state)
        weights = recipe.inference_weights(state, params, ctx)
        metrics = dict(problem.evaluate(weights))
        nm_final = dict(recipe.final_nm(state, params, ctx))  # the N:M of Pi_T, as applied above
        module_steps = dict(state.switched)
        if not recipe.sparse or not recipe.schedule.dense_phase:  # single-phase: the observed
            module_steps = dict(ostate.fired) if ostate is not None else dict.fromkeys(modules)
        first = [s for s in module_steps.values() if s is not None]
        switch_step = min(first) if first else None
        return FitResult(weights=weights, dense_weights=params, trace=trace,
                         switch_step=switch_step, metrics=metrics, initial_metrics=initial_metrics,
                         nm=nm_final, recipe=recipe,
                         criterion=None if criterion is None else repr(criterion),
                         steps=steps, seed=seed, problem=repr(problem), status=status,
                         message=message, stopped_at=stopped, module_switch_steps=module_steps,
                         diverged_param=where,
                         curves={k: np.asarray(v, dtype=np.float64 if k != "step" else np.int64)
                                 for k, v in curves.items()},
                         diagnostics={"g2_over_vstar": diagnostics} if diagnostics else {})


def _checked_answer(problem, answer, params) -> tuple:
    """``problem.loss_and_grad``'s answer, checked: (a real loss, {name: gradient}) with
    exactly the parameters' names, each gradient an array of its parameter's shape and
    dtype. A wrong one is a TypeError/ValueError naming the parameter, not an error deep in
    the optimizer (or a broadcast, silently wrong update). A few attribute reads a step."""
    where = f"{type(problem).__name__}.loss_and_grad"
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        size = f" of {len(answer)} items" if isinstance(answer, (tuple, list)) else ""
        raise TypeError(f"{where} must return (loss, grads), got a {type(answer).__name__}"
                        f"{size}")
    loss, grads = answer
    if isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype.kind == "f":
        loss = loss[()]
    if isinstance(loss, (bool, np.bool_)) or not isinstance(loss, numbers.Real):
        raise TypeError(f"{where} must return a real number as its loss, got {_show(loss)} "
                        f"({type(loss).__name__})")
    if not isinstance(grads, Mapping):
        raise TypeError(f"{where} must return its gradients as a dict name -> array, got "
                        f"{type(grads).__name__}")
    if grads.keys() != params.keys():
        missing, extra = sorted(set(params) - set(grads)), sorted(set(grads) - set(params))
        what = ([f"no gradient for {missing}"] if missing else []) + (
            [f"gradients for {extra}, which are not parameters"] if extra else [])
        raise ValueError(f"{where} returned {' and '.join(what)}; it must return one gradient "
                         f"per parameter, named as the parameters")
    for name, g in grads.items():
        p = params[name]
        if type(g) is np.ndarray and g.shape == p.shape and g.dtype == p.dtype:
            continue
        if not isinstance(g, np.ndarray):
            raise TypeError(f"{where}: the gradient of {name!r} must be a numpy.ndarray, got "
                            f"{type(g).__name__}")
        if g.shape != p.shape:
            raise ValueError(f"{where}: the gradient of {name!r} has shape {g.shape}, but the "
                             f"parameter has shape {p.shape}")
        if g.dtype != p.dtype:
            raise TypeError(f"{where}: the gradient of {name!r} has dtype {g.dtype}, but the "
                            f"parameter has dtype {p.dtype}")
    return loss, grads


def _first_non_finite(loss, grads) -> tuple[str | None, str | None]:
    """(description, parameter) of the first non-finite value: the loss, then the gradients
    in order; (None, None) when all are finite. A non-finite loss names the first
    parameter whose gradient is non-finite too (None if none is).

    One sum per array (a NaN or inf makes it non-finite); only a non-finite sum, which a
    finite array can also give by overflowing, is checked element by element.
    """
    first = None
    for name, g in grads.items():
        if not np.isfinite(g.sum()) and not np.isfinite(g).all():
            count = int(np.count_nonzero(~np.isfinite(g)))
            first = name, f"the gradient of {name!r} has {count} non-finite value(s)"
            break
    if not np.isfinite(loss):
        where = f", first non-finite gradient {first[0]!r}" if first else ""
        return f"the loss is {float(loss)}{where}", first and first[0]
    if first is not None:
        return first[1], first[0]
    return None, None


def _first_non_finite_weight(params) -> tuple[str | None, str | None]:
    """(description, parameter) of the first parameter with a non-finite weight after an
    update (an lr so large that the step overflows), else (None, None); one sum per array."""
    for name, w in params.items():
        if not np.isfinite(w.sum()) and not np.isfinite(w).all():
            count = int(np.count_nonzero(~np.isfinite(w)))
            return f"the weights of {name!r} have {count} non-finite value(s)", name
    return None, None


def _total(stats, modules):
    """The step's AdamStats over all parameters (None under SGD-M)."""
    from stepsim.core.optim import AdamStats

    parts = [stats[m] for m in modules]
    return None if parts[0] is None else AdamStats.combine(parts)


def _record(trace: Trace, i: int, loss, stats, state, layer_names, lr) -> None:
    trace.loss[i] = loss
    trace.lr[i] = lr
    trace.phase[i] = state.phase
    trace.flips[i] = state.flips
    for j, name in enumerate(layer_names):
        trace.n[i, j], trace.m[i, j] = state.nm_now[name]
        trace.layer_phase[i, j] = state.phases[name]
    if stats is not None:
        trace.v_l1[i] = stats.v_l1
        trace.v_l2[i] = stats.v_l2
        trace.dv_l1[i] = stats.dv_l1
        trace.dv_zeros[i] = stats.dv_zeros
        trace.z[i] = z_sample(stats)
        nonzero = stats.size - stats.dv_zeros
        if nonzero > 0 and np.isfinite(stats.dv_log_sum):
            trace.z_geo[i] = math.exp(stats.dv_log_sum / nonzero)


#: steps after a module's switch at which :func:`frozen_v_diagnostics` records g^2 / v*
DIAGNOSTIC_OFFSETS = (1, 10, 100)


def frozen_v_diagnostics(out: dict, k: int, grads: dict, state) -> None:
    """Record, into ``out`` (name -> {"+j": [median, p99]}), g^2 / v* of every parameter
    whose v is frozen (STEP's phase 2) at step k = k0 + j for j in
    :data:`DIAGNOSTIC_OFFSETS` (k0: the module's switch step). g: the problem's gradient at
    step k; v*: the frozen denominator squared as phase 2 reads it (bias correction and
    eps included: v*/c + eps inside the root, (sqrt(v*/c) + eps)^2 outside). Reads only:
    the step's arithmetic is unchanged. Median and 99th percentile over the coordinates
    (np.quantile, linear interpolation: exact, sorted values, no SIMD sums)."""
    frozen = getattr(getattr(state, "opt", None), "frozen", None)
    if not frozen:
        return
    for name, fz in frozen.items():
        k0 = state.switched.get(name)
        if k0 is None or k - k0 not in DIAGNOSTIC_OFFSETS or name not in grads:
            continue
        v = np.asarray(state.opt.v[name], dtype=np.float64) / fz.bias_correction2
        denom2 = v + fz.eps if fz.eps_mode == "inside" else (np.sqrt(v) + fz.eps) ** 2
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.square(np.asarray(grads[name], dtype=np.float64)) / denom2
        q = np.quantile(ratio.reshape(-1), (0.5, 0.99))
        out.setdefault(name, {})[f"+{k - k0}"] = [float(q[0]), float(q[1])]
