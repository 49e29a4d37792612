"""paper_checks/calibration_draft5.py (PROTOCOL.md D5.8, "Calibration"): its --quick run
writes the table with its provenance, and its cases go through the production decision
code — controls whose right verdict is certain, the extension's trigger, bimodal seeds
(D5.8's amendment), the same numbers from the same seed."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from stepsim.checks import protocol
from stepsim.checks.claim_decisions import decide_on_problem
from stepsim.checks.simulated_views import Recipe, expected_error, world

PATH = Path(__file__).resolve().parents[2] / "paper_checks" / "calibration_draft5.py"
R, NR, INC = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"
RULES = protocol.TYPED[5]


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("calibration_draft5", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["calibration_draft5"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_every_case_with_provenance(cal, tmp_path):
    out = tmp_path / "cal.json"
    assert cal.main(["--quick", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    result, prov = document["result"], document["provenance"]
    assert prov["seed"] == cal.SEED and prov["params"]["sims"] == cal.QUICK_SIMS
    assert prov["params"]["quick"] is True and "numpy" in prov["versions"]
    assert list(result["cases"]) == list(cal.cases())
    for name, case in result["cases"].items():
        v = case["verdicts"]
        assert sum(v.values()) == case["sims"] == cal.QUICK_SIMS, name
        assert case["wrong"] == v[case["wrong_verdict"]], name
        low, high = case["ci95"]
        assert 0.0 <= low <= case["rate"] <= high <= 1.0, name
        assert case["parts"] >= 8, name  # every part of both readings was decided
    # the divergence-only cases have < 3 finite pairs: the extension ran every time
    for name in ("divergence-only at 0 (C4, both sides 80%)",
                 "divergence-only at delta (C4, both sides 80%)"):
        assert result["cases"][name]["extended"] == cal.QUICK_SIMS
    assert result["cases"]["null: C5 every part at 0"]["extended"] == 0
    table = out.with_suffix(".md").read_text()
    assert all(f"| {name} |" in table for name in result["cases"])


def test_recipes_have_the_truths_the_cases_state(cal):
    """Each case's truths, read back from the recipes its claim's RunSpecs got."""
    for name in ("bimodal at 0 (C6, STEP collapses in 3 of 8 seeds)",
                 "bimodal at delta (C6, baselines collapse with p = 3/8)"):
        sim = cal.Simulation(cal.cases()[name], tuple(range(8)), RULES)
        by = {}
        for key, (run, _) in sim.groups.items():
            by.setdefault(run.recipe, set()).add(expected_error(sim.recipes[key]))
        assert all(len(v) == 1 for v in by.values())
        e = {k: v.pop() for k, v in by.items()}
        truth = 0.0 if "at 0" in name else cal.DELTA
        assert e["asp"] == e["sr-ste"]
        assert e["sr-ste"] - e["step"] == pytest.approx(truth, abs=1e-9)
    c4 = cal.Simulation(cal.cases()["C4 every part at delta"], tuple(range(8)), RULES)
    shift = {(run.lr, run.step, run.criterion, run.scale): c4.recipes[k].shift
             for k, (run, _) in c4.groups.items()}
    assert {v for (_, _, c, _), v in shift.items() if c == "AutoSwitch"} == {0.0}
    assert {v for (_, _, c, _), v in shift.items() if c != "AutoSwitch"} == {cal.DELTA}
    assert {lr for lr, *_ in shift} == {"in place", "own"}
    with pytest.raises(ValueError, match="Recipe.shift"):
        Recipe(3.0)  # the 0.5-stratum's error probability would pass 1


def test_a_huge_effect_reads_reproduced_and_a_reversed_one_not(cal):
    """Controls through the whole path: STEP closing the gap entirely (E = 11 delta at
    every part) is REPRODUCED at the claim in every simulation; STEP far worse than the
    baselines (E = -11 delta) is NOT REPRODUCED in every one."""
    huge = cal.Case("C5", cal._c5_truths(0.0, baseline_gap=5.5), NR, "control")
    out = cal.run_case("control: huge", huge, 3, RULES)
    assert out["verdicts"][R] == 3 and out["wrong"] == 0
    reversed_ = cal.Case("C5", cal._c5_truths(5.5, baseline_gap=5.5), R, "control")
    out = cal.run_case("control: reversed", reversed_, 2, RULES)
    assert out["verdicts"][NR] == 2 and out["wrong"] == 0


def test_the_extension_decides_a_claim_on_sixteen_seeds(cal):
    """Every Eq. 10 / Eq. 11 run diverges, no AutoSwitch run does: no finite pair, 8
    discordant seeds a part; the trigger fires, the parts are measured on 16 seeds and the
    worse-claimed side diverged more (one-sided McNemar 2^-16): REPRODUCED."""
    def truth(run):
        return Recipe(0.0, diverge=0.0 if run.criterion == "AutoSwitch" else 1.0)

    out = cal.run_case("control: extension", cal.Case("C4", truth, NR, "control"), 1, RULES)
    assert out["extended"] == 1 and out["verdicts"][R] == 1


def _collapsing_sr_ste(step_extra: float):
    """C6 on digits: SR-STE's runs collapse (+30% of items) in exactly 3 of each 8 seeds
    (far runs in the claim); ASP's never do; STEP errs on ``step_extra`` of the items
    more than ASP."""
    def truth(run):
        if run.recipe == "dense":
            return Recipe(-4.0)
        if run.recipe == "sr-ste":
            return Recipe(0.0, collapse=3 / 8, far=0.3, exact=True)
        return Recipe(0.0, extra=step_extra if run.recipe == "step" else 0.0)
    return truth


def test_a_bimodal_claim_reads_not_reproduced_only_where_a_part_shows_both_modes(cal):
    """The amendment's rule through ``decide_on_problem``. STEP 3% of items worse than ASP
    (E ~ -5.7 delta at ASP's parts): the rules as first measured say NOT REPRODUCED on
    seeds 0-7; the registered rules hold every such part back (INCONCLUSIVE "bimodal
    seeds"), on seeds 0-7 (not extended) and on seeds 0-15 too (ASP's paired values are
    all in one mode: they cannot show that the baselines' other mode was missed). STEP
    30% of items worse: the SR-STE parts' values show both modes, and on seeds 0-15 the
    claim is NOT REPRODUCED (the evidence is there), on seeds 0-7 it is held back."""
    from stepsim.checks import extension

    seeds = tuple(range(8)) + tuple(RULES.divergence.extension_seeds)
    mild = cal.Simulation(cal.Case("C6", _collapsing_sr_ste(0.03), NR, "control"), seeds,
                          RULES)
    assert mild.extend  # a case with collapses draws the extension seeds
    views = mild.draw(world(np.random.default_rng(3)))
    why = extension.needs_more_seeds([j for m in mild.members[8] for j in m.jobs], views,
                                     RULES, 0.5)
    assert why.startswith("bimodal seeds: 3 of 8 finite run(s) of ") and "sr-ste" in why
    unamended = cal.Simulation(mild.case, seeds, cal.rules_named("draft5-as-measured"))
    assert decide_on_problem("C6", unamended.members[8], views)[-1].verdict == NR
    for size, words in ((8, "only on the extension seeds"), (16, "all in one mode")):
        lines = decide_on_problem("C6", mild.members[size], views)
        parts = [p for line in lines[:-1] for p in line.parts]
        held = [p for p in parts if p.reason.startswith("bimodal seeds: ")]
        assert len(held) >= 4 and all(" vs asp " in p.name and words in p.reason and
                                      "else NOT REPRODUCED" in p.reason for p in held)
        assert NR not in {p.verdict for p in parts} and lines[-1].verdict == INC
    assert cal.decide(mild, views, extend=True) == (INC, True)

    bad = cal.Simulation(cal.Case("C6", _collapsing_sr_ste(0.3), NR, "control"), seeds,
                         RULES)
    views = bad.draw(world(np.random.default_rng(4)))
    assert decide_on_problem("C6", bad.members[8], views)[-1].verdict == INC
    lines = decide_on_problem("C6", bad.members[16], views)
    assert lines[-1].verdict == NR
    shown = [p for line in lines[:-1] for p in line.parts if p.verdict == NR]
    assert shown and all(" vs sr-ste " in p.name for p in shown)
    assert cal.decide(bad, views, extend=True) == (NR, True)


def test_far_runs_read_each_run_group_against_its_own_median():
    """A finite run more than far from its group's median is far, in either direction; a
    diverged run is not counted (it is divergence's)."""
    from stepsim.checks import extension
    from stepsim.checks.budget import Budget

    b = Budget("full", "digits", "main", RULES.seeds.full, rules=RULES, steps=200,
               lrs={"adam|dense|-": 1e-3, "adam|sr-ste|1:8": 1e-3})
    dense, sr = b.runs("dense"), b.runs("sr-ste", nm=(1, 8))
    base = {j.digest: {"error": 10.0 + 0.1 * j.seed, "diverged": False} for j in dense + sr}
    assert extension.far_runs(dense + sr, base, 10.0) is None
    for shift in (10.5, -10.5):
        views = dict(base, **{sr[2].digest: {"error": 10.2 + shift, "diverged": False}})
        assert extension.far_runs(dense + sr, views, 10.0)[1:] == (1, 8)
        assert extension.far_runs(dense + sr, views, 11.0) is None
    lost = dict(base, **{sr[2].digest: {"error": 100.0, "diverged": True}})
    assert extension.far_runs(dense + sr, lost, 10.0) is None
    # a part's paired values: how many lie in the far mode (RULES 5 bimodal.part_far_values)
    assert extension.far_values([-10.0] * 14 + [18.0, 18.5], 10.0) == 2
    assert extension.far_values([-10.0] * 15 + [18.0], 10.0) == 1 < RULES.bimodal.part_far_values
    assert extension.far_values([1.0], 10.0) == 0


def test_the_remembering_budget_makes_the_registered_runspecs(cal):
    """The script's budgets give the RunSpecs a plain ``Budget`` gives (the same digests)."""
    import dataclasses

    from stepsim.checks.budget import Budget

    made = cal.budgets("C6", tuple(range(8)), RULES)
    for b in made:
        plain = Budget(**{f.name: getattr(b, f.name) for f in dataclasses.fields(b)})
        for _ in range(2):  # the second time from its memory
            assert b.run("sr-ste", 3, nm=(1, 16)) == plain.run("sr-ste", 3, nm=(1, 16))
            assert b.run("step-sr", 5, nm=(1, 8)).digest == \
                plain.run("step-sr", 5, nm=(1, 8)).digest


def test_same_seed_same_numbers(cal):
    name = "null: C4 every part at 0"
    case = cal.cases()[name]
    a, b = (cal.run_case(name, case, 1, RULES) for _ in range(2))
    assert {k: v for k, v in a.items() if k != "cpu_s"} == \
        {k: v for k, v in b.items() if k != "cpu_s"}
    assert math.isclose(a["ci95"][1], 0.975)  # Clopper-Pearson of 0 / 1
