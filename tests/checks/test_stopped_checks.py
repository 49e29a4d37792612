"""Start marks (stepsim.checks.stopped): a check that stopped before its report is counted
in the next report's ledger; a live check's mark, another host's, or one made under other
rules or in another mode is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from stepsim.checks import stopped


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _mark(out, run_id, start, **fields):
    path = stopped.mark_started(out, run_id, {"mode": "full", "claims": ["C3"],
                                              "started_utc": "then", "jobs": 2,
                                              "rules_sha256": "abc"})
    mark = json.loads(path.read_text())
    mark.update({"started_epoch": start, "pid": _dead_pid()}, **fields)
    path.write_text(json.dumps(mark))
    return path


def _run_file(runs, name, when):
    path = runs / f"{name}.json"
    path.write_text("{}")
    os.utime(path, (when, when))


def test_a_stopped_check_counts_from_its_start_to_its_last_saved_run(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    now = time.time()
    a = _mark(tmp_path, "a", now - 100)  # stopped: runs at -90 and -70
    b = _mark(tmp_path, "b", now - 60)  # stopped: one run at -50
    live = _mark(tmp_path, "live", now - 40, pid=os.getppid())  # its process is alive
    far = _mark(tmp_path, "far", now - 39, host="another-host")  # cannot tell: left alone
    other = _mark(tmp_path, "other", now - 38, rules_sha256="xyz")  # other rules
    _run_file(runs, "r1", now - 90)
    _run_file(runs, "r2", now - 70)
    _run_file(runs, "r3", now - 50)
    _run_file(runs, "r0", now - 200)  # before any mark: a finished check's
    entries, used = stopped.stopped_checks(tmp_path, runs, mode="full", rules_sha256="abc",
                                           this_run_id="me")
    assert [e["run_id"] for e in entries] == ["a", "b"] and used == [a, b]
    assert [e["runs_made"] for e in entries] == [2, 1]
    assert entries[0]["wall_s"] == pytest.approx(30.0, abs=1e-3)  # start -100, last run -70
    assert entries[1]["wall_s"] == pytest.approx(10.0, abs=1e-3)  # start -60, last run -50
    assert all(e["stopped"] and e["claims"] == ["C3"] for e in entries)
    quick, _ = stopped.stopped_checks(tmp_path, runs, mode="quick", rules_sha256="abc",
                                      this_run_id="me")
    assert quick == []  # another mode's report does not take them
    stopped.remove(tmp_path, used)
    assert sorted(p.name for p in (tmp_path / stopped.MARKS_DIR).iterdir()) == sorted(
        p.name for p in (live, far, other))
    stopped.remove(tmp_path, [live, far, other])
    assert not (tmp_path / stopped.MARKS_DIR).exists()


def test_a_mark_cut_short_is_ignored(tmp_path):
    (tmp_path / stopped.MARKS_DIR).mkdir()
    (tmp_path / stopped.MARKS_DIR / "cut.json").write_text('{"run_id": "cut", "star')
    (tmp_path / "runs").mkdir()
    assert stopped.stopped_checks(tmp_path, tmp_path / "runs", mode="full", rules_sha256="abc",
                                  this_run_id="me") == ([], [])
