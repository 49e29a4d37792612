"""The one place where sweeps meet the training API (problems, recipes, criteria, fit).

Everything else in :mod:`stepsim.experiments` sees runs as JSON parameters; only this
module turns them into objects and calls ``fit``. When the problem/recipe/fit API changes,
this is the file to adjust.

Today's API: ``make_problem(name, **options)``, ``make_recipe(name, optimizer=..., **options)``,
``make_criterion(name, adam=recipe.optimizer, **options)`` (wrapped in ``SwitchWhen`` for
per-module switching), and ``fit(problem, recipe, steps, rng=..., criterion=..., nm=(n, m),
progress=False, threads=1, eval_every=...)``.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from stepsim.experiments.spec import canonical_json


def build_problem(entry: dict):
    """The problem of a run's ``params["problem"]`` ({"name", "options"})."""
    return _cached_problem(canonical_json(entry))


@functools.lru_cache(maxsize=4)
def _cached_problem(key: str):
    # a process builds each problem once (data sets are read/generated once per worker);
    # problems are immutable: fit draws batches from its own generator
    import json

    from stepsim.problems import make_problem

    entry = json.loads(key)
    return make_problem(entry["name"], **_tuples(entry["options"]))


def build_recipe(entry: dict):
    """The recipe of ``params["recipe"]`` ({"name", "optimizer", "options"})."""
    from stepsim.recipes import make_recipe

    return make_recipe(entry["name"], optimizer=entry["optimizer"], **_tuples(entry["options"]))


def build_criterion(entry: dict | None, recipe=None):
    """The criterion of ``params["criterion"]`` ({"name", "options"} or None) for ``recipe``.

    The option ``per_module = true`` runs the criterion on each parameter's own v
    (``SwitchWhen(criterion, per_module=True)``: every module switches on its own).
    recipe None: build it on its own (names and options are checked; the options tied to
    Adam keep the criterion's defaults).
    """
    if entry is None:
        return None
    from stepsim.criteria import make_criterion
    from stepsim.recipes.switch import SwitchWhen
    from stepsim.recipes.transforms import SGDM

    if recipe is not None and isinstance(recipe.optimizer, SGDM):
        raise ValueError(f"criterion {entry['name']!r} watches Adam's second moment; recipe "
                         f"{recipe.name!r} uses momentum SGD, which has none")
    options = _tuples(entry["options"])
    per_module = options.pop("per_module", False)
    adam = None if recipe is None else recipe.optimizer
    criterion = make_criterion(entry["name"], adam=adam, **options)
    return SwitchWhen(criterion, per_module=per_module) if per_module else criterion


def needs_criterion(entry: dict, options: dict) -> bool:
    """Whether recipe ``entry`` with ``options`` has a dense phase with no fixed end (STEP)."""
    return bool(build_recipe(dict(entry, options=options)).needs_criterion)


def check_run(params: dict) -> None:
    """Build everything a run needs without training: raises what ``fit`` would raise.

    Checks the names and options of the problem, recipe and criterion (their ``make_*``),
    that a recipe needing a criterion has one, and that the run's N:M tiles every sparse
    parameter of the problem (``check_specs`` on ``with_nm`` specs and the initial shapes).
    """
    from stepsim.sparsity import check_specs, with_nm

    problem = build_problem(params["problem"])
    recipe = build_recipe(params["recipe"])
    criterion = build_criterion(params["criterion"], recipe)
    if recipe.needs_criterion and criterion is None:
        raise ValueError(f"recipe {recipe.name!r} needs a switch criterion: give the recipe "
                         "'criteria' or the spec a default 'criterion' (e.g. autoswitch)")
    check_specs(_shapes(params["problem"]), with_nm(problem.specs, *params["nm"]))


def _shapes(problem_entry: dict) -> dict:
    """Arrays shaped like the problem's parameters (zeros of their shapes: no data kept)."""
    return {name: np.broadcast_to(np.float32(0), shape)
            for name, shape in _cached_shapes(canonical_json(problem_entry)).items()}


@functools.lru_cache(maxsize=16)
def _cached_shapes(key: str) -> dict:
    params = _cached_problem(key).init_params(np.random.default_rng(0))
    return {name: value.shape for name, value in params.items()}


def fit_run(params: dict, rng_seed: int):
    """Train one run; returns (FitResult, runtime in seconds of ``fit`` alone).

    Numba runs on one thread (``threads=1``); the caller limits BLAS threads. The run's
    generator is ``np.random.default_rng(rng_seed)`` inside ``fit``.
    """
    from stepsim.training import fit

    problem = build_problem(params["problem"])
    recipe = build_recipe(params["recipe"])
    criterion = build_criterion(params["criterion"], recipe)
    start = time.perf_counter()
    result = fit(problem, recipe, params["steps"], rng=rng_seed, criterion=criterion,
                 nm=tuple(params["nm"]), progress=False, threads=1,
                 eval_every=params.get("eval_every"))
    return result, time.perf_counter() - start


def final_sparsity(params: dict, result) -> float:
    """Fraction of the sparsified parameters' entries pruned by the run's final N:M."""
    from stepsim.sparsity import sparsity, with_nm

    problem = build_problem(params["problem"])
    specs = with_nm(problem.specs, *params["nm"])
    shapes = {name: w.shape for name, w in result.weights.items()}
    return float(sparsity(specs, shapes, {k: tuple(v) for k, v in result.nm.items()}))


def _tuples(options: dict) -> dict:
    """JSON lists back to tuples (N:M pairs, layer sizes): the types the constructors expect."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
