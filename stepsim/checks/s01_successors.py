"""S1 (beyond the paper, PROTOCOL.md section S1): STEP among its successors, on paired seeds.

Quantity. Per problem and N:M of the comparison's rules (``protocol.EXTRAS["S1"]``: digits at
the main timescale, 1:8 and 1:16; the LM at the fast timescale, 2:4) and evaluation seed,
the error e of every recipe at its own tuned learning rate: dense, SR-STE (lambda 2e-4),
STEP (both readings, at STEP's own tuned lr as in "STEP at its own tuned learning rate": the
claims' runs, shared), and the recipes new to S1, each tuned exactly as a baseline (§3):
S-STE (Hu, Zhu & Chen, NeurIPS 2024), masked decay with a dense tail (Hu et al., ICML 2024;
its trained model is DENSE), masked decay without it (an N:M model), transposable SR-STE,
and S-STE with STEP's precondition phase and frozen v ("s-ste-step"). Per recipe: its gap to
dense e_X - e_dense with its CI (the checks' paired per-seed estimate, the seeds x items SE),
its divergence rate k/8 with its Clopper-Pearson interval, the mean mask flip rate over
the last 10% of steps, and its paired difference to SR-STE.

Effect. Per recipe X other than SR-STE and dense, per N:M: E = e_SR-STE - e_X (> 0: X is
better than SR-STE), margin 0 (a direction).

Rule (PROTOCOL "S1", registered before its evidence): the parts of one problem and N:M
(every recipe vs SR-STE) are one Holm family decided by the generic rule (§6, draft 4's
statistics: error effects on the seeds whose runs stayed finite, with their count;
divergence compared by exact McNemar; both sides diverged: INCONCLUSIVE "both
diverged"); a part REPRODUCED reads "X better than SR-STE", NOT REPRODUCED "X worse", else
"no difference shown". The line's verdict answers the successors' papers' claim "a
successor beats SR-STE": REPRODUCED if some successor (S-STE, masked decay with an N:M
result) is better at every N:M of the setting, NOT REPRODUCED if every successor is
worse at some N:M, else INCONCLUSIVE. No part has a premise. Draft 5 (PROTOCOL.md
D5.5, D5.10): a part whose difference lies inside (-delta, +delta), delta the problem's
margin, by two one-sided tests (Holm per N:M) reads "equivalent"; "better" and "worse"
only outside that band.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from stepsim.checks import plots, protocol
from stepsim.checks.budget import STEP_KEYS, effect
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ClaimResult,
    Evidence,
    combine,
    decide_equivalence,
    decide_parts,
    rule_of,
)

RULES = protocol.EXTRAS["S1"]

#: recipe key -> the label the table and figure use
LABELS = {"dense": "dense", "sr-ste": "SR-STE", "step-a1": "STEP-A1 (own lr)",
          "step-sr": "STEP-SR (own lr)", "s-ste": "S-STE",
          "md-dense": "masked decay + dense tail (DENSE result)",
          "md-nm": "masked decay, no dense tail", "t-sr-ste": "transposable SR-STE",
          "s-ste-step": "S-STE + frozen v (s-ste-step)"}
#: how a part's verdict reads in the table
READS = {REPRODUCED: "better", NOT_REPRODUCED: "worse", INCONCLUSIVE: "no difference shown"}
#: draft 5 (PROTOCOL.md D5.5, D5.10): a successor within the problem's margin of SR-STE
EQUIVALENT = "equivalent"


def nms(budget) -> tuple:
    """The N:M ratios S1 compares on ``budget``'s problem (quick mode: its own)."""
    if budget.mode == "quick":
        return RULES.quick.nms
    return RULES.settings[budget.problem].nms


def recipes() -> list[str]:
    """Every sparse recipe key of the comparison, SR-STE first (the table's order)."""
    steps = [STEP_KEYS[r] for r in RULES.step.readings]
    return [RULES.baseline, *steps, *RULES.recipes]


def part_name(key: str, nm) -> str:
    """The part comparing recipe ``key`` with SR-STE at ``nm`` ("s-ste vs sr-ste 1:8")."""
    return f"{key} vs {RULES.baseline} {protocol.nm_label(nm)}"


def part_names(budget) -> tuple:
    """Per N:M, one part per recipe other than SR-STE (each N:M its own Holm family)."""
    return tuple(part_name(key, nm) for nm in nms(budget) for key in recipes()
                 if key != RULES.baseline)


def primary_parts(budget) -> tuple:
    """The parts the line's verdict rests on: the successors' ("a successor beats
    SR-STE"); the other recipes' parts are reported beside it."""
    return tuple(part_name(key, nm) for nm in nms(budget) for key in recipes()
                 if key in RULES.successors)


def groups(budget) -> dict:
    """(recipe key, N:M or None) -> the runs over the evaluation seeds. Dense and SR-STE
    are the claims' runs (C5), STEP the runs of its own-lr operating point (PROTOCOL.md
    "STEP at its own tuned learning rate"): the
    same RunSpecs, so a store that holds the claims' runs serves them."""
    own = dataclasses.replace(budget, step_lr=RULES.step.lr)  # shares ``needed``
    out = {(RULES.reference, None): budget.runs(RULES.reference)}
    for nm in nms(budget):
        for key in recipes():
            b = own if key in STEP_KEYS.values() else budget
            out[(key, nm)] = b.runs(key, nm=nm)
    return out


def jobs(budget):
    return [r for group in groups(budget).values() for r in group]


def _flip_tail(view) -> float | None:
    """A run's mean flip rate over the last ``flip_tail`` of its steps (block means)."""
    blocks = (view.get("flip_blocks") or {}).get("rate") or []
    tail = blocks[-max(1, round(RULES.flip_tail * len(blocks))):] if blocks else []
    tail = [x for x in tail if x is not None]
    return sum(tail) / len(tail) if tail else None


def _row(results, runs, dense, budget, name) -> dict:
    from stepsim.checks.operating import clopper_pearson

    gap = effect(results, [(1, runs), (-1, dense)], name=name, units=budget.units,
                 margin=budget.margin)
    k = sum(bool(results[r.digest].get("diverged")) for r in runs)
    flips = [_flip_tail(results[r.digest]) for r in runs
             if not results[r.digest].get("diverged")]
    flips = [f for f in flips if f is not None]
    return {"lr": float(dict(runs[0].recipe_options)["lr"]), "nm_result": None,
            "gap": [gap.estimate, gap.ci_low, gap.ci_high], "gap_values": list(gap.values),
            "finite": gap.n, "diverged": k, "n": len(runs),
            "diverged_ci": list(clopper_pearson(k, len(runs))),
            "flip_tail": statistics.fmean(flips) if flips else None}


def _nm_result(results, runs, nm) -> str:
    """The N:M of the trained model: "dense" when its final masks keep everything."""
    for r in runs:
        view = results[r.digest]
        if not view.get("diverged") and view.get("nm"):
            found = {tuple(v) for v in view["nm"].values()}
            return "dense" if all(n == m for n, m in found) else ", ".join(
                sorted(f"{n}:{m}" for n, m in found))
    return protocol.nm_label(nm)


def decide_claim(budget, results):
    g = groups(budget)
    dense = g[(RULES.reference, None)]
    base = RULES.baseline
    table, parts, per_successor = {}, {}, {s: [] for s in RULES.successors}
    for nm in nms(budget):
        label = protocol.nm_label(nm)
        rows, todo = {}, {}
        for key in recipes():
            runs = g[(key, nm)]
            rows[key] = _row(results, runs, dense, budget, f"gap({key}) at {label}")
            rows[key]["nm_result"] = _nm_result(results, runs, nm)
            if key != base:
                e = effect(results, [(1, g[(base, nm)]), (-1, runs)],
                           name=f"e({base}) - e({key}) at {label}", units=budget.units,
                           margin=float(RULES.margin))
                todo[part_name(key, nm)] = Evidence(e)
        decided = decide_parts(todo, alpha=budget.rules.alpha)  # Holm: this N:M
        if budget.rules.version >= 5:
            decided = within_band(todo, decided, budget.margin, budget.rules.alpha)
        for name, part in decided.items():
            key = name.split(" vs ")[0]
            reads = EQUIVALENT if part.reason.startswith(EQUIVALENT) else READS[part.verdict]
            rows[key]["vs_baseline"] = {
                "estimate": part.effect.estimate, "ci": [part.effect.ci_low,
                                                         part.effect.ci_high],
                "level": part.level, "n": part.effect.n, "verdict": part.verdict,
                "reads": reads, "reason": part.reason}
            if key in per_successor:
                per_successor[key].append(part.verdict)
        parts.update(decided)
        table[label] = rows
    dense_view = [results[r.digest] for r in dense]
    numbers = {"table": table, "units": budget.units, "margin": float(RULES.margin),
               "dense": {"lr": float(dict(dense[0].recipe_options)["lr"]),
                         "diverged": sum(bool(v.get("diverged")) for v in dense_view),
                         "error": statistics.fmean(v["error"] for v in dense_view
                                                   if not v.get("diverged"))
                         if not all(v.get("diverged") for v in dense_view) else None},
               "labels": {k: LABELS.get(k, k) for k in [RULES.reference, *recipes()]},
               "dense_result": list(RULES.dense_result),
               "rules_sha256": RULES.digest}
    verdict, reason = _verdict(per_successor, table)
    first = next(iter(parts.values())).effect if parts else None
    # S1 runs STEP at its own lr (its rules' "step"), whatever the plain setting's label says
    problem = budget.label.replace("STEP at SR-STE's tuned lr", "STEP and every recipe at "
                                   "its own tuned lr")
    return ClaimResult(CLAIM.id, CLAIM.title, verdict, reason, CLAIM.rule, first, problem,
                       tuple(budget.seeds), budget.mode, numbers, parts=tuple(parts.values()))


def within_band(todo: dict, decided: dict, margin: float, alpha: float) -> dict:
    """Draft 5's reading of S1's parts (PROTOCOL.md D5.5, D5.10): a part whose difference
    to SR-STE lies inside (-margin, +margin) by two one-sided tests (Holm over the N:M's
    parts, ``verdict.decide_equivalence``) reads "equivalent" (INCONCLUSIVE for the line's
    "a successor beats SR-STE"), whatever its direction; "better" / "worse" stay only
    outside the band. margin: the problem's."""
    import dataclasses

    band = decide_equivalence({n: e.effect for n, e in todo.items()}, margin, alpha=alpha)
    out = {}
    for name, part in decided.items():
        inside = band[name]
        if inside.verdict == REPRODUCED:
            part = dataclasses.replace(
                part, verdict=INCONCLUSIVE, effect=inside.effect, level=inside.level,
                reason=f"{EQUIVALENT} within the margin: {inside.reason}")
        out[name] = part
    return out


def _verdict(per_successor: dict, table: dict) -> tuple[str, str]:
    """The line's verdict on "a successor beats SR-STE" (module docstring) and its reason."""
    each = {s: combine(v) for s, v in per_successor.items() if v}
    if any(v == REPRODUCED for v in each.values()):
        verdict = REPRODUCED
    elif each and all(v == NOT_REPRODUCED for v in each.values()):
        verdict = NOT_REPRODUCED
    else:
        verdict = INCONCLUSIVE
    words = "; ".join(
        f"{label}: " + ", ".join(f"{k} {row['vs_baseline']['reads']}"
                                 for k, row in rows.items() if "vs_baseline" in row)
        for label, rows in table.items())
    head = ", ".join(f"{s}: {READS[v]}" for s, v in each.items())  # per N:M in the table
    return verdict, f"successors vs SR-STE — {head} (Holm per N:M) — {words}"


# --------------------------------------------------------------------------- output
def _fmt(x, spec=".3g") -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else \
        format(x, spec)


def markdown_table(result) -> list[str]:
    """The comparison's table of one setting (report.md and the README): per N:M and
    recipe, the result's N:M, lr, gap to dense [95% CI], diverged k/n [95% CP], the
    difference to SR-STE [CI at its Holm level] and how it reads, and the mean flip rate
    over the last 10% of steps. ``result``: a ClaimResult or its dict."""
    n = result.numbers if hasattr(result, "numbers") else result["numbers"]
    setting = result.setting if hasattr(result, "setting") else result.get("setting", "")
    units = n["units"]
    lines = [(f"S1 on {setting} ({units}; dense: lr {_fmt(n['dense']['lr'], 'g')}, error "
              f"{_fmt(n['dense']['error'])}, diverged {n['dense']['diverged']})"), "",
             ("| N:M | recipe | result | lr | gap to dense [95% CI] | diverged k/n [95% CP] "
              "| e(SR-STE) − e(recipe) [CI, Holm level] | reads | flip rate, last 10% |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, rows in n["table"].items():
        for key, row in rows.items():
            g = row["gap"]
            lo, hi = row["diverged_ci"]
            vs = row.get("vs_baseline")
            delta = "(baseline)" if vs is None else (
                f"{_fmt(vs['estimate'])} [{_fmt(vs['ci'][0])}, {_fmt(vs['ci'][1])}] "
                f"({100 * vs['level']:.4g}%, n={vs['n']})")
            reads = "—" if vs is None else f"**{vs['reads']}**"
            result_nm = row["nm_result"] + (" (DENSE model)" if key in n["dense_result"]
                                            else "")
            lines.append(
                f"| {label} | {n['labels'].get(key, key)} | {result_nm} | {row['lr']:g} | "
                f"{_fmt(g[0])} [{_fmt(g[1])}, {_fmt(g[2])}] (n={row['finite']}) | "
                f"{row['diverged']}/{row['n']} [{lo:.2f}, {hi:.2f}] | {delta} | {reads} | "
                f"{_fmt(row['flip_tail'], '.2e')} |")
    return lines


def readme_table(report_json) -> str:
    """The README's successors table, regenerated from a report.json (every S1 line)."""
    import json
    from pathlib import Path

    doc = json.loads(Path(report_json).read_text())["result"]
    lines = []
    for c in doc["claims"]:
        if c["claim"] == CLAIM.id:
            lines += markdown_table(c) + [""]
    if not lines:
        raise ValueError(f"{report_json} holds no {CLAIM.id} result")
    return "\n".join(lines)


def figures(result, out_dir):
    """One figure per setting: each recipe's gap to dense per N:M (mean, 95% t-CI over
    the finite seeds, the seeds as dots), diverged runs counted in the labels."""
    from pathlib import Path

    n = result.numbers
    groups = {}
    for label, rows in n["table"].items():
        for key, row in rows.items():
            tag = f" ({row['diverged']} div.)" if row["diverged"] else ""
            groups[f"{label} {key}{tag}"] = row["gap_values"] or [math.nan]
    path = Path(out_dir) / f"successors-{result.setting.replace('/', '-')}.png"
    return [plots.bars(path, title=f"S1: gap to dense by recipe — {result.verdict}",
                        groups=groups, ylabel=f"gap to dense ({n['units']})", hline=0.0,
                        note=f"{result.problem}; seeds {list(result.seeds)}; each recipe at "
                        "its own tuned lr; md-dense's model is dense; diverged runs left "
                        "out (counted)")]


CLAIM = register(Claim(
    id="S1",
    title="Beyond the paper: STEP among its successors",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    primary=primary_parts, figures=figures, markdown=markdown_table))
