"""The third stage of a check: one verdict per claim and setting, from the jobs' views.

:func:`decide` asks each claim (``registry.Claim.decide``) for its
:class:`~stepsim.checks.verdict.ClaimResult` on each budget of the evaluation stage, says
in the verdict line when runs diverged (PROTOCOL.md "Draft 4: statistics": an outcome,
left out of the error effects), names the setting, and labels each registered in-place
verdict robust or fragile across its tie set (:func:`robustness`, PROTOCOL.md "Tie-aware
tuning"). Under draft 5's rules (a budget's ``rules.version`` >= 5) a claim that gathers
its parts (``Claim.gather``) is decided per problem, every budget of it together
(:func:`stepsim.checks.claim_decisions.decide_on_problem`: its readings' lines and the
claim's own line); the others (C11, C12, S1) per budget as before. Pure: no file is read
or written.
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
    ``results`` (digest -> view), in the evaluation's order; under draft 5, every
    (claim, problem) together (module docstring)."""
    families, single = {}, {}
    for (claim, key), jobs in evaluation.jobs.items():
        budget = evaluation.budget(claim, key)
        rules = getattr(budget, "rules", None)
        if rules is not None and rules.version >= 5 and get_claim(claim).gather is not None:
            families.setdefault((claim, budget.problem), []).append((key, jobs))
        else:
            single[(claim, key)] = jobs
    out = _decide_each(evaluation, results, single)
    for (claim, _), members in families.items():
        out += _decide_family(evaluation, results, claim, members)
    return out


def _decide_family(evaluation, results: dict, claim: str, members) -> list[Decided]:
    """One claim on one problem under draft 5: its readings' lines and its own line. A
    reading's line takes its jobs' run time (a single line, every job's), the claim's
    line none; each a share of the decision's."""
    from stepsim.checks.claim_decisions import IN_PLACE_SUFFIX, Member, decide_on_problem

    t0 = time.perf_counter()
    lines = decide_on_problem(claim, [Member(evaluation.budget(claim, key), tuple(jobs))
                                      for key, jobs in members], results)
    spent = (time.perf_counter() - t0) / len(lines)
    jobs_of = dict(members)
    out = []
    for line in lines:
        if len(lines) == 1:
            jobs = [t for _, group in members for t in group]
        else:
            jobs = jobs_of.get(line.setting.removesuffix(IN_PLACE_SUFFIX), [])
        lost = sorted({t.describe() for t in jobs if results[t.digest].get("diverged")})
        if lost:
            line = dataclasses.replace(line, numbers=dict(line.numbers, diverged=lost))
        out.append(Decided(line, sum(results[t.digest]["seconds"] for t in jobs) + spent))
    return out


def _decide_each(evaluation, results: dict, jobs_of: dict) -> list[Decided]:
    """Each (claim, setting) of ``jobs_of`` decided on its own budget (draft 4; the
    claims decided without gathered parts)."""
    out = []
    for (claim, key), jobs in jobs_of.items():
        t0 = time.perf_counter()
        result = get_claim(claim).decide(evaluation.budget(claim, key), results)
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
        drafted = isinstance(r.numbers, dict) and "readings" in r.numbers  # draft 5: done
        if "@" in r.setting or not ties or drafted:
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
