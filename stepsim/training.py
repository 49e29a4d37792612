"""The training loop shared by every recipe: :func:`fit`, a :class:`FitRun` driven from the
first step to the last (its :class:`~stepsim.fit_result.Trace` and
:class:`~stepsim.fit_result.FitResult` live in :mod:`stepsim.fit_result`).

One step k = 1..T (SPEC section 3): draw a minibatch, ask the recipe for the forward
weights (Pi_k * w_k in a sparse phase), take the problem's loss and gradient there, let the
recipe update (the stages of :mod:`stepsim.recipes.sequence`, in place), record a row of
the trace, and feed
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

import math
import numbers
from collections.abc import Mapping

import numpy as np

from stepsim._ground.validate import check_int, check_nm_pair, show
from stepsim.core.finite import FiniteCheck
from stepsim.fit_result import (
    STATUS_BLOWUP,
    STATUS_COMPLETED,
    STATUS_NON_FINITE,
    FitResult,
    Trace,
    record_step,
)
from stepsim.recipes.switch import StepStats, plan_schedule

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


def check_blowup(blowup) -> tuple[int, float]:
    """``fit``'s ``blowup``: (window, multiple), a window of >= 1 steps and a finite
    multiple > 1."""
    from stepsim._ground.validate import check_real

    if not isinstance(blowup, (tuple, list)) or len(blowup) != 2:
        raise TypeError(f"blowup must be (window, multiple), got {blowup!r}")
    window = check_int("blowup window", blowup[0], minimum=1)
    multiple = check_real("blowup multiple", blowup[1], minimum=1.0, min_open=True)
    if not math.isfinite(multiple):
        raise ValueError(f"blowup multiple must be finite, got {multiple!r}")
    return window, float(multiple)


def _check_nm_arg(nm):
    return None if nm is None else check_nm_pair("nm", nm)


def fit(problem, recipe, steps: int, *, rng=None, criterion=None, nm=None,
        log_stats: bool = False, progress: bool = True, threads: int | None = None,
        blas_threads: int | None = 1, eval_every: int | None = None,
        blowup: tuple[int, float] | None = None) -> FitResult:
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
        Progress on stderr: a bar on a terminal, else a line at a steady interval for a
        long run (:mod:`stepsim._ground.progress`); False: none.
    threads : int, optional
        numba threads for the kernels during the run (default 1; restored after). With
        one thread the kernels run inline, so no idle numba worker spins against BLAS's
        threads (on a small machine a step runs several times faster than with numba and
        BLAS both on every core: ``stepsim bench --only train``). Results do not depend
        on it.
    blas_threads : int or None
        BLAS threads for the problem's matmuls during the run (default 1; restored after;
        None leaves BLAS as it is). OpenBLAS's bits can depend on its thread count for
        some shapes, so a fixed default keeps "same seed, same bits" across machines with
        different core counts and across sweep workers; raise it for large models.
    eval_every : int, optional
        Record ``problem.evaluate`` every K steps (and at step 0) into ``FitResult.curves``.
    blowup : (window, multiple), optional
        Stop the run as diverged (``status="blow-up"``) at the first step k >= window
        where the mean batch loss of steps k - window + 1 .. k exceeds ``multiple`` times
        the initial loss (step 1's batch loss, taken at the initial weights): a loss that
        blew up without going non-finite. The mean is exact (``math.fsum``), so the same
        run stops at the same step anywhere.

    Returns
    -------
    FitResult
        A non-finite loss, gradient or weight stops the run (it diverged):
        ``status="non-finite"``, ``stopped_at`` (= ``diverged_at``) the step,
        ``diverged_param`` and ``message`` which parameter went non-finite first, and the lr.
    """
    from stepsim._ground.progress import Progress
    from stepsim._ground.threads import training_threads

    threads = 1 if threads is None else check_int("threads", threads, minimum=1)
    if blas_threads is not None:
        blas_threads = check_int("blas_threads", blas_threads, minimum=1)
    # everything that computes (init, evaluate, the steps) under one thread policy, so the
    # same seed gives the same bits whatever the machine's core count; a divergence is
    # reported once, by the status, not by NumPy warnings for every layer of every step
    with training_threads(kernels=threads, blas=blas_threads), \
            np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        run = FitRun(problem, recipe, steps, rng=rng, criterion=criterion, nm=nm,
                     log_stats=log_stats, eval_every=eval_every, blowup=blowup)
        with Progress(run.steps, f"fit {recipe.name}", force=None if progress else False,
                      unit="step") as bar:
            for k in range(1, run.steps + 1):
                stats = run.step(k)
                if stats is None:  # it diverged: run.status says where
                    break
                run.after_step(k, stats)
                bar.update(1)
        return run.result()


class FitRun:
    """One run of :func:`fit`, a step at a time: its set-up (the constructor: the
    arguments as :func:`fit` takes them, checked), one step (:meth:`step`), what follows a
    step (:meth:`after_step`: criteria, switches, curves) and the :class:`FitResult`
    (:meth:`result`). :func:`fit` runs it under its thread policy and NumPy error state;
    ``stepsim bench`` times its steps exactly as fit runs them.

    What a caller may read between steps: ``problem``, ``recipe``, ``ctx`` (the
    RunContext), ``params`` (the weights the steps update: the lean step's own arrays),
    ``state`` (the RecipeState), ``stepper`` (what runs the step's sequence: the
    :class:`~stepsim.recipes.lean.LeanStep`, or the recipe's pure methods when the
    weights are not float ndarrays), ``batch_rng``, ``trace``, ``status`` and ``message``.
    """

    def __init__(self, problem, recipe, steps: int, *, rng=None, criterion=None, nm=None,
                 log_stats: bool = False, eval_every: int | None = None,
                 blowup: tuple[int, float] | None = None):
        from stepsim._ground.malloc import keep_freed_memory
        from stepsim._ground.portability import warn_if_not_portable
        from stepsim.core.sparsity import with_nm
        from stepsim.recipes import Recipe
        from stepsim.recipes.lean import LeanStep
        from stepsim.recipes.recipe import RunContext

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
        self.blowup = None if blowup is None else check_blowup(blowup)
        self.losses = []  # the batch losses, while a blow-up is watched for

        self.problem, self.recipe, self.steps = problem, recipe, steps
        self.criterion, self.eval_every = criterion, eval_every
        self.schedule, self.observed, watched = plan_schedule(recipe, criterion, steps)
        crit_obj = getattr(criterion, "criterion", criterion)
        self.seed = int(rng) if isinstance(rng, int) else None
        init_rng, self.batch_rng = np.random.default_rng(rng).spawn(2)

        specs = dict(problem.specs)
        if nm is not None:
            specs = with_nm(specs, *nm)
        params = problem.init_params(init_rng)
        stats_on = crit_obj.stats_on if watched else "v"
        log = bool(log_stats) or bool(watched and crit_obj.needs_log)
        self.ctx = ctx = RunContext.make(params, specs, steps, stats_on=stats_on, log_stats=log)
        self.initial_metrics = dict(problem.evaluate(params))
        state = recipe.init(params, ctx)
        self.layer_names = list(ctx.sparse_names)
        self.trace = Trace.empty(steps, self.layer_names, sum(
            params[k].size for k in self.layer_names) if recipe.sparse else 0)
        self.modules = modules = tuple(params)

        self.sstate = self.schedule.init(steps, modules) if self.schedule is not None else None
        self.ostate = self.observed.init(steps, modules) if self.observed is not None else None
        if self.sstate is not None and self.schedule.at_start(self.sstate):
            params, state = recipe.switch(state, params, 0, ctx,
                                          self.schedule.at_start(self.sstate))
        self.curves = ({"step": [0], **{k: [v] for k, v in self.initial_metrics.items()}}
                       if eval_every else {})
        # the step in place on buffers owned by this run (stepsim.recipes.lean); None when
        # the weights are not float ndarrays: then the recipe's pure methods
        self.lean = LeanStep.make(recipe, params, state, ctx)
        keep_freed_memory()  # a step's freed temporaries stay for the next (stepsim._ground.malloc)
        self.params = self.lean.params if self.lean is not None else params
        self.stepper = self.lean or recipe
        self.state = state
        self.status, self.message, self.stopped, self.kept = STATUS_COMPLETED, "", None, steps
        self.where, self.diagnostics = None, {}
        self.lr_at = recipe.optimizer.lr_at
        self.weights = FiniteCheck()  # the lean step's weights: one address table a run

    def step(self, k: int):
        """Step k: batch, forward, loss and gradient, update, trace row, checks. Returns the
        step's StepStats, or None when a loss, gradient or weight went non-finite (the
        run stops: status, message and stopped_at are set)."""
        problem, ctx = self.problem, self.ctx
        batch = problem.sample_batch(self.batch_rng)
        fwd, self.state = self.stepper.forward(self.state, self.params, k, ctx)
        loss, grads = _checked_answer(problem, problem.loss_and_grad(fwd, batch), fwd)
        bad, self.where = _first_non_finite(loss, grads)
        lr = self.lr_at(k, self.steps)  # once a step: update and trace
        stats = None
        if bad is None:
            self.params, self.state, parts = self.stepper.update(self.state, self.params, grads,
                                                                 k, ctx, lr=lr)
            self.recipe.diagnose(self.diagnostics, k, grads, self.state)
            stats = StepStats(parts, _total(parts, self.modules))
            record_step(self.trace, k - 1, loss, stats.total, self.state, self.layer_names, lr)
            bad, self.where = _first_non_finite_weight(self.params, self.weights)
            self.kept = k
        else:
            self.kept = k - 1
        if bad is not None:
            self.status, self.stopped = STATUS_NON_FINITE, k
            self.message = (f"diverged at step {k}: {bad} (lr {lr:g}); the run stopped "
                            f"(trace holds steps 1..{self.kept})")
            return None
        if self.blowup is not None and self._blew_up(k, float(loss), lr):
            return None
        return stats

    def _blew_up(self, k: int, loss: float, lr: float) -> bool:
        """Watch for a blow-up (``fit``'s ``blowup``); True (status, message and
        stopped_at set) when the window ending at step k exceeds the multiple."""
        window, multiple = self.blowup
        self.losses.append(loss)
        if k < window:
            return False
        initial = self.losses[0]
        last = math.fsum(self.losses[k - window:k]) / window
        if not last > multiple * initial:
            return False
        self.status, self.stopped = STATUS_BLOWUP, k
        self.message = (f"diverged at step {k}: the mean batch loss of steps {k - window + 1}"
                        f"..{k} is {last:.4g}, above {multiple:g} x the initial {initial:.4g} "
                        f"(lr {lr:g}); the run stopped (trace holds steps 1..{self.kept})")
        return True

    def after_step(self, k: int, stats) -> None:
        """Feed the step's statistics to the observed criterion and the switch schedule
        (switching the modules it fires for), and record the curves every eval_every."""
        recipe = self.recipe
        if self.ostate is not None:
            self.ostate, _ = self.observed.update(self.ostate, k, stats)
        if self.sstate is not None:
            self.sstate, fired = self.schedule.update(self.sstate, k, stats)
            if fired:
                self.params, self.state = recipe.switch(self.state, self.params, k, self.ctx,
                                                        fired)
                if self.lean is not None:
                    self.params = self.lean.adopt(self.params)
        if self.eval_every and k % self.eval_every == 0:
            now, _ = recipe.forward(self.state, self.params, k + 1, self.ctx)
            self.curves["step"].append(k)
            # dict(): the dense Pi * w, as the final evaluation reads it (inference_weights),
            # not the kept-weight products the step takes, so that a curve's point at step k
            # has the bits a run of k steps reports
            for key, value in self.problem.evaluate(dict(now)).items():
                self.curves.setdefault(key, []).append(value)

    def result(self) -> FitResult:
        """The run's :class:`FitResult` (inference weights evaluated once more)."""
        recipe, state, params, ctx = self.recipe, self.state, self.params, self.ctx
        trace, message = self.trace, self.message
        if self.stopped is not None:
            trace = trace.head(self.kept)
        elif recipe.sparse:
            message = recipe.masker.report(state.masker_state)
        weights = recipe.inference_weights(state, params, ctx)
        metrics = dict(self.problem.evaluate(weights))
        nm_final = dict(recipe.final_nm(state, params, ctx))  # the N:M of Pi_T, as applied
        module_steps = dict(state.switched)
        if not recipe.sparse or not recipe.schedule.dense_phase:  # single-phase: the observed
            module_steps = (dict(self.ostate.fired) if self.ostate is not None
                            else dict.fromkeys(self.modules))
        first = [s for s in module_steps.values() if s is not None]
        curves = {k: np.asarray(v, dtype=np.float64 if k != "step" else np.int64)
                  for k, v in self.curves.items()}
        return FitResult(weights=weights, dense_weights=params, trace=trace,
                         switch_step=min(first) if first else None, metrics=metrics,
                         initial_metrics=self.initial_metrics, nm=nm_final, recipe=recipe,
                         criterion=None if self.criterion is None else repr(self.criterion),
                         steps=self.steps, seed=self.seed, problem=repr(self.problem),
                         status=self.status, message=message, stopped_at=self.stopped,
                         module_switch_steps=module_steps, diverged_param=self.where,
                         curves=curves, diagnostics=self.diagnostics)


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
    if type(loss) is not float:  # a Python float (the usual loss) needs none of the checks
        if isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype.kind == "f":
            loss = loss[()]
        if isinstance(loss, (bool, np.bool_)) or not isinstance(loss, numbers.Real):
            raise TypeError(f"{where} must return a real number as its loss, got "
                            f"{show(loss)} ({type(loss).__name__})")
    if type(grads) is not dict and not isinstance(grads, Mapping):  # dict: no ABC check
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

    One pass per array, all in one kernel call (:class:`~stepsim.core.finite.FiniteCheck`).
    """
    first = None
    names = list(grads)
    i = FiniteCheck().first([grads[name] for name in names])
    if i >= 0:
        name = names[i]
        count = int(np.count_nonzero(~np.isfinite(grads[name])))
        first = name, f"the gradient of {name!r} has {count} non-finite value(s)"
    if not (math.isfinite(loss) if type(loss) is float else np.isfinite(loss)):
        where = f", first non-finite gradient {first[0]!r}" if first else ""
        return f"the loss is {float(loss)}{where}", first and first[0]
    if first is not None:
        return first[1], first[0]
    return None, None


def _first_non_finite_weight(params, check: FiniteCheck | None = None) -> tuple[
        str | None, str | None]:
    """(description, parameter) of the first parameter with a non-finite weight after an
    update (an lr so large that the step overflows), else (None, None); one pass per
    array, in one kernel call. ``check``: a :class:`FiniteCheck` kept across steps (it
    keeps the table of the same weight arrays)."""
    names = list(params)
    i = (check or FiniteCheck()).first([params[name] for name in names])
    if i < 0:
        return None, None
    name = names[i]
    count = int(np.count_nonzero(~np.isfinite(params[name])))
    return f"the weights of {name!r} have {count} non-finite value(s)", name


def _total(stats, modules):
    """The step's AdamStats over all parameters (None under SGD-M)."""
    parts = [stats[m] for m in modules]
    return None if parts[0] is None else type(parts[0]).combine(parts)
