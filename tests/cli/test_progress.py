"""Progress outside a terminal: with stderr a pipe, ``train``, ``sweep`` and ``theorem1``
print one line at a steady interval while they run (done / total, failures, elapsed, ETA),
and nothing with ``--quiet``. The interval is ``STEPSIM_PROGRESS_INTERVAL`` (documented in
``stepsim._ground.progress`` and every ``--quiet`` help), set small here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INTERVAL = 0.4
LINE = re.compile(r"^(?P<label>.+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\)"
                  r"(?:, (?P<failed>\d+) diverged)?, elapsed (?P<elapsed>[\dms.h]+), "
                  r"(?:ETA (?:[\dms.h]+|unknown)|done)$")


def _seconds(text: str) -> float:
    """'4.2s', '2m05s' or '1h02m' as seconds (stepsim._ground.progress.format_duration)."""
    if text.endswith("s") and "m" not in text:
        return float(text[:-1])
    if "h" in text:
        hours, minutes = text.rstrip("m").split("h")
        return 3600 * int(hours) + 60 * int(minutes)
    minutes, secs = text.rstrip("s").split("m")
    return 60 * int(minutes) + int(secs)


def _run(args, *, quiet=False, cwd=None):
    """Run ``stepsim ARGS`` with stderr a pipe; returns (rc, stdout, [(line, the process
    was still running when it arrived)])."""
    env = dict(os.environ, PYTHONPATH=str(REPO), STEPSIM_PROGRESS_INTERVAL=str(INTERVAL))
    env.pop("STEPSIM_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "stepsim", *args,
                             *(["--quiet"] if quiet else [])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd or REPO)
    arrived = []

    def read():
        for line in proc.stderr:
            arrived.append((line.rstrip("\n"), proc.poll() is None))

    reader = threading.Thread(target=read)
    reader.start()
    out = proc.stdout.read()
    proc.wait(timeout=600)
    reader.join(timeout=60)
    return proc.returncode, out, arrived


def _check_lines(arrived, unit: str, *, diverged: bool = False):
    """Progress lines came while the command ran, each on the clock's grid (the k-th at
    elapsed >= k x INTERVAL), and a last one says done; returns the parsed lines."""
    parsed = [(LINE.match(text), running) for text, running in arrived]
    assert all(m for m, _ in parsed), [t for t, _ in arrived]
    *periodic, last = [m for m, _ in parsed]
    assert len(periodic) >= 2, arrived
    assert sum(running for _, running in parsed[:-1]) >= 2  # printed before the end
    for k, m in enumerate(periodic, start=1):
        assert m["unit"] == unit
        # due at start + k * interval (printed with 0.1 s resolution), never faster
        assert _seconds(m["elapsed"]) >= k * INTERVAL - 0.1, (k, m.group(0))
    assert last.group(0).endswith(", done") and last["done"] == last["total"]
    assert (last["failed"] is not None) is diverged
    return [m for m, _ in parsed]


def test_train_prints_steady_lines_on_a_pipe_and_none_when_quiet():
    rc, out, arrived = _run(["train", "--steps", "4000"])
    assert rc == 0 and "table1" in out
    lines = _check_lines(arrived, "steps")
    assert lines[0]["label"] == "fit step" and lines[-1]["total"] == "4000"
    dones = [int(m["done"]) for m in lines]
    assert dones == sorted(dones)
    rc, out, arrived = _run(["train", "--steps", "4000"], quiet=True)
    assert rc == 0 and "table1" in out and arrived == []


def test_sweep_lines_count_runs_and_the_diverged_ones(tmp_path):
    """lr = 1e300 overflows the regression: two of the four runs diverge, counted."""
    args = ["sweep", "--recipes", "dense", "--grid", "recipe.lr=1e-3,1e300", "--steps", "3000",
            "--seeds", "2", "--jobs", "1"]
    rc, out, arrived = _run([*args, "--out", str(tmp_path / "s")])
    assert "wall time" in out
    assert rc == 0, arrived
    lines = _check_lines(arrived, "runs", diverged=True)
    assert lines[-1].group(0).startswith("sweep s: 4/4 runs (100%), 2 diverged, elapsed")
    rc, _, arrived = _run([*args, "--out", str(tmp_path / "quiet")], quiet=True)
    assert rc == 0 and arrived == []


@pytest.mark.slow
def test_theorem1_prints_steady_lines_on_a_pipe():
    rc, out, arrived = _run(["theorem1", "--trials", "1000"])
    assert rc == 0 and re.search(r"HOLDS|VIOLATED|INCONCLUSIVE", out), out
    lines = _check_lines(arrived, "trials")
    assert lines[-1].group(0).startswith("theorem1 uniform: 1000/1000 trials (100%)")


def test_a_bad_interval_is_one_line_naming_the_variable(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), STEPSIM_PROGRESS_INTERVAL="soon")
    run = subprocess.run([sys.executable, "-m", "stepsim", "train", "--steps", "3"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                         check=False)
    assert run.returncode == 2
    assert run.stderr == ("stepsim train: error: STEPSIM_PROGRESS_INTERVAL must be a positive "
                          "number of seconds, got 'soon'\n")


def test_the_line_reads_done_total_failures_elapsed_and_eta(monkeypatch):
    """The line's parts from the counters (no clock): a resumed job's ETA counts only the
    pace of the units done here."""
    import io

    from stepsim._ground.progress import Progress

    monkeypatch.delenv("STEPSIM_PROGRESS", raising=False)
    bar = Progress(40, "sweep digits", stream=io.StringIO(), initial=10, unit="run",
                   failures="diverged")
    assert bar.enabled is False and bar.interval == 30.0
    bar.update(5, failed=1)
    assert bar.line(125.0) == ("sweep digits: 15/40 runs (37%), 1 diverged, elapsed 2m05s, "
                               "ETA 10m25s")
    bar.update(100)
    assert bar.line(3725.0) == "sweep digits: 40/40 runs (100%), 1 diverged, elapsed 1h02m, done"
    assert Progress(3, "fit", stream=io.StringIO(), unit="step").line(0.5) == (
        "fit: 0/3 steps (0%), elapsed 0.5s, ETA unknown")
