"""Every verdict rule of the registered protocol (paper_checks/PROTOCOL.md §5-§7), on fake
run views whose right verdict is known.

No training here (but for one tiny run that diverges on purpose): each claim module's
``jobs(budget)`` is generated for a protocol budget, every job is classified back into
what it is (recipe key, optimizer, N:M, criterion, loss scale, seed), and a scenario
decides its view — on digits, the per-image errors are 100.0 on a chosen number of the
899 held-out images (a prefix, so that runs of one seed are nested and their contrasts
have a known test-set sampling error); on the LM, per-sequence loss gaps. The right
verdict then follows from the claim's rule: REPRODUCED, NOT REPRODUCED, INCONCLUSIVE
(noise, premise absent), and for the STEP claims the "either reading" logic.

Also here: the protocol's small pieces (``switch_cause``, ``tuning.choose``, config keys,
``settings``), the generic rule of the older checks, and what a diverged run's view is.
"""

from __future__ import annotations

import copy
import math
import re
import zlib

import numpy as np
import pytest

from stepsim.checks import CLAIMS, claim_module, parse_claims, protocol, tuning
from stepsim.checks._setup import RECIPES, Budget, NoProblem, switch_cause
from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ClaimResult,
    combine,
    rule_of,
)

R, NR, INC = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
SEEDS = tuple(range(8))
N_DIGITS = 899  # the held-out half of scikit-learn's 1797 digits (PROTOCOL §1)
N_LM = 512
#: recipe options that are not part of a recipe key (set per run by the budget)
PER_RUN = {"lr", "beta2", "momentum", "layerwise_m", "layerwise_target"}


# --- budgets and job classification -----------------------------------------------------


def needed_keys(module, problem="digits", timescale="main", only=None, steps=0) -> set:
    probe = Budget("full", problem, timescale, SEEDS, lrs=None, only=only, steps=steps)
    module.jobs(probe)
    return set(probe.needed)


def budget_for(module, problem="digits", timescale="main", *, only=None, steps=0, lrs=None):
    """A full-mode budget whose every needed config has lr 1e-3 (or ``lrs``' value)."""
    keys = needed_keys(module, problem, timescale, only, steps)
    chosen = {k: 1e-3 for k in keys}
    chosen.update(lrs or {})
    return Budget("full", problem, timescale, SEEDS, lrs=chosen, only=only, steps=steps)


def classify(spec) -> dict:
    """What a RunSpec is, in the protocol's words."""
    options = dict(spec.recipe_options)
    core = {k: v for k, v in options.items() if k not in PER_RUN}
    keys = [k for k, (name, o) in RECIPES.items() if name == spec.recipe and o == core]
    assert len(keys) == 1, (spec.recipe, core, keys)
    criterion = dict(spec.criterion_options)
    return {"key": keys[0], "opt": spec.optimizer, "nm": spec.nm, "m": options.get("layerwise_m"),
            "criterion": spec.criterion, "clip": bool(criterion.pop("clip", False)),
            "copts": criterion, "scale": spec.loss_scale, "seed": spec.seed,
            "lr": options["lr"], "steps": spec.steps}


# --- fake views -------------------------------------------------------------------------


def digit_items(wrong) -> np.ndarray:
    """100.0 on the first ``wrong`` images (or on images[start:start + count])."""
    start, count = (0, wrong) if isinstance(wrong, int) else wrong
    assert 0 <= start and 0 <= count and start + count <= N_DIGITS
    x = np.zeros(N_DIGITS)
    x[start:start + count] = 100.0
    return x


def lm_items(gap: float, salt: str) -> np.ndarray:
    """Per-sequence loss gaps around ``gap`` nats (a run's own small noise)."""
    rng = np.random.default_rng(zlib.crc32(salt.encode()))
    return gap + 0.01 * rng.standard_normal(N_LM)


def make_view(items, *, steps=5000, switch_step=None, curve=None, lm=False, v_late_ratio=0.05,
              z_min=1e-9, diverged=False, score=1.0) -> dict:
    """A run's view as ``report._view`` makes it. curve: error at each of the 10 evaluation
    points (default: flat at the final error, i.e. converged)."""
    items = np.asarray(items, dtype=np.float64)
    error = float(np.mean(items))
    at = [steps // 10 * (j + 1) for j in range(10)]
    curve = [error] * 10 if curve is None else list(curve)
    curves = {"step": at, "gap": curve} if lm else {
        "step": at, "test_accuracy": [1.0 - e / 100.0 for e in curve]}
    v_steps = [1, 10, 100, 1000, steps]
    return {"error": error, "items": items, "diverged": diverged, "switch_step": switch_step,
            "curves": curves, "v_late_ratio": v_late_ratio,
            "z_window": {"min_mean": z_min, "at_step": steps, "window": 1000},
            "v_curve": {"step": v_steps, "v_l1": [1.0, 2.0, 1.5, 1.0, v_late_ratio * 2],
                        "z": [1e-3, 1e-5, 1e-7, 1e-9, 1e-10]},
            "table1": {"k0": switch_step, "score": score}, "seconds": 0.0}


def views(module, budget, scenario) -> dict:
    """digest -> view for every job of ``module``; scenario(job, i) -> the view's keyword
    arguments, "wrong" (digits: number of wrong images, or (start, count)) or "gap" (lm),
    i = the seed's index."""
    out = {}
    lm = budget.problem == "lm"
    for spec in module.jobs(budget):
        job = classify(spec)
        i = budget.seeds.index(job["seed"])
        kw = dict(scenario(job, i))
        if lm:
            items = lm_items(kw.pop("gap"), f"{spec.digest}")
        else:
            items = digit_items(kw.pop("wrong"))
        out[spec.digest] = make_view(items, steps=budget.steps, lm=lm, **kw)
    return out


def decided(module, budget, scenario) -> ClaimResult:
    result = module.decide_claim(budget, views(module, budget, scenario))
    assert result.verdict in (R, NR, INC) and result.rule == module.RULE
    assert result.parts and all(p.verdict in (R, NR, INC) for p in result.parts)
    assert combine(p.verdict for p in result.parts) in (R, NR, INC)
    return result


def parts(result) -> dict:
    return {p.name: p for p in result.parts}


def base(i: int) -> int:
    """Per-seed variation common to every run of a seed (cancels in a paired contrast)."""
    return 20 + i % 3


# --- the rules and the small pieces ------------------------------------------------------


def test_every_claim_module_states_its_registered_rule_and_parse_claims():
    for claim in CLAIMS:
        module = claim_module(claim)
        assert module.CLAIM == claim and module.RULE.startswith("Rule (PROTOCOL"), claim
        assert module.RULE == rule_of(module.__doc__)
    assert parse_claims(["all"]) == list(CLAIMS)
    assert parse_claims(None) == list(CLAIMS)
    assert parse_claims(["c12", "C1", "C1"]) == ["C1", "C12"]
    with pytest.raises(ValueError, match="unknown claim 'C13'"):
        parse_claims(["C13"])
    with pytest.raises(ValueError, match="unknown claim 'C99'"):
        parse_claims(["all", "C99"])


def test_switch_cause_names_why_a_run_switched_when_it_did():
    T, w = 5000, 1000  # main timescale: T_w = 1000 > 0.1 T
    assert switch_cause(None, T, w, clip=True) == "never"
    assert switch_cause(2501, T, w, clip=True) == "clip"  # floor(0.5 T) + 1
    assert switch_cause(2501, T, w, clip=False) == "fired"  # unclipped: no forced step
    assert switch_cause(2500, T, w, clip=True) == "fired"
    assert switch_cause(1000, T, w, clip=True) == "window"  # max(T_w, floor(0.1 T) + 1)
    assert switch_cause(1000, T, w, clip=False) == "window"  # T_w unclipped
    assert switch_cause(1001, T, w, clip=True) == "fired"
    T, w = 2000, 100  # fast timescale: the lower clip is later than the window
    assert switch_cause(201, T, w, clip=True) == "window"
    assert switch_cause(100, T, w, clip=False) == "window"
    assert switch_cause(201, T, w, clip=False) == "fired"
    assert switch_cause(1001, T, w, clip=True) == "clip"
    assert switch_cause(1001, T, w, clip=False) == "fired"


def test_config_keys_round_trip_and_step_reuses_srste():
    for args in [("adam", "sr-ste", (1, 8), None), ("sgdm", "dense", None, None),
                 ("adam", "lw-sr-ste", None, 16), ("adam", "decay-nodense", (2, 4), None)]:
        assert protocol.parse_key(protocol.config_key(*args)) == args
    assert protocol.config_key("sgdm", "dense") == "sgdm|dense|-"
    assert protocol.config_key("adam", "lw-sr-ste", m=8) == "adam|lw-sr-ste|M8"
    for step, tuned in protocol.TUNED_AS.items():
        assert protocol.config_key("adam", step, (1, 8)) == protocol.config_key("adam", tuned,
                                                                               (1, 8))
    assert protocol.config_key("adam", "step-sr", (1, 8)) == "adam|sr-ste|1:8"
    assert protocol.config_key("adam", "lw-step-a1", m=16) == "adam|lw-sr-ste|M16"
    # the others are tuned each: the decaying mask's two variants, ASP
    assert protocol.config_key("adam", "decay-dense", (1, 8)) != protocol.config_key(
        "adam", "decay-nodense", (1, 8))


def test_settings_of_full_and_quick_mode():
    assert protocol.settings("full") == [("digits", "main", None), ("digits", "fast", ("C5",)),
                                         ("lm", "fast", None)]
    assert protocol.settings("quick") == [("digits", "fast", None)]
    assert protocol.settings("full", ["lm"]) == [("lm", "fast", None)]
    assert protocol.settings("full", ["digits"]) == [("digits", "main", None),
                                                     ("digits", "fast", ("C5",))]
    with pytest.raises(ValueError, match=r"problem 'lm' is not in quick mode, which runs only "
                       r"\['digits'\]; check it in full mode"):
        protocol.settings("quick", ["lm"])  # refused, not an empty check
    with pytest.raises(ValueError, match="problem must be one of"):
        protocol.settings("full", ["regression"])


def test_budget_runs_use_the_tuned_lr_of_their_config_and_the_timescale():
    lrs = {"adam|sr-ste|1:8": 0.003, "adam|dense|-": 0.01, "sgdm|dense|-": 0.3}
    b = Budget("full", "digits", "main", SEEDS, lrs=lrs)
    assert (b.steps, b.beta2, b.window, b.margin) == (5000, 0.999, 1000, 0.5)
    for key in ("sr-ste", "step-a1", "step-sr", "step-sr-vupd"):
        spec = b.run(key, 0, nm=(1, 8))
        assert dict(spec.recipe_options)["lr"] == 0.003 and dict(spec.recipe_options)[
            "beta2"] == 0.999
    sgdm = dict(b.run("dense", 0, optimizer="sgdm").recipe_options)
    assert sgdm["lr"] == 0.3 and sgdm["momentum"] == 0.9 and "beta2" not in sgdm
    assert b.run("dense", 3).eval_every == 500 and b.run("dense", 3).seed == 3
    with pytest.raises(KeyError, match=re.escape("no tuned learning rate for adam|asp|1:8")):
        b.run("asp", 0, nm=(1, 8))
    fast = Budget("quick", "digits", "fast", (0, 1, 2), lrs={})
    assert (fast.steps, fast.beta2, fast.window) == (2000, 0.99, 100)
    lm = Budget("full", "lm", "fast", SEEDS)
    assert lm.margin == 0.02 and lm.nms == ((2, 4), (1, 8))
    assert Budget("full", "digits", "main", SEEDS, steps=200).steps == 200


# --- tuning -----------------------------------------------------------------------------


@pytest.fixture
def five_point_grid(monkeypatch):
    """The tuning rule on a fixed 5-value grid (the protocol's grid may grow by its edge rule)."""
    monkeypatch.setitem(protocol.RULES["grids"]["digits"], "adam", [3e-4, 1e-3, 3e-3, 1e-2, 3e-2])


def tuning_case(means_by_lr, diverged=()):
    """tuning.jobs for one config on digits/main and fake results whose tuning-seed mean
    error at grid value j is means_by_lr[j] (wrong images: 9 per point, to the image)."""
    probe = Budget("full", "digits", "main", SEEDS, steps=200)
    groups = tuning.jobs({"digits/main": (probe, {"adam|sr-ste|1:8"})})
    (key, group), = groups.items()
    assert key == ("digits/main", "adam|sr-ste|1:8")
    grid = protocol.grid("digits", "adam")
    assert group["grid"] == grid and group["seeds"] == 3 and len(group["tasks"]) == 15
    results = {}
    for j, lr in enumerate(grid):
        tasks = group["tasks"][3 * j:3 * j + 3]
        assert [t.seed for t in tasks] == protocol.RULES["seeds"]["tuning"]
        for k, t in enumerate(tasks):
            assert dict(t.recipe_options)["lr"] == lr and t.eval_every is None
            assert t.steps == 200 and t.nm == (1, 8) and t.recipe == "sr-ste"
            wrong = int(means_by_lr[j]) + (k - 1)  # seeds around the mean
            results[t.digest] = make_view(digit_items(wrong),
                                          diverged=(j, k) in diverged)
    return groups, results


def test_tuning_chooses_the_lowest_mean_and_flags_the_grid_edges(five_point_grid):
    groups, results = tuning_case([50, 40, 30, 60, 70])
    chosen, table = tuning.choose(groups, results)
    assert chosen == {"digits/main": {"adam|sr-ste|1:8": 3e-3}}
    row = table["digits/main"]["adam|sr-ste|1:8"]
    assert row["choice"] == 3e-3 and row["edge"] is None and row["grid"] == [3e-4, 1e-3, 3e-3,
                                                                            1e-2, 3e-2]
    assert row["means"] == pytest.approx([100 * w / N_DIGITS for w in (50, 40, 30, 60, 70)])
    chosen, table = tuning.choose(*tuning_case([20, 40, 30, 60, 70]))
    assert table["digits/main"]["adam|sr-ste|1:8"]["edge"] == "low"
    assert chosen["digits/main"]["adam|sr-ste|1:8"] == 3e-4
    chosen, table = tuning.choose(*tuning_case([80, 40, 30, 60, 20]))
    assert table["digits/main"]["adam|sr-ste|1:8"]["edge"] == "high"


def test_tuning_ties_go_to_the_smaller_lr_and_a_diverged_run_is_infinite(five_point_grid):
    chosen, _ = tuning.choose(*tuning_case([50, 30, 30, 60, 30]))
    assert chosen["digits/main"]["adam|sr-ste|1:8"] == 1e-3
    # one diverged tuning seed makes its grid value +inf, however low its error reads
    chosen, table = tuning.choose(*tuning_case([50, 10, 30, 60, 70], diverged={(1, 2)}))
    row = table["digits/main"]["adam|sr-ste|1:8"]
    assert row["means"][1] == math.inf and row["choice"] == 3e-3
    assert chosen["digits/main"]["adam|sr-ste|1:8"] == 3e-3


def test_a_missing_committed_file_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(tuning, "COMMITTED", tmp_path / "tuned_lrs.json")
    with pytest.raises(FileNotFoundError, match="tuned_lrs.json is missing: quick mode reuses"):
        tuning.committed()
    path = tuning.write_committed({"digits/fast": {"adam|dense|-": 0.01}},
                                  tmp_path / "tuned_lrs.json", source="a test")
    assert path.exists() and tuning.committed() == {"digits/fast": {"adam|dense|-": 0.01}}


# --- a diverged run ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the diverging run's overflow
def test_a_diverged_runs_view_counts_as_predicting_nothing(tmp_path):
    from stepsim.checks.report import _view
    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    b = Budget("full", "digits", "main", SEEDS, lrs={"adam|dense|-": 1e-3}, steps=200)
    ok = b.run("dense", 0)
    bad = b.run("dense", 0, optimizer="sgdm", lr=1e6)  # non-finite within a few steps
    store = RunStore(tmp_path)
    executors.run_serial([ok, bad], store.save)
    good, lost = _view(store, ok), _view(store, bad)
    assert not good["diverged"] and good["items"].shape == (N_DIGITS,)
    assert set(np.unique(good["items"])) <= {0.0, 100.0}
    assert good["error"] == pytest.approx(np.mean(good["items"]))
    assert good["error"] < 50 and good["seconds"] >= 0
    assert lost["diverged"] and lost["stopped_at"] is not None
    assert np.all(lost["items"] == 100.0) and lost["error"] == 100.0
    assert lost["metrics"]["test_accuracy"] > 0.05  # chance-level guesses: not credited


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
