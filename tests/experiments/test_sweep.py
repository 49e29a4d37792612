"""Sweeps survive SIGKILL, and give the same bits on any executor (process pool, Dask)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from stepsim.experiments import load_table, run_sweep
from tests.tables import stable_rows

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"steps": 100, "seeds": 2, "nm": ["2:4", "1:8"], "criterion": "autoswitch",
        "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}},
        "recipes": ["sr-ste", "step"]}


def arrays_of(out_dir) -> dict:
    """run file name -> {array name: bytes} for every run's .npz (NaNs compare by bits)."""
    out = {}
    for path in sorted((Path(out_dir) / "runs").glob("*.npz")):
        with np.load(path) as data:
            out[path.name] = {k: (data[k].dtype.str, data[k].shape, data[k].tobytes())
                              for k in data.files}
    return out


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The sweep run straight through, in this process."""
    out = tmp_path_factory.mktemp("straight")
    return out, run_sweep(SPEC, out, jobs=1, progress=False)


def children(pid: int) -> set[int]:
    """PIDs of the live processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigkill_mid_sweep_then_resume_gives_the_same_table(straight, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "stepsim", "sweep", str(spec), "--out", str(out), "--jobs", "2"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    runs = out / "runs"
    deadline = time.monotonic() + 90
    try:  # kill -9 the sweep as soon as its first runs are written: mid-sweep, maybe mid-write
        while len([p for p in runs.glob("*.json") if not p.name.startswith(".")]) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep wrote no result in 90 s"
            time.sleep(0.005)
        workers = children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the sweep process only, as a crash would
        proc.wait()
        # its pool workers notice and leave (within their 0.5 s poll), running nothing more
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers and not any(alive(pid) for pid in workers)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # clean up whatever the test itself started
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    total = len(straight[1])
    done_at_kill = load_table(out)
    assert 2 <= len(done_at_kill) < total, "the kill did not land mid-sweep"
    assert len(done_at_kill) + len(done_at_kill.missing) == total

    resumed = run_sweep(spec, out, jobs=1, progress=False)  # the same command, again
    assert stable_rows(resumed) == stable_rows(straight[1])
    assert arrays_of(out) == arrays_of(straight[0])
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]  # temporaries cleaned
    # rows of runs finished before the kill are the ones written then (not recomputed)
    before = {r["digest"]: r["runtime_s"] for r in done_at_kill.rows}
    assert all(r["runtime_s"] == before[r["digest"]] for r in resumed.rows
               if r["digest"] in before)


def saves_and_finishes(monkeypatch):
    """Record when this process saves each run and when its worker finished it."""
    from stepsim.experiments import store

    saved, finished = [], []
    real_save = store.RunStore.save

    def save(self, run, output):
        saved.append(time.time())
        finished.append(output.finished_at)
        return real_save(self, run, output)

    monkeypatch.setattr(store.RunStore, "save", save)
    return saved, finished


@pytest.mark.slow
def test_process_pool_and_dask_give_the_same_rows_and_bits(straight, tmp_path, monkeypatch):
    from distributed import LocalCluster

    saved, finished = saves_and_finishes(monkeypatch)
    pool = run_sweep(SPEC, tmp_path / "pool", jobs=2, progress=False)
    assert stable_rows(pool) == stable_rows(straight[1])
    assert arrays_of(tmp_path / "pool") == arrays_of(straight[0])
    # results are saved as they arrive, not after the last run: what a kill can lose is
    # only the runs in flight (8 runs on 2 workers: the first save precedes the last finish)
    assert len(saved) == len(pool) and min(saved) < max(finished)

    # a real scheduler address on loopback TCP; workers as threads keep the test fast
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        dask = run_sweep(SPEC, tmp_path / "dask", scheduler=cluster.scheduler_address,
                         progress=False)
    assert stable_rows(dask) == stable_rows(straight[1])
    assert arrays_of(tmp_path / "dask") == arrays_of(straight[0])
