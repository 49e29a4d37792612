"""The third stage of a check: one verdict per claim and setting, from the jobs' views.

:func:`decide` asks each claim (``registry.Claim.decide``) for its
:class:`~stepsim.checks.verdict.ClaimResult` on each budget of the evaluation stage, says
in the verdict line when runs diverged (PROTOCOL.md "Draft 4: statistics": an outcome,
left out of the error effects), names the setting, and labels each registered in-place
verdict robust or fragile across its tie set (:func:`robustness`, PROTOCOL.md "Tie-aware
tuning"). Pure: no file is read or written.
"""

from __future__ import annotations

import dataclasses
import time

from stepsim.checks.registry import get_claim


@dataclasses.dataclass(frozen=True)
class Decided:
    """A claim's result on one setting and the seconds it took: its jobs' own run times
    (a shared job counts for each claim that uses it) and its decision."""

    result: object
    seconds: float


def decide(evaluation, results: dict) -> list[Decided]:
    """Every (claim, setting) of ``evaluation`` (``planning.Evaluation``) decided on
    ``results`` (digest -> view), in the evaluation's order."""
    out = []
    for (claim, key), jobs in evaluation.jobs.items():
        t0 = time.perf_counter()
        result = get_claim(claim).decide(evaluation.budgets[key], results)
        lost = [t for t in jobs if results[t.digest].get("diverged")]
        if lost:  # said in the verdict line, not only in the numbers
            configs = sorted({t.replace(seed=0).describe() for t in lost})
            result = dataclasses.replace(
                result, reason=f"{result.reason} [{len(lost)} diverged run(s) in "
                f"{len(configs)} configuration(s): an outcome, left out of the error "
                f"effects (PROTOCOL 'Draft 4: statistics')]",
                numbers=dict(result.numbers, diverged=sorted(t.describe() for t in lost)))
        result = dataclasses.replace(result, setting=key)
        seconds = sum(results[t.digest]["seconds"] for t in jobs)
        out.append(Decided(result, seconds + time.perf_counter() - t0))
    return out


def robustness(decided: list) -> list:
    """Each registered in-place verdict (C5, C6 at a setting without an operating-point
    tag) labelled "robust across the tie set" when every tied SR-STE lr of every N:M gives
    it the same verdict, else "fragile (lr choice)" with the verdicts; the tie set's lines
    are those tagged "sr-ste N:M lr=..." (PROTOCOL.md "Tie-aware tuning")."""
    out = []
    for r in decided:
        ties = [t for t in decided if t.claim == r.claim and "@sr-ste " in t.setting
                and t.setting.split("@")[0] == r.setting]
        if "@" in r.setting or not ties:
            out.append(r)
            continue
        verdicts = {t.setting.split("@", 1)[1]: t.verdict for t in ties}
        per_nm = {}
        for tag, v in verdicts.items():
            per_nm.setdefault(tag.split()[1], set()).add(v)
        robust = all(len(v) == 1 for v in per_nm.values())
        label = ("robust across the tie set" if robust else "fragile (lr choice)") + (
            ": " + "; ".join(f"{tag}: {v}" for tag, v in sorted(verdicts.items())))
        out.append(dataclasses.replace(
            r, reason=f"{r.reason} [tie set: {label}]",
            numbers=dict(r.numbers, tie_set={"robust": robust, "verdicts": verdicts})))
    return out


__all__ = ["Decided", "decide", "robustness"]
