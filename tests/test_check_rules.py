"""Every verdict rule of the paper checks, on synthetic inputs whose right verdict is known.

Each claim module's ``decide_claim`` is fed made-up run results (no training): a scenario
maps a job's arguments to its error, so the right verdict follows from the rule in the
module's docstring — REPRODUCED, NOT REPRODUCED, INCONCLUSIVE, and the "too easy to tell
the recipes apart" case.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepsim.checks import CLAIMS, claim_module, parse_claims
from stepsim.checks._setup import budget as make_budget
from stepsim.checks._setup import within
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ClaimResult,
    combine,
    decide,
    effect_of,
    paired_effect,
    rule_of,
    separated,
)

R, NR, INC = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
BUDGET = make_budget("full")  # 5 seeds
JITTER = (0.004, -0.003, 0.001, -0.002, 0.0)  # per-seed noise, the same for every recipe


# --- the generic rule ------------------------------------------------------------------


def test_decide_partitions_by_ci_and_margin():
    e = lambda values: effect_of(values, name="x", units="u", margin=0.1)
    assert decide(e([0.3, 0.31, 0.29, 0.3]))[0] == R                # CI above 0, reaches m
    assert decide(e([-0.2, -0.21, -0.19]))[0] == NR                 # opposite sign
    assert decide(e([0.01, 0.011, 0.009]))[0] == NR                 # real but < margin
    assert decide(e([-0.2, 0.3, 0.1, -0.1]))[0] == INC              # CI straddles 0
    assert decide(e([0.3]))[0] == INC                               # one seed: no interval
    verdict, reason = decide(e([0.3, 0.31, 0.29]), discriminates=False, why_not="too easy")
    assert (verdict, reason) == (INC, "too easy")


def test_effect_interval_is_students_t():
    from scipy import stats

    x = np.array([1.0, 2.0, 4.0])
    e = paired_effect(x, np.zeros(3), name="d", units="u", margin=1.0, ci_level=0.9)
    half = stats.t.ppf(0.95, 2) * x.std(ddof=1) / math.sqrt(3)
    assert e.estimate == pytest.approx(7 / 3) and e.ci_high == pytest.approx(7 / 3 + half)
    assert e.values == (1.0, 2.0, 4.0) and e.n == 3
    with pytest.raises(ValueError, match="finite"):
        effect_of([1.0, float("nan")], name="d", units="u", margin=1.0)
    with pytest.raises(ValueError, match="equal non-zero lengths"):
        paired_effect([1.0], [1.0, 2.0], name="d", units="u", margin=1.0)
    with pytest.raises(ValueError, match="margin"):
        effect_of([1.0, 2.0], name="d", units="u", margin=0.0)


def test_combine_separated_within_and_the_record():
    assert combine([R, R]) == R and combine([R, INC]) == INC and combine([R, NR, INC]) == NR
    with pytest.raises(ValueError):
        combine(["HOLDS"])
    assert separated([1, 2, 3], [0, 1.1, 2.05]) and not separated([1, 2, 3], [1, 2, 3])
    assert within([0.2, 0.21, 0.19], 0.1, 0.3)[0] == R
    assert within([0.6, 0.61, 0.59], 0.1, 0.3)[0] == NR
    assert within([0.05, 0.3, 0.2], 0.1, 0.3)[0] == INC
    with pytest.raises(ValueError, match="verdict must be one of"):
        ClaimResult("C0", "t", "HOLDS", "r", "rule", None, "p", (), "quick", {})
    assert rule_of("Title.\n\nRule (x): a\n  b.\n\nMore.") == "Rule (x): a b."


def test_every_claim_module_states_its_rule_and_parse_claims():
    for claim in CLAIMS:
        module = claim_module(claim)
        assert module.CLAIM == claim and module.RULE.startswith("Rule (fixed before")
    assert parse_claims(["all"]) == list(CLAIMS)
    assert parse_claims(["c12", "C1", "C1"]) == ["C1", "C12"]
    with pytest.raises(ValueError, match="unknown claim 'C13'"):
        parse_claims(["C13"])


# --- fake results ----------------------------------------------------------------------


def fake_results(module, error, extras=None):
    """digest -> result for every run of ``module``: ln test loss = error(kw, seed index)."""
    out = {}
    for job in module.jobs(BUDGET):
        kw = _kw(job)
        i = BUDGET.seeds.index(kw["seed"])
        e = error(kw, i)
        result = {"metrics": {"test_loss": math.exp(e)}, "switch_step": None, "seconds": 0.0,
                  "nm": {}}
        if extras is not None:
            result.update(extras(kw, i))
        out[job.digest] = result
    return out


def _kw(spec) -> dict:
    """A RunSpec's fields as a dict (recipe_options with the optimizer among them)."""
    return {"recipe": spec.recipe, "seed": spec.seed, "steps": spec.steps,
            "recipe_options": {"optimizer": spec.optimizer, **dict(spec.recipe_options)},
            "criterion": spec.criterion, "criterion_options": dict(spec.criterion_options),
            "loss_factor": spec.loss_scale, "nm": spec.nm}


def recipe_of(kw):
    r = kw["recipe"]
    return f"{r}/{kw['recipe_options'].get('optimizer', 'adam')}"


def verdict_of(module, error, extras=None):
    result = module.decide_claim(BUDGET, fake_results(module, error, extras))
    assert result.verdict in (R, NR, INC) and result.rule == module.RULE
    return result.verdict


# --- C1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("gap_adam, gap_sgdm, expected", [
    (0.2, 0.0, R), (0.0, 0.2, NR), (0.0, 0.0, INC), (0.1, 0.1, NR)])
def test_c1_rule(gap_adam, gap_sgdm, expected):
    gap = {"sr-ste/adam": gap_adam, "sr-ste/sgdm": gap_sgdm}
    error = lambda kw, i: -4.0 + JITTER[i] + gap.get(recipe_of(kw), 0.0)
    assert verdict_of(claim_module("C1"), error) == expected


def test_c1_noisy_gap_is_inconclusive():
    noise = (0.3, -0.3, 0.25, -0.2, 0.0)
    gap = lambda kw, i: {"sr-ste/adam": 0.2 + noise[i], "sr-ste/sgdm": 0.15}.get(recipe_of(kw), 0)
    assert verdict_of(claim_module("C1"), lambda kw, i: -4.0 + gap(kw, i)) == INC


# --- C2 ---------------------------------------------------------------------------------


def v_curve(end_share):
    steps = np.arange(1, 101) * 40
    return {"v_curve": {"step": steps.tolist(), "v_l1": np.linspace(1.0, end_share, 100).tolist(),
                        "v_l2": [0.0] * 100, "z": [0.0] * 100, "phase": [0] * 100}}


@pytest.mark.parametrize("dense_end, srste_end, expected", [
    (0.01, 0.5, R), (0.01, 0.01, NR), (0.9, 0.9, INC)])
def test_c2_rule(dense_end, srste_end, expected):
    share = lambda kw, i: (srste_end if kw["recipe"] == "sr-ste" else dense_end) * (1 + JITTER[i])
    assert verdict_of(claim_module("C2"), lambda kw, i: -4.0,
                      lambda kw, i: v_curve(share(kw, i))) == expected


# --- C3 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("minimum, expected", [
    ((1e-9,) * 5, R), ((1e-6,) * 5, NR), ((3e-9, 3e-8, 1e-9, 2e-8, 1e-8), INC)])
def test_c3_rule(minimum, expected):
    extras = lambda kw, i: {"z_window": {"window": 1000, "min_mean": minimum[i], "at_step": 10,
                                         "first_z": 1.0}, **v_curve(0.1)}
    assert verdict_of(claim_module("C3"), lambda kw, i: -4.0, extras) == expected


# --- C4 ---------------------------------------------------------------------------------


def c4_extras(scores, k0s):
    def extras(kw, i):
        c = kw["criterion"]
        k0 = k0s[c] * (1 + int(kw["loss_factor"] != 1.0) * (c == "autoswitch"))
        return {"table1": {"k0": k0, "score": scores[c] * (1 + JITTER[i]), "steps_available": 1000},
                "score_curve": {"k0": [1, 10], "score": [2.0, 1.0]}, "switch_step": k0}
    return extras


@pytest.mark.parametrize("scores, expected", [
    ({"autoswitch": 1.0, "agarwal": 2.0, "tang": 2.0}, R),
    ({"autoswitch": 1.0, "agarwal": 2.0, "tang": 1.0}, NR),
    ({"autoswitch": 2.0, "agarwal": 1.0, "tang": 1.0}, NR)])
def test_c4_rule_and_units(scores, expected):
    module = claim_module("C4")
    k0s = {"autoswitch": 1000, "agarwal": 3, "tang": 1001}
    results = fake_results(module, lambda kw, i: -4.0, c4_extras(scores, k0s))
    result = module.decide_claim(BUDGET, results)
    assert result.verdict == expected
    units = result.numbers["units"]
    assert units["autoswitch"]["depends_on_loss_units"]  # its k0 doubled under x0.01 / x100
    assert not units["tang"]["depends_on_loss_units"]
    assert result.numbers["k0"]["agarwal"] == [3] * 5  # k0 always beside the score


def test_c4_noisy_scores_are_inconclusive():
    module = claim_module("C4")
    noise = (0.5, -0.4, 0.6, -0.5, 0.1)

    def extras(kw, i):
        s = 1.0 if kw["criterion"] == "autoswitch" else math.exp(0.05 + noise[i])
        return {"table1": {"k0": 5, "score": s, "steps_available": 1000},
                "score_curve": {"k0": [1], "score": [1.0]}}
    assert verdict_of(module, lambda kw, i: -4.0, extras) == INC


# --- C5, C6 -----------------------------------------------------------------------------


@pytest.mark.parametrize("claim", ["C5", "C6"])
@pytest.mark.parametrize("gap_step, gap_base, expected", [
    (0.01, 0.2, R), (0.2, 0.2, NR), (0.0, 0.0, INC)])
def test_c5_c6_rules(claim, gap_step, gap_base, expected):
    def error(kw, i):
        r = kw["recipe"]
        return -4.0 + JITTER[i] + (0 if r == "dense" else gap_step if r == "step" else gap_base)
    assert verdict_of(claim_module(claim), error) == expected


def test_c5_step_closing_less_than_half_is_not_reproduced():
    error = lambda kw, i: -4.0 + {"dense": 0, "step": 0.15}.get(kw["recipe"], 0.2)
    assert verdict_of(claim_module("C5"), error) == NR       # 0.2 - 2 * 0.15 < 0
    assert verdict_of(claim_module("C6"), error) == R        # 0.2 - 0.15 >= 0.02


# --- C7 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("slope, auto_fraction, expected", [
    (0.0, 0.2, R), (0.5, 0.2, NR), (0.0, 0.7, NR), (0.0, None, NR)])
def test_c7_rule(slope, auto_fraction, expected):
    module = claim_module("C7")

    def error(kw, i):
        f = (kw["criterion_options"] or {}).get("fraction", 0.2)
        return -4.0 + slope * f + JITTER[i] * 0.1

    def extras(kw, i):
        if kw["criterion"] != "autoswitch":
            return {}
        k = None if auto_fraction is None else int(auto_fraction * kw["steps"]) + i
        return {"switch_step": k}
    assert verdict_of(module, error, extras) == expected


# --- C8 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("updated_penalty, expected", [(0.2, R), (-0.2, NR), (0.0, NR)])
def test_c8_rule(updated_penalty, expected):
    module = claim_module("C8")

    def error(kw, i):
        return -4.0 + JITTER[i] + (updated_penalty if kw["recipe"] == "step-v-updated" else 0)

    def extras(kw, i):
        return {"switch_step": int(kw["criterion_options"]["fraction"] * kw["steps"])}
    result = module.decide_claim(BUDGET, fake_results(module, error, extras))
    assert result.verdict == expected
    assert result.numbers["switch"]["early"]["k0"] == 800 < 1000 < result.numbers["switch"][
        "late"]["k0"]


def test_c8_decomposition_separates_bias_correction_from_freezing():
    module = claim_module("C8")
    penalty = {"step": 0.3, "step-v-updated": 0.1}  # raw v* hurts; corrected v* is best

    def error(kw, i):
        bc = kw["recipe_options"].get("v_star") == "bias-corrected"
        return -4.0 + JITTER[i] + (0.0 if bc else penalty[kw["recipe"]])
    extras = lambda kw, i: {"switch_step": 100}
    result = module.decide_claim(BUDGET, fake_results(module, error, extras))
    d = result.numbers["decomposition"]["early"]
    assert d["missing bias correction: e(raw) - e(bias-corrected)"].estimate == pytest.approx(0.3)
    assert d["freezing itself: e(bias-corrected) - e(updated)"].estimate == pytest.approx(-0.1)
    assert result.verdict == NR  # with the paper's raw v*, updating wins here


# --- C9, C10 ----------------------------------------------------------------------------


@pytest.mark.parametrize("srste, step, expected", [(0.2, 0.05, R), (0.2, 0.3, NR),
                                                   (0.0, 0.0, INC)])
def test_c9_rule(srste, step, expected):
    error = lambda kw, i: -4.0 + JITTER[i] + {"layerwise-sr-ste": srste,
                                              "layerwise-step": step}.get(kw["recipe"], 0.0)
    assert verdict_of(claim_module("C9"), error) == expected


@pytest.mark.parametrize("with_dense, without, expected", [(0.05, 0.3, R), (0.3, 0.05, NR),
                                                           (0.0, 0.0, INC)])
def test_c10_rule(with_dense, without, expected):
    def error(kw, i):
        if kw["recipe"] == "dense":
            return -4.0 + JITTER[i]
        return -4.0 + JITTER[i] + (without if kw["recipe_options"]["dense_fraction"] == 0.0
                                   else with_dense)
    assert verdict_of(claim_module("C10"), error) == expected


# --- C11, C12 ---------------------------------------------------------------------------


def c11_results(paper_verdicts):
    module = claim_module("C11")
    out = {}
    for label, name, _ in module.PROCESSES:
        stationary = name not in ("drift", "decay")
        v = paper_verdicts.get(label, "HOLDS") if stationary else "VIOLATED"
        ok = {"overall": "HOLDS", "tightness_max": 0.5}
        out[label] = {"stationary": stationary, "paper": {"coord_overall": v, "inf_overall": v},
                      "inflation": {"coord": 2.0 if v == "VIOLATED" else 0.5, "inf": 1.0},
                      "corrected": {"kappa": [1.0], **{f"{k}_{s}": ok
                                                       for k in ("chebyshev", "gauss")
                                                       for s in ("coord", "inf")}}}
    return {job.digest: out[label] for label, job in module._jobs(BUDGET).items()}


@pytest.mark.parametrize("verdicts, expected", [
    ({}, R), ({"ar1 rho=0.99": "VIOLATED"}, NR), ({"sine": "INCONCLUSIVE"}, INC)])
def test_c11_rule(verdicts, expected):
    result = claim_module("C11").decide_claim(BUDGET, c11_results(verdicts))
    assert result.verdict == expected  # nonstationary controls are VIOLATED in every case


def test_c11_process_job_holds_for_iid_and_reports_corrected_bounds():
    module = claim_module("C11")
    out = module.process_job(process="uniform", params={}, trials=20, dim=4, per_decade=1,
                             seed=0, horizon=100)
    assert out["paper"]["coord_overall"] != "VIOLATED" and out["inflation"]["coord"] < 1
    c = out["corrected"]
    assert c["kappa"] == pytest.approx([1.0] * len(out["lags"]))
    assert c["chebyshev_coord"]["n"] == 80 and c["chebyshev_inf"]["n"] == 20
    assert all(b >= g for b, g in zip(c["chebyshev_coord"]["bound"], c["gauss_coord"]["bound"]))


def test_c12_rule_on_the_real_tables_and_on_made_up_cells():
    from stepsim.sparse24.memory import Table5Cell

    module = claim_module("C12")
    results = {job.digest: module.memory_job() for job in module.jobs(BUDGET)}
    result = module.decide_claim(BUDGET, results)
    assert result.verdict == NR and "8/8 match with NO metadata" in result.reason
    assert module.cell_verdict(Table5Cell("gpt2", "2:4", 162.13, 162.129, "paper", "none")) == R
    assert module.cell_verdict(Table5Cell("gpt2", "2:4", 162.13, 174.56, "all", "index")) == NR


def test_c4_a_criterion_that_never_fires_is_inconclusive():
    module = claim_module("C4")

    def extras(kw, i):
        fired = kw["criterion"] != "tang" or i > 0
        return {"table1": {"k0": 5 if fired else None, "score": 1.0 if fired else None,
                           "steps_available": 1000 if fired else 0},
                "score_curve": {"k0": [1], "score": [1.0]}}
    assert verdict_of(module, lambda kw, i: -4.0, extras) == INC
