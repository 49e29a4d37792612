"""One training run, described once: :class:`RunSpec`, the door every front end goes through.

``stepsim train``, a sweep row (:mod:`stepsim.experiments.sweep_spec`) and a paper check's run
(:mod:`stepsim.checks`) are all a ``RunSpec``; names become objects and ``fit`` is called
only here (:meth:`RunSpec.build`, :meth:`RunSpec.run`)::

    spec = RunSpec(problem="digits", recipe="step", nm=(1, 4), steps=2000, seed=0,
                   recipe_options={"lr": 1e-3})
    spec.check()              # names, options, N:M against the layers: what fit would raise
    result = spec.run()       # a FitResult
    RunSpec.from_json(spec.to_json()) == spec and spec.digest   # same text, same digest

The defaults a run takes when a field is not given are stated here and nowhere else:

* the switch criterion of a recipe that needs one (STEP and its variants): AutoSwitch
  (Algorithm 2) with the paper's optional clipping to [0.1 T, 0.5 T] (``clip=True``), so
  that a default run always switches and leaves both phases a share of the run
  (:data:`DEFAULT_CRITERION`). An explicit ``criterion="autoswitch"`` is the unclipped one.
  Recipes that need no criterion get none (``criterion=None`` also says "none" for STEP
  when its ``switch_at`` is given);
* an optimizer's learning rate and other options: the optimizer's own defaults (Adam
  lr 1e-3, momentum SGD lr 1e-2, :mod:`stepsim.recipes.optimizers`); a RunSpec holds only
  the options given;
* N:M: the problem's own (every registered problem: 2:4). The run's N:M enters through
  one door, the ``nm`` field, which sets the problem's ``nm`` option (the problem's
  sparse parameters *and* anything it derives from its N:M, such as the NQM's oracle
  mask); giving ``nm`` among the problem's options is an error.

The seed is the one ``fit`` gets (``rng=seed``): two RunSpecs that are equal give the same
bits. A sweep derives it from the problem and the seed index (``spec.rng_seed``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json

from stepsim._ground.validate import NMRatio
from stepsim.recipes.switch import DEFAULT_CRITERION  # the one default (module docstring)

DEFAULT_STEPS = 2000
DEFAULT_OPTIMIZER = "adam"
#: "the default criterion": what ``RunSpec(criterion=...)`` is when not given
AUTO = "default"
FORMAT = "stepsim.RunSpec/1"


def canonical_json(obj) -> str:
    """Compact JSON with sorted keys: equal parameters give equal text on any machine."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


class _Table(tuple):
    """A table (dict) option value, frozen as sorted (key, value) pairs (e.g. a layer-wise
    allocation {parameter: N}); it is a dict again in JSON and for the constructors."""

    __slots__ = ()


def _frozen(value):
    """A JSON-like value with lists and tuples as tuples (hashable, equal after a round trip)."""
    if isinstance(value, dict):
        return _Table(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # NumPy scalars
        value = value.item()
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"an option value must be a number, string, boolean, None or a list, "
                        f"got {value!r} ({type(value).__name__})")
    return value


def _options(where: str, options) -> tuple:
    """dict or pairs -> sorted tuple of (key, frozen value) pairs."""
    if options is None:
        return ()
    items = options.items() if isinstance(options, dict) else options
    out = {}
    for key, value in items:
        if not isinstance(key, str) or not key:
            raise TypeError(f"{where}: option names must be strings, got {key!r}")
        try:
            out[key] = _frozen(value)
        except TypeError as exc:
            raise TypeError(f"{where} option {key!r}: {exc}") from None
    return tuple(sorted(out.items()))


def _json_value(value):
    if isinstance(value, _Table):
        return {k: _json_value(v) for k, v in value}
    return [_json_value(v) for v in value] if isinstance(value, tuple) else value


def _python_value(value):
    """An option value as the constructors take it: tuples stay tuples, tables are dicts."""
    if isinstance(value, _Table):
        return {k: _python_value(v) for k, v in value}
    return tuple(_python_value(v) for v in value) if isinstance(value, tuple) else value


def _kwargs(pairs) -> dict:
    return {k: _python_value(v) for k, v in pairs}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One seeded training run by names and options (module docstring).

    problem, problem_options: a registered problem (``stepsim.problems.PROBLEMS``) and its
    options (no ``nm``: see ``nm``). recipe, optimizer, recipe_options: a recipe
    (``stepsim.recipes.RECIPES``), "adam" | "adamw" | "sgdm", and the recipe's and the
    optimizer's options. criterion, criterion_options: a switch criterion
    (``stepsim.recipes.criteria.CRITERIA``) or None; not given: :data:`DEFAULT_CRITERION` for a
    recipe that needs one, else None. per_module: run the criterion on each parameter's
    own v. nm: (n, m) of every sparse parameter, or None (the problem's). steps: T.
    seed: ``fit``'s rng (int >= 0). eval_every: learning curves every K steps, or None.
    loss_scale: multiply the training loss by this (``problems.scaled.ScaledLoss``).
    blowup: ``fit``'s (window, multiple) blow-up stop, or None (not watched; a RunSpec
    without it has the digest it had before the field existed).

    Options are stored as sorted (key, value) pairs with lists as tuples; pass dicts.
    """

    problem: str = "regression"
    recipe: str = "dense"
    steps: int = DEFAULT_STEPS
    seed: int = 0
    problem_options: tuple = ()
    optimizer: str = DEFAULT_OPTIMIZER
    recipe_options: tuple = ()
    criterion: str | None = AUTO
    criterion_options: tuple = ()
    per_module: bool = False
    nm: NMRatio | None = None
    eval_every: int | None = None
    loss_scale: float = 1.0
    blowup: tuple | None = None

    def __post_init__(self):
        from stepsim._ground.validate import check_int, check_nm_pair, check_real

        for field in ("problem", "recipe", "optimizer"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"RunSpec {field} must be a name (a string), got "
                                f"{getattr(self, field)!r}")
        put = functools.partial(object.__setattr__, self)
        put("problem_options", _options("problem", self.problem_options))
        put("recipe_options", _options("recipe", self.recipe_options))
        put("criterion_options", _options("criterion", self.criterion_options))
        if any(k == "nm" for k, _ in self.problem_options):
            raise ValueError("the run's N:M is RunSpec(nm=(n, m)) (a sweep spec's nm, --nm), "
                             "not the problem option 'nm' (one door for N:M)")
        put("steps", check_int("steps", self.steps, minimum=1))
        put("seed", check_int("seed", self.seed, minimum=0))
        if self.nm is not None:  # the one check of the run's N:M: an NMRatio from here to fit
            put("nm", check_nm_pair("nm", self.nm))
        if self.eval_every is not None:
            put("eval_every", check_int("eval_every", self.eval_every, minimum=1))
        put("loss_scale", float(check_real("loss_scale", self.loss_scale, minimum=0.0,
                                           min_open=True)))
        if self.blowup is not None:
            from stepsim.training import check_blowup

            put("blowup", check_blowup(self.blowup))
        if not isinstance(self.per_module, bool):
            raise TypeError(f"per_module must be True or False, got {self.per_module!r}")
        if self.criterion == AUTO:  # options given: they adjust the default criterion
            if not self.build_recipe().needs_criterion:
                if self.criterion_options or self.per_module:
                    raise ValueError(f"criterion options {dict(self.criterion_options)} need "
                                     f"a criterion name: recipe {self.recipe!r} needs no "
                                     "criterion, so it gets no default one")
                put("criterion", None)
            else:
                put("criterion", DEFAULT_CRITERION[0])
                put("criterion_options", _options(
                    "criterion", dict(DEFAULT_CRITERION[1], **dict(self.criterion_options))))
        elif self.criterion is None:
            if self.criterion_options or self.per_module:
                raise ValueError("criterion options (or per_module) given with criterion=None")
        elif not isinstance(self.criterion, str):
            raise TypeError(f"criterion must be a name or None, got {self.criterion!r}")

    # ------------------------------------------------------------------ identity
    def to_dict(self) -> dict:
        """JSON-ready: ``{"format", "problem": {name, options}, "recipe": {name, optimizer,
        options}, "criterion": {name, options, per_module} | None, "nm", "steps", "seed",
        "eval_every", "loss_scale"}``."""
        def opts(pairs):
            return {k: _json_value(v) for k, v in pairs}

        criterion = None if self.criterion is None else {
            "name": self.criterion, "options": opts(self.criterion_options),
            "per_module": self.per_module}
        return {"format": FORMAT,
                "problem": {"name": self.problem, "options": opts(self.problem_options)},
                "recipe": {"name": self.recipe, "optimizer": self.optimizer,
                           "options": opts(self.recipe_options)},
                "criterion": criterion, "nm": None if self.nm is None else list(self.nm),
                "steps": self.steps, "seed": self.seed, "eval_every": self.eval_every,
                "loss_scale": self.loss_scale,
                # only when watched: every RunSpec made before the field keeps its digest
                **({} if self.blowup is None else {"blowup": list(self.blowup)})}

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        """The inverse of :meth:`to_dict` (``from_dict(s.to_dict()) == s``)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document: {str(data)[:80]!r}")
        known = {"format", "problem", "recipe", "criterion", "nm", "steps", "seed",
                 "eval_every", "loss_scale", "blowup"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"RunSpec: unknown key(s) {unknown}; known: {sorted(known)}")
        crit = data.get("criterion")
        return cls(problem=data["problem"]["name"], problem_options=data["problem"]["options"],
                   recipe=data["recipe"]["name"], optimizer=data["recipe"]["optimizer"],
                   recipe_options=data["recipe"]["options"],
                   criterion=None if crit is None else crit["name"],
                   criterion_options={} if crit is None else crit["options"],
                   per_module=False if crit is None else crit.get("per_module", False),
                   nm=data.get("nm"), steps=data["steps"], seed=data["seed"],
                   eval_every=data.get("eval_every"), loss_scale=data.get("loss_scale", 1.0),
                   blowup=None if data.get("blowup") is None else tuple(data["blowup"]))

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): the text the digest is taken over."""
        return canonical_json(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 (hex) of :meth:`to_json`: equal runs, equal digest, in any process
        (computed once per RunSpec: the fields are frozen)."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    def replace(self, **changes) -> RunSpec:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line: problem, recipe, criterion, N:M, steps and seed."""
        def show(pairs):
            return "" if not pairs else "(" + ", ".join(f"{k}={v}" for k, v in pairs) + ")"

        crit = "none" if self.criterion is None else self.criterion + show(
            self.criterion_options) + (" per module" if self.per_module else "")
        nm = "problem's" if self.nm is None else f"{self.nm[0]}:{self.nm[1]}"
        scale = "" if self.loss_scale == 1.0 else f", loss x{self.loss_scale:g}"
        stop = "" if self.blowup is None else (f", stopped if its loss blows up "
                                               f"({self.blowup[1]:g}x, window {self.blowup[0]})")
        return (f"{self.problem}{show(self.problem_options)}, {self.recipe}"
                f"{show((('optimizer', self.optimizer),) + self.recipe_options)}, "
                f"criterion {crit}, N:M {nm}, {self.steps} steps, seed {self.seed}{scale}{stop}")

    # ------------------------------------------------------------------ building
    def build_problem(self):
        """The problem, loss-scaled if asked: built once per process for equal names and
        options (keyed by the problem's name and the canonical JSON of its options as
        given, N:M and data seed among them; the 8 most recent are kept,
        :func:`problem_cache_info`). Sharing one is safe because ``fit`` never changes a
        problem (its batches come from ``fit``'s own generator; tests/experiments/test_workers.py
        checks every registered problem's state and that a run on a cached problem has the
        bits of a run on a fresh one)."""
        problem = _problem(self.problem, self.problem_options, self.nm)
        if self.loss_scale != 1.0:
            from stepsim.problems.scaled import ScaledLoss

            problem = ScaledLoss(problem, self.loss_scale)
        return problem

    def build_recipe(self):
        from stepsim.recipes import make_recipe

        return make_recipe(self.recipe, optimizer=self.optimizer, **_kwargs(self.recipe_options))

    def build_criterion(self, recipe=None):
        """The criterion (a ``SwitchWhen(..., per_module=True)`` when per_module) or None.

        Its options tied to Adam (beta2, eps) default to ``recipe``'s optimizer's.
        """
        if self.criterion is None:
            return None
        from stepsim.recipes.criteria import make_criterion

        optimizer = None if recipe is None else recipe.optimizer
        adam = optimizer if hasattr(optimizer, "beta2") else None
        criterion = make_criterion(self.criterion, adam=adam, **_kwargs(self.criterion_options))
        if self.per_module:
            from stepsim.recipes.switch import SwitchWhen

            return SwitchWhen(criterion, per_module=True)
        return criterion

    def build(self) -> Built:
        """(problem, recipe, criterion): the objects ``fit`` takes."""
        recipe = self.build_recipe()
        return Built(self.build_problem(), recipe, self.build_criterion(recipe))

    def check(self) -> None:
        """Build everything without training: raises what :meth:`run` (``fit``) would.

        Names and options of the problem, recipe and criterion; the recipe/criterion pair
        (``recipes.switch.plan_schedule``: a criterion watches Adam, a recipe that needs one has
        one); the N:M against every sparse parameter's shape.
        """
        import numpy as np

        from stepsim.core.sparsity import check_specs
        from stepsim.recipes.switch import plan_schedule

        problem, recipe, criterion = self.build()
        plan_schedule(recipe, criterion, self.steps)
        shapes = _shapes(self.problem, self.problem_options, self.nm)
        check_specs({k: np.broadcast_to(np.float32(0), s) for k, s in shapes.items()},
                    problem.specs)

    def run(self, *, progress: bool = False):
        """Train: ``fit(problem, recipe, steps, rng=seed, criterion=..., eval_every=...)``
        with one numba and one BLAS thread; returns the :class:`~stepsim.training.FitResult`."""
        from stepsim.training import fit

        problem, recipe, criterion = self.build()
        return fit(problem, recipe, self.steps, rng=self.seed, criterion=criterion,
                   progress=progress, threads=1, eval_every=self.eval_every,
                   blowup=self.blowup)


class Built(tuple):
    """(problem, recipe, criterion) of a :class:`RunSpec`."""

    __slots__ = ()

    def __new__(cls, problem, recipe, criterion):
        return super().__new__(cls, (problem, recipe, criterion))

    problem = property(lambda self: self[0])
    recipe = property(lambda self: self[1])
    criterion = property(lambda self: self[2])


@functools.lru_cache(maxsize=8)
def _problem(name: str, options: tuple, nm: NMRatio | None):
    """The problem ``name`` with ``options`` (RunSpec's frozen pairs, hashable: the cache
    key as they are) and the run's N:M, handed on as the checked :class:`NMRatio`."""
    from stepsim.problems import make_problem

    return make_problem(name, **_kwargs(options), **({} if nm is None else {"nm": nm}))


def problem_cache_info() -> dict:
    """This process's problem cache (:meth:`RunSpec.build_problem`): ``{"hits", "misses",
    "size", "maxsize"}``."""
    info = _problem.cache_info()
    return {"hits": info.hits, "misses": info.misses, "size": info.currsize,
            "maxsize": info.maxsize}


@functools.lru_cache(maxsize=16)
def _shapes(name: str, options: tuple, nm: NMRatio | None) -> dict:
    import numpy as np

    params = _problem(name, options, nm).init_params(np.random.default_rng(0))
    return {k: v.shape for k, v in params.items()}


def final_sparsity(spec: RunSpec, result) -> float:
    """Fraction of the sparsified parameters' entries pruned by ``result``'s final N:M."""
    from stepsim.core.sparsity import sparsity

    problem = spec.build_problem()
    shapes = {name: w.shape for name, w in result.weights.items()}
    return float(sparsity(problem.specs, shapes, {k: tuple(v) for k, v in result.nm.items()}))


__all__ = ["AUTO", "DEFAULT_CRITERION", "Built", "RunSpec", "canonical_json", "final_sparsity",
           "problem_cache_info"]
