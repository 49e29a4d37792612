"""From decided parts to one claim result, the same way for every training claim.

* :func:`absent` — a part whose premise is absent for a reason the generic gate cannot
  test (e.g. a dense run that has not converged): INCONCLUSIVE, "premise absent: ...".
* :func:`claim_verdict` — the claim's verdict from its parts (``verdict.combine``), or,
  for a claim about STEP, from each reading's parts: REPRODUCED if either reading is
  REPRODUCED (the reason names it), NOT REPRODUCED if every reading is, else INCONCLUSIVE
  (PROTOCOL.md section 5, "Two readings of STEP"; Holm runs over the parts of both
  readings together).
* :func:`result` — the :class:`~stepsim.checks.verdict.ClaimResult` of a claim
  (``registry.Claim``), whose parts must be the ones it declares (``Claim.parts``).
* :class:`Gathered` — what a claim measures on one budget before any decision (draft 5:
  the parts of every reading of a claim on a problem are decided together,
  ``claim_decisions``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ClaimResult,
    Part,
    combine,
)


@dataclasses.dataclass(frozen=True)
class Gathered:
    """A claim's measurements on one budget, not yet decided (``Claim.gather``).

    parts: name -> :class:`~stepsim.checks.verdict.Evidence` (or a ``Directional``, or a
    ``Part`` already decided: runs lost, no v to read), in the order ``Claim.parts``
    declares; numbers: every number behind them (JSON-ready); groups: reading of STEP ->
    the names of its parts (None: the claim involves no STEP: one group); after: parts ->
    parts, a gate applied to the decided parts (the plateau gate), or None."""

    parts: dict
    numbers: dict
    groups: dict | None = None
    after: Callable | None = None


def from_measured(measured: Callable, claim: Callable) -> tuple[Callable, Callable]:
    """(decide, gather) of a claim whose parts all come from ``measured(budget, results) ->
    (todo, readings, numbers)``: todo, name -> Evidence; readings, reading -> its parts.
    decide decides them with :func:`~stepsim.checks.verdict.decide_parts`; gather hands
    them over undecided (draft 5). ``claim()``: the registered Claim, read at call time
    (the functions are made before it exists)."""
    from stepsim.checks.verdict import decide_parts

    def decide(budget, results):
        todo, readings, numbers = measured(budget, results)
        return result(claim(), budget, decide_parts(todo), numbers, readings=readings)

    def gather(budget, results):
        """Draft 5: the parts measured, decided with every reading of the claim."""
        todo, readings, numbers = measured(budget, results)
        return Gathered(todo, numbers, readings)

    for made in (decide, gather):  # they belong to the claim's module (registry.register)
        made.__module__ = measured.__module__
    return decide, gather


def absent(name: str, effect, text: str) -> Part:
    return Part(name=name, effect=effect, verdict=INCONCLUSIVE,
                reason=f"premise absent: {text}", level=effect.ci_level, premise=None,
                premise_text=text, absent=True)


def lost(name: str, text: str, *, units: str, margin: float) -> Part:
    """A part that cannot be measured because runs diverged (PROTOCOL.md "Draft 4:
    statistics"): its effect has n = 0 and NaN estimate and interval — never a number
    made of diverged runs."""
    import math

    from stepsim.checks.verdict import Effect

    effect = Effect(name=name, estimate=math.nan, ci_low=math.nan, ci_high=math.nan,
                    ci_level=0.95, n=0, units=units, margin=float(margin))
    return Part(name=name, effect=effect, verdict=INCONCLUSIVE, reason=f"diverged: {text}",
                level=0.95, premise=None, premise_text="")


def diverged(results: dict, *groups) -> int:
    """How many runs of ``groups`` (lists of RunSpecs) went non-finite."""
    return sum(bool(results[r.digest].get("diverged")) for g in groups for r in g)


def claim_verdict(parts: dict, readings: dict | None = None) -> tuple[str, str]:
    """(verdict, reason). readings: reading -> the names of its parts (None: one family)."""
    if not readings:
        verdict = combine(p.verdict for p in parts.values())
        return verdict, _summary(parts)
    per = {r: combine(parts[n].verdict for n in names) for r, names in readings.items()}
    if any(v == REPRODUCED for v in per.values()):
        verdict = REPRODUCED
    elif all(v == NOT_REPRODUCED for v in per.values()):
        verdict = NOT_REPRODUCED
    else:
        verdict = INCONCLUSIVE
    head = ", ".join(f"STEP-{r}: {v}" for r, v in per.items())
    return verdict, f"{head} — {_summary(parts)}"


def _summary(parts: dict) -> str:
    return "; ".join(f"{name}: {p.verdict}" + (" (premise absent)"
                                               if p.reason.startswith("premise absent") else "")
                     for name, p in parts.items())


def result(claim, budget, parts: dict, numbers: dict, *, readings=None,
           reason_prefix: str = "", decided: tuple | None = None) -> ClaimResult:
    """``claim``'s result on ``budget`` from its decided ``parts`` (name -> Part, in the
    order ``claim.parts(budget)`` declares) and its ``numbers``; readings: reading -> the
    names of its parts (a claim about STEP, :func:`claim_verdict`); decided: (verdict,
    reason) when a rule over more than this budget gave them (draft 5's claim rule),
    else :func:`claim_verdict`'s."""
    declared = tuple(claim.parts(budget))
    if tuple(parts) != declared:
        raise RuntimeError(f"{claim.id} decided parts {list(parts)} but declares {list(declared)}")
    verdict, reason = decided if decided is not None else claim_verdict(parts, readings)
    first = next(iter(parts.values())).effect if parts else None
    numbers = dict(numbers, units=getattr(budget, "units", ""),
                   margin=getattr(budget, "margin", None))
    return ClaimResult(claim.id, claim.title, verdict, reason_prefix + reason, claim.rule,
                       first, budget.label, tuple(budget.seeds), budget.mode, numbers,
                       parts=tuple(parts.values()))
