"""From parts to a claim, per problem, across its readings (PROTOCOL.md, "Draft 5": one rule
from parts to a claim; readings).

:func:`decide_on_problem` decides one claim on one problem from every budget of it — each
budget a reading (``Budget.reading``: primary "in place" and "own", secondary "freeze
sparse", "k0=0.3T", "cosine own", "tie lr=...", ...) — at once:

1. every budget's parts are measured (``Claim.gather``) and decided together
   (``part_decisions.decide_both_ways``: one NOT REPRODUCED Holm family over every part of
   the claim on the problem, the REPRODUCED direction at alpha / K), then each budget's
   gate after the decision (the plateau gate); in a claim whose seeds are bimodal (a run
   far from its run group's median, ``extension.bimodal_hold``) a part is NOT REPRODUCED
   only when the claim was decided on the extension seeds and the part's own paired
   values show the far mode; else it is INCONCLUSIVE "bimodal seeds" (PROTOCOL.md D5.8's
   amendment);
2. a **reading of STEP** (a budget and one of STEP's readings A1, SR; a claim without STEP:
   the budget) is REPRODUCED when every primary part of it whose premise is present is
   REPRODUCED and there is one; NOT REPRODUCED when some primary part is; else
   INCONCLUSIVE (:func:`reading_verdict`); one in which more than half of STEP's runs
   diverged is labelled "STEP diverges here (k of n runs)";
3. a budget's line: REPRODUCED when some reading of STEP in it is, NOT REPRODUCED when
   every one is (:func:`claim_rule`); the **claim's** line: the same rule over the readings
   of STEP of the primary budgets, naming the reading that decided it, the primary parts
   when they are mixed ("1:16 REPRODUCED, 1:8 INCONCLUSIVE (no gap of the claimed size)"),
   and "decided only where STEP diverges" when every reading that decides it carries that
   label; with SR-STE's tie set, the in-place line says whether its verdict is robust
   across it.

A claim with one budget on the problem gets one line, the claim's (setting: the budget's
key); with several, one line per budget (setting: its key; the in-place budget, whose key
is the claim's, "@in-place" added) and the claim's line (setting: the problem's setting,
e.g. "digits/main"; its ``numbers["readings"]`` maps each reading to its verdict).
"""

from __future__ import annotations

import dataclasses

from stepsim.checks import extension, outcome
from stepsim.checks.part_decisions import DISAGREE, HARM, NO_GAP, decide_both_ways, k_of
from stepsim.checks.registry import get_claim
from stepsim.checks.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, ClaimResult

#: the two readings every claim about STEP is decided at (``Budget.reading``)
PRIMARY = ("in place", "own")
#: the reason head of a part held back from NOT REPRODUCED by bimodal seeds
BIMODAL = "bimodal seeds"
#: the reason heads a mixed line names a part's verdict by
TAGS = (NO_GAP, HARM, DISAGREE, BIMODAL, "switched on the plateau", "premise absent",
        "both diverged", "diverged")
#: the recipes whose runs are STEP's (a reading diverges when most of them did)
STEP_RECIPES = ("step", "layerwise-step")
#: the in-place budget's line, beside the claim's line of the same setting
IN_PLACE_SUFFIX = "@in-place"


@dataclasses.dataclass(frozen=True)
class Member:
    """One budget of a claim on a problem and the jobs it ran for the claim."""

    budget: object
    jobs: tuple


def reading_verdict(parts) -> str:
    """A reading's verdict from its primary parts (PROTOCOL.md D5.5): NOT REPRODUCED when
    one is; REPRODUCED when every one whose premise is present is, and one is; else
    INCONCLUSIVE."""
    parts = list(parts)
    if any(p.verdict == NOT_REPRODUCED for p in parts):
        return NOT_REPRODUCED
    present = [p for p in parts if not p.absent]
    if present and all(p.verdict == REPRODUCED for p in present):
        return REPRODUCED
    return INCONCLUSIVE


def claim_rule(verdicts) -> str:
    """The claim's verdict from its primary readings' (PROTOCOL.md D5.5): REPRODUCED when
    some reading is, NOT REPRODUCED when every one is (and there is one), else
    INCONCLUSIVE."""
    verdicts = list(verdicts)
    if REPRODUCED in verdicts:
        return REPRODUCED
    if verdicts and all(v == NOT_REPRODUCED for v in verdicts):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def _values(given) -> tuple:
    """(paired values, margin) of a part as given to the decision (its effect's); ((), 0.0)
    when it has none."""
    effect = getattr(given, "effect", None)
    return (tuple(getattr(effect, "values", ()) or ()),
            float(getattr(effect, "margin", 0.0) or 0.0))


def hold_back(part, why: str | None):
    """``part`` unless it is NOT REPRODUCED and held (``why`` not None): then INCONCLUSIVE,
    its reason ``why`` followed by what it would have read (PROTOCOL.md D5.8's amendment:
    bimodal seeds)."""
    if why is None or part.verdict != NOT_REPRODUCED:
        return part
    return dataclasses.replace(part, verdict=INCONCLUSIVE,
                               reason=f"{why} (else NOT REPRODUCED: {part.reason})")


def part_tag(part) -> str:
    """A part's reason in a few words ("no gap of the claimed size", "harm shown", ...), ""
    when its interval says it all."""
    reason = part.reason
    for tag in TAGS:
        if reason.startswith(tag):
            return tag
    if "diverged more often" in reason.split(";")[0]:
        return "divergence"
    return ""


def mixed_words(parts, strip: str = "") -> str:
    """The primary parts' verdicts when they differ ("1:16 REPRODUCED, 1:8 INCONCLUSIVE
    (no gap of the claimed size)"), "" when they agree. ``strip``: a prefix of the part
    names the line already says (e.g. "STEP-A1 ")."""
    parts = list(parts)
    if len({p.verdict for p in parts}) <= 1:
        return ""
    words = []
    for p in parts:
        name = p.name[len(strip):] if strip and p.name.startswith(strip) else p.name
        tag = part_tag(p)
        words.append(f"{name} {p.verdict}" + (f" ({tag})" if tag else ""))
    return ", ".join(words)


def step_divergence(jobs, results: dict, reading: str | None, rules) -> tuple | None:
    """(diverged, runs) of STEP's distinct runs among ``jobs`` for STEP reading ``reading``
    ("A1": without SR-STE's term, "SR": with it) when more than ``rules.readings.diverging
    ["more_than"]`` of them diverged, else None (also for a claim without STEP)."""
    if reading is None:
        return None
    seen = {}
    for job in jobs:
        if getattr(job, "recipe", None) not in STEP_RECIPES:
            continue
        with_sr = "srste_lam" in dict(job.recipe_options)
        if with_sr == (reading == "SR"):
            seen[job.digest] = bool(results[job.digest].get("diverged"))
    k, n = sum(seen.values()), len(seen)
    share = float(rules.readings.diverging["more_than"])
    return (k, n) if n and k > share * n else None


def _label(member: Member, taken: set) -> str:
    """The member's reading, unique among its claim's (a tie set's lr can repeat across
    N:M: then the N:M is said too)."""
    reading = member.budget.reading
    if reading in taken and member.budget.nm_only is not None:
        n, m = member.budget.nm_only
        reading = f"{reading} {n}:{m}"
    while reading in taken:
        reading += "'"
    taken.add(reading)
    return reading


@dataclasses.dataclass(frozen=True)
class _Reading:
    """One reading of STEP in a budget: its verdict, its primary parts, the divergence
    label."""

    label: str
    step: str | None
    verdict: str
    parts: tuple
    diverging: tuple | None

    @property
    def name(self) -> str:
        return self.label if self.step is None else f"{self.label} STEP-{self.step}"

    def words(self) -> str:
        """"own STEP-SR: REPRODUCED" with its mixed parts and divergence label."""
        strip = "" if self.step is None else f"STEP-{self.step} "
        mixed = mixed_words(self.parts, strip)
        text = f"{self.name}: {self.verdict}" + (f" ({mixed})" if mixed else "")
        if self.diverging:
            text += f" — STEP diverges here ({self.diverging[0]} of {self.diverging[1]} runs)"
        return text


def decide_on_problem(claim_id: str, members, results: dict) -> list[ClaimResult]:
    """The lines of claim ``claim_id`` on one problem (module docstring). members: the
    claim's :class:`Member` s on the problem (the in-place budget first, as planned),
    results: digest -> view. Every budget must be under the same rules (draft 5's)."""
    claim = get_claim(claim_id)
    members = list(members)
    if not members:
        raise ValueError(f"claim {claim_id}: no budget to decide on")
    rules = members[0].budget.rules
    problem = members[0].budget.problem
    if any(m.budget.rules is not rules or m.budget.problem != problem for m in members):
        raise ValueError(f"claim {claim_id}: its budgets on one problem must share the rules "
                         f"and the problem")
    k = k_of(claim_id, rules)
    taken: set = set()
    labels = [_label(m, taken) for m in members]
    gathered = [claim.gather(m.budget, results) for m in members]
    every = {}
    for label, g in zip(labels, gathered):
        for name, evidence in g.parts.items():
            every[f"{claim_id} {problem} {label}: {name}"] = evidence
    decided = decide_both_ways(every, k=k, rules=rules)
    hold = extension.bimodal_hold([m.budget for m in members],
                                  [j for m in members for j in m.jobs], results)
    if hold is not None:
        decided = {name: hold_back(part, hold(*_values(every[name]))) for name, part
                   in decided.items()}
    lines = []
    readings = []
    for member, label, g in zip(members, labels, gathered):
        b = member.budget
        parts = {name: dataclasses.replace(decided[f"{claim_id} {problem} {label}: {name}"],
                                           name=name) for name in g.parts}
        if g.after is not None:
            parts = g.after(parts)
        primary = set(claim.primary_parts(b))
        groups = g.groups or {None: list(parts)}
        per = [_Reading(label, step, reading_verdict(parts[n] for n in names if n in primary),
                        tuple(parts[n] for n in names if n in primary),
                        step_divergence(member.jobs, results, step, rules))
               for step, names in groups.items()]
        readings.append((b, per))
        verdict = claim_rule(r.verdict for r in per)
        reason = "; ".join(r.words() for r in per)
        result = outcome.result(claim, b, parts, g.numbers, readings=g.groups,
                                decided=(verdict, reason))
        numbers = dict(result.numbers, reading=label, primary=bool(b.primary), k=k,
                       step_readings={r.name: {"verdict": r.verdict,
                                               "diverging": list(r.diverging or ())}
                                      for r in per})
        headline = ", ".join(f"STEP-{r.step} {r.verdict}" + (" (diverges)" if r.diverging
                                                              else "") for r in per)
        lines.append(dataclasses.replace(result, numbers=numbers, setting=b.key,
                                         headline=headline if g.groups else _one(per[0])))
    key = _claim_key(members)
    if len(members) == 1:  # the claim's line is its one reading's
        only = lines[0]
        return [dataclasses.replace(only, numbers=dict(only.numbers, readings={
            labels[0]: only.verdict}))]
    lines = _tie_robustness(lines, labels)
    lines = [dataclasses.replace(line, setting=line.setting + IN_PLACE_SUFFIX)
             if line.setting == key else line for line in lines]
    return lines + [_claim_line(claim, members, labels, lines, readings, key, k)]


def _short(verdict: str) -> str:
    return {REPRODUCED: "R", NOT_REPRODUCED: "NR", INCONCLUSIVE: "I"}[verdict]


def _one(reading: _Reading) -> str:
    """The headline of a reading without readings of STEP: its mixed parts, if any."""
    mixed = mixed_words(reading.parts)
    return mixed or "; ".join(sorted({part_tag(p) for p in reading.parts} - {""}))


def _claim_key(members) -> str:
    """The setting of the claim's own line: the in-place budget's, else the first primary
    budget's problem and timescale."""
    for m in members:
        if m.budget.reading == "in place" and not m.budget.tag:
            return m.budget.key
    first = next((m.budget for m in members if m.budget.primary), members[0].budget)
    return f"{first.problem}/{first.timescale}"


def _claim_line(claim, members, labels, lines, readings, key, k) -> ClaimResult:
    """The claim's own line from its primary readings of STEP."""
    primary = [r for (b, per) in readings if b.primary for r in per]
    verdict = claim_rule(r.verdict for r in primary)
    if verdict == REPRODUCED:
        deciding = [r for r in primary if r.verdict == REPRODUCED]
        head = "REPRODUCED at " + ", ".join(r.name for r in deciding)
    elif verdict == NOT_REPRODUCED:
        deciding = primary
        head = "NOT REPRODUCED at every primary reading"
    else:
        deciding = []
        head = "no primary reading decides it" if not primary else "mixed readings"
    only_diverging = bool(deciding) and all(r.diverging for r in deciding)
    if only_diverging:
        head += " (decided only where STEP diverges)"
    mixed = [f"{r.name}: {mixed_words(r.parts, '' if r.step is None else f'STEP-{r.step} ')}"
             for r in deciding if mixed_words(r.parts)]
    words = [r.words() for r in primary]
    secondary = [f"{line.numbers['reading']}: {line.verdict}" for line in lines
                 if not line.numbers["primary"]]
    reason = head + ("; primary parts " + "; ".join(mixed) if mixed else "") + \
        " — primary: " + "; ".join(words) + \
        ("; secondary (not deciding): " + ", ".join(secondary) if secondary else "")
    if verdict == REPRODUCED:
        headline = "by " + ", ".join(r.name for r in deciding)
    elif verdict == NOT_REPRODUCED:
        headline = "every primary reading NOT REPRODUCED"
    else:
        headline = ", ".join(f"{r.name} {_short(r.verdict)}" for r in primary)
    if only_diverging:
        headline += "; only where STEP diverges"
    b = next((m.budget for m in members if m.budget.primary), members[0].budget)
    numbers = {"readings": {line.numbers["reading"]: line.verdict for line in lines},
               "step_readings": {r.name: r.verdict for (_, per) in readings for r in per},
               "primary_readings": [r.name for r in primary],
               "decided_by": [r.name for r in deciding],
               "diverging": {r.name: list(r.diverging) for (_, per) in readings for r in per
                             if r.diverging},
               "only_where_step_diverges": only_diverging, "k": k,
               "lines": {line.numbers["reading"]: line.setting for line in lines},
               "units": getattr(b, "units", ""), "margin": getattr(b, "margin", None)}
    return ClaimResult(claim.id, claim.title, verdict, reason, claim.rule, None, b.label,
                       tuple(b.seeds), b.mode, numbers, setting=key, headline=headline)


def _tie_robustness(lines, labels) -> list:
    """The in-place line labelled robust (every tied SR-STE lr of every N:M gives it the
    same verdict) or fragile across SR-STE's tie set (the "tie lr=..." readings),
    PROTOCOL.md "Tie-aware tuning"."""
    ties = {label: line for label, line in zip(labels, lines) if label.startswith("tie ")}
    if not ties:
        return lines
    out = []
    for label, line in zip(labels, lines):
        if label != "in place":
            out.append(line)
            continue
        verdicts = {t.setting.split("@", 1)[1]: t.verdict for t in ties.values()}
        per_nm = {}
        for tag, v in verdicts.items():
            per_nm.setdefault(tag.split()[1], set()).add(v)
        robust = all(len(v) == 1 for v in per_nm.values())
        words = ("robust across the tie set" if robust else "fragile (lr choice)") + (
            ": " + "; ".join(f"{tag}: {v}" for tag, v in sorted(verdicts.items())))
        out.append(dataclasses.replace(
            line, reason=f"{line.reason} [tie set: {words}]",
            numbers=dict(line.numbers, tie_set={"robust": robust, "verdicts": verdicts})))
    return out


def is_claim_line(result) -> bool:
    """Whether ``result`` is a claim's own line made of its readings (no parts, no
    figure of its own)."""
    numbers = result.numbers if isinstance(result.numbers, dict) else {}
    return "decided_by" in numbers


__all__ = ["BIMODAL", "IN_PLACE_SUFFIX", "Member", "claim_rule", "decide_on_problem",
           "hold_back", "is_claim_line",
           "mixed_words", "part_tag", "reading_verdict", "step_divergence"]
