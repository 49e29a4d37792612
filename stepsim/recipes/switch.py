"""Switch schedules: when each module leaves its dense phase — one object for every way.

A recipe states its own with a :class:`Schedule` (configuration: is there a dense phase,
what ends it without a criterion, was that the user's choice, does a criterion run per
module); ``fit`` turns it, or the criterion it is given, into one of the run-time
schedules below.

A run-time schedule answers, step by step, "which modules switch now?". Three kinds:

* :class:`SwitchAt` — a fixed step k0 (0: before the first step, i.e. no dense phase) or a
  fraction of the run (k0 = ceil(fraction * T)); every module at once.
* :class:`SwitchWhen` — a criterion (:mod:`stepsim.recipes.criteria`) watching Adam's statistics:
  globally (one criterion state over all of v; every module switches when it fires), or
  with ``per_module=True`` one criterion state per module, each fed that module's own
  statistics (the Adam kernel reduces them per array), so each module switches at its own
  step — the paper's per-module AutoSwitch (Table 4).

Interface: ``init(total_steps, modules) -> state``; ``at_start(state)`` -> modules that
switch before step 1; ``update(state, step, stats) -> (state, fired)`` where ``stats`` is
a :class:`StepStats` (each module's AdamStats of step k and their total; None under
SGD-M) or a plain dict module -> AdamStats, and ``fired`` is the tuple of modules that
switch after step k. States are immutable; ``state.fired`` gives
module -> step (None: not yet). A module is one parameter array.

Also the one place that decides when a run switches: :data:`DEFAULT_CRITERION` (what a
recipe that needs a criterion gets when none is named), :func:`plan_schedule` (which
schedule ``fit`` switches on, given a recipe and a criterion or schedule), and the step
arithmetic and clip bounds of :mod:`stepsim._ground.switch_steps` (re-exported here).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from stepsim._ground.switch_steps import (  # noqa: F401 (re-exported: the one definition)
    CLIP_BOUNDS,
    clip_steps,
    fraction_to_step,
    legal_switch_steps,
)
from stepsim._ground.validate import check_int, check_step_or_fraction

#: The switch criterion of a recipe that needs one and names none: AutoSwitch (Algorithm 2)
#: clipped to (0.1 T, 0.5 T] (``CLIP_BOUNDS``), so that a default run always switches and
#: leaves both phases a share of the run. As (name, ((option, value), ...)).
DEFAULT_CRITERION = ("autoswitch", (("clip", True),))


class StepStats(NamedTuple):
    """One step's Adam statistics: by_module (module -> AdamStats or None) and total
    (``AdamStats.combine`` over the modules in order, or None under SGD-M)."""

    by_module: dict
    total: object


class ScheduleState(NamedTuple):
    """modules: the module names, in order. k0: the fixed step (SwitchAt) or None.
    criteria: module (or "*" for global) -> criterion state. fired: module -> step or None."""

    modules: tuple
    k0: int | None
    criteria: dict
    fired: dict


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A recipe's switch schedule: when its modules leave the dense phase (configuration).

    dense_phase : bool
        A dense phase precedes the sparse one (False: sparse from step 0; the rest is
        then unused).
    switch_at : int, float or None
        What ends the dense phase when ``fit`` gets no criterion: a step (int >= 0) or a
        fraction of the run (float in [0, 1], k0 = ceil(fraction * T)); None: a criterion
        is required. Normalised by ``check_step_or_fraction`` (int = a step, float = a
        fraction).
    explicit : bool
        The user chose ``switch_at`` (a criterion given to ``fit`` then conflicts); False
        for a recipe's own default.
    per_module : bool
        A criterion given to ``fit`` runs per module (each module switches on its own
        statistics, :class:`SwitchWhen` with ``per_module=True``; layerwise-step's
        default, as the paper's Table 4).
    """

    dense_phase: bool = False
    switch_at: int | float | None = None
    explicit: bool = False
    per_module: bool = False

    def __post_init__(self):
        if self.switch_at is not None:  # normalised: int = a step, float = a fraction
            object.__setattr__(self, "switch_at",
                               check_step_or_fraction("switch_at", self.switch_at))

    @property
    def needs_criterion(self) -> bool:
        """A dense phase whose end no static ``switch_at`` fixes."""
        return self.dense_phase and self.switch_at is None


@dataclasses.dataclass(frozen=True)
class SwitchAt:
    """Every module switches after step ``at`` (int >= 0) or after ceil(at * T) (a float
    fraction in [0, 1]; 0.0 means before the first step)."""

    at: int | float

    def __post_init__(self):
        object.__setattr__(self, "at", check_step_or_fraction("at", self.at))

    def step_for(self, total_steps: int) -> int:
        """k0 for a run of ``total_steps`` (0: before the first step)."""
        if isinstance(self.at, float):
            return fraction_to_step(self.at, total_steps) if self.at else 0
        return int(self.at)

    def init(self, total_steps: int, modules) -> ScheduleState:
        check_int("total_steps", total_steps, minimum=1)
        return ScheduleState(tuple(modules), self.step_for(total_steps), {},
                             dict.fromkeys(modules))

    def at_start(self, state: ScheduleState) -> tuple:
        return state.modules if state.k0 == 0 else ()

    def update(self, state: ScheduleState, step: int, stats) -> tuple[ScheduleState, tuple]:
        if step != state.k0:
            return state, ()
        fired = {m: step for m in state.modules}
        return state._replace(fired=fired), state.modules


@dataclasses.dataclass(frozen=True)
class SwitchWhen:
    """Modules switch when ``criterion`` fires: on all of v (default) or per module."""

    criterion: object
    per_module: bool = False

    def __post_init__(self):
        check_criterion("criterion", self.criterion)
        if not isinstance(self.per_module, bool):
            raise TypeError(f"per_module must be True or False, got {self.per_module!r}")

    def init(self, total_steps: int, modules) -> ScheduleState:
        keys = tuple(modules) if self.per_module else ("*",)
        crit = {k: self.criterion.init(total_steps) for k in keys}
        return ScheduleState(tuple(modules), None, crit, dict.fromkeys(modules))

    def at_start(self, state: ScheduleState) -> tuple:
        return ()

    def update(self, state: ScheduleState, step: int, stats) -> tuple[ScheduleState, tuple]:
        from stepsim.core.optim_hyper import AdamStats

        if isinstance(stats, StepStats):
            by_module, total = stats
        else:
            by_module, total = stats, None
        crit, fired, now = dict(state.criteria), dict(state.fired), []
        for key, cstate in state.criteria.items():
            if cstate.fired_at is not None:
                continue
            if key == "*":
                watched = total
                if watched is None:
                    watched = AdamStats.combine(by_module[m] for m in state.modules)
                members = state.modules
            else:
                watched, members = by_module[key], (key,)
            crit[key], hit = self.criterion.update(cstate, step, watched)
            if hit:
                for m in members:
                    fired[m] = step
                now.extend(members)
        return state._replace(criteria=crit, fired=fired), tuple(now)


def schedule_for(recipe, criterion, steps):
    """(schedule deciding the switches or None, observed schedule or None).

    Two-phase recipes: the schedule given (a criterion is wrapped in SwitchWhen, per module
    if the recipe's schedule says so) or the recipe's own switch_at; both at once is an
    error when the recipe's was explicit.
    Single-phase recipes are sparse from step 0; a criterion given is only observed.
    """
    own = recipe.schedule
    given = None
    if criterion is not None:
        if isinstance(criterion, str):
            raise TypeError(f"criterion must be an object, not a name: build it with "
                            f"make_criterion({criterion!r}, adam=recipe.optimizer) (or pass a "
                            f"switch schedule, stepsim.recipes.switch.SwitchAt/SwitchWhen)")
        given = criterion if is_schedule(criterion) else None
        if given is None:
            check_criterion("criterion", criterion)
            per_module = own.per_module and own.dense_phase
            given = SwitchWhen(criterion, per_module=per_module)
    if not recipe.sparse:
        return None, given
    if not own.dense_phase:
        return SwitchAt(0), given
    if given is not None and own.explicit:
        raise ValueError(f"recipe {recipe.name!r} was built with an explicit switch "
                         f"({own.switch_at!r}: {dict(recipe.options)}) and fit got a "
                         f"schedule too ({criterion!r}); give one or the other")
    if given is not None:
        return given, None
    if own.switch_at is None:
        raise ValueError(f"recipe {recipe.name!r} needs a switch criterion (criterion=..., e.g. "
                         f"make_criterion('fixed-fraction', fraction=0.2)) or switch_at=...")
    return SwitchAt(own.switch_at), None


def plan_schedule(recipe, criterion, steps: int):
    """(schedule, observed, watched) of a run: what ``fit`` will switch on and watch.

    The one place that says which criteria a recipe accepts: a criterion watches Adam's
    second moment, so a recipe on momentum SGD refuses one, and a criterion's beta2 and
    eps must be its Adam's. Raises what ``fit`` raises for the pair, without training
    (``stepsim.experiments.RunSpec.check`` calls it; ``fit`` too).
    """
    from stepsim.recipes.optimizers import SGDM

    schedule, observed = schedule_for(recipe, criterion, steps)
    watched = [s for s in (schedule, observed) if hasattr(s, "criterion")]
    if watched and isinstance(recipe.optimizer, SGDM):
        raise ValueError(f"criterion {criterion!r} watches Adam's second moment; recipe "
                         f"{recipe.name!r} uses momentum SGD, which has none")
    for s in watched:
        from stepsim.recipes.criteria import check_matches_adam

        check_matches_adam(s.criterion, recipe.optimizer)
    return schedule, observed, watched


def check_criterion(name: str, value) -> None:
    """TypeError unless ``value`` looks like a criterion (init, update, stats_on, needs_log).

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object

    Raises
    ------
    TypeError
    """
    missing = [a for a in ("init", "update", "stats_on", "needs_log") if not hasattr(value, a)]
    if missing:
        hint = (" (build one with make_criterion(name, adam=recipe.optimizer))"
                if isinstance(value, str) else "")
        raise TypeError(f"{name} must be a criterion object{hint}; got {value!r} "
                        f"({type(value).__name__}, lacks {missing})")


def is_schedule(value) -> bool:
    """True for a switch schedule (SwitchAt, SwitchWhen, or anything with their interface).

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    return all(hasattr(value, a) for a in ("init", "at_start", "update"))
