"""Verdict rules C7-C12 of the registered protocol (paper_checks/PROTOCOL.md §5-§7), on fake
run views whose right verdict is known (fake_views.py); a diverged run counted as an
outcome (draft 4), not averaged; and how the claims' verdicts combine into the record.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from stepsim.checks import CLAIMS
from stepsim.checks.budget import Budget, NoProblem
from stepsim.checks.verdict import ClaimResult, combine, rule_of
from tests.checks.fake_views import (
    INC,
    N_DIGITS,
    NR,
    SEEDS,
    R,
    base,
    budget_for,
    claim_module,
    classify,
    decided,
    needed_keys,
    parts,
)

# --- C7 ---------------------------------------------------------------------------------


SAME = object()


def c7_scenario(*, slope=0, fired=8, k0=1100, scale_001=SAME, readings=("A1", "SR")):
    """Fixed fractions: error = base + slope images at f = 0.8 (0 elsewhere) and one image of
    seed-to-seed wobble; AutoSwitch (unclipped): k0 + 20 i in the first ``fired`` seeds,
    T_w (= 1000, the first step its window allows: cause "window") in the others; at loss
    x0.01 the same unless ``scale_001`` gives its k0 (None: it never fires)."""
    def scenario(job, i):
        reading = "SR" if job["key"] == "step-sr" else "A1"
        if job["criterion"] == "fixed-fraction":
            f = job["copts"]["fraction"]
            extra = slope if f == 0.8 and reading in readings else 0
            return {"wrong": 100 + base(i) + extra + (i + int(10 * f)) % 2}
        assert job["criterion"] == "autoswitch" and not job["clip"]
        step = k0 if job["scale"] == 1.0 or scale_001 is SAME else scale_001
        if step is None:
            return {"wrong": 100, "switch_step": None}
        return {"wrong": 100, "switch_step": step + 20 * i if i < fired else 1000}
    return scenario


def test_c7_flat_and_landing_near_20_percent_is_reproduced():
    module = claim_module("C7")
    result = decided(module, budget_for(module), c7_scenario())
    assert result.verdict == R
    by = parts(result)
    assert len(by) == 14  # 2 readings x (5 fractions + 2 loss scales)
    assert by["STEP-A1 flat at f=0.4"].verdict == R and "TOST" in by["STEP-A1 flat at f=0.4"].reason
    landing = by["STEP-SR AutoSwitch lands, loss x0.01"]
    assert landing.verdict == R and landing.effect.estimate == pytest.approx(
        np.mean([(1100 + 20 * i) / 5000 for i in range(8)]))
    rows = result.numbers["switches"]["STEP-A1 AutoSwitch lands, loss x1"]
    assert {r["cause"] for r in rows} == {"fired"}


def test_c7_a_fraction_off_the_mean_is_not_flat():
    module = claim_module("C7")
    result = decided(module, budget_for(module), c7_scenario(slope=100))
    assert result.verdict == NR
    assert parts(result)["STEP-SR flat at f=0.8"].verdict == NR
    assert "outside" in parts(result)["STEP-SR flat at f=0.8"].reason
    result = decided(module, budget_for(module), c7_scenario(slope=100, readings=("SR",)))
    assert result.verdict == R and "STEP-A1: REPRODUCED, STEP-SR: NOT REPRODUCED" in result.reason


@pytest.mark.parametrize("kwargs, expected", [
    # draft 4: the fired rate against 0.5 by an exact binomial test (Clopper-Pearson), the
    # landing parts in C7's two Holm families (14 parts)
    ({"fired": 8}, R),           # 8 of 8 fired: p = 1/256 at rate 0.5
    ({"fired": 6}, INC),         # 6 of 8: p = 0.145, not shown above 0.5 (draft 3: R)
    ({"fired": 5}, INC),         # 5 of 8: neither above nor below 0.5 (draft 3: NR)
    # every seed at T_w: 20% exactly but "window"; 0 of 8 fired gives p = 1/256, times 3
    # (Bonferroni over the three ways to fail) > 0.05 / 14: not shown with 8 seeds
    ({"fired": 0, "k0": 1000}, INC),
    ({"k0": 3000}, NR),          # lands at 60%
    ({"scale_001": None}, NR),   # never fires at loss x0.01: fraction 1.0, "never"
    ({"k0": 1200, "fired": 8, "scale_001": 1250}, R),
])
def test_c7_landing_needs_the_interval_and_fired_causes(kwargs, expected):
    module = claim_module("C7")
    result = decided(module, budget_for(module), c7_scenario(**kwargs))
    assert result.verdict == expected
    landing = [p for p in result.parts if "lands" in p.name]
    assert len(landing) == 4
    assert all("Clopper-Pearson" in p.reason for p in landing)
    if expected == NR:
        assert any(p.verdict == NR for p in landing)
        assert all(p.verdict == R for p in result.parts if "flat" in p.name)
    if kwargs.get("fired") == 0:
        assert all("fired (not window/never) in 0/8 seeds" in p.reason for p in landing)


def test_c7_never_firing_counts_as_fraction_one():
    module = claim_module("C7")
    result = decided(module, budget_for(module), c7_scenario(scale_001=None))
    p = parts(result)["STEP-A1 AutoSwitch lands, loss x0.01"]
    assert p.verdict == NR and p.effect.estimate == 1.0 and "fired" in p.reason
    assert {r["cause"] for r in result.numbers["switches"][p.name]} == {"never"}


# --- C8 ---------------------------------------------------------------------------------


def c8_scenario(updated, frozen, bias_corrected=None, *, sr=None):
    """Extra wrong images over dense: v updated, v frozen raw (and bias-corrected)."""
    def scenario(job, i):
        key = job["key"]
        assert key == "dense" or job["criterion"] == "fixed-step"
        if key == "dense":
            return {"wrong": base(i)}
        reading = "SR" if key.startswith("step-sr") else "A1"
        u, f, bc = (updated, frozen, bias_corrected) if reading == "A1" or sr is None else sr
        bc = f if bc is None else bc
        extra = u if key.endswith("-vupd") else (bc if key.endswith("-bc") else f)
        return {"wrong": base(i) + extra, "switch_step": job["copts"]["k0"]}
    return scenario


def test_c8_rule():
    module = claim_module("C8")
    b = budget_for(module)
    assert {classify(s)["copts"].get("k0") for s in module.jobs(b)} == {None, 400, 1600}
    result = decided(module, b, c8_scenario(100, 10))
    assert result.verdict == R and len(result.parts) == 8
    assert result.numbers["switch_steps"] == {"0.4 T_w": 400, "1.6 T_w": 1600}
    assert decided(module, b, c8_scenario(100, 200)).verdict == NR
    assert decided(module, b, c8_scenario(100, 100)).verdict == NR  # no gain: margin ruled out
    # raw v* loses, bias-corrected v* wins: the parts say which
    result = decided(module, b, c8_scenario(100, 200, 10))
    assert result.verdict == NR
    assert parts(result)["STEP-A1 bias-corrected v* at 0.4 T_w"].verdict == R
    assert parts(result)["STEP-A1 raw v* at 0.4 T_w"].verdict == NR
    # either reading
    result = decided(module, b, c8_scenario(100, 200, sr=(100, 10, 10)))
    assert result.verdict == R and "STEP-SR: REPRODUCED" in result.reason


def test_c8_updating_v_without_a_gap_is_premise_absent():
    module = claim_module("C8")
    result = decided(module, budget_for(module), c8_scenario(0, 0))
    assert result.verdict == INC
    assert all(p.reason.startswith("premise absent: STEP-") for p in result.parts)


# --- C9 ---------------------------------------------------------------------------------


def c9_scenario(srste, step_a1, step_sr):
    def scenario(job, i):
        extra = {"dense": 0, "lw-sr-ste": srste, "lw-step-a1": step_a1,
                 "lw-step-sr": step_sr}[job["key"]]
        return {"wrong": base(i) + extra, "switch_step": 1500 if "step" in job["key"] else None}
    return scenario


def test_c9_rule_like_for_like_at_srste_lr():
    module = claim_module("C9")
    assert needed_keys(module) == {"adam|dense|-", "adam|lw-sr-ste|M8", "adam|lw-sr-ste|M16"}
    b = budget_for(module, lrs={"adam|lw-sr-ste|M8": 0.003, "adam|lw-sr-ste|M16": 0.01})
    for spec in module.jobs(b):
        job = classify(spec)
        if job["key"] != "dense":
            assert job["m"] in (8, 16) and dict(spec.recipe_options)["layerwise_target"] == 0.75
            assert job["lr"] == {8: 0.003, 16: 0.01}[job["m"]]  # STEP uses lw SR-STE's lr
    result = decided(module, b, c9_scenario(100, 10, 10))
    assert result.verdict == R and sorted(parts(result)) == sorted(
        ["STEP-SR M=8", "STEP-A1 M=8", "STEP-SR M=16", "STEP-A1 M=16"])
    assert decided(module, b, c9_scenario(100, 200, 200)).verdict == NR
    result = decided(module, b, c9_scenario(100, 200, 10))
    assert result.verdict == R and "STEP-SR: REPRODUCED, STEP-A1: NOT REPRODUCED" in result.reason
    result = decided(module, b, c9_scenario(0, 0, 0))
    assert result.verdict == INC and all(p.reason.startswith("premise absent")
                                         for p in result.parts)
    assert {r["cause"] for r in result.numbers["switches"]["STEP-A1 M=16"]} == {"fired"}


# --- C10 --------------------------------------------------------------------------------


@pytest.mark.parametrize("with_dense, without, expected", [
    (10, 100, R), (100, 10, NR), (100, 100, NR), (0, 0, INC)])
def test_c10_rule(with_dense, without, expected):
    module = claim_module("C10")
    b = budget_for(module)
    extra = {"dense": 0, "decay-dense": with_dense, "decay-nodense": without}
    result = decided(module, b, lambda job, i: {"wrong": base(i) + extra[job["key"]]})
    assert result.verdict == expected and list(parts(result)) == ["1:8", "1:16"]
    if expected == INC:
        assert all(p.reason.startswith("premise absent") for p in result.parts)


def test_the_shared_test_sets_error_is_in_every_interval():
    """Every seed has the same effect (no spread), 4 images = 0.44 points < margin, but the two
    variants get different images wrong (~118 of them): the test set's sampling error
    (~100 sqrt(118) / 899 = 1.2 points) keeps the interval wide — INCONCLUSIVE, not a point
    interval that rules the margin out."""
    module = claim_module("C10")

    def scenario(job, i):
        return {"wrong": {"dense": base(i), "decay-nodense": 40 + base(i),
                          "decay-dense": (400, 36 + base(i))}[job["key"]]}
    result = decided(module, budget_for(module), scenario)
    e = result.parts[0].effect
    assert e.estimate == pytest.approx(400 / N_DIGITS) and e.se_seeds == 0.0
    assert 1.0 < e.se_test < 1.4 and e.ci_low < 0 < e.margin < e.ci_high
    assert result.verdict == INC
    # a point interval only when every run agrees on every test item: then no effect at all
    # is exactly no effect, and the margin is ruled out
    same = lambda job, i: {"wrong": {"dense": base(i)}.get(job["key"], 40 + base(i))}
    result = decided(module, budget_for(module), same)
    e = result.parts[0].effect
    assert (e.estimate, e.se_seeds, e.se_test, e.ci_low, e.ci_high) == (0, 0, 0, 0, 0)
    assert result.verdict == NR


# --- divergence as its own outcome (PROTOCOL draft 4) -----------------------------------


def lost_scenario(lost, *, extra=None):
    """Digits C5: ``lost``: recipe key -> the seeds whose run diverged (every image wrong,
    ``diverged``); the others: dense + 40 images for the baselines, + 5 for STEP."""
    extra = extra or {"dense": 0, "asp": 40, "sr-ste": 40, "step-a1": 5, "step-sr": 5}

    def scenario(job, i):
        if i in lost.get(job["key"], ()):
            return {"wrong": N_DIGITS, "diverged": True, "switch_step": 1500}
        return {"wrong": base(i) + extra[job["key"]], "switch_step": 1500}
    return scenario


def test_a_diverged_side_is_counted_not_averaged():
    module = claim_module("C5")
    b = budget_for(module)
    # STEP-A1 lost in every seed: no finite pair, never "0 [0, 0]" nor a huge negative effect
    result = decided(module, b, lost_scenario({"step-a1": range(8)}))
    by = parts(result)
    a1 = by["STEP-A1 vs sr-ste 1:8"]
    assert a1.verdict == INC and a1.reason.startswith("diverged: 0 finite pair(s) of 8")
    assert a1.effect.n == 0 and math.isnan(a1.effect.estimate)
    assert a1.effect.divergence["minus"] == 8 and a1.effect.divergence["plus"] == 0
    # 4 parts at p = 2/256 each cannot reach 0.05 / 8 (Tarone: they leave the family), so
    # STEP-SR's parts are judged at the levels of 4 hypotheses, not 8
    assert "exact McNemar p = 0.00781" in a1.reason
    sr = by["STEP-SR vs sr-ste 1:8"]
    assert sr.verdict == R and sr.level <= 1 - 0.05 / 4 + 1e-12
    assert result.verdict == R and "STEP-SR: REPRODUCED" in result.reason
    # both sides lost: "both diverged"
    both = decided(module, b, lost_scenario({"step-a1": range(8), "sr-ste": range(8)}))
    p = parts(both)["STEP-A1 vs sr-ste 1:8"]
    assert p.verdict == INC and p.reason.startswith("both diverged: the premise")
    assert "0 finite seed(s) of 8" in p.reason


def test_report_shows_a_diverged_part_as_counts_never_nan(tmp_path):
    """The report's effect cells (report.md's table and parts, the printed line), also from
    a report.json read back: a part with no finite pair shows its divergence counts, never
    "nan [nan, nan]"; a part judged on the finite pairs says how many there were."""
    import dataclasses

    from stepsim.checks.markdown import markdown
    from stepsim.checks.outputs import Report, load_report, write_report

    module = claim_module("C5")
    b = budget_for(module)
    lost = dataclasses.replace(decided(module, b, lost_scenario({"step-a1": range(8)})),
                               setting=b.key)
    one = dataclasses.replace(decided(module, b, lost_scenario({"step-a1": [3]})),
                              setting=b.key + "@one")
    assert math.isnan(lost.effect.estimate)  # the number stays NaN in report.json
    write_report(Report("full", (lost, one), 1.0, str(tmp_path)), tmp_path, params={})
    for md in (markdown(load_report(tmp_path / "report.json")),
               (tmp_path / "report.md").read_text()):
        assert "nan" not in md
        after_matrix = md.split("## Verdict matrix", 1)[1].split("\n## ", 1)[1]  # its table
        row = next(line for line in after_matrix.splitlines() if line.startswith("| C5 |"))
        assert ("n/a — diverged: worse-claimed side in 0/8 seeds, better-claimed side in "
                "8/8; 0 finite pair(s)") in row
        assert "on 7/8 finite pairs" in md  # STEP-A1's parts with the lost seed
    assert "nan" not in lost.line() and "n/a — diverged" in lost.line()


def test_one_lost_seed_leaves_the_finite_pairs_to_judge():
    """One STEP run of eight diverged: the part is judged on the 7 finite pairs (draft 3
    scored the lost run as 100% error and turned a clear R into an INCONCLUSIVE or worse)."""
    module = claim_module("C5")
    result = decided(module, budget_for(module), lost_scenario({"step-a1": [3]}))
    p = parts(result)["STEP-A1 vs sr-ste 1:8"]
    assert p.verdict == R and p.effect.n == 7 and "error on the 7 finite pair(s)" in p.reason
    assert p.effect.divergence["finite"] == [0, 1, 2, 4, 5, 6, 7]


def test_divergence_can_decide_a_small_family():
    """C10 (2 parts): the variant the claim says is better (with its dense phase) diverges in
    every seed at 1:8: exact McNemar p = 2/256 <= 0.05 / 2 -> NOT REPRODUCED by divergence;
    the worse one diverging instead -> REPRODUCED."""
    module = claim_module("C10")
    b = budget_for(module)

    def scenario(lost_key):
        def inner(job, i):
            if job["key"] == lost_key and job["nm"] == (1, 8):
                return {"wrong": N_DIGITS, "diverged": True}
            return {"wrong": base(i) + {"dense": 0, "decay-dense": 10,
                                        "decay-nodense": 60}[job["key"]]}
        return inner
    result = decided(module, b, scenario("decay-dense"))
    p = parts(result)["1:8"]
    assert p.verdict == NR and p.reason.startswith("the better-claimed side diverged more")
    assert result.verdict == NR
    p = parts(decided(module, b, scenario("decay-nodense")))["1:8"]
    # the premise e(no dense phase) - e(dense) is on its finite seeds: none -> not measurable
    assert p.verdict == INC and p.reason.startswith("diverged: the premise")


def test_c10_each_variant_is_tuned_for_itself():
    module = claim_module("C10")
    assert needed_keys(module) == {"adam|dense|-", "adam|decay-dense|1:8",
                                   "adam|decay-nodense|1:8", "adam|decay-dense|1:16",
                                   "adam|decay-nodense|1:16"}
    b = budget_for(module, lrs={"adam|decay-dense|1:8": 0.01, "adam|decay-nodense|1:8": 0.03})
    by = {(classify(s)["key"], s.nm): classify(s)["lr"] for s in module.jobs(b)}
    assert by[("decay-dense", (1, 8))] == 0.01 and by[("decay-nodense", (1, 8))] == 0.03
    assert {s.seed for s in module.jobs(b)} == set(SEEDS)


def test_claims_that_do_not_apply_and_problems():
    b = Budget("full", "lm", "fast", SEEDS)
    assert [c for c in CLAIMS if b.applies(c)] == ["C1", "C2", "C5", "C6"]
    fast = Budget("full", "digits", "fast", SEEDS, only=("C5",))
    assert [c for c in CLAIMS if fast.applies(c)] == ["C5"]
    main = Budget("full", "digits", "main", SEEDS)
    assert [c for c in CLAIMS if main.applies(c)] == [f"C{k}" for k in range(1, 11)]


# --- C11, C12 ---------------------------------------------------------------------------


def c11_results(paper_verdicts, *, vacuous=(), chebyshev_fail=(), gauss_fail=()):
    module = claim_module("C11")
    out = {}
    for label, name, _ in module.PROCESSES:
        stationary = name not in ("drift", "decay")
        v = paper_verdicts.get(label, "HOLDS") if stationary else "VIOLATED"
        entry = {"stationary": stationary, "paper": {"coord_overall": v, "inf_overall": v},
                 "inflation": {"coord": 2.0 if v == "VIOLATED" else 0.5, "inf": 1.0}}
        if stationary:
            def bound(kind, s, label=label):
                failed = label in (chebyshev_fail if kind == "chebyshev" else gauss_fail)
                return {"bound": [1.0, 2.0] if kind == "chebyshev" else [0.5, 1.0],
                        "overall": "VIOLATED" if failed else "HOLDS", "tightness_max": 0.5}
            entry["corrected"] = {"kappa": [1.0, 1.0],
                                  "worst_case": [1.0, 3.0] if label in vacuous else [3.0, 3.0],
                                  **{f"{k}_{s}": bound(k, s) for k in ("chebyshev", "gauss")
                                     for s in ("coord", "inf")}}
        out[label] = entry
    return {job.digest: out[label] for label, job in module._jobs(NoProblem("full")).items()}


@pytest.mark.parametrize("verdicts, expected", [
    ({}, R), ({"ar1 rho=0.99": "VIOLATED"}, NR), ({"sine": "INCONCLUSIVE"}, INC)])
def test_c11_rule_part_a(verdicts, expected):
    result = claim_module("C11").decide_claim(NoProblem("full"), c11_results(verdicts))
    assert result.verdict == expected  # nonstationary controls are VIOLATED in every case
    assert result.reason.startswith("(a) ")
    assert "; (b) the proved Chebyshev bound: " in result.reason
    if expected == NR:
        assert "ar1 rho=0.99" in result.reason and "x2.00" in result.reason


def test_c11_part_b_reports_tightness_and_the_heuristic_bound_apart():
    module = claim_module("C11")
    result = module.decide_claim(NoProblem("full"), c11_results({}))
    assert "(b) the proved Chebyshev bound: never violated, never equal to the trivial" \
        in result.reason
    assert "sub-Gaussian" not in result.reason
    result = module.decide_claim(NoProblem("full"), c11_results(
        {}, vacuous={"regime"}, chebyshev_fail={"sine"}, gauss_fail={"ar1 rho=0.9"}))
    assert result.verdict == R  # (b) never changes the verdict
    assert "VIOLATED for sine" in result.reason
    assert "vacuous (equal to the trivial bound) for regime at 50% of lags" in result.reason
    assert "sub-Gaussian bound (heuristic, not proved) fails for ar1 rho=0.9" in result.reason
    assert result.numbers["chebyshev_vacuous_share"]["regime"] == 0.5
    assert result.numbers["trials"] == 500  # full mode's size
    assert module._size("quick")["trials"] == 100


def test_c11_process_job_holds_for_iid_and_reports_corrected_bounds():
    module = claim_module("C11")
    out = module.process_job(process="uniform", params={}, trials=20, dim=4, per_decade=1,
                             seed=0, horizon=100)
    assert out["paper"]["coord_overall"] != "VIOLATED" and out["inflation"]["coord"] < 1
    c = out["corrected"]
    assert c["kappa"] == pytest.approx([1.0] * len(out["lags"]))
    assert c["chebyshev_coord"]["n"] == 80 and c["chebyshev_inf"]["n"] == 20
    assert all(b >= g for b, g in zip(c["chebyshev_coord"]["bound"], c["gauss_coord"]["bound"]))
    assert len(c["worst_case"]) == len(out["lags"])


def test_c12_rule_on_the_real_tables_and_on_made_up_cells():
    from stepsim.sparse24.memory import Table5Cell

    module = claim_module("C12")
    plain = NoProblem("full")
    (job,) = module.jobs(plain)
    cells = module.memory_job()
    result = module.decide_claim(plain, {job.digest: cells})
    assert result.verdict == R  # the numbers match with no metadata
    assert result.reason.startswith("(1) numbers: 8/8 cells match at 2 bytes a value with no "
                                    "metadata; (2) the metadata sentence: ")
    n = result.numbers["metadata_sentence_matches"]
    assert n < 8 and f"{n}/8 match when the metadata is counted" in result.reason
    assert "does not count the metadata" in result.reason
    spoiled = copy.deepcopy(cells)
    spoiled["paper tensors, no metadata"][3]["verdict"] = NR
    result = module.decide_claim(plain, {job.digest: spoiled})
    assert result.verdict == NR and result.reason.startswith("(1) numbers: 7/8 cells match")
    assert module.cell_verdict(Table5Cell("gpt2", "2:4", 162.13, 162.129, "paper", "none")) == R
    assert module.cell_verdict(Table5Cell("gpt2", "2:4", 162.13, 174.56, "all", "index")) == NR


# --- combine and the record ------------------------------------------------------------


def test_combine_and_the_record():
    assert combine([R, R]) == R and combine([R, INC]) == INC and combine([R, NR, INC]) == NR
    with pytest.raises(ValueError):
        combine(["HOLDS"])
    with pytest.raises(ValueError, match="verdict must be one of"):
        ClaimResult("C0", "t", "HOLDS", "r", "rule", None, "p", (), "quick", {})
    assert rule_of("Title.\n\nRule (x): a\n  b.\n\nMore.") == "Rule (x): a b."
