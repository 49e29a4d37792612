"""Draft 5's rule from parts to a claim, per problem and across its readings (PROTOCOL.md
D5.3-D5.5), through the claims' own gather functions and ``decisions.decide`` on fake run
views whose right verdict is known (tests/checks/fake_views.py)."""

from __future__ import annotations

import dataclasses

import pytest

from stepsim.checks import protocol
from stepsim.checks.budget import Budget
from stepsim.checks.claim_decisions import (
    Member,
    claim_rule,
    decide_on_problem,
    is_claim_line,
    reading_verdict,
)
from stepsim.checks.decisions import decide
from stepsim.checks.outputs import Report
from stepsim.checks.planning import Evaluation
from stepsim.checks.verdict import Part, effect_from
from tests.checks.fake_views import N_DIGITS, SEEDS, base, claim_module, views
from tests.checks.test_rules_c1_c6 import gap_scenario
from tests.checks.test_rules_c7_c12 import c8_scenario

R5 = protocol.TYPED[5]
R, NR, INC = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"
IN_PLACE_ONLY = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10")


def budgets(*claims: str, own: bool = True, extra=()) -> list[Budget]:
    """Draft-5 budgets of ``claims`` on digits: in place, STEP's own lr (claims about
    STEP), and ``extra`` (Budget keyword sets); lr 1e-3 for every config, 3e-4 for STEP's
    own (so that the own reading's runs are other runs)."""
    made = [Budget("full", "digits", "main", SEEDS, rules=R5)]
    about_step = tuple(c for c in claims if c in R5.readings.step_claims)
    if own:
        made.append(dataclasses.replace(made[0], step_lr="own", only=about_step,
                                        tag="own-lr", needed=set()))
    made += [dataclasses.replace(made[0], needed=set(), only=about_step, **kw)
             for kw in extra]
    for b in made:
        for claim in claims:
            if b.applies(claim):
                claim_module(claim).jobs(b)
    lrs = {k: 3e-4 if "step" in k.split("|")[1] else 1e-3 for b in made for k in b.needed}
    return [dataclasses.replace(b, lrs=lrs, needed=set()) for b in made]


def run(claim: str, made, scenario, per_budget=None):
    """decide_on_problem of ``claim`` on fake views; per_budget: reading -> scenario (the
    views of that budget's runs made by it instead)."""
    module = claim_module(claim)
    results = {}
    for b in made:
        chosen = (per_budget or {}).get(b.reading, scenario)
        results.update(views(module, b, chosen))
    members = [Member(b, tuple(module.jobs(b))) for b in made]
    return decide_on_problem(claim, members, results), results


def by_setting(lines) -> dict:
    return {line.setting: line for line in lines}


def test_reading_and_claim_rules():
    def part(verdict, absent=False):
        e = effect_from([0.1, 0.2], name="e", units="", margin=0.0)
        return Part("p", e, verdict, "r", 0.95, absent=absent)

    assert reading_verdict([part(R), part(INC, absent=True)]) == R
    assert reading_verdict([part(INC, absent=True)]) == INC  # none present
    assert reading_verdict([part(R), part(NR, absent=True)]) == NR  # harm shown counts
    assert reading_verdict([part(R), part(INC)]) == INC
    assert claim_rule([NR, R, INC]) == R
    assert claim_rule([NR, NR]) == NR and claim_rule([NR, INC]) == INC and claim_rule([]) == INC


def test_c5_reading_lines_and_the_claim_line():
    made = budgets("C5")
    lines, _ = run("C5", made, gap_scenario({"asp": 100, "sr-ste": 100, "step-a1": 250,
                                             "step-sr": 5}))
    lines = by_setting(lines)
    assert set(lines) == {"digits/main@in-place", "digits/main@own-lr", "digits/main"}
    claim = lines["digits/main"]
    assert is_claim_line(claim) and not claim.parts and claim.figures == ()
    assert claim.verdict == R
    assert claim.numbers["readings"] == {"in place": R, "own": R}
    assert claim.numbers["decided_by"] == ["in place STEP-SR", "own STEP-SR"]
    assert claim.numbers["k"] == 4 and claim.headline == "by in place STEP-SR, own STEP-SR"
    in_place = lines["digits/main@in-place"]
    assert in_place.numbers["reading"] == "in place" and in_place.numbers["primary"]
    assert in_place.headline == "STEP-A1 NOT REPRODUCED, STEP-SR REPRODUCED"
    # every part of both readings is in one family: the REPRODUCED parts at alpha/4
    assert [p.level for p in in_place.parts if p.verdict == R] == pytest.approx([0.975] * 4)


def test_no_gap_of_the_claimed_size_and_harm_shown():
    """SR-STE's gap is 3 images (0.33 points, under the 0.5 margin): its parts have no
    premise; where STEP is worse than SR-STE the harm is shown and the reading is NOT
    REPRODUCED, never hidden; ASP's parts decide the rest."""
    made = budgets("C5", own=False)
    lines, _ = run("C5", made, gap_scenario({"asp": 100, "sr-ste": 3, "step-a1": 60,
                                             "step-sr": 1}))
    (line,) = lines
    parts = {p.name: p for p in line.parts}
    assert parts["STEP-A1 vs sr-ste 1:8"].verdict == NR
    assert parts["STEP-A1 vs sr-ste 1:8"].reason.startswith("harm shown")
    assert parts["STEP-SR vs sr-ste 1:8"].verdict == INC
    assert parts["STEP-SR vs sr-ste 1:8"].reason.startswith("no gap of the claimed size")
    assert parts["STEP-SR vs asp 1:8"].verdict == R
    # STEP-SR: its ASP parts REPRODUCED, its SR-STE parts without premise: REPRODUCED
    assert line.numbers["step_readings"]["in place STEP-SR"]["verdict"] == R
    assert line.numbers["step_readings"]["in place STEP-A1"]["verdict"] == NR
    assert line.verdict == R and line.numbers["readings"] == {"in place": R}
    assert "no gap of the claimed size" in line.reason  # the mixed primary parts, named


def test_a_mixed_line_names_its_parts():
    """C1 at 1:16 REPRODUCED (10 points larger under Adam), at 1:8 no gap beyond the
    margin: the line says both."""
    gaps = {("adam", (1, 16)): 90, ("sgdm", (1, 16)): 10, ("adam", (1, 8)): 2,
            ("sgdm", (1, 8)): 2}

    def scenario(job, i):
        if job["key"] == "dense":
            return {"wrong": base(i)}
        return {"wrong": base(i) + gaps[(job["opt"], job["nm"])]}

    lines, _ = run("C1", budgets("C1", own=False), scenario)
    (line,) = lines
    assert line.setting == "digits/main" and line.verdict == R
    assert line.headline == "1:8 INCONCLUSIVE (no gap of the claimed size), 1:16 REPRODUCED"
    assert "1:8 INCONCLUSIVE (no gap of the claimed size)" in line.reason


def test_step_diverges_here_and_a_claim_decided_only_there():
    """C4 where, in place, every run switched by Eq. 10 or Eq. 11 diverges (2 of 3 of
    STEP's runs) and AutoSwitch's do not: the worse-claimed side diverged in all 8 seeds
    (one-sided McNemar 2^-8 <= 0.05/4), so each part is REPRODUCED; at STEP's own lr the
    criteria tie. The claim is REPRODUCED only by readings where STEP diverges, and says
    so."""
    from tests.checks.test_rules_c1_c6 import c4_scenario

    def diverging(job, i):
        if job["criterion"] != "autoswitch":
            return {"wrong": N_DIGITS, "diverged": True, "switch_step": 300 + i}
        return c4_scenario({"A1": 0, "SR": 0})(job, i)

    def own(job, i):  # Eq. 10's bias-corrected runs reuse SR-STE's lr: shared with in place
        return (diverging if job["key"].endswith("-bc") else c4_scenario({"A1": 0, "SR": 0}))(
            job, i)

    lines, _ = run("C4", budgets("C4"), own, per_budget={"in place": diverging})
    lines = by_setting(lines)
    in_place = lines["digits/main@in-place"]
    assert in_place.verdict == R
    assert "in place STEP-A1: REPRODUCED — STEP diverges here (72 of 96 runs)" in in_place.reason
    assert in_place.headline == "STEP-A1 REPRODUCED (diverges), STEP-SR REPRODUCED (diverges)"
    claim = lines["digits/main"]
    assert claim.verdict == R and claim.numbers["readings"]["own"] == NR
    assert claim.numbers["only_where_step_diverges"]
    assert "(decided only where STEP diverges)" in claim.reason
    assert claim.headline.endswith("; only where STEP diverges")
    assert claim.numbers["diverging"] == {"in place STEP-A1": [72, 96],
                                          "in place STEP-SR": [72, 96]}


def test_divergence_of_the_better_claimed_side_is_an_outcome():
    """C8, in place: frozen v diverges in every seed, v updated never (and is worse than
    dense: the premise holds). The better-claimed side diverged more; at STEP's own lr
    frozen v closes the gap: the claim is REPRODUCED there, not only where STEP
    diverges."""
    def diverging(job, i):
        if job["key"] in ("step-a1", "step-sr", "step-a1-bc", "step-sr-bc"):
            return {"wrong": N_DIGITS, "diverged": True, "switch_step": job["copts"]["k0"]}
        return c8_scenario(50, 0)(job, i)

    def own(job, i):  # the bias-corrected runs reuse SR-STE's lr: shared with in place
        return diverging(job, i) if job["key"].endswith("-bc") else c8_scenario(50, 0)(job, i)

    lines, _ = run("C8", budgets("C8"), own, per_budget={"in place": diverging})
    lines = by_setting(lines)
    in_place = lines["digits/main@in-place"]
    assert "STEP diverges here (32 of 32 runs)" in in_place.reason
    assert all("diverged" in p.reason for p in in_place.parts)
    claim = lines["digits/main"]
    assert claim.verdict == R and claim.numbers["decided_by"] == ["own STEP-A1", "own STEP-SR"]
    assert not claim.numbers["only_where_step_diverges"]


def test_c8_primary_parts_are_raw_v_star():
    made = budgets("C8", own=False)
    # raw v* frozen closes the gap; bias-corrected is as bad as updated
    lines, _ = run("C8", made, c8_scenario(50, 0, 50))
    (line,) = lines
    verdicts = {p.name: p.verdict for p in line.parts}
    assert verdicts["STEP-A1 raw v* at 0.4 T_w"] == R
    assert verdicts["STEP-A1 bias-corrected v* at 0.4 T_w"] == NR  # secondary: shown
    assert line.verdict == R  # decided by raw v* alone


def test_c3_loss_scales_are_parts():
    def scenario(job, i):
        z = {0.01: 1e-12, 1.0: 1e-10, 100.0: 1e-6}[job["scale"]]
        return {"wrong": base(i), "z_min": z * (1 + 0.01 * i)}

    lines, _ = run("C3", budgets("C3", own=False), scenario)
    (line,) = lines
    assert [p.name for p in line.parts] == ["x0.01", "x1", "x100"]
    assert [p.verdict for p in line.parts] == [R, R, NR]
    assert line.verdict == NR


def test_decide_groups_by_claim_and_problem_and_lines_fit_a_terminal():
    """decisions.decide on an evaluation stage of two claims: one family per claim on the
    problem; the printed table's lines are at most 100 characters."""
    made = budgets("C5", "C1", extra=[{"fraction": 0.3, "tag": "k0=0.3T"}])
    jobs = {(c, b.key): claim_module(c).jobs(b) for b in made for c in ("C5", "C1")
            if b.applies(c)}
    results = {}
    for b in made:
        results.update(views(claim_module("C5"), b, gap_scenario({"asp": 100, "sr-ste": 100,
                                                                  "step-a1": 250,
                                                                  "step-sr": 5})))
    results.update(views(claim_module("C1"), made[0], lambda job, i: {
        "wrong": base(i) + (0 if job["key"] == "dense" else 90 if job["opt"] == "adam"
                            else 10)}))
    made = {b.key: b for b in made}
    ev = Evaluation({}, {}, made, jobs)
    decided = decide(ev, results)
    settings = sorted((d.result.claim, d.result.setting) for d in decided)
    assert settings == [("C1", "digits/main"), ("C5", "digits/main"),
                        ("C5", "digits/main@in-place"), ("C5", "digits/main@k0=0.3T"),
                        ("C5", "digits/main@own-lr")]
    c5_claim = next(d.result for d in decided if d.result.claim == "C5"
                    and d.result.setting == "digits/main")
    assert c5_claim.numbers["readings"]["k0=0.3T"] == R
    assert "secondary (not deciding): k0=0.3T: REPRODUCED" in c5_claim.reason
    report = Report("full", tuple(d.result for d in decided), 1.0, None)
    for line in report.table().splitlines():
        assert len(line) <= 100, line
    assert all(d.seconds >= 0 for d in decided)


def test_s1_reads_equivalent_inside_the_problems_margin():
    """S1 under draft 5: S-STE better than SR-STE by 2 images (0.22 points, inside the 0.5
    margin) reads "equivalent", not "better"; transposable SR-STE 30 images worse reads
    "worse" (outside the band); the line: no successor better."""
    import numpy as np

    from stepsim.checks import s01_successors as s1

    def decided(rules):
        b = Budget("full", "digits", "main", SEEDS, rules=rules)
        s1.jobs(b)
        b = dataclasses.replace(b, lrs={k: 1e-3 for k in b.needed}, needed=set())
        shift = {"dense": -50, "s-ste": -2, "t-sr-ste": 30}
        results = {}
        for (key, nm), group in s1.groups(b).items():
            for i, r in enumerate(group):
                x = np.zeros(N_DIGITS)
                x[:100 + base(i) + shift.get(key, 0)] = 100.0
                results[r.digest] = {"items": x, "error": float(np.mean(x)),
                                     "diverged": False,
                                     "nm": {"w1": [1, 1] if key == "dense" else list(nm)},
                                     "flip_blocks": {"block": 50, "rate": [0.01] * 10}}
        return s1.decide_claim(b, results)

    result = decided(R5)
    row = result.numbers["table"]["1:8"]
    assert row["s-ste"]["vs_baseline"]["reads"] == "equivalent"
    assert row["s-ste"]["vs_baseline"]["verdict"] == INC
    assert row["s-ste"]["vs_baseline"]["reason"].startswith("equivalent within the margin")
    assert row["t-sr-ste"]["vs_baseline"]["reads"] == "worse"
    assert result.verdict != R
    assert "**equivalent**" in "\n".join(s1.markdown_table(result))
    # under draft 4 the same difference reads "no difference shown": the band is draft 5's
    row4 = decided(protocol.TYPED[4]).numbers["table"]["1:8"]
    assert row4["s-ste"]["vs_baseline"]["reads"] == "no difference shown"
