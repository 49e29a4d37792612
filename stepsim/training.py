"""The training loop shared by every recipe: :func:`fit`, its :class:`Trace` and :class:`FitResult`.

One step k = 1..T (SPEC section 3): draw a minibatch, ask the recipe for the forward
weights (Pi_k * w_k in a sparse phase), take the problem's loss and gradient there, let the
recipe update (optimizer + its gradient/weight pieces), record a row of the trace, and feed
Adam's statistics to the switch criterion until it fires; when it fires after step k0 a
two-phase recipe (STEP, ASP, decaying mask) enters its sparse phase (STEP: v* = v_{k0}).
Recipes without a dense phase only observe the criterion (its step is still reported).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np

from stepsim._validate import check_int, check_nm

PHASE_DENSE, PHASE_SPARSE = 0, 1


@dataclasses.dataclass(frozen=True, repr=False)
class Trace:
    """Per-step record of a run, as preallocated NumPy arrays (row k-1 is step k).

    loss: minibatch loss at the forward weights. v_l1, v_l2: ||v_k||_1, ||v_k||_2 (all
    layers; of vhat when the criterion asked for stats_on="vhat"). dv_l1: ||v_k - v_{k-1}||_1.
    z: Z_k = dv_l1 / d (AutoSwitch Option I). z_geo: exp(mean log|dv| over dv != 0) (Option
    II; nan unless log statistics were on). dv_zeros: coordinates with dv exactly 0. v
    fields are nan under momentum SGD. flips: mask entries changed since the previous step
    (the dense phase counts as all kept). n, m: (T, L) N and M of each sparse layer in force
    (N = M in the dense phase), layers in ``layer_names`` order. phase: 0 dense, 1 sparse.
    lr: the learning rate used.
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

    ARRAYS = ("loss", "v_l1", "v_l2", "dv_l1", "z", "z_geo", "dv_zeros", "flips", "n", "m",
              "phase", "lr")

    @classmethod
    def empty(cls, steps: int, layer_names) -> Trace:
        f = lambda: np.full(steps, np.nan)
        layers = len(layer_names)
        return cls(loss=f(), v_l1=f(), v_l2=f(), dv_l1=f(), z=f(), z_geo=f(),
                   dv_zeros=np.zeros(steps, np.int64), flips=np.zeros(steps, np.int64),
                   n=np.zeros((steps, layers), np.int32), m=np.zeros((steps, layers), np.int32),
                   phase=np.zeros(steps, np.int8), lr=f(), layer_names=tuple(layer_names))

    def __len__(self):
        return len(self.loss)

    def __repr__(self):
        return f"Trace(steps={len(self)}, layers={list(self.layer_names)})"

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.ARRAYS}

    @classmethod
    def load_npz(cls, path) -> Trace:
        with np.load(path) as data:
            arrays = {name: data[name] for name in cls.ARRAYS}
            names = tuple(str(s) for s in data["layer_names"])
        return cls(layer_names=names, **arrays)


@dataclasses.dataclass(frozen=True, repr=False)
class FitResult:
    """The outcome of :func:`fit`.

    weights: inference weights Pi_T * w_T (dense recipes: w_T). dense_weights: w_T.
    trace: the per-step :class:`Trace`. switch_step: step after which the criterion (or
    the recipe's fixed schedule) switched, None if it never did (for single-phase recipes:
    when the observing criterion fired). metrics: ``problem.evaluate(weights)``;
    initial_metrics: at the initial weights. nm: name -> final (n, m) of every sparse
    layer. recipe: the :class:`~stepsim.recipes.Recipe`; criterion: its repr or None;
    steps, seed (None when a Generator was passed), problem: the problem's repr.
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

    success = True  # scipy-like vocabulary: a run that returns has completed

    def __repr__(self):
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items())
        return (f"FitResult(recipe={self.recipe!r}, steps={self.steps}, seed={self.seed}, "
                f"switch_step={self.switch_step}, final_loss={self.trace.loss[-1]:.4g}, "
                f"metrics={{{metrics}}})")

    def summary(self) -> dict:
        """Everything but the arrays, as JSON-ready values."""
        return {
            "recipe": self.recipe.name,
            "recipe_options": {k: v for k, v in self.recipe.options},
            "criterion": self.criterion,
            "steps": self.steps,
            "seed": self.seed,
            "problem": self.problem,
            "switch_step": self.switch_step,
            "metrics": self.metrics,
            "initial_metrics": self.initial_metrics,
            "nm": {k: list(v) for k, v in self.nm.items()},
            "final_loss": float(self.trace.loss[-1]),
            "mask_flips_total": int(self.trace.flips.sum()),
        }

    def save(self, path, *, params: dict | None = None) -> tuple[Path, Path]:
        """Write the summary as JSON (with provenance) and the trace and weights as .npz beside it.

        Returns (json path, npz path); the npz has the trace arrays and ``weights/NAME``.
        """
        from stepsim._provenance import save_json

        from stepsim._atomic import savez

        path = Path(path)
        npz = path.with_suffix(".npz")
        if npz == path:
            raise ValueError(f"result path {str(path)!r} must not end in .npz: the trace and "
                             "weights go to an .npz beside the JSON")
        payload = dict(self.summary(), arrays=npz.name)
        run = dict(params or {}, recipe=self.recipe.name, recipe_options=dict(self.recipe.options),
                   criterion=self.criterion, steps=self.steps, problem=self.problem)
        weights = {f"weights/{k}": v for k, v in self.weights.items()}
        # arrays first, JSON last: a JSON that exists always points to complete arrays
        savez(npz, layer_names=np.array(self.trace.layer_names), **self.trace.arrays(), **weights)
        save_json(path, payload, params=run, seed=self.seed)
        return path, npz


SMALL_MODEL = 1 << 16  # below this many parameters, fit runs the kernels on one thread


def fit(problem, recipe, steps: int, *, rng=None, criterion=None, nm=None,
        log_stats: bool = False, progress: bool = True, threads: int | None = None) -> FitResult:
    """Train ``problem`` with ``recipe`` for ``steps`` steps; return a :class:`FitResult`.

    problem: a :class:`stepsim.problems.Problem`. recipe: a Recipe or a recipe name.
    rng: seed or Generator; it is split once into an init stream and a batch stream, so
    the same seed gives the same bits. criterion: a criterion object, a criterion name, or
    None; it decides the switch of two-phase recipes (STEP needs one unless built with
    switch_at; ASP and decaying mask fall back to their prune_at / dense_fraction) and is
    only observed by single-phase recipes. nm: (n, m) overriding the problem's N:M for every
    sparse parameter. log_stats: always reduce sum log|dv| (Trace.z_geo); on anyway when
    the criterion needs it. progress: a progress bar on stderr (tty only).
    threads: numba threads for the kernels during the run (restored after). Default: 1
    for models under ``SMALL_MODEL`` parameters — on arrays this small a parallel launch
    costs more than the work, and on a loaded 2-core machine it was measured 8-30x slower
    (5-20 ms vs 0.65 ms a step) — else numba's current setting. Results do not depend on
    the thread count: the statistics are summed per fixed block, in block order.
    """
    from stepsim import criteria as crit
    from stepsim._progress import Progress
    from stepsim.recipes import Recipe, make_recipe
    from stepsim.sparsity import check_specs, with_nm
    from stepsim.recipes.transforms import SGDM

    steps = check_int("steps", steps, minimum=1)
    if isinstance(recipe, str):
        recipe = make_recipe(recipe)
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe or a recipe name, got {type(recipe).__name__}")
    if criterion is not None and isinstance(recipe.optimizer, SGDM):
        raise ValueError(f"criterion {criterion!r} watches Adam's second moment; recipe "
                         f"{recipe.name!r} uses momentum SGD, which has none")
    if isinstance(criterion, str):
        criterion = crit.make_criterion(criterion, adam=recipe.optimizer)
    if criterion is not None:
        crit.check_matches_adam(criterion, recipe.optimizer)
    if recipe.needs_criterion and criterion is None:
        raise ValueError(f"recipe {recipe.name!r} needs a switch criterion (criterion=..., e.g. "
                         f"make_criterion('fixed-fraction', fraction=0.2)) or switch_at=...")
    seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
    init_rng, batch_rng = np.random.default_rng(rng).spawn(2)

    specs = dict(problem.specs)
    if nm is not None:
        specs = with_nm(specs, *check_nm(*nm))
    params = problem.init_params(init_rng)
    check_specs(params, specs)
    evaluate = getattr(problem, "evaluate", None)
    initial_metrics = dict(evaluate(params)) if evaluate else {}

    stats_on = criterion.stats_on if criterion is not None else "v"
    log = bool(log_stats) or bool(criterion is not None and criterion.needs_log)
    state = recipe.init(params, specs, steps, stats_on=stats_on, log_stats=log)
    layer_names = [name for name, spec in specs.items() if spec.sparse]
    trace = Trace.empty(steps, layer_names)

    two_phase = recipe.sparse and recipe.dense_phase
    switch_step = None
    if recipe.sparse and not recipe.dense_phase:  # STE, SR-STE: sparse from the first step
        params, state = recipe.switch(state, params, 0)
    # a two-phase recipe's own schedule (ASP's prune_at, ...) applies when no criterion is given
    k0_static = recipe.static_switch_step(steps) if two_phase and criterion is None else None
    if k0_static == 0:
        params, state = recipe.switch(state, params, 0)
        switch_step = 0
    cstate = criterion.init(steps) if criterion is not None else None
    watching = criterion is not None

    if threads is not None:
        threads = check_int("threads", threads, minimum=1)
    elif sum(w.size for w in params.values()) < SMALL_MODEL:
        threads = 1
    with _numba_threads(threads), \
            Progress(steps, f"fit {recipe.name}", force=None if progress else False) as bar:
        for k in range(1, steps + 1):
            batch = problem.sample_batch(batch_rng)
            fwd, state = recipe.forward(state, params, k)
            loss, grads = problem.loss_and_grad(fwd, batch)
            params, state, stats = recipe.update(state, params, grads, k)
            _record(trace, k - 1, loss, stats, state, layer_names,
                    recipe.optimizer.lr_at(k, steps))
            fired = False
            if watching:
                cstate, fired = criterion.update(cstate, k, stats)
                if fired:
                    watching = False
            elif k0_static is not None and k == k0_static:
                fired = True
            if fired:
                switch_step = k
                if two_phase:
                    params, state = recipe.switch(state, params, k)
            bar.update(1)

    weights = recipe.inference_weights(state, params)
    metrics = dict(evaluate(weights)) if evaluate else {}
    nm_final = dict(recipe.final_nm(state, params))  # the N:M of Pi_T, as applied above
    return FitResult(weights=weights, dense_weights=params, trace=trace,
                     switch_step=switch_step, metrics=metrics, initial_metrics=initial_metrics,
                     nm=nm_final, recipe=recipe,
                     criterion=None if criterion is None else repr(criterion),
                     steps=steps, seed=seed, problem=repr(problem))


@contextlib.contextmanager
def _numba_threads(threads: int | None):
    """Run the block with numba using ``threads`` threads (None: leave it alone)."""
    if threads is None:
        yield
        return
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _record(trace: Trace, i: int, loss, stats, state, layer_names, lr) -> None:
    trace.loss[i] = loss
    trace.lr[i] = lr
    trace.phase[i] = state.phase
    trace.flips[i] = state.flips
    for j, name in enumerate(layer_names):
        trace.n[i, j], trace.m[i, j] = state.nm_now[name]
    if stats is not None:
        trace.v_l1[i] = stats.v_l1
        trace.v_l2[i] = stats.v_l2
        trace.dv_l1[i] = stats.dv_l1
        trace.dv_zeros[i] = stats.dv_zeros
        trace.z[i] = stats.dv_l1 / stats.size
        nonzero = stats.size - stats.dv_zeros
        if nonzero > 0 and np.isfinite(stats.dv_log_sum):
            trace.z_geo[i] = np.exp(stats.dv_log_sum / nonzero)
