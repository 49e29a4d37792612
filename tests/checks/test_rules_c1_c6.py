"""Verdict rules C1-C6 of the registered protocol (paper_checks/PROTOCOL.md §5-§7), on fake
run views whose right verdict is known (fake_views.py): REPRODUCED, NOT REPRODUCED,
INCONCLUSIVE (noise, premise absent), and for the STEP claims the "either reading" logic.
"""

from __future__ import annotations

import math

import pytest

from tests.checks.fake_views import (
    INC,
    N_DIGITS,
    NR,
    R,
    base,
    budget_for,
    claim_module,
    decided,
    parts,
)

# --- C1 ---------------------------------------------------------------------------------


def c1_scenario(gap_adam, gap_sgdm, *, dense_moves=0.0, noise=None):
    def scenario(job, i):
        if job["key"] == "dense":
            curve = None
            if dense_moves:  # still falling: 0.8 T -> T moves by dense_moves points
                final = 100.0 * base(i) / N_DIGITS
                curve = [final + dense_moves * (9 - j) / 2 for j in range(10)]
            return {"wrong": base(i), "curve": curve}
        gap = gap_adam if job["opt"] == "adam" else gap_sgdm
        return {"wrong": base(i) + gap + (noise[i] if noise and job["opt"] == "adam" else 0)}
    return scenario


@pytest.mark.parametrize("gap_adam, gap_sgdm, expected", [
    (90, 10, R),    # 8.9 points larger under Adam
    (10, 90, NR),   # the opposite
    (50, 50, NR),   # equal gaps: an effect of the margin is ruled out
])
def test_c1_rule(gap_adam, gap_sgdm, expected):
    module = claim_module("C1")
    result = decided(module, budget_for(module), c1_scenario(gap_adam, gap_sgdm))
    assert result.verdict == expected
    assert list(parts(result)) == ["1:8", "1:16"]
    assert all(p.verdict == expected for p in result.parts)
    gaps = result.numbers["gap"]["1:8"]
    assert gaps["adam"] == pytest.approx([100 * gap_adam / N_DIGITS] * 8)
    assert result.numbers["units"] == "error points (%)" and result.numbers["margin"] == 0.5


def test_c1_premise_absent_no_gap_or_dense_not_converged():
    module = claim_module("C1")
    b = budget_for(module)
    result = decided(module, b, c1_scenario(0, 0))
    assert result.verdict == INC
    assert all(p.reason.startswith("premise absent: SR-STE's gap to dense is not above 0")
               for p in result.parts)
    result = decided(module, b, c1_scenario(90, 10, dense_moves=0.5))
    assert result.verdict == INC
    assert all("premise absent: dense not converged" in p.reason for p in result.parts)
    assert result.numbers["dense_moved_late"]["adam"] == pytest.approx(0.5)
    # a move under margin / 2 is converged
    assert decided(module, b, c1_scenario(90, 10, dense_moves=0.2)).verdict == R


def test_c1_noisy_effect_is_inconclusive():
    module = claim_module("C1")
    noise = (150, -150, 120, -120, 100, -100, 60, -40)  # mean +2.5 images, sd ~ 110
    result = decided(module, budget_for(module), c1_scenario(300, 290, noise=noise))
    assert result.verdict == INC and "contains 0" in result.parts[0].reason


def test_c1_on_the_lm_reads_nats_and_its_gap_curve():
    module = claim_module("C1")
    b = budget_for(module, "lm", "fast")

    def scenario(job, i, gaps):
        if job["key"] == "dense":
            return {"gap": 0.05}
        return {"gap": 0.05 + gaps[job["opt"]]}
    result = decided(module, b, lambda j, i: scenario(j, i, {"adam": 0.2, "sgdm": 0.05}))
    assert result.verdict == R and list(parts(result)) == ["2:4", "1:8"]
    assert result.parts[0].effect.estimate == pytest.approx(0.15, abs=0.005)
    assert result.numbers["units"].startswith("nats") and result.numbers["margin"] == 0.02
    result = decided(module, b, lambda j, i: scenario(j, i, {"adam": 0.1, "sgdm": 0.1}))
    assert result.verdict == NR


# --- C2 ---------------------------------------------------------------------------------


def c2_scenario(dense_r, srste_r):
    def scenario(job, i):
        if job["key"] == "dense":
            return {"wrong": base(i), "v_late_ratio": dense_r * (1 + 0.03 * i)}
        return {"wrong": base(i), "v_late_ratio": srste_r * (1 + 0.02 * ((3 * i) % 8))}
    return scenario


@pytest.mark.parametrize("dense_r, srste_r, expected, reached", [
    (0.01, 0.5, R, True),     # v stays 50x larger late: direction and size
    (0.01, 0.015, R, False),  # direction only: ln 1.5 < ln 2
    (0.02, 0.01, NR, False),  # the opposite direction
])
def test_c2_rule_direction_and_size(dense_r, srste_r, expected, reached):
    module = claim_module("C2")
    result = decided(module, budget_for(module), c2_scenario(dense_r, srste_r))
    assert result.verdict == expected
    assert all(result.numbers["size"][nm]["reached"] is reached for nm in ("1:8", "1:16"))
    assert result.numbers["size"]["1:8"]["estimate"] == pytest.approx(
        math.log(srste_r / dense_r), abs=0.05)
    assert len(result.numbers["ratio"]["dense"]) == 8


def test_c2_dense_v_not_decaying_is_premise_absent():
    module = claim_module("C2")
    result = decided(module, budget_for(module), c2_scenario(0.9, 0.95))
    assert result.verdict == INC
    assert all(p.reason.startswith("premise absent") for p in result.parts)
    # a ratio of 0.5 only on average, not below it with confidence: still absent
    result = decided(module, budget_for(module), c2_scenario(0.45, 0.9))
    assert result.verdict == INC and "premise absent" in result.reason


# --- C3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("minimum, expected", [
    ((1e-9,) * 8, R),                                       # 1 decade below eps
    ((1e-6,) * 8, NR),                                      # 2 decades above
    ((3e-9, 3e-8, 1e-9, 2e-8, 1e-8, 3e-9, 3e-8, 1e-8), INC),  # straddles eps
    ((0.0,) * 8, R),                                        # Z exactly 0: 30 decades
])
def test_c3_rule(minimum, expected):
    module = claim_module("C3")
    scenario = lambda job, i: {"wrong": base(i), "z_min": minimum[i] if job["scale"] == 1.0
                               else 1.0}
    result = decided(module, budget_for(module), scenario)
    assert result.verdict == expected
    assert result.numbers["decades"]["0.01"] == [-8.0] * 8  # the other scales: reported
    if minimum[0] == 0.0:
        assert result.effect.estimate == 30.0


def test_c3_premise_is_a_run_of_five_windows():
    module = claim_module("C3")
    short = budget_for(module, steps=2000)  # T = 2000 < 5 T_w = 5000
    result = decided(module, short, lambda job, i: {"wrong": 20, "z_min": 1e-9})
    assert result.verdict == INC and result.parts[0].reason.startswith("premise absent: T = 2000")
    assert "False" in result.numbers["premise"]
    assert decided(module, budget_for(module),
                   lambda job, i: {"wrong": 20, "z_min": 1e-9}).numbers["premise"].endswith(
        "True")


# --- C4 ---------------------------------------------------------------------------------


def c4_scenario(better):
    """better: reading -> how many fewer images AutoSwitch gets wrong than Eq. 10 / 11."""
    def scenario(job, i):
        reading = "SR" if job["key"] == "step-sr" else "A1"
        auto = job["criterion"] == "autoswitch"
        k0 = 1500 + 10 * i if auto else 300 + i
        extra = 0 if auto else better[reading]
        return {"wrong": 200 + base(i) + extra, "switch_step": k0, "score": 0.5 + 0.01 * i}
    return scenario


def test_c4_rule_either_reading():
    module = claim_module("C4")
    b = budget_for(module)
    result = decided(module, b, c4_scenario({"A1": 90, "SR": 90}))
    assert result.verdict == R and len(result.parts) == 12
    result = decided(module, b, c4_scenario({"A1": 90, "SR": -90}))
    assert result.verdict == R and "STEP-A1: REPRODUCED, STEP-SR: NOT REPRODUCED" in result.reason
    result = decided(module, b, c4_scenario({"A1": -90, "SR": -90}))
    assert result.verdict == NR
    result = decided(module, b, c4_scenario({"A1": -90, "SR": 0}))
    assert result.verdict == NR  # equal outcomes rule out the margin too
    rows = result.numbers["switches"]["STEP-A1 AutoSwitch x1"]
    assert [r["k0"] for r in rows] == [1500 + 10 * i for i in range(8)]
    assert {r["cause"] for r in rows} == {"fired"}
    assert rows[2]["table1_score"] == pytest.approx(0.52)
    assert {r["cause"] for r in result.numbers["switches"]["STEP-SR Eq. 10 x0.01"]} == {"fired"}


def test_c4_noisy_outcomes_are_inconclusive():
    module = claim_module("C4")
    noise = (120, -120, 100, -100, 80, -80, 90, -60)

    def scenario(job, i):
        auto = job["criterion"] == "autoswitch"
        return {"wrong": 300 + (0 if auto else noise[i]), "switch_step": 1500}
    assert decided(module, budget_for(module), scenario).verdict == INC


# --- C5, C6 -----------------------------------------------------------------------------


def gap_scenario(gaps, *, switch_step=1500):
    """gaps: recipe key -> extra wrong images over dense (asp, sr-ste, step-a1, step-sr)."""
    def scenario(job, i):
        return {"wrong": base(i) + gaps.get(job["key"], 0),
                "switch_step": switch_step if job["key"].startswith("step") else None}
    return scenario


@pytest.mark.parametrize("claim", ["C5", "C6"])
def test_c5_c6_step_closes_the_gap_in_both_readings(claim):
    module = claim_module(claim)
    b = budget_for(module)
    result = decided(module, b, gap_scenario({"asp": 100, "sr-ste": 100, "step-a1": 5,
                                              "step-sr": 5}))
    assert result.verdict == R
    assert len(result.parts) == 8  # 2 readings x 2 baselines x 2 N:M, Holm over all 8
    levels = sorted(p.level for p in result.parts)
    assert levels[-1] == pytest.approx(1 - 0.05 / 8) and levels[0] == pytest.approx(0.95)
    assert set(result.numbers["gap_to_dense"]) == {"1:8", "1:16"}
    assert result.numbers["gap_to_dense"]["1:8"]["asp"] == pytest.approx([100 * 100 / N_DIGITS]
                                                                         * 8)


@pytest.mark.parametrize("claim", ["C5", "C6"])
def test_c5_c6_either_reading_and_neither(claim):
    module = claim_module(claim)
    b = budget_for(module)
    result = decided(module, b, gap_scenario({"asp": 100, "sr-ste": 100, "step-a1": 250,
                                              "step-sr": 5}))
    assert result.verdict == R
    assert result.reason.startswith("STEP-A1: NOT REPRODUCED, STEP-SR: REPRODUCED")
    result = decided(module, b, gap_scenario({"asp": 100, "sr-ste": 100, "step-a1": 250,
                                              "step-sr": 250}))
    assert result.verdict == NR
    # one reading inconclusive (noisy), the other not reproduced: inconclusive
    noise = (150, -150, 120, -120, 100, -100, 60, -40)

    def noisy(job, i):
        extra = {"asp": 300, "sr-ste": 300, "step-a1": 600}.get(job["key"], 0)
        if job["key"] == "step-sr":
            extra = (150 if claim == "C5" else 300) + noise[i]
        return {"wrong": base(i) + extra, "switch_step": 1500}
    result = decided(module, b, noisy)
    assert result.verdict == INC
    assert result.reason.startswith("STEP-A1: NOT REPRODUCED, STEP-SR: INCONCLUSIVE")


def test_c5_needs_step_to_close_half_the_gap_c6_only_some():
    gaps = {"asp": 300, "sr-ste": 300, "step-a1": 180, "step-sr": 180}
    c5, c6 = claim_module("C5"), claim_module("C6")
    assert decided(c5, budget_for(c5), gap_scenario(gaps)).verdict == NR  # 300 - 2 * 180 < 0
    assert decided(c6, budget_for(c6), gap_scenario(gaps)).verdict == R   # 300 - 180 > 0


@pytest.mark.parametrize("claim", ["C5", "C6"])
def test_c5_c6_baselines_without_a_gap_are_premise_absent(claim):
    module = claim_module(claim)
    result = decided(module, budget_for(module), gap_scenario({"step-a1": 5, "step-sr": 5}))
    assert result.verdict == INC
    assert all(p.reason.startswith("premise absent") for p in result.parts)
    assert "(premise absent)" in result.reason
    # only ASP without a gap: SR-STE's parts still decide, the claim cannot be all REPRODUCED
    result = decided(module, budget_for(module), gap_scenario({"sr-ste": 100, "step-a1": 5,
                                                               "step-sr": 5}))
    by = parts(result)
    assert by["STEP-SR vs asp 1:8"].reason.startswith("premise absent")
    assert by["STEP-SR vs sr-ste 1:8"].verdict == R and result.verdict == INC


def test_c5_switch_causes_are_recorded():
    module = claim_module("C5")
    b = budget_for(module)
    gaps = {"asp": 100, "sr-ste": 100, "step-a1": 5, "step-sr": 5}
    for k0, cause in [(1500, "fired"), (1000, "window"), (2501, "clip"), (None, "never")]:
        result = decided(module, b, gap_scenario(gaps, switch_step=k0))
        rows = result.numbers["switches"]["SR"]["1:16"]
        assert len(rows) == 8 and {r["cause"] for r in rows} == {cause}
        assert rows[0]["fraction"] == (None if k0 is None else k0 / 5000)


def test_c5_agreement_run_and_c6_on_the_lm():
    c5 = claim_module("C5")
    fast = budget_for(c5, timescale="fast", only=("C5",))
    specs = c5.jobs(fast)
    assert {s.nm for s in specs} == {None, (1, 8)} and {s.steps for s in specs} == {2000}
    result = decided(c5, fast, gap_scenario({"asp": 100, "sr-ste": 100, "step-a1": 5,
                                             "step-sr": 5}, switch_step=300))
    assert result.verdict == R and len(result.parts) == 4
    assert result.numbers["switches"]["A1"]["1:8"][0]["cause"] == "fired"

    c6 = claim_module("C6")
    lm = budget_for(c6, "lm", "fast")
    assert {s.nm for s in c6.jobs(lm)} == {None, (1, 8)}  # the LM's high sparsity: 1:8
    gaps = {"asp": 0.2, "sr-ste": 0.2, "step-a1": 0.01, "step-sr": 0.3}
    result = decided(c6, lm, lambda job, i: {"gap": 0.05 + gaps.get(job["key"], 0.0),
                                             "switch_step": 300})
    assert result.verdict == R and len(result.parts) == 4
    assert result.reason.startswith("STEP-A1: REPRODUCED, STEP-SR: NOT REPRODUCED")
