"""Switch criteria: when STEP leaves its precondition phase (SPEC section 4).

A criterion watches Adam's second moment step by step, through the
:class:`~stepsim.optim.AdamStats` that :func:`~stepsim.adam_step` reduces in its pass
over memory, and answers "switch now?". Every criterion is streaming: its state holds
O(T_w) scalars, never a copy of v.

Interface (every criterion implements it):

* ``stats_on``: ``"v"`` or ``"vhat"`` — which v the caller must ask ``adam_step`` to
  reduce statistics on; ``needs_log``: whether it needs ``log_stats=True``.
* ``init(total_steps) -> state``: a fresh state for a run of ``total_steps`` steps.
* ``update(state, step, stats) -> (state, fired)``: feed step k's statistics (k = 1, 2,
  ...); ``fired`` is True at the step the criterion decides to switch, and stays True
  after (switching is one-way). The state's ``fired_at`` is that step, or None.

Build one by name with :func:`make_criterion`.
"""

from __future__ import annotations

import dataclasses
import math

from stepsim._validate import check_choice, check_fraction, check_int


@dataclasses.dataclass
class FiredState:
    """Shared part of every criterion's state: the step it fired at (None: not yet)."""

    fired_at: int | None = None


@dataclasses.dataclass(frozen=True)
class FixedStep:
    """Switch at a fixed step k0 (fires when ``step == k0``)."""

    k0: int
    stats_on = "v"
    needs_log = False

    def __post_init__(self):
        check_int("k0", self.k0, minimum=1)

    def init(self, total_steps: int) -> FiredState:
        return FiredState()

    def update(self, state: FiredState, step: int, stats) -> tuple[FiredState, bool]:
        if state.fired_at is None and step >= self.k0:
            state.fired_at = step
        return state, state.fired_at is not None


@dataclasses.dataclass(frozen=True)
class FixedFraction:
    """Switch after a fixed fraction of the run: k0 = max(1, ceil(fraction * total_steps)).

    The paper's Figure 7 sweep. A fraction of 1.0 switches at the last step.
    """

    fraction: float
    stats_on = "v"
    needs_log = False

    def __post_init__(self):
        check_fraction("fraction", self.fraction)

    def step_for(self, total_steps: int) -> int:
        return max(1, math.ceil(self.fraction * total_steps))

    def init(self, total_steps: int) -> FiredState:
        check_int("total_steps", total_steps, minimum=1)
        return _FractionState(k0=self.step_for(total_steps))

    def update(self, state, step: int, stats):
        if state.fired_at is None and step >= state.k0:
            state.fired_at = step
        return state, state.fired_at is not None


@dataclasses.dataclass
class _FractionState(FiredState):
    k0: int = 1


# name -> constructor; more criteria register here (autoswitch, agarwal, tang).
CRITERIA = {
    "fixed-step": FixedStep,
    "fixed-fraction": FixedFraction,
}


def make_criterion(name: str, **options):
    """A criterion by name (see ``CRITERIA``), with its options as keywords."""
    check_choice("criterion", name, CRITERIA)
    return CRITERIA[name](**options)
