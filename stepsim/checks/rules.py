"""The registered rules as frozen, typed records, parsed and validated once.

``paper_checks/PROTOCOL.md`` states each draft's numbers as a JSON block
(:mod:`stepsim.checks.protocol` keeps them as the dicts the document states, and their
SHA-256). :meth:`Rules.parse` turns the current draft's dict into a :class:`Rules`: every
block an attribute (``rules.seeds.quick``, ``rules.problems["digits"].margin``,
``rules.operating_points.tie.se``), lists as tuples, objects as read-only dicts; a missing
or unknown key, a value of the wrong type or an inconsistent rule (a quick problem that is
not a problem, a tuning seed that is also an evaluation seed, ...) is a one-line error at
import, never a KeyError in the middle of a check. :meth:`Rules.to_dict` gives back
exactly the registered dict, so :attr:`Rules.digest` is the digest a report records.
:class:`SuccessorRules` is the same for the successors comparison (PROTOCOL.md section
"S1"), which has its own block and digest.

Importing this module imports neither NumPy nor numba.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import types
import typing
from collections.abc import Mapping
from typing import Any


def canonical(obj) -> str:
    """The canonical JSON of ``obj`` (sorted keys, no spaces): what a digest is taken of."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def digest(obj) -> str:
    """SHA-256 (hex) of the canonical JSON of a rules dict or a :class:`Record`."""
    if isinstance(obj, Record):
        obj = obj.to_dict()
    return hashlib.sha256(canonical(obj).encode()).hexdigest()


class Frozen(dict):
    """A read-only dict (a JSON object of the rules); serialises as a dict."""

    def _read_only(self, *args, **kwargs):
        raise TypeError("the registered rules are read-only; make new rules instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self):  # pickled as its items (dict's default would set them one by one)
        return (Frozen, (dict(self),))


def _parse(kind, value, where: str):
    """``value`` (from JSON) checked against type ``kind`` and frozen."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind.parse(value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list, got {value!r:.60}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_parse(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ValueError(f"{where} must hold {len(args)} values, got {value!r:.60}")
        return tuple(_parse(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is Mapping:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where} must be an object, got {value!r:.60}")
        return Frozen({str(k): _parse(args[1], v, f"{where}.{k}") for k, v in value.items()})
    if kind is Any:
        return _freeze(value)
    if origin in (typing.Union, types.UnionType):  # X | None: a later draft's optional key
        inner = [a for a in typing.get_args(kind) if a is not type(None)]
        return None if value is None else _parse(inner[0], value, where)
    if kind is float:  # an int stays an int: the digest is of the numbers as registered
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where} must be a number, got {value!r:.60}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{where} must be true or false, got {value!r:.60}")
        return value
    if kind in (int, str):
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TypeError(f"{where} must be {'an integer' if kind is int else 'a string'}, "
                            f"got {value!r:.60}")
        return value
    raise TypeError(f"{where}: no parser for {kind!r}")  # a new field type: add it above


def _freeze(value):
    if isinstance(value, Mapping):
        return Frozen({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _plain(value):
    """The JSON form of a parsed value (tuples as lists, records and dicts as dicts)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Record:
    """A JSON object of the rules with a fixed set of keys, one field each."""

    @classmethod
    def parse(cls, data, where: str | None = None):
        """``cls`` from ``data`` (a dict with exactly its fields' keys), checked."""
        where = where or cls.__name__
        if not isinstance(data, Mapping):
            raise TypeError(f"{where} must be an object, got {data!r:.60}")
        fields = dataclasses.fields(cls)
        names = [f.name for f in fields]
        optional = {f.name for f in fields if f.default is None}  # later drafts' keys
        missing = [n for n in names if n not in data and n not in optional]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(f"{where}: " + "; ".join(
                part for part in (f"missing key(s) {missing}" if missing else "",
                                  f"unknown key(s) {unknown}" if unknown else "") if part))
        hints = typing.get_type_hints(cls)
        return cls(**{n: _parse(hints[n], data[n], f"{where}.{n}") for n in names
                      if n in data})

    def to_dict(self) -> dict:
        """The rules as registered (JSON types: lists, dicts); a key a later draft added
        (a field defaulting to None) is left out when this draft does not state it, so an
        earlier draft's dict and digest come back exactly."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.default is None and getattr(self, f.name) is None)}

    def with_value(self, path: str, value):
        """These rules with the value at ``path`` ("grids.digits.adam") replaced, parsed and
        validated as registered rules are (other rules, e.g. for a test of the machinery;
        their digest is not the registered one)."""
        data = self.to_dict()
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if last not in node:
            raise KeyError(f"no rule {path!r}")
        node[last] = value
        return type(self).parse(data)


# ----------------------------------------------------------------------- one draft's rules
@dataclasses.dataclass(frozen=True)
class Problem(Record):
    """A problem of the protocol: its registry name and fixed options, its N:M ratios, the
    units of its error and the margin (the smallest effect that counts), its timescales
    (the first is its main one)."""

    registry: str
    options: Mapping[str, Any]
    nms: tuple[tuple[int, int], ...]
    units: str
    margin: float
    timescales: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Seeds(Record):
    tuning: tuple[int, ...]
    full: tuple[int, ...]
    quick: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Timescale(Record):
    beta2: float
    steps: int


@dataclasses.dataclass(frozen=True)
class Agreement(Record):
    """The claim checked again at a second timescale (its N:M only, full mode)."""

    claim: str
    problem: str
    nm: tuple[int, int]
    timescales: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Quick(Record):
    """Quick mode: its problems and timescale; draft 5 also each problem's run length,
    claims and N:M (``claims[problem]``, ``nms[problem]``; a problem not named: all)."""

    problems: tuple[str, ...]
    timescale: str
    steps: Mapping[str, int] | None = None
    claims: Mapping[str, tuple[str, ...]] | None = None
    nms: Mapping[str, tuple[tuple[int, int], ...]] | None = None
    own_claims: tuple[str, ...] | None = None  # the claims read at STEP's own (None: all)


@dataclasses.dataclass(frozen=True)
class Layerwise(Record):
    ms: tuple[int, ...]
    target: float


@dataclasses.dataclass(frozen=True)
class Landing(Record):
    """C7's landing: the interval of switch fractions, the rate of fired switches."""

    interval: tuple[float, float]
    fired_rate: float
    loss_scales: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Tie(Record):
    """A tie set's rule: mean(d) <= se x SE(d); the readings re-decided at tied lrs (draft
    4's operating points); the kind of SE (draft 5: the seeds x items SE on validation)."""

    se: float
    readings: Mapping[str, tuple[str, ...]] | None = None
    se_kind: str | None = None


@dataclasses.dataclass(frozen=True)
class SwitchFractions(Record):
    fractions: tuple[float, ...]
    readings: Mapping[str, tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class Schedule(Record):
    schedule: str
    warmup_fraction: float
    problems: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class OperatingPoints(Record):
    """PROTOCOL.md "Draft 4": the in-place claims' operating points."""

    claims: tuple[str, ...]
    step_lr: Mapping[str, tuple[str, ...]]
    tie: Tie
    switch_fractions: SwitchFractions
    schedules: Mapping[str, Schedule]


@dataclasses.dataclass(frozen=True)
class Plateau(Record):
    window: int
    max_ratio: float
    claims: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Stability(Record):
    level: float


@dataclasses.dataclass(frozen=True)
class VStar(Record):
    c4_eq10: tuple[str, ...]
    c4_eq10_decides: str


@dataclasses.dataclass(frozen=True)
class Diagnostics(Record):
    after_switch: tuple[int, ...]
    quantiles: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Extended(Record):
    """What only ``--extended`` runs (PROTOCOL.md "Budget and the extended set"): STEP-A1
    and STEP-SR readings per problem, the problems of the schedule readings, the stability
    map's extra tuning seeds; draft 5: the agreement check, whole ``problems`` (every claim
    on them), whole ``claims`` (on every problem) and the secondary readings of
    ``secondary_problems``."""

    readings: Mapping[str, tuple[str, ...]]
    schedule_problems: tuple[str, ...]
    stability_seeds: tuple[int, ...]
    agreement: Agreement | None = None  # draft 5: the agreement check moved here
    problems: tuple[str, ...] | None = None  # None: ()
    secondary_problems: tuple[str, ...] | None = None
    claims: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Blowup(Record):
    """A run diverged when the mean batch loss of ``window`` steps exceeds ``multiple``
    times its initial loss (``fit``'s blow-up stop)."""

    window: int
    multiple: float


@dataclasses.dataclass(frozen=True)
class Divergence(Record):
    """Divergence as an outcome: the finite pairs an error effect needs, the test of the
    two sides' divergence; draft 5: the blow-up rule and the extension seeds of a claim
    decidable only by divergence."""

    min_finite_pairs: int
    test: str
    blowup: Blowup | None = None
    extension_seeds: tuple[int, ...] | None = None


# ----------------------------------------------------------------------- draft 5's blocks
@dataclasses.dataclass(frozen=True)
class Halving(Record):
    """Successive halving of a config's lr grid (PROTOCOL.md, D5.2's amendment): only for
    ``recipes``; every lr to the first rung (a fraction of T), ``keep_after_first`` of the
    grid (a share's name: "third", rounded up) on to the next, ``finalists`` to T; each
    regulariser value's grid on its own; a promoted run starts again from scratch."""

    rule: str
    recipes: tuple[str, ...]
    rungs: tuple[float, ...]
    keep_after_first: str
    finalists: int
    per_regulariser_value: bool
    from_scratch: bool

    def __post_init__(self):
        if list(self.rungs) != sorted(set(self.rungs)) or not all(0 < r < 1 for r in self.rungs):
            raise ValueError(f"halving.rungs must rise strictly within (0, 1), got {self.rungs}")
        if self.keep_after_first not in HALVING_SHARES:
            raise ValueError(f"halving.keep_after_first must be one of {sorted(HALVING_SHARES)}, "
                             f"got {self.keep_after_first!r}")
        if self.finalists < 1:
            raise ValueError(f"halving.finalists must be >= 1, got {self.finalists}")

    def kept(self, grid_size: int) -> int:
        """How many of a grid of ``grid_size`` lrs go on past the first rung (rounded up,
        at least the finalists, at most the grid)."""
        share = HALVING_SHARES[self.keep_after_first]
        return min(grid_size, max(self.finalists, -(-grid_size * share[0] // share[1])))


#: a share's name -> (numerator, denominator)
HALVING_SHARES = {"third": (1, 3), "half": (1, 2)}


@dataclasses.dataclass(frozen=True)
class Tuning(Record):
    """How a config's candidate is chosen: the grid-edge rule; successive halving (None:
    every candidate runs to T)."""

    edge: Mapping[str, Any]
    halving: Halving | None


@dataclasses.dataclass(frozen=True)
class Readings(Record):
    """Draft 5's readings: the primary ones (lr readings x readings of STEP), the claims
    they apply to, the secondary ones (name -> where), and when a reading is labelled
    "STEP diverges here" (more than this share of STEP's runs diverged)."""

    primary: Mapping[str, tuple[str, ...]]
    step_claims: tuple[str, ...]
    secondary: Mapping[str, Any]
    diverging: Mapping[str, float]


@dataclasses.dataclass(frozen=True)
class Premise(Record):
    """Where a premise is gated ("margin") and each claim's harm quantity."""

    at: str
    harm: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Bootstrap(Record):
    resamples: int
    seed: int


@dataclasses.dataclass(frozen=True)
class Intervals(Record):
    """The primary interval, the paired bootstrap beside it, and when a part is decided."""

    primary: str
    bootstrap: Bootstrap
    decide: str


@dataclasses.dataclass(frozen=True)
class Bimodal(Record):
    """Bimodal seeds (PROTOCOL.md D5.8's amendment): a finite run is **far** when its error
    is more than ``far_margins`` problem margins from the median error of its run group's
    finite runs (the runs of one configuration at every seed); a claim on a problem with a
    far run gets the extension seeds (``extend``), and a part of it reads NOT REPRODUCED
    only as ``not_reproduced`` says ("after the extension, where the part's values show
    both modes": decided on the extension seeds, and at least ``part_far_values`` of the
    part's own paired values more than ``far_margins`` of its margins from their
    median)."""

    far_margins: float
    extend: bool
    not_reproduced: str
    part_far_values: int

    def __post_init__(self):
        if not self.far_margins > 0:
            raise ValueError(f"bimodal.far_margins must be > 0, got {self.far_margins!r}")
        if isinstance(self.part_far_values, bool) or self.part_far_values < 1:
            raise ValueError(f"bimodal.part_far_values must be an integer >= 1, got "
                             f"{self.part_far_values!r}")
        if self.not_reproduced not in BIMODAL_NOT_REPRODUCED:
            raise ValueError(f"bimodal.not_reproduced must be one of "
                             f"{list(BIMODAL_NOT_REPRODUCED)}, got {self.not_reproduced!r}")


#: when a claim with a far run may read NOT REPRODUCED
BIMODAL_NOT_REPRODUCED = ("after the extension, where the part's values show both modes",)


@dataclasses.dataclass(frozen=True)
class FreezeScope(Record):
    registered: str
    options: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Budget(Record):
    """Wall-time budgets on ``cores`` cores, in minutes."""

    full_minutes: float
    quick_minutes: float
    cores: int


READINGS = ("A1", "SR")  # the two readings of STEP (PROTOCOL.md section 5)
MODES = ("quick", "full")


@dataclasses.dataclass(frozen=True)
class Rules(Record):
    """Every number one draft of the protocol fixes (PROTOCOL.md, its RULES blocks).

    claims: problem -> the claims decided on it ("none": the claims that train nothing).
    grids: problem -> optimizer -> the learning rates tuned over. The other fields are
    named as in PROTOCOL.md's sections."""

    version: int
    problems: Mapping[str, Problem]
    seeds: Seeds
    grids: Mapping[str, Mapping[str, tuple[float, ...]]]
    momentum: float
    srste_lam: float
    timescales: Mapping[str, Timescale]
    clip: tuple[float, float]
    eval_points: int
    alpha: float
    claims: Mapping[str, tuple[str, ...]]
    agreement: Agreement
    quick: Quick
    layerwise: Layerwise
    c4_loss_scales: tuple[float, ...]
    c7_fractions: tuple[float, ...]
    c7_landing: Landing
    c8_switch_windows: tuple[float, ...]
    c3_margin_decades: float
    operating_points: OperatingPoints
    plateau: Plateau
    stability: Stability
    v_star: VStar
    diagnostics: Diagnostics
    extended: Extended
    divergence: Divergence
    # draft 5 (PROTOCOL.md "Draft 5"): None in earlier drafts
    splits: Mapping[str, str] | None = None
    regularisers: Mapping[str, Mapping[str, tuple[float, ...]]] | None = None
    tuning: Tuning | None = None
    readings: Readings | None = None
    premise: Premise | None = None
    claim_rules: Mapping[str, Any] | None = None
    error_control: Mapping[str, str] | None = None
    intervals: Intervals | None = None
    tie: Tie | None = None
    freeze_scope: FreezeScope | None = None
    s1: Mapping[str, Any] | None = None
    budget: Budget | None = None
    bimodal: Bimodal | None = None  # D5.8's amendment: bimodal seeds

    def __post_init__(self):
        _check_rules(self)

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the registered dict (what a report records)."""
        return digest(self)

    def problem(self, name: str) -> Problem:
        """The rules of problem ``name``; ValueError naming the problems otherwise."""
        if name not in self.problems:
            raise ValueError(f"problem must be one of {list(self.problems)}, got {name!r}")
        return self.problems[name]

    def grid(self, problem: str, optimizer: str) -> list[float]:
        return list(self.grids[problem][optimizer])

    def claims_on(self, problem: str) -> tuple[str, ...]:
        """The claims decided on ``problem`` ("none": the claims that train nothing)."""
        return self.claims.get(problem, ())

    def settings(self, mode: str, problems=None,
                 extended: bool = False) -> list[tuple[str, str, tuple | None]]:
        """The (problem, timescale, only_claims) settings a check of ``mode`` runs, in
        report order: every problem at its main timescale, and the agreement claim at the
        fast timescale on digits in full mode unless the agreement check belongs to the
        extended set (``extended.agreement``: draft 5); quick mode runs its problems at its
        timescale. A problem of the extended set (``extended.problems``) runs in full mode
        only with ``extended``; naming it without is a ValueError (it would run nothing)."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
        chosen = list(self.problems) if problems is None else list(problems)
        for p in chosen:
            self.problem(p)
        quick = self.quick.problems
        if mode == "quick":
            if problems is not None and not set(chosen) <= set(quick):
                # refused, not ignored: a quick check of these would run nothing of them
                raise ValueError(f"problem {min(set(chosen) - set(quick))!r} is not "
                                 f"in quick mode, which runs only {list(quick)}; check it "
                                 f"in full mode")
            return [(p, self.quick.timescale, None) for p in quick if p in chosen]
        aside = () if extended else self.extended.problems or ()
        if problems is not None and set(chosen) & set(aside):
            raise ValueError(f"problem {min(set(chosen) & set(aside))!r} belongs to the "
                             "extended set of the protocol (PROTOCOL.md \"Budget, quick mode, "
                             "the extended set\"): check it with --extended")
        out = []
        for p in (p for p in chosen if p not in aside):
            out.append((p, self.problems[p].timescales[0], None))
            if p == self.agreement.problem and self.extended.agreement is None:
                out.append((p, "fast", (self.agreement.claim,)))  # (draft 5: --extended)
        return out


def _check_rules(r: Rules) -> None:
    """The rules' consistency: each name one block uses is defined by another."""
    problems, timescales = set(r.problems), set(r.timescales)

    def need(ok: bool, text: str) -> None:
        if not ok:
            raise ValueError(f"rules (draft {r.version}): {text}")

    for name, p in r.problems.items():
        need(set(p.timescales) <= timescales and p.timescales,
             f"problem {name!r}: timescales {list(p.timescales)} not in {sorted(timescales)}")
        need(all(1 <= n <= m for n, m in p.nms), f"problem {name!r}: N:M needs 1 <= N <= M")
        need(p.margin >= 0, f"problem {name!r}: margin must be >= 0")
    need(set(r.grids) == problems, f"grids for {sorted(r.grids)}, problems {sorted(problems)}")
    for name, grids in r.grids.items():
        for opt, lrs in grids.items():
            need(lrs and lrs[0] > 0 and all(a < b for a, b in itertools.pairwise(lrs)),
                 f"grid {name}/{opt} must be positive and increasing")
    need(set(r.claims) <= problems | {"none"}, f"claims on unknown problems {sorted(r.claims)}")
    need(not set(r.seeds.tuning) & (set(r.seeds.full) | set(r.seeds.quick))
         and not set(r.extended.stability_seeds) & (set(r.seeds.full) | set(r.seeds.quick)),
         "a tuning seed is also an evaluation seed")
    # the agreement check runs on the problem's own timescales, or (draft 5) in the
    # extended set, at any timescale of the protocol
    agreement = r.extended.agreement or r.agreement
    allowed = (r.problems[agreement.problem].timescales if r.extended.agreement is None
               else tuple(r.timescales)) if agreement.problem in problems else ()
    need(agreement.problem in problems and agreement.claim in r.claims_on(agreement.problem)
         and set(agreement.timescales) <= set(allowed),
         "the agreement claim, problem and timescales must be the problem's")
    need(set(r.quick.problems) <= problems and r.quick.timescale in timescales,
         "quick mode's problems and timescale must be the protocol's")
    aside = set(r.extended.problems or ())
    need(aside | set(r.extended.secondary_problems or ()) <= problems and aside < problems,
         "extended.problems and extended.secondary_problems must be problems of the "
         "protocol, and some problem must stay in the full run")
    lo, hi = r.clip
    need(0 < lo < hi <= 1, f"clip must be 0 < lo < hi <= 1, got {list(r.clip)}")
    need(0 < r.alpha < 0.5 and 0 < r.stability.level < 1, "alpha in (0, 0.5), level in (0, 1)")
    need(0 < r.plateau.max_ratio <= 1, "plateau.max_ratio must be in (0, 1]")
    op = r.operating_points
    every = {c for cs in r.claims.values() for c in cs}
    need(set(op.claims) <= every and set(r.plateau.claims) <= every,
         "operating_points.claims and plateau.claims must be claims of the protocol")
    for block, readings in (("tie", op.tie.readings),
                            ("switch_fractions", op.switch_fractions.readings),
                            ("extended", r.extended.readings)):
        need(set(readings) <= problems and all(set(v) <= set(READINGS)
                                               for v in readings.values()),
             f"{block}.readings: problems {sorted(problems)}, readings {list(READINGS)}")
    for name, s in op.schedules.items():
        need(set(s.problems) <= problems and 0 <= s.warmup_fraction < 1,
             f"schedule {name!r}: problems and warm-up fraction")
    need(r.v_star.c4_eq10_decides in r.v_star.c4_eq10, "v_star.c4_eq10_decides")
    need(r.divergence.min_finite_pairs >= 2, "divergence.min_finite_pairs must be >= 2")
    need(r.bimodal is None or not r.bimodal.extend or r.divergence.extension_seeds,
         "bimodal.extend needs divergence.extension_seeds")


# ----------------------------------------------------------------------- section S1
@dataclasses.dataclass(frozen=True)
class SuccessorSetting(Record):
    timescale: str
    nms: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class SuccessorQuick(Record):
    problem: str
    timescale: str
    nms: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class StepReading(Record):
    readings: tuple[str, ...]
    lr: str


@dataclasses.dataclass(frozen=True)
class SuccessorRules(Record):
    """The successors comparison S1 (PROTOCOL.md section "S1"): where it runs, the
    reference and baseline recipes, STEP's readings and lr, the recipes new to S1
    (key -> (registry recipe, options)), which of them train a dense model, which are the
    successors the verdict is about, the margin and the flip-rate tail."""

    id: str
    settings: Mapping[str, SuccessorSetting]
    quick: SuccessorQuick
    reference: str
    baseline: str
    step: StepReading
    recipes: Mapping[str, tuple[str, Mapping[str, Any]]]
    dense_result: tuple[str, ...]
    successors: tuple[str, ...]
    margin: float
    flip_tail: float

    def __post_init__(self):
        if not (set(self.successors) | set(self.dense_result)) <= set(self.recipes):
            raise ValueError(f"rules {self.id}: successors and dense_result must be recipes "
                             f"of the comparison")
        if not set(self.step.readings) <= set(READINGS) or self.step.lr not in ("own",
                                                                               "sr-ste"):
            raise ValueError(f"rules {self.id}: step readings {list(READINGS)}, lr 'own' or "
                             f"'sr-ste'")

    @functools.cached_property
    def digest(self) -> str:
        return digest(self)


__all__ = ["Frozen", "Problem", "Record", "Rules", "SuccessorRules", "canonical", "digest"]
