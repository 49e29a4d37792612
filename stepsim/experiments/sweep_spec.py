"""A sweep spec: a grid of training runs, read from TOML/JSON, checked, expanded into runs.

A spec (a dict, or a TOML/JSON file holding one)::

    steps = 2000                 # int, or a list of ints (a grid axis)
    eval_every = 100             # optional: learning curves (fit's eval_every) in every run
    seeds = 5                    # seed indices 0..4, or an explicit list [0, 3, 7]
    nm = ["2:4", "1:8"]          # N:M of every sparse layer ("N:M" strings or [n, m] pairs)

    [problem]                    # or [[problems]]: several problem entries
    name = "regression"
    options = { scale = 0.1 }    # fixed options
    grid = { batch_size = [16, 64] }   # every combination of these values

    [criterion]                  # for recipes that need one (STEP) and name none; without
    name = "autoswitch"          # it: RunSpec's default (AutoSwitch clipped to [0.1T, 0.5T])

    [[recipes]]
    name = "dense"
    [[recipes]]
    name = "sr-ste"
    grid = { lam = [1e-4, 2e-4] }
    [[recipes]]
    name = "step"
    optimizer = "adam"           # adam (default) | adamw | sgdm
    criteria = ["autoswitch", { name = "fixed-fraction", options = { fraction = 0.2 } }]
    # a criterion option per_module = true switches each parameter on its own v

An entry is a name, or a table with ``name``, ``options`` and ``grid`` (recipes also take
``optimizer`` and ``criterion``/``criteria``; ``criterion = "none"`` keeps the default
criterion away from that recipe). The runs are the product problem x recipe x criterion x
N:M x steps x seed. Option values are plain numbers, strings, booleans or lists (lists
become tuples for the constructors, e.g. ``teacher_nm = [2, 4]``). Every run is a
:class:`~stepsim.experiments.run.RunSpec`, named by its digest.

Seeds. A run's generator is ``SeedSequence(rng_seed)`` with ``rng_seed`` a 64-bit hash of
the canonical JSON of the run's problem (name and options) and its seed index — never its
position in the grid. So adding a recipe or a seed to a sweep changes no other run, and
runs that differ only in recipe, criterion, N:M or steps share their initial weights and
their minibatch stream (common random numbers): a paired comparison on the same seed index
compares the recipes on the same draws.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from pathlib import Path

from stepsim._ground.validate import check_input_file, check_int, show
from stepsim.experiments.run import canonical_json

SPEC_KEYS = ("name", "steps", "seeds", "nm", "problem", "problems", "criterion", "recipes",
             "eval_every")
PROBLEM_KEYS = ("name", "options", "grid")
CRITERION_KEYS = ("name", "options", "grid")
RECIPE_KEYS = ("name", "optimizer", "options", "grid", "criterion", "criteria")


def _digest(obj) -> bytes:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).digest()


def rng_seed(problem: dict, seed: int) -> int:
    """The seed ``fit`` gets: 64 bits of SHA-256 over the problem entry (``{"name",
    "options"}``) and the seed index (module docstring)."""
    key = {"problem": problem, "seed": seed}
    return int.from_bytes(_digest(key)[:8], "little")


def as_run_spec(problem: dict, recipe: dict, criterion: dict | None, nm, steps: int,
                seed: int, eval_every: int | None = None):
    """One grid point as a :class:`~stepsim.experiments.run.RunSpec` (its seed: the hash
    :func:`rng_seed` of the problem and the seed index). A criterion option ``per_module``
    becomes ``RunSpec.per_module``; the sweep's N:M is the RunSpec's ``nm`` (a problem
    option ``nm`` is refused: one door)."""
    from stepsim.experiments.run import RunSpec

    crit_options = {} if criterion is None else dict(criterion["options"])
    per_module = crit_options.pop("per_module", False)
    return RunSpec(problem=problem["name"], problem_options=problem["options"],
                   recipe=recipe["name"], optimizer=recipe["optimizer"],
                   recipe_options=recipe["options"],
                   criterion=None if criterion is None else criterion["name"],
                   criterion_options=crit_options, per_module=per_module,
                   nm=nm if isinstance(nm, tuple) else tuple(nm), steps=steps,
                   seed=rng_seed(problem, seed),
                   eval_every=eval_every)


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A checked, normalised spec (see the module docstring); :meth:`runs` expands it.

    problems, recipes: tuples of normalised entries (dicts). criterion: the default
    criterion entry or None. nm: tuple of (n, m). steps, seeds: tuples of ints.
    """

    problems: tuple
    recipes: tuple
    criterion: dict | None
    nm: tuple
    steps: tuple
    seeds: tuple
    name: str | None = None
    eval_every: int | None = None

    def to_dict(self) -> dict:
        """The spec as JSON-ready data (``parse_spec(spec.to_dict()) == spec``)."""
        return {"name": self.name, "steps": list(self.steps), "seeds": list(self.seeds),
                "nm": [f"{n}:{m}" for n, m in self.nm], "problems": list(self.problems),
                "criterion": self.criterion, "recipes": [_recipe_out(r) for r in self.recipes],
                "eval_every": self.eval_every}

    def runs(self, needs_criterion) -> list:
        """Every run as a :class:`~stepsim.experiments.run.RunSpec`, in grid order
        (problem, recipe, criterion, N:M, steps, seed index).

        needs_criterion(recipe_entry, options) -> bool: whether that recipe needs a switch
        criterion; the spec's default ``criterion`` goes to those (and only those) whose
        entry names none. (:func:`stepsim.experiments.plan_sweep` passes RunSpec's.)
        """
        return [run for run, _ in self.grid(needs_criterion)]

    def grid(self, needs_criterion) -> list[tuple]:
        """(RunSpec, seed index) of every run, in the order of :meth:`runs`; the index is
        the table's ``seed`` column (the RunSpec's seed is its hash, :func:`rng_seed`)."""
        problems = [{"name": p["name"], "options": options}
                    for p in self.problems for options in entry_options(p)]
        default = self.criterion
        if default is None:  # the one default criterion
            from stepsim.recipes.switch import DEFAULT_CRITERION

            default = {"name": DEFAULT_CRITERION[0], "options": dict(DEFAULT_CRITERION[1]),
                       "grid": {}}
        recipes = [pair for r in self.recipes
                   for pair in _recipe_variants(r, default, needs_criterion)]
        return [(as_run_spec(problem, recipe, criterion, nm, steps, seed, self.eval_every), seed)
                for problem, (recipe, criterion), nm, steps, seed in itertools.product(
                    problems, recipes, self.nm, self.steps, self.seeds)]


def _recipe_variants(entry: dict, default: dict | None, needs_criterion) -> list[tuple]:
    """(recipe params, criterion params or None) for every option and criterion of an entry."""
    out = []
    for options in entry_options(entry):
        recipe = {"name": entry["name"], "optimizer": entry["optimizer"], "options": options}
        criteria = entry["criteria"]
        if not criteria:
            wants_default = entry["default_criterion"] and needs_criterion(entry, options)
            criteria = [default] if wants_default and default is not None else [None]
        for crit in criteria:
            if crit is None:
                out.append((recipe, None))
            else:
                out.extend((recipe, {"name": crit["name"], "options": c_opts})
                           for c_opts in entry_options(crit))
    return out


def entry_options(entry: dict) -> list[dict]:
    """The option dicts of a normalised entry: fixed options plus each combination of its grid."""
    grid = entry["grid"]
    keys = sorted(grid)
    return [dict(entry["options"], **dict(zip(keys, values)))
            for values in itertools.product(*(grid[k] for k in keys))]


# ------------------------------------------------------------------------ parsing
def load_spec(path) -> SweepSpec:
    """Read a spec from a ``.toml`` or ``.json`` file and :func:`parse_spec` it."""
    return parse_spec(read_spec_file(path))


def read_spec_file(path) -> dict:
    """The raw spec dict in a ``.toml`` or ``.json`` file (not yet checked)."""
    path = Path(path)
    if path.suffix.lower() not in (".toml", ".json"):
        raise ValueError(f"sweep spec {str(path)!r} must end in .toml or .json")
    check_input_file(path, "sweep spec")
    text = path.read_text()
    if path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
            try:
                import tomli as tomllib
            except ModuleNotFoundError:
                raise ValueError(f"sweep spec {str(path)!r}: reading TOML needs Python >= 3.11 "
                                 "(or the tomli package); write the spec as JSON") from None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"sweep spec {str(path)!r} is not valid TOML: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"sweep spec {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TypeError(f"sweep spec {str(path)!r} must hold a JSON object ({{\"recipes\": "
                         f"[...], ...}}), got {type(data).__name__} {show(data)}")
    return data


def parse_spec(data) -> SweepSpec:
    """Normalise a spec dict (module docstring) into a :class:`SweepSpec`.

    Checks the shape of the spec only (keys, types, non-empty axes); whether the names and
    options exist is checked by :func:`stepsim.experiments.validate_spec`. Errors are
    ValueError/TypeError naming the entry, e.g. ``recipes[2] ('sr-ste'): ...``.
    """
    if isinstance(data, SweepSpec):
        return data
    if not isinstance(data, dict):
        raise TypeError(f"a sweep spec must be a table/dict, got {type(data).__name__}")
    _check_keys("spec", data, SPEC_KEYS)
    if "problem" in data and "problems" in data:
        raise ValueError("spec: give 'problem' (one entry) or 'problems' (a list), not both")
    if "problem" in data:
        problems = [data["problem"]]
    else:
        problems = _list("problems", data.get("problems", ["regression"]))
    problems = tuple(_entry(f"problems[{i}]", p, PROBLEM_KEYS) for i, p in enumerate(problems))
    if "recipes" not in data:
        raise ValueError("spec: 'recipes' is missing (a list of recipe entries)")
    recipes = tuple(_recipe(f"recipes[{i}]", r)
                    for i, r in enumerate(_list("recipes", data["recipes"])))
    criterion = data.get("criterion")
    if criterion is not None:
        criterion = _entry("criterion", criterion, CRITERION_KEYS)
        if any(len(v) != 1 for v in criterion["grid"].values()):
            raise ValueError("criterion: the default criterion takes options, not a grid "
                             "(give a recipe several 'criteria' to sweep criteria)")
    nm = tuple(_nm(f"nm[{i}]", x) for i, x in enumerate(_list("nm", data.get("nm", ["2:4"]))))
    steps = data.get("steps", 2000)
    steps = tuple(check_int(f"steps[{i}]", s, minimum=1)
                  for i, s in enumerate(steps if isinstance(steps, list) else [steps]))
    if not steps:
        raise ValueError("spec: 'steps' is an empty list")
    seeds = data.get("seeds", 1)
    n_seeds = len(seeds) if isinstance(seeds, list) else check_int("seeds", seeds, minimum=1)
    _check_grid_fits(_variants(problems) * _variants(recipes) * len(nm) * len(steps) * n_seeds)
    seeds = _seeds(seeds)  # after the size check: a count of 10^9 is not made into a tuple
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"spec: 'name' must be a string, got {name!r}")
    eval_every = data.get("eval_every")
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every, minimum=1)
    return SweepSpec(problems=problems, recipes=recipes, criterion=criterion, nm=nm,
                     steps=steps, seeds=seeds, name=name, eval_every=eval_every)


def _check_keys(where: str, table: dict, allowed) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _list(where: str, value) -> list:
    if not isinstance(value, list):
        raise TypeError(f"spec: {where!r} must be a list, got {value!r}")
    if not value:
        raise ValueError(f"spec: {where!r} is an empty list: the grid would have no runs")
    return value


def _entry(where: str, entry, allowed) -> dict:
    """A name or {name, options, grid} -> {"name", "options", "grid"} (grid values lists)."""
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        raise TypeError(f"{where}: must be a name or a table with 'name', got {entry!r}")
    _check_keys(where, entry, allowed)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: needs a 'name' (a string), got {name!r}")
    where = f"{where} ({name!r})"
    options = entry.get("options", {})
    grid = entry.get("grid", {})
    for key, value in (("options", options), ("grid", grid)):
        if not isinstance(value, dict):
            raise TypeError(f"{where}: {key!r} must be a table of KEY = VALUE, got {value!r}")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{where}: grid {key!r} must be a non-empty list of values, "
                             f"got {values!r}")
    both = sorted(set(options) & set(grid))
    if both:
        raise ValueError(f"{where}: option(s) {both} given both in 'options' and in 'grid'")
    out = {"name": name, "options": _json_ready(where, options),
           "grid": _json_ready(where, {k: list(v) for k, v in grid.items()})}
    if "optimizer" in allowed:
        out["optimizer"] = entry.get("optimizer", "adam")
    return out


def _recipe(where: str, entry) -> dict:
    out = _entry(where, entry, RECIPE_KEYS)
    raw = entry if isinstance(entry, dict) else {}
    where = f"{where} ({out['name']!r})"
    if "criterion" in raw and "criteria" in raw:
        raise ValueError(f"{where}: give 'criterion' or 'criteria', not both")
    crits = raw.get("criteria", [raw["criterion"]] if "criterion" in raw else [])
    if not isinstance(crits, list) or ("criteria" in raw and not crits):
        raise ValueError(f"{where}: 'criteria' must be a non-empty list, got {crits!r}")
    # criterion = "none": explicitly no criterion (e.g. a dense run that should not observe one)
    none = crits == ["none"]
    out["criteria"] = [] if none else [_entry(f"{where} criteria[{i}]", c, CRITERION_KEYS)
                                       for i, c in enumerate(crits)]
    out["default_criterion"] = not none and not out["criteria"]
    return out


def _recipe_out(entry: dict) -> dict:
    """A normalised recipe entry in the spec's own form (inverse of :func:`_recipe`)."""
    out = {k: entry[k] for k in ("name", "optimizer", "options", "grid")}
    if entry["criteria"]:
        out["criteria"] = entry["criteria"]
    elif not entry["default_criterion"]:
        out["criterion"] = "none"
    return out


def _nm(where: str, value):
    """'N:M' or [N, M] -> :class:`~stepsim._ground.validate.NMRatio` (the runs' N:M, checked
    here once)."""
    from stepsim._ground.validate import NMRatio, check_nm_pair

    try:
        if isinstance(value, str):
            return NMRatio.parse(value, name=where)
        if isinstance(value, list):
            value = tuple(value)
        return check_nm_pair(where, value)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{where}: must be 'N:M' or [N, M] ({exc})") from None


#: bytes a planned run holds at least (its Run, params and RunSpec: ~1.2 KB measured with
#: tracemalloc over 2000 runs), before it runs or writes anything
PLAN_BYTES_PER_RUN = 1024


def _variants(entries) -> int:
    """How many option combinations the entries' grids give (criteria variants not counted:
    a lower bound of the runs they make)."""
    return sum(math.prod(len(v) for v in e["grid"].values()) for e in entries)


def _check_grid_fits(runs: int) -> None:
    """Refuse, before any run is planned, a grid whose plan alone cannot fit in memory
    (``seeds = 1000000000``)."""
    from stepsim._ground.validate import check_memory

    check_memory(f"spec: the grid's {runs:,} runs (at least {PLAN_BYTES_PER_RUN} B each to "
                 f"plan)", runs * PLAN_BYTES_PER_RUN)


def _seeds(value) -> tuple[int, ...]:
    if isinstance(value, list):
        if not value:
            raise ValueError("spec: 'seeds' is an empty list: the grid would have no runs")
        seeds = tuple(check_int(f"seeds[{i}]", s, minimum=0) for i, s in enumerate(value))
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"spec: 'seeds' has repeated seed indices: {list(seeds)}")
        return seeds
    count = check_int("seeds", value, minimum=1)
    return tuple(range(count))


def _json_ready(where: str, options: dict) -> dict:
    """``options`` as JSON values (tuples become lists), as they are hashed and stored.

    A NaN or infinite number is refused naming its option ("lr must be finite, got nan"):
    no option of a recipe, problem or criterion takes one, and JSON cannot hold it."""
    for key, value in options.items():
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{where}: {key} must be finite, got {v}")
    try:
        return json.loads(canonical_json(options))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: options must be plain numbers, strings, booleans and "
                         f"lists ({exc})") from None


__all__ = ["SweepSpec", "as_run_spec", "canonical_json", "entry_options", "load_spec", "parse_spec",
           "read_spec_file", "rng_seed"]
