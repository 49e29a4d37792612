"""paper_checks/mnist1d_pilot.py --quick: every stage runs on a tiny model through the
experiments' executors and its run store, and writes its JSON (with provenance) and its
Markdown report; the full mode's constants keep the pilot off the protocol's seeds."""

import importlib.util
import json
from pathlib import Path

import numpy as np

PATH = Path(__file__).resolve().parents[2] / "paper_checks" / "mnist1d_pilot.py"


def _script():
    spec = importlib.util.spec_from_file_location("mnist1d_pilot_script", PATH)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_pilot_seeds_are_not_the_protocols_and_choices_read_no_test_split():
    from stepsim.checks import protocol

    script = _script()
    pilot = set(script.SEEDS["tuning"]) | set(script.SEEDS["evaluation"])
    used = set().union(*(set(rules.seeds.tuning) | set(rules.seeds.full)
                         for rules in protocol.TYPED.values()))
    assert not pilot & used and min(pilot) >= 2000
    assert "split=\"test\"" not in PATH.read_text() and "x_test" not in PATH.read_text()
    assert script.MODEL in script.SCREEN


def test_pilot_quick_mode_runs_every_stage(tmp_path):
    script = _script()
    out = tmp_path / "pilot.json"
    assert script.main(["--quick", "--jobs", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    result, params = doc["result"], doc["provenance"]["params"]
    assert params["mode"] == "quick" and doc["provenance"]["seed"] == [2000, 2001, 2002]
    assert result["registration"] is None
    assert {r["lr"] for r in result["screen"]} == {1e-3, 3e-3}
    chosen = {c["name"]: c for c in result["chosen"]}
    assert set(chosen) == {"dense adam dense", "dense sgdm dense", "sr-ste adam 1:4",
                           "sr-ste sgdm 1:4"}
    assert chosen["sr-ste adam 1:4"]["lam"] == 2e-4 and chosen["dense adam dense"]["lam"] is None
    for row in result["gaps"]:
        gap = row["gap"]
        assert np.isfinite(gap["mean"]) and gap["n"] == 2
        assert abs(gap["mean"] - np.mean(gap["per_seed"])) < 1e-9
    assert [r["optimizer"] for r in result["gaps"]] == ["adam", "sgdm", "adam"]
    assert len(result["c1"]) == 1 and len(result["step"]) == 4
    for row in result["step"]:
        assert sum(row["causes"].values()) == 2
    text = (tmp_path / "pilot.md").read_text()
    assert "Quick mode" in text and "## 4. STEP's switch" in text
    assert (tmp_path / "pilot.runs").is_dir()
    # a second call reads every run from the store
    assert script.main(["--quick", "--jobs", "1", "--out", str(out)]) == 0
