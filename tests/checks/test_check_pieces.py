"""The registered protocol's small pieces: ``switch_cause``, ``tuning.choose``, config
keys, ``settings``, the tuned learning rates of a budget, and what a diverged run's view
is (one tiny run that diverges on purpose).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from stepsim.checks import CLAIMS, EXTRAS, get_claim, parse_claims, protocol, tuning
from stepsim.checks.budget import Budget, switch_cause
from stepsim.checks.verdict import rule_of
from tests.checks.fake_views import N_DIGITS, SEEDS, digit_items, make_view

# --- the rules and the small pieces ------------------------------------------------------


def test_every_claim_module_registers_its_claim_with_its_rule_and_parse_claims():
    import importlib

    for claim, name in {**CLAIMS, **EXTRAS}.items():
        record = get_claim(claim)
        module = importlib.import_module(f"stepsim.checks.{name}")
        assert record is module.CLAIM and record.id == claim
        assert record.rule.startswith("Rule (PROTOCOL") and record.rule == rule_of(module.__doc__)
        assert record.decide is module.decide_claim and record.jobs is module.jobs
        assert (record.figure is None) != (record.figures is None), claim  # draws, once
        assert record.extra == (claim in EXTRAS)
    assert get_claim("c5") is get_claim("C5")
    with pytest.raises(ValueError, match="unknown claim 'C13'"):
        get_claim("C13")
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
    r4, r5 = protocol.TYPED[4], protocol.TYPED[5]
    assert r4.settings("full") == [("digits", "main", None), ("digits", "fast", ("C5",)),
                                   ("lm", "fast", None)]
    assert r4.settings("quick") == [("digits", "fast", None)]
    assert r4.settings("full", ["lm"]) == [("lm", "fast", None)]
    assert r4.settings("full", ["digits"]) == [("digits", "main", None),
                                               ("digits", "fast", ("C5",))]
    with pytest.raises(ValueError, match=r"problem 'lm' is not in quick mode, which runs only "
                       r"\['digits'\]; check it in full mode"):
        r4.settings("quick", ["lm"])  # refused, not an empty check
    # draft 5: the problems at their main timescales (the agreement check and the LM are
    # --extended's: PROTOCOL.md D5.11's budget), quick mode on all three at the fast timescale
    assert r5.settings("full") == [("digits", "main", None), ("mnist1d", "cnn", None)]
    assert r5.settings("full", extended=True) == [("digits", "main", None),
                                                  ("lm", "fast", None), ("mnist1d", "cnn", None)]
    with pytest.raises(ValueError, match=r"problem 'lm' belongs to the extended set of the "
                       r"protocol .*: check it with --extended"):
        r5.settings("full", ["lm"])  # named without --extended: refused, not an empty check
    assert r5.settings("full", ["lm"], extended=True) == [("lm", "fast", None)]
    assert r5.settings("quick") == [("digits", "fast", None), ("lm", "fast", None),
                                    ("mnist1d", "fast", None)]
    with pytest.raises(ValueError, match="problem must be one of"):
        protocol.RULES.settings("full", ["regression"])


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
    """Draft 4's tuning rule (an lr per config; draft 5's candidates: test_draft5_plan.py)
    on a fixed 5-value grid (the protocol's grid may grow by its edge rule)."""
    monkeypatch.setattr(protocol, "RULES", protocol.TYPED[4].with_value(
        "grids.digits.adam", [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]))


def tuning_case(means_by_lr, diverged=()):
    """tuning.jobs for one config on digits/main and fake results whose tuning-seed mean
    error at grid value j is means_by_lr[j] (wrong images: 9 per point, to the image)."""
    probe = Budget("full", "digits", "main", SEEDS, steps=200)
    groups = tuning.jobs({"digits/main": (probe, {"adam|sr-ste|1:8"})})
    (key, group), = groups.items()
    assert key == ("digits/main", "adam|sr-ste|1:8")
    grid = protocol.RULES.grid("digits", "adam")
    assert group["grid"] == grid and group["seeds"] == 3 and len(group["tasks"]) == 15
    results = {}
    for j, lr in enumerate(grid):
        tasks = group["tasks"][3 * j:3 * j + 3]
        assert tuple(t.seed for t in tasks) == protocol.RULES.seeds.tuning
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
    from stepsim.checks.execution import view
    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    b = Budget("full", "digits", "main", SEEDS, lrs={"adam|dense|-": 1e-3}, steps=200)
    ok = b.run("dense", 0)
    bad = b.run("dense", 0, optimizer="sgdm", lr=1e6)  # non-finite within a few steps
    store = RunStore(tmp_path)
    executors.run_serial([ok, bad], store.save)
    good, lost = view(store, ok), view(store, bad)
    assert not good["diverged"] and good["items"].shape == (N_DIGITS,)
    assert set(np.unique(good["items"])) <= {0.0, 100.0}
    assert good["error"] == pytest.approx(np.mean(good["items"]))
    assert good["error"] < 50 and good["seconds"] >= 0
    assert lost["diverged"] and lost["stopped_at"] is not None
    assert np.all(lost["items"] == 100.0) and lost["error"] == 100.0
    assert lost["metrics"]["test_accuracy"] > 0.05  # chance-level guesses: not credited


def test_a_full_check_of_a_problem_outside_quick_mode_is_planned():
    """``stepsim check --problem lm`` (full mode, draft 4): its tuning covers the LM only
    (quick mode, whose configs a full tuning also covers, has no LM setting)."""
    from stepsim.checks.planning import plan

    made = plan(["C5"], "full", protocol.TYPED[4], problems=["lm"])
    assert made.evaluation is None and made.tuning
    assert {setting for setting, _ in made.tuning} == {"lm/fast"}
    assert {b.problem for b in made.budgets} == {"lm"}
    with pytest.raises(ValueError, match="not in quick mode"):
        plan(["C5"], "quick", protocol.TYPED[4], problems=["lm"])


def test_same_report_compares_reports_apart_from_their_times(tmp_path):
    """tests/checks/same_report.py (the refactors' check that no result moved): times and
    run ids are ignored, a verdict or a run count that moved is found."""
    import json

    from tests.checks import same_report

    def write(name, *, runtime, verdict, runs):
        doc = {"result": {"runtime_s": runtime, "run_id": name, "compute": {
            "runs": runs, "worker_s": runtime * 2},
            "claims": [{"claim": "C1", "verdict": verdict, "runtime_s": runtime}]},
            "provenance": {"params": {"run_id": name, "mode": "quick"}, "created_utc": name}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    a = write("a", runtime=1.0, verdict="REPRODUCED", runs=3)
    b = write("b", runtime=9.0, verdict="REPRODUCED", runs=3)
    assert same_report.main([a, b]) == 0
    c = write("c", runtime=1.0, verdict="INCONCLUSIVE", runs=4)
    found = same_report.differences(same_report.comparable(a), same_report.comparable(c))
    assert found == [".result.claims[0].verdict: 'REPRODUCED' != 'INCONCLUSIVE'",
                     ".result.compute.runs: 3 != 4"]


def test_quick_mode_reads_step_at_its_own_choice_only_for_c5_and_c6():
    """PROTOCOL.md D5.11's amendment (``quick.own_claims``): quick mode's "own" reading is
    C5's and C6's; C4, C7 and C8 are read in place only (full mode reads both)."""
    from stepsim.checks import planning

    r5 = protocol.TYPED[5]
    quick = planning.plan(["C4", "C5", "C6", "C7", "C8"], "quick", r5, problems=["digits"])
    own = {b.key: b.only for b in quick.budgets if b.step_lr == "own"}
    assert own == {"digits/fast@own-lr": ("C5", "C6")}
    full = planning.plan(["C4", "C5", "C6", "C7", "C8"], "full", r5, problems=["digits"])
    assert {b.key: b.only for b in full.budgets if b.step_lr == "own"} == {
        "digits/main@own-lr": ("C4", "C5", "C6", "C7", "C8")}


def test_a_full_check_without_extended_says_what_it_left_out():
    """PROTOCOL.md D5.11: the registered full run's report names the extended set's parts
    it did not run; quick mode, --extended and draft 4 name none."""
    import types

    from stepsim.checks import markdown, planning

    r5 = protocol.TYPED[5]
    core = planning.plan(["all"], "full", r5)
    lines = planning.extended_set_left_out(core)
    assert lines[:3] == ["problem lm: every claim", "claim C9", "claim S1"]
    assert "the secondary readings on digits (freeze-sparse, fractions, tie)" in lines
    assert "cosine with warm-up on digits" in lines
    assert planning.extended_set_left_out(planning.plan(["all"], "full", r5,
                                                        extended=True)) == []
    assert planning.extended_set_left_out(planning.plan(["C3"], "quick", r5)) == []
    assert planning.extended_set_left_out(planning.plan(["C3"], "full",
                                                        protocol.TYPED[4])) == []
    text = "\n".join(markdown._operating_markdown(
        types.SimpleNamespace(operating={"extended_set": lines})))
    assert "## Not run by this check: the extended set" in text
    assert "- claim S1" in text
