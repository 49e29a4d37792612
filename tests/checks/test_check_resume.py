"""`stepsim check` (``run_checks``) survives SIGKILL in either stage of its flow — tuning the
learning rates, then the evaluation runs: the same call again redoes only the runs in
flight, and its report equals a straight run's; equal runs are run once; the test-only
overrides (``steps``, ``lrs``) and the errors that come before any work.

Runs here are 200 steps (the smallest ``steps`` the API accepts) on digits: ~0.1 s each.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from stepsim.checks import protocol, run_checks, tuning

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = ["C3", "C12"]  # full mode, digits: 30 tuning runs, 24 evaluation runs, one count
#: the same call as the test's straight run, in a process of its own (to be killed)
SCRIPT = ("import sys; from stepsim.checks import run_checks; "
          "run_checks(sys.argv[1].split(','), mode='full', problems=['digits'], steps=200, "
          "out=sys.argv[2], progress=False, jobs=1)")


def call(out, claims=CLAIMS, **kw):
    return run_checks(claims, mode="full", problems=["digits"], steps=200, out=out,
                      progress=False, jobs=1, **kw)


def report_numbers(out: Path) -> dict:
    """report.json without what differs between equal runs (times, versions, run id)."""
    doc = json.loads((out / "report.json").read_text())["result"]
    claims = [{k: v for k, v in c.items() if k not in ("runtime_s", "versions")}
              for c in doc["claims"]]
    return {"claims": claims, "tuning": doc["tuning"], "lrs": doc["lrs"],
            "protocol": doc["protocol"], "mode": doc["mode"]}


def finished(out: Path) -> dict:
    """digest -> mtime of every finished run's (or task's) JSON in the store."""
    return {p.stem: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")
            if not p.name.startswith(".")}


def kill_when(out: Path, stored: int) -> dict:
    """Start the check in a process of its own, SIGKILL it as soon as ``stored`` runs are
    in the store (maybe mid-write); return the store's finished runs then."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, ",".join(CLAIMS), str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while not (out / "runs").is_dir() or len(finished(out)) < stored:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, f"the check stored no {stored} runs in 120 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "report.json").exists()
    return finished(out)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigkill_in_tuning_and_in_evaluation_then_resume_gives_the_same_report(tmp_path):
    straight = tmp_path / "straight"
    report = call(straight)
    total = len(finished(straight))
    # the two-stage flow: every config tuned on the tuning seeds, for the main timescale
    # (draft 5's quick mode takes the main setting's choices), before the evaluation runs
    assert set(report.tuning) == {"digits/main"}
    row = report.tuning["digits/main"]["adam|dense|-"]
    grid = protocol.RULES.grid("digits", "adam")
    assert row["grid"][1:-1] == grid or row["grid"] == grid  # an edge choice: one more value
    assert row["choice"]["lr"] in row["grid"]
    assert report.lrs["digits/main"]["adam|dense|-"] == row["choice"]
    # one config (Adam, dense: no regulariser) on the whole grid x 3 tuning seeds, halved
    # (PROTOCOL.md D5.2's amendment): a candidate ran once per rung up to the one it reached;
    # an lr added at the grid's edge ran to T at once
    ladder = [row["steps"] // 4, row["steps"] // 2, row["steps"]]
    assert len(row["reached"]) == len(row["candidates"]) == len(row["grid"]) >= len(grid)
    assert sorted(row["reached"]).count(row["steps"]) >= 2  # the finalists ran to T
    n_tuning = 3 * sum(ladder.index(r) + 1 if c["lr"] in grid else 1
                       for c, r in zip(row["candidates"], row["reached"]))
    assert total == n_tuning + 24 + 1
    assert [(c.claim, c.setting) for c in report.claims] == [("C3", "digits/main"),
                                                             ("C12", "none")]
    assert report.claims[0].seeds == protocol.RULES.seeds.full
    assert report.protocol["altered_for_testing"]

    out = tmp_path / "killed"
    first = kill_when(out, 2)  # in the tuning stage
    assert 2 <= len(first) < n_tuning, "the first kill did not land while tuning"
    second = kill_when(out, n_tuning + 2)  # in the evaluation stage
    assert n_tuning + 2 <= len(second) < total, "the second kill did not land mid-evaluation"
    assert all(second[d] == t for d, t in first.items())  # finished runs were not redone

    call(out)  # the same call, again
    after = finished(out)
    assert len(after) == total and set(after) == set(finished(straight))
    assert all(after[d] == t for d, t in second.items())
    assert report_numbers(out) == report_numbers(straight)
    run_id = json.loads((out / "report.json").read_text())["result"]["run_id"]
    assert (out / "figures" / "RUN_ID").read_text().strip() == run_id
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging, no marks
    # the ledger: the two killed checks (from their start marks), then the one that wrote
    ledger = json.loads((out / "report.json").read_text())["result"]["compute"]
    killed, last = ledger["checks"][:-1], ledger["checks"][-1]
    assert [c.get("stopped") for c in ledger["checks"]] == [True, True, None]
    assert [c["runs_made"] for c in killed] == [len(first), len(second) - len(first)]
    assert all(c["wall_s"] > 0 for c in killed) and last["runs_made"] == total - len(second)
    assert ledger["wall_s"] == pytest.approx(sum(c["wall_s"] for c in ledger["checks"]))
    assert "stopped before its report" in (out / "report.md").read_text()


@pytest.mark.slow
def test_equal_runs_are_shared_between_claims_and_a_second_call_runs_nothing(tmp_path,
                                                                           monkeypatch):
    from stepsim.checks.budget import Budget
    from stepsim.experiments import executors
    from tests.checks.fake_views import claim_module

    lrs = {"digits/main": {"adam|dense|-": 0.003, "adam|sr-ste|1:8": 0.01,
                           "adam|sr-ste|1:16": 0.01}}
    claims = ["C2", "C3"]  # both run dense Adam at loss x1 on each seed
    b = Budget("full", "digits", "main", protocol.RULES.seeds.full,
               lrs=lrs["digits/main"], steps=200)
    specs = [s for c in claims for s in claim_module(c).jobs(b)]
    distinct = {s.digest for s in specs}
    assert len(distinct) == len(specs) - 8
    monkeypatch.setattr(tuning, "COMMITTED", tmp_path / "missing.json")  # never read
    ran = []
    real = executors.execute
    monkeypatch.setattr(executors, "execute", lambda task: ran.append(task.digest) or real(task))
    # jobs=1: every run in this process, where the counting execute sees it; lrs given:
    # no tuning stage, the runs use exactly these learning rates
    first = call(tmp_path / "r", claims, lrs=lrs)
    assert sorted(ran) == sorted(distinct)
    assert first.lrs == lrs and first.tuning == {} and first.protocol["altered_for_testing"]
    ran.clear()
    second = call(tmp_path / "r", claims, lrs=lrs)
    assert ran == []
    assert [c.numbers for c in first.claims] == [c.numbers for c in second.claims]
    assert [c.verdict for c in first.claims] == [c.verdict for c in second.claims]


def test_quick_mode_with_given_learning_rates_reads_no_committed_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "COMMITTED", tmp_path / "missing.json")
    lrs = {"digits/fast": {"adam|dense|-": 0.01}}
    report = run_checks(["C3"], mode="quick", steps=200, lrs=lrs, out=tmp_path / "q",
                        progress=False, jobs=1)
    (c3,) = report.claims
    assert report.mode == "quick" and report.lrs == lrs and report.tuning == {}
    assert c3.setting == "digits/fast" and c3.seeds == (0, 1, 2) and c3.mode == "quick"
    assert c3.numbers["steps"] == 200 and c3.numbers["window"] == 100
    assert report.table().startswith("[quick: indicative, not evidence]\nC3   digits/fast ")
    assert len(finished(tmp_path / "q")) == 9  # 3 seeds x 3 loss scales


def test_quick_mode_without_the_committed_file_fails_before_any_run(tmp_path, monkeypatch):
    from stepsim.experiments import executors

    monkeypatch.setattr(executors, "execute", lambda task: pytest.fail("a run started"))
    monkeypatch.setattr(tuning, "COMMITTED", tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError, match=r"missing\.json is missing: quick mode reuses "
                                                r"the learning rates of the committed full run"):
        run_checks(["C3"], mode="quick", out=tmp_path / "q", progress=False)
    assert not (tmp_path / "q" / "report.json").exists()


@pytest.mark.slow
def test_a_diverged_run_predicts_nothing_and_the_verdict_line_says_so():
    lrs = {"digits/main": {"adam|dense|-": 1e-3, "adam|sr-ste|1:8": 1e-3,
                           "adam|sr-ste|1:16": 1e-3, "sgdm|dense|-": 1e6,
                           "sgdm|sr-ste|1:8": 1e6, "sgdm|sr-ste|1:16": 1e6}}
    with warnings.catch_warnings():  # fit reports the divergence; NumPy must not repeat it
        warnings.simplefilter("error", RuntimeWarning)
        report = call(None, ["C1"], lrs=lrs)
    (c1,) = report.claims
    # every SGD-M run went non-finite at lr 1e6, none under Adam: divergence alone differs
    # (no finite pair of Adam's and SGD-M's dense runs), so the extension stage ran C1 on
    # the extension seeds too: 3 configs x 16 seeds; the line lists them in its numbers
    assert c1.seeds == tuple(range(16))
    assert report.operating["extensions"][0].startswith("C1 on digits: extended to seeds")
    assert len(c1.numbers["diverged"]) == 48, c1.reason
    assert all("optimizer=sgdm" in d for d in c1.numbers["diverged"])
    # draft 4: a diverged run is an outcome, never scored as every image wrong: SGD-M has no
    # finite seed, so its gap has no value and no part reads "0 [0, 0]"
    assert list(c1.numbers["gap"]["1:8"]["sgdm"]) == []
    assert "0 [0, 0]" not in c1.reason
    assert c1.verdict == "INCONCLUSIVE" and all(p.verdict == "INCONCLUSIVE" for p in c1.parts)


def test_bad_calls_fail_before_any_run(tmp_path, monkeypatch):
    from stepsim.experiments import executors

    monkeypatch.setattr(executors, "execute", lambda task: pytest.fail("a run started"))
    with pytest.raises(ValueError, match="steps must be an integer >= 200, got 199"):
        run_checks(["C3"], mode="full", steps=199, out=tmp_path / "a", progress=False)
    with pytest.raises(ValueError, match="mode must be 'quick' or 'full'"):
        run_checks(["C3"], mode="fast", out=tmp_path / "a", progress=False)
    with pytest.raises(ValueError, match="unknown claim 'C13'"):
        run_checks(["C13"], mode="full", out=tmp_path / "a", progress=False)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="problem must be one of"):
        run_checks(["C3"], mode="full", problems=["regression"], out=tmp_path / "b",
                   progress=False)
    assert not (tmp_path / "b" / "runs").exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="must be a directory"):
        run_checks(["C3"], mode="full", out=a_file, progress=False)
    with pytest.raises(ValueError, match="not writable"):
        run_checks(["C3"], mode="full", out=a_file / "below", progress=False)
    assert not (tmp_path / "a").exists()


def test_the_default_out_is_not_the_current_directory(monkeypatch, tmp_path):
    from stepsim.checks.outputs import default_out

    monkeypatch.delenv("STEPSIM_CHECK_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_out("quick") == tmp_path / "stepsim" / "check" / "quick"
    monkeypatch.setenv("STEPSIM_CHECK_DIR", str(tmp_path / "c"))
    assert default_out("full") == tmp_path / "c" / "full"


def test_a_failure_while_drawing_leaves_the_old_report_and_its_figures_together(tmp_path,
                                                                             monkeypatch):
    import dataclasses

    from stepsim.checks.registry import REGISTRY, get_claim

    out = tmp_path / "r"
    run_checks(["C12"], mode="full", out=out, progress=False)  # no training: a count
    old = json.loads((out / "report.json").read_text())["result"]["run_id"]
    assert (out / "figures" / "RUN_ID").read_text().strip() == old

    def broken(result, path):  # as a kill while drawing would leave it
        raise RuntimeError("drawing failed")

    monkeypatch.setitem(REGISTRY, "C12", dataclasses.replace(get_claim("C12"), figure=broken))
    with pytest.raises(RuntimeError, match="drawing failed"):
        run_checks(["C12"], mode="full", out=out, progress=False)
    # the failed check's start mark stays: the next report's ledger counts it (stopped.py)
    assert len(list((out / ".checks").glob("*.json"))) == 1
    assert json.loads((out / "report.json").read_text())["result"]["run_id"] == old
    assert (out / "figures" / "RUN_ID").read_text().strip() == old
    monkeypatch.undo()
    run_checks(["C12"], mode="full", out=out, progress=False)  # cleans the staging left
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # and counts the mark
    ledger = json.loads((out / "report.json").read_text())["result"]["compute"]["checks"]
    assert [c.get("stopped") for c in ledger][-2:] == [True, None]
