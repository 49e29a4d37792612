"""`stepsim check` survives SIGKILL: the same command again redoes only the runs in flight,
and its report's verdict numbers equal a straight run's; equal runs are run once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stepsim.checks import run_checks

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ["C3", "C10"]  # 12 short regression runs: a kill lands mid-check, quickly


def verdict_numbers(out: Path) -> list:
    """Each claim of report.json without what differs between equal runs (times, versions,
    figure paths)."""
    doc = json.loads((out / "report.json").read_text())["result"]
    return [{k: v for k, v in c.items() if k not in ("runtime_s", "versions")}
            for c in doc["claims"]]


def finished(out: Path) -> dict:
    """digest -> mtime of every finished run's JSON in the store."""
    return {p.stem: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")
            if not p.name.startswith(".")}


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigkill_mid_check_then_resume_gives_the_same_report(tmp_path):
    straight = tmp_path / "straight"
    run_checks(CLAIMS, mode="quick", out=straight, progress=False)
    total = len(finished(straight))

    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "stepsim", "check", *CLAIMS, "--quick", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 90
    try:  # kill -9 as soon as two runs are stored: mid-check, maybe mid-write
        while not (out / "runs").is_dir() or len(finished(out)) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the check stored no run in 90 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = finished(out)
    assert 2 <= len(before) < total, "the kill did not land mid-check"
    assert not (out / "report.json").exists()

    run_checks(CLAIMS, mode="quick", out=out, progress=False)  # the same call, again
    after = finished(out)
    assert len(after) == total
    assert all(after[d] == t for d, t in before.items())  # finished runs were not redone
    assert verdict_numbers(out) == verdict_numbers(straight)
    run_id = json.loads((out / "report.json").read_text())["result"]["run_id"]
    assert (out / "figures" / "RUN_ID").read_text().strip() == run_id
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.slow
def test_equal_runs_are_shared_between_claims_and_a_second_call_runs_nothing(tmp_path,
                                                                           monkeypatch):
    from stepsim.experiments import executors

    out = tmp_path / "r"
    claims = ["C1", "C2"]  # both run dense and SR-STE under Adam (lr 1e-3) on each seed
    from stepsim.checks import claim_module
    from stepsim.checks._setup import budget

    b = budget("quick")
    specs = [s for c in claims for s in claim_module(c).jobs(b)]
    distinct = {s.digest for s in specs}
    assert len(distinct) < len(specs)
    ran = []
    real = executors.execute
    monkeypatch.setattr(executors, "execute", lambda task: ran.append(task.digest) or real(task))
    # n_jobs=1: every run in this process, where the counting execute sees it
    first = run_checks(claims, mode="quick", out=out, progress=False, n_jobs=1)
    assert sorted(ran) == sorted(distinct)
    ran.clear()
    second = run_checks(claims, mode="quick", out=out, progress=False, n_jobs=1)
    assert ran == []
    assert [c.numbers for c in first.claims] == [c.numbers for c in second.claims]


def test_an_unwritable_out_fails_before_any_run(tmp_path, monkeypatch):
    from stepsim.experiments import executors

    monkeypatch.setattr(executors, "execute", lambda task: pytest.fail("a run started"))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="must be a directory"):
        run_checks(["C3"], mode="quick", out=a_file, progress=False)
    with pytest.raises(ValueError, match="not writable"):
        run_checks(["C3"], mode="quick", out=a_file / "below", progress=False)


def test_the_default_out_is_not_the_current_directory(monkeypatch, tmp_path):
    from stepsim.checks.report import default_out

    monkeypatch.delenv("STEPSIM_CHECK_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_out("quick") == tmp_path / "stepsim" / "check" / "quick"
    monkeypatch.setenv("STEPSIM_CHECK_DIR", str(tmp_path / "c"))
    assert default_out("full") == tmp_path / "c" / "full"


def test_a_failure_while_drawing_leaves_the_old_report_and_its_figures_together(tmp_path,
                                                                             monkeypatch):
    from stepsim.checks import claim_module

    out = tmp_path / "r"
    run_checks(["C12"], mode="quick", out=out, progress=False)
    old = json.loads((out / "report.json").read_text())["result"]["run_id"]
    assert (out / "figures" / "RUN_ID").read_text().strip() == old

    def broken(result, path):  # as a kill while drawing would leave it
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(claim_module("C12"), "figure", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        run_checks(["C12"], mode="quick", out=out, progress=False)
    assert json.loads((out / "report.json").read_text())["result"]["run_id"] == old
    assert (out / "figures" / "RUN_ID").read_text().strip() == old
    monkeypatch.undo()
    run_checks(["C12"], mode="quick", out=out, progress=False)  # cleans the staging left
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
