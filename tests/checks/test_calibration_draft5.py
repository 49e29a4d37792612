"""paper_checks/calibration_draft5.py (PROTOCOL.md D5.8, "Calibration"): its --quick run
writes the table with its provenance, and its cases go through the production decision
code — controls whose right verdict is certain, the extension's trigger and composition,
the same numbers from the same seed."""

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


def test_the_composition_is_decide_on_problems(cal):
    """Without an extension the script's composition of the production functions gives
    decide_on_problem's claim verdict and reading verdicts (so the extension's claims are
    decided by the same rule)."""
    for name in ("C7 one fraction per reading delta off",
                 "bimodal at delta (C6, baselines collapse with p = 3/8)"):
        case = cal.cases()[name]
        sim = cal.Simulation(case, tuple(range(8)), RULES)
        draw = world(np.random.default_rng(7))
        for _ in range(2):
            views = sim.draw(draw)
            line = decide_on_problem(case.claim, sim.members[8], views)[-1]
            verdict, readings = cal.compose(sim.claim, sim.members[8], views)
            assert verdict == line.verdict
            assert readings == line.numbers["step_readings"]


def test_same_seed_same_numbers(cal):
    name = "null: C4 every part at 0"
    case = cal.cases()[name]
    a, b = (cal.run_case(name, case, 1, RULES) for _ in range(2))
    assert {k: v for k, v in a.items() if k != "cpu_s"} == \
        {k: v for k, v in b.items() if k != "cpu_s"}
    assert math.isclose(a["ci95"][1], 0.975)  # Clopper-Pearson of 0 / 1
