"""`stepsim check` end to end on a quick subset: a well-formed report.json, report.md, figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stepsim.checks.verdict import VERDICTS
from stepsim.cli import main


def test_quick_subset_writes_a_well_formed_report(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["check", "C3", "C12", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "C3 " in printed and "C12 " in printed and "report.json" in printed
    doc = json.loads((out / "report.json").read_text())
    result, provenance = doc["result"], doc["provenance"]
    assert result["mode"] == "quick" and provenance["params"]["claims"] == ["C3", "C12"]
    assert provenance["versions"]["numpy"]
    claims = {c["claim"]: c for c in result["claims"]}
    assert list(claims) == ["C3", "C12"]
    for c in claims.values():
        assert c["verdict"] in VERDICTS and c["rule"].startswith("Rule (fixed before")
        assert c["runtime_s"] > 0 and c["versions"]["python"] and c["reason"]
        for figure in c["figures"]:
            assert (out / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    c3 = claims["C3"]
    assert c3["seeds"] == [0, 1, 2] and len(c3["effect"]["values"]) == 3
    assert c3["effect"]["ci_low"] <= c3["effect"]["estimate"] <= c3["effect"]["ci_high"]
    assert claims["C12"]["verdict"] == "NOT REPRODUCED"  # exact counts: no noise here
    md = (out / "report.md").read_text()
    assert "| C3 | **" in md and "## C12" in md and "rule: Rule (fixed before" in md


def test_bad_arguments_fail_before_any_work(tmp_path, capsys):
    assert main(["check", "C13", "--out", str(tmp_path / "x")]) == 2
    assert "unknown claim 'C13'" in capsys.readouterr().err
    assert main(["check", "C12", "--jobs", "0", "--out", str(tmp_path / "x")]) == 2
    assert "--jobs" in capsys.readouterr().err
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["check", "C12", "--out", str(a_file)]) == 2
    assert "--out must be a directory" in capsys.readouterr().err
    assert main(["check", "C1", "--problem-option", "nm=2:x", "--problem", "regression",
                 "--out", str(tmp_path / "x")]) == 2
    assert "--problem-option nm: bad value" in capsys.readouterr().err
    assert main(["check", "C1", "--problem", "regression", "--problem-option", "depth=3",
                 "--out", str(tmp_path / "x")]) == 2
    assert "unknown option(s) ['depth']" in capsys.readouterr().err
    assert main(["check", "C1", "--problem-option", "d_in=8", "--out", str(tmp_path / "x")]) == 2
    assert main(["check", "C1", "--steps", "10", "--out", str(tmp_path / "x")]) == 2
    assert "steps must be an integer >= 1500" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_help_imports_nothing_heavy():
    code = ("import sys; from stepsim.cli import build_parser; build_parser(); "
            "import stepsim.checks; print('numpy' in sys.modules, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_same_results_in_process_in_a_pool_and_on_dask():
    """Every executor gives the same numbers for the same runs (runtime aside)."""
    from dask.distributed import LocalCluster

    from stepsim.checks._setup import budget
    from stepsim.experiments import executors, traces

    b = budget("quick")
    specs = [b.fit("dense", s, steps=60, optimizer="adam", lr=1e-3) for s in (0, 1)]

    def collect(run, *args):
        out = {}
        run(specs, lambda spec, output: out.setdefault(spec.digest,
                                                       traces.summary(output.result)), *args)
        return out

    serial = collect(executors.run_serial)
    assert len(serial) == 2 and serial[specs[0].digest] != serial[specs[1].digest]
    assert collect(executors.run_pool, 2) == serial
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        assert collect(executors.run_dask, cluster.scheduler_address) == serial
