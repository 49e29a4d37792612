"""Sweep processes sharing one --out split the runs (claims), and a killed claimer never blocks.

Two `stepsim sweep` processes started on one directory each claim a run before running it
(a locked file per run, RunStore.claim in stepsim.experiments.store), so together they run every run
exactly once and both end with the table a single process writes; a claim left by a
SIGKILLed process is free at once (the kernel drops a dead process's locks).
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from stepsim.experiments import executors, load_table, plan_sweep, run_sweep, store, sweep_dir
from tests.tables import stable_rows

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"steps": 100, "seeds": 2, "nm": ["2:4", "1:8"], "criterion": "autoswitch",
        "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}},
        "recipes": ["sr-ste", "step"]}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="claims use fcntl locks")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The sweep run by one process, straight through."""
    out = tmp_path_factory.mktemp("straight")
    return out, run_sweep(SPEC, out, jobs=1, progress=False)


def without_runtime(csv_text: str) -> list[str]:
    """table.csv's lines without the runtime_s column (the one that differs between runs)."""
    lines = csv_text.splitlines()
    drop = lines[0].split(",").index("runtime_s")
    return [",".join(c for i, c in enumerate(line.split(",")) if i != drop) for line in lines]


def npz_bits(out_dir) -> dict:
    import numpy as np

    out = {}
    for path in sorted((Path(out_dir) / sweep_dir.RUNS_DIR).glob("*.npz")):
        with np.load(path) as data:
            out[path.name] = {k: data[k].tobytes() for k in data.files}
    return out


@contextlib.contextmanager
def started(cmds, **kwargs):
    """Start the commands in their own sessions; on the way out SIGKILL what still runs."""
    procs = [subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, **kwargs) for cmd in cmds]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


# ------------------------------------------------------------------ in one process
def test_a_claim_excludes_others_until_released_and_says_who_holds_it(tmp_path):
    run = plan_sweep(SPEC)[0]
    mine, theirs = store.RunStore(tmp_path), store.RunStore(tmp_path)  # two holders
    claim_file = tmp_path / store.CLAIMS_DIR / f"{run.digest}.claim"
    assert mine.claim(run)
    assert not theirs.claim(run)
    assert mine.holder(run) == f"pid {os.getpid()} on {os.uname().nodename}"
    mine.release(run, finished=False)  # given back unfinished: the file stays, unlocked
    assert claim_file.exists() and theirs.claim(run)
    assert not mine.claim(run)
    theirs.release(run, finished=True)  # finished: the claim file goes
    assert not claim_file.exists()
    assert mine.claim(run)
    mine.release_all()
    assert theirs.claim(run)
    theirs.release_all()


def test_a_finished_run_is_not_claimed_and_a_killed_writers_leftovers_go(tmp_path):
    run = plan_sweep(SPEC)[0]
    runs = store.RunStore(tmp_path)
    left = tmp_path / f".{run.digest}.json.abc123.json"  # what a killed atomic write leaves
    other = tmp_path / ".0123abcd.json.x.json"  # another run's writer, maybe alive: kept
    left.write_text("{")
    other.write_text("{")
    assert runs.claim(run) and not left.exists() and other.exists()
    runs.save(run, executors.execute(run))
    runs.release(run, finished=True)
    assert not store.RunStore(tmp_path).claim(run)  # finished: nothing to claim


# ------------------------------------------------------------------ two sweep processes
WRAPPER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from stepsim.experiments import executors

    log, me, other, spec, out = sys.argv[1:6]
    real = executors.execute

    def execute(task):  # count every run this process trains; make each last
        with open(log, "a") as f:   # long enough that the two sweeps overlap
            f.write(f"{os.getpid()} {task.recipe} {task.nm} {task.seed}\\n")
        time.sleep(0.2)
        return real(task)

    executors.execute = execute
    Path(me).touch()  # start together: both imported, neither has claimed anything yet
    deadline = time.monotonic() + 60
    while not Path(other).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    from stepsim.cli import main
    sys.exit(main(["sweep", spec, "--out", out, "--jobs", "1"]))
""")


def test_two_sweeps_on_one_out_run_every_run_once_and_write_the_single_table(straight,
                                                                            tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    script = tmp_path / "sweep_counting.py"
    script.write_text(WRAPPER)
    out, log = tmp_path / "shared", tmp_path / "executed.log"
    ready = [tmp_path / "ready0", tmp_path / "ready1"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    cmds = [[sys.executable, str(script), str(log), str(ready[i]), str(ready[1 - i]),
             str(spec), str(out)] for i in range(2)]
    with started(cmds, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as procs:
        outputs = [proc.communicate(timeout=240) for proc in procs]
    for proc, (stdout, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr.decode()
        assert "wall time" in stdout.decode()  # each one waited for the whole table

    executed = log.read_text().splitlines()
    total = len(straight[1])
    runs = sorted(line.split(" ", 1)[1] for line in executed)
    assert len(executed) == total and len(set(runs)) == total  # every run exactly once
    by = {line.split()[0] for line in executed}
    assert by == {str(p.pid) for p in procs}  # and the second sweep really helped

    table = load_table(out)
    assert stable_rows(table) == stable_rows(straight[1])
    csv = (out / "table.csv").read_text()
    assert without_runtime(csv) == without_runtime((straight[0] / "table.csv").read_text())
    assert npz_bits(out) == npz_bits(straight[0])
    claims = out / sweep_dir.RUNS_DIR / store.CLAIMS_DIR
    assert not list(claims.iterdir())  # finished runs keep no claim
    assert not [p for p in (out / sweep_dir.RUNS_DIR).iterdir() if p.name.startswith(".")]


# ------------------------------------------------------------------ a claimer that dies
HOLDER = textwrap.dedent("""
    import sys, time
    from stepsim.experiments import plan_sweep, sweep_dir
    import json

    spec, out, index = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    assert sweep_dir.sweep_store(out).claim(plan_sweep(spec)[index])
    print("held", flush=True)
    time.sleep(120)
""")


def test_a_sigkilled_claimers_claim_is_taken_over_and_live_claims_are_waited_for(
        straight, tmp_path, monkeypatch, capsys):
    out, held = tmp_path / "resumed", 3
    runs = plan_sweep(SPEC)
    cmd = [sys.executable, "-c", HOLDER, json.dumps(SPEC), str(out), str(held)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    executed = []
    real = executors.execute

    def counting_execute(task):
        executed.append(task)
        return real(task)

    monkeypatch.setattr(executors, "execute", counting_execute)
    with started([cmd], env=env, stdout=subprocess.PIPE) as (holder,):
        assert holder.stdout.readline() == b"held\n"
        assert not sweep_dir.sweep_store(out).claim(runs[held])  # a live claim excludes us
        killed, stop = threading.Event(), threading.Event()

        def kill_when_the_rest_is_done():  # the sweep runs the rest, then waits for ours
            deadline = time.monotonic() + 120  # then kill anyway: a failure, never a hang
            while not stop.wait(0.02):
                finished = sweep_dir.sweep_store(out).is_finished
                done = sum(map(finished, runs)) == len(runs) - 1
                if done or time.monotonic() > deadline:
                    time.sleep(0.6)  # let the sweep poll a few times while it waits
                    if holder.poll() is None:
                        os.kill(holder.pid, signal.SIGKILL)  # it dies; its claim file stays
                        if done:
                            killed.set()
                    return

        killer = threading.Thread(target=kill_when_the_rest_is_done, daemon=True)
        killer.start()
        try:
            table = run_sweep(SPEC, out, jobs=1, progress=False)
        finally:
            stop.set()
            killer.join(timeout=5)
        assert killed.is_set()
        holder.wait(timeout=10)
        claim_file = out / sweep_dir.RUNS_DIR / store.CLAIMS_DIR / f"{runs[held].digest}.claim"
        assert not claim_file.exists()  # finished: released

    err = capsys.readouterr().err
    assert f"waiting for 1 run(s) that another sweep process (pid {holder.pid} on " in err
    assert stable_rows(table) == stable_rows(straight[1])
    assert npz_bits(out) == npz_bits(straight[0])
    assert sorted(t.digest for t in executed) == sorted(r.digest for r in runs)
    assert executed[-1] == runs[held]  # the dead claimer's run, taken over last
