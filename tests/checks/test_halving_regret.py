"""paper_checks/halving_regret.py: the successive-halving rules it simulates, their compute
count, the blow-up stop, and its quick mode end to end (runs, checks, held-out, files)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "paper_checks" / "halving_regret.py"


@pytest.fixture(scope="module")
def hr():
    spec = importlib.util.spec_from_file_location("halving_regret", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def run(curve, final, stopped_at=None, steps=100):
    """A view-like run: error at each curve step, final error, where it stopped."""
    return {"curve": dict(curve), "final": final, "stopped_at": stopped_at,
            "executed": steps if stopped_at is None else stopped_at}


GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]


def grid_runs(at25, at50, final, seeds=2):
    """Per lr, ``seeds`` identical runs with those errors at steps 25, 50 and 100."""
    return [[run({25: a, 50: b}, f) for _ in range(seeds)] for a, b, f in zip(at25, at50, final)]


def test_halving_promotes_by_rung_means_and_counts_run_steps(hr):
    # 1e-2 is the best at T but only third at T/4: keep 1/3 (2 of 6) drops it, keep 1/2 not
    runs = grid_runs(at25=[90, 50, 20, 10, 15, 12], at50=[80, 40, 15, 9, 8, 11],
                     final=[70, 30, 10, 6, 4, 7])
    sh3 = hr.simulate(GRID, runs, 100, hr.Variant("a", (0.25, 0.5), 1 / 3, 1))
    assert [r[1] for r in sh3["rungs"]] == [[0, 1, 2, 3, 4, 5], [3, 5]]
    assert sh3["choice"] == 3 and sh3["finalists"] == [3]
    # from scratch: 6 runs of 25, 2 of 50, 1 of 100 per seed; resumed: 4 x 25, 1 x 50, 1 x 100
    assert sh3["steps_scratch"] == 2 * (6 * 25 + 2 * 50 + 100)
    assert sh3["steps_resumed"] == 2 * (4 * 25 + 50 + 100)
    sh2 = hr.simulate(GRID, runs, 100, hr.Variant("b", (0.25, 0.5), 1 / 2, 1))
    assert [r[1] for r in sh2["rungs"]][1] == [3, 4, 5] and sh2["choice"] == 4
    assert hr.full_grid_choice(GRID, [[r["final"] for r in per] for per in runs]) == 4


def test_two_finalists_are_chosen_by_final_error_and_ties_go_to_the_smaller_lr(hr):
    runs = grid_runs(at25=[9, 9, 9, 5, 5, 9], at50=[9, 9, 9, 6, 5, 9],
                     final=[9, 9, 9, 3, 3, 9])
    one = hr.simulate(GRID, runs, 100, hr.Variant("a", (0.25, 0.5), 1 / 3, 1))
    two = hr.simulate(GRID, runs, 100, hr.Variant("b", (0.25, 0.5), 1 / 3, 2))
    assert one["choice"] == 4  # the best at T/2
    assert two["finalists"] == [3, 4] and two["choice"] == 3  # tied at T: the smaller lr
    # a tie at a rung goes to the smaller lr as well: 3 and 4 tie at T/4, keep 1 of 6
    tie = hr.simulate(GRID, runs, 100, hr.Variant("c", (0.25, 0.5), 1 / 6, 1))
    assert tie["rungs"][1][1] == [3]


def test_a_run_that_stopped_is_infinite_at_every_later_rung_and_costs_its_steps(hr):
    runs = grid_runs(at25=[9, 8, 7, 6, 5, 1], at50=[9, 8, 7, 6, 5, 1], final=[9, 8, 7, 6, 5, 1])
    runs[5][1] = run({}, math.inf, stopped_at=10)  # the best lr diverged on one seed
    assert hr.rung_error(runs[5][1], 25) == math.inf
    assert hr.rung_error(run({25: 3.0}, 3.0, stopped_at=30), 25) == 3.0
    sim = hr.simulate(GRID, runs, 100, hr.Variant("a", (0.25, 0.5), 1 / 3, 1))
    assert sim["rungs"][0][2][5] == math.inf and sim["choice"] == 4
    assert sim["steps_scratch"] == 2 * (6 * 25 + 2 * 50 + 100) - (25 - 10)


def test_config_table_reports_regret_the_tie_set_and_what_halving_can_know_of_it(hr):
    runs = grid_runs(at25=[90, 50, 20, 10, 15, 12], at50=[80, 40, 15, 9, 8, 11],
                     final=[70, 30, 10, 6, 4, 7], seeds=3)
    runs[3][0]["final"] = 2.0  # 3e-3: 2, 6, 6 vs 1e-2's 4, 4, 4: d = (-2, 2, 2), tied
    variants = (hr.Variant("a", (0.25, 0.5), 1 / 3, 1), hr.Variant("b", (0.25, 0.5), 1 / 2, 2),
                hr.Variant("late", (0.35, 0.7), 1 / 3, 1))
    table = hr.config_table(GRID, runs, 100, variants, {25, 50, 100})
    assert table["choice"] == 1e-2 and table["tie"] == [3e-3, 1e-2]
    a, b = table["variants"]["a"], table["variants"]["b"]
    assert a["choice"] == 3e-3 and a["differs"] and a["in_tie_set"]
    assert a["regret"] == pytest.approx(2 / 3) and a["tie_known"] == [3e-3]
    assert b["choice"] == 1e-2 and not b["differs"] and b["finalists"] == [3e-3, 1e-2]
    assert b["tie_known"] == [3e-3, 1e-2]
    assert "late" not in table["variants"]  # its rungs are not curve steps
    assert a["saved_scratch"] == pytest.approx(1 - 350 / 600)


def test_blowup_step_is_the_first_loss_above_ten_times_the_first_or_non_finite(hr):
    assert hr.blowup_step([2.3, 2.0, 23.1, 1.0]) == 3
    assert hr.blowup_step([2.3, 22.9, float("nan")]) == 3
    assert hr.blowup_step([2.3, 2.0, 1.0]) is None
    assert hr.blowup_step([]) is None
    common = {"config": "k", "seed": 0, "choice": 1e-2, "tie": [1e-2]}
    rows = [{"blowup": {10.0: 3}, "executed": 100, "stopped_at": None, "diverged": False,
             "final": 4.0, "lr": 1e-2, **common},
            {"blowup": {10.0: 5}, "executed": 40, "stopped_at": 40, "diverged": True,
             "final": math.inf, "lr": 3e-2, **common},
            {"blowup": {10.0: None}, "executed": 100, "stopped_at": None, "diverged": False,
             "final": 4.0, "lr": 1e-3, **common}]
    table = hr.blowup_table(rows, 10.0)
    assert table["stopped"] == 2 and table["stopped_then_nonfinite"] == 1
    assert table["diverged"] == 1
    assert table["saved_steps"] == 97 + 35 and table["executed_steps"] == 240
    assert table["false_stops"] == [{"config": "k", "lr": 1e-2, "seed": 0, "step": 3,
                                     "final": 4.0, "chosen": True, "tied": True}]


def test_quick_mode_runs_checks_and_writes_its_files(hr, tmp_path):
    out = tmp_path / "hr.json"
    store = tmp_path / "runs"
    assert hr.main(["--quick", "--jobs", "1", "--store", str(store), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    result = doc["result"]
    assert doc["provenance"]["params"]["quick"] is True
    assert doc["provenance"]["seed"] == {"tuning": [1000, 1001], "evaluation": [0, 1]}
    rows = result["tables"]["digits/main"]
    assert set(rows) == {"adam|sr-ste|1:8", "adam|asp|1:8"}
    for row in rows.values():
        assert row["choice"] in row["grid"] and set(row["variants"]) == {
            v.name for v in hr.VARIANTS}
        assert len(row["runs"]) == 6 and all(len(per) == 2 for per in row["runs"])
    # the method's checks ran and hold: curves change nothing; a rung's run from scratch
    # is the full run's prefix
    assert [c["equal"] for c in result["checks"]["curves"]] == [True]
    assert [c["step"] for c in result["checks"]["prefix"]] == [50, 100]
    assert all(c["equal"] for c in result["checks"]["prefix"])
    # the ledger beside the store: this call, with the runs it made
    (call,) = json.loads((tmp_path / "runs.calls.json").read_text())
    assert call["runs_run"] == result["compute"]["runs_run_this_call"] >= 24 + 1 + 2
    md = out.with_suffix(".md").read_text()
    assert "## Summary" in md and "## Held-out regret" in md and "## Blow-up stop" in md
    # the held-out comparison on its own (the quick grid may choose the same lr everywhere)
    from stepsim.experiments.store import RunStore

    runner = hr.Runner(RunStore(store), 1)
    h = hr.held_out("digits", "adam|sr-ste|1:8", [1e-2, 1e-3], (0, 1), runner,
                    steps=hr.QUICK_STEPS)
    assert runner.runs == 4  # two lrs x two seeds, none in the store before
    (d,) = h["differences"]
    assert d["n"] == 2 and d["ci_low"] <= d["estimate"] <= d["ci_high"]
    assert d["estimate"] == pytest.approx(h["mean_error"]["0.001"] - h["mean_error"]["0.01"])
