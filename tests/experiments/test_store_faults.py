"""Faults in a sweep's run store, through the real CLI (subprocesses, nothing patched).

Each case starts from a copy of a finished sweep (or a sweep in progress), does to it what a
disk, a copy or a kill does — a .npz cut to 100 bytes, a flipped byte, half a pair, a
foreign file, a full disk in the middle of a save, SIGKILL during a save — and runs the
same ``stepsim sweep`` command again: it says in one line what it set aside (naming the
folder), redoes those runs, and ends with the clean sweep's table; ``stepsim sweep --verify``
says whether the store is whole (exit 0) or not (1), and ``stepsim report`` refuses a
damaged one in one line. The same for ``stepsim check``: tests/checks/test_check_faults.py.

The full disk is a small tmpfs (skipped where mounting is not permitted); the kill is
strace's syscall tampering (SIGKILL delivered as the sweep enters the rename that commits a
file: exactly during a save), skipped without strace or ptrace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults import ROOT, flip, inside_an_array, lines, stepsim, strace_kill_at, tmpfs

SPEC = {"steps": 20, "seeds": 3, "nm": ["2:4"],
        "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}},
        "recipes": ["dense", "sr-ste"]}
RUNS = 6

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX folders, tmpfs, strace")


def sweep(out, cwd, prefix=()) -> subprocess.CompletedProcess:
    """The command every case runs, and runs again."""
    return stepsim("sweep", "spec.json", "--out", out, "--jobs", "1", cwd=cwd, prefix=prefix)


def table(out: Path) -> list[str]:
    """table.csv without its runtime_s column (the one that differs between equal runs)."""
    rows = (out / "table.csv").read_text().splitlines()
    drop = rows[0].split(",").index("runtime_s")
    return [",".join(c for i, c in enumerate(r.split(",")) if i != drop) for r in rows]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished sweep, made once by the CLI: (its folder's parent, folder name)."""
    where = tmp_path_factory.mktemp("sweeps")
    (where / "spec.json").write_text(json.dumps(SPEC))
    done = sweep("clean", where)
    assert done.returncode == 0, done.stderr
    return where, "clean"


@pytest.fixture
def copy(finished):
    """A fresh copy of the finished sweep, beside it (so the same spec.json is used)."""
    where, clean = finished
    name = f"copy-{os.getpid()}-{len(list(where.iterdir()))}"
    shutil.copytree(where / clean, where / name)
    yield where, name
    shutil.rmtree(where / name, ignore_errors=True)


def damage_every_way(runs: Path) -> dict:
    """Damage five of the six runs, one way each, and add a foreign file; return
    {digest: what was done}."""
    digests = sorted(p.stem for p in runs.glob("*.json"))
    done = dict(zip(digests, ["truncated .npz", "flipped .npz byte", "flipped .json byte",
                              ".npz gone", ".json gone"]))
    d = iter(digests)
    npz = runs / f"{next(d)}.npz"
    npz.write_bytes(npz.read_bytes()[:100])  # the first 100 bytes kept
    npz = runs / f"{next(d)}.npz"
    flip(npz, inside_an_array(npz))  # same size
    js = runs / f"{next(d)}.json"
    text = js.read_text()
    at = text.index('"final_loss": ') + len('"final_loss": ') + 3  # a digit of a number
    js.write_text(text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1:])  # same size
    (runs / f"{next(d)}.npz").unlink()
    (runs / f"{next(d)}.json").unlink()
    (runs / "notes.txt").write_text("not a run")
    return done


def test_a_damaged_sweep_is_verified_refused_by_report_and_healed_by_the_same_command(
        finished, copy):
    where, clean = finished
    _, name = copy
    out, runs = where / name, where / name / "runs"
    damaged = damage_every_way(runs)

    verify = stepsim("sweep", "--verify", name, cwd=where)
    assert verify.returncode == 1 and verify.stderr == ""
    said = lines(verify.stdout)
    assert sorted(line.split()[1] for line in said if line.startswith("damaged ")) == \
        sorted(damaged)
    assert "foreign  notes.txt  not a file of this store" in said
    kinds = _kinds_in(said)
    assert sorted(kinds.split(", ")) == ["1 .json changed since it was saved",
                                         "1 .json without its .npz",
                                         "1 .npz without its .json", "2 unreadable .npz"]
    assert said[-2] == (f"{name}/runs: 1 stored run whole, 5 damaged ({kinds}), 1 foreign "
                        f"file; `stepsim sweep SPEC --out {name}` (the same command) sets "
                        f"them aside in {name}/runs/damaged and redoes the damaged runs")
    assert said[-1] == f"{name}: 1 of {RUNS} planned runs stored whole"

    report = stepsim("report", name, cwd=where)
    assert report.returncode == 1 and report.stdout == ""
    (line,) = lines(report.stderr)
    assert line.startswith(f"stepsim report: error: 5 damaged runs in {name}/runs (")
    assert line.endswith(f"`stepsim sweep SPEC --out {name}` (the same command) sets them "
                         f"aside in {name}/runs/damaged and redoes them")
    assert not list(out.glob("report_*.md"))

    again = sweep(name, where)
    assert again.returncode == 0, again.stderr
    (line,) = lines(again.stderr)
    assert line.startswith(f"stepsim sweep: 5 damaged runs and 1 foreign file set aside in "
                           f"{name}/runs/damaged (")
    assert line.endswith("); redoing the runs")
    assert table(out) == table(where / clean)
    aside = sorted(p.name for p in (runs / "damaged").iterdir())
    assert len([a for a in aside if a.endswith(".why")]) == 6  # five runs and the foreign file
    assert "notes.txt" in aside

    assert stepsim("sweep", "--verify", name, cwd=where).returncode == 0
    healed, reference = stepsim("report", name, cwd=where), stepsim("report", clean, cwd=where)
    assert healed.returncode == 0 and reference.returncode == 0
    assert healed.stdout.replace(name, "DIR") == reference.stdout.replace(clean, "DIR")


def _kinds_in(said: list[str]) -> str:
    """The "(...)" of --verify's summary line: the damaged kinds in the order they were
    listed (its order is the store's, by digest)."""
    counts = {}
    for line in said:
        if line.startswith("damaged "):
            label = line.split("  ", 2)[2].split(" (")[0]
            counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in counts.items())


def test_a_full_disk_in_the_middle_of_a_save_is_one_line_and_the_same_command_resumes(
        finished, tmp_path):
    where, clean = finished
    shutil.copy(where / "spec.json", tmp_path / "spec.json")
    with tmpfs(tmp_path / "disk", "40k") as disk:  # the plan and two runs' files fit
        full = sweep("disk/sweep", tmp_path)
        assert full.returncode == 1 and "Traceback" not in full.stderr
        (line,) = lines(full.stderr)
        assert line == ("stepsim sweep: error: [Errno 28] No space left on device while "
                        "saving a run in disk/sweep/runs; the runs finished there are kept, "
                        "and the same command resumes")
        runs = disk / "sweep" / "runs"
        stored = [p for p in runs.iterdir() if p.is_file()]
        assert 0 < len(stored) < 2 * RUNS
        pairs = {p.stem for p in stored if p.suffix == ".json"}  # no half pair left
        assert pairs == {p.stem for p in stored if p.suffix == ".npz"}
        assert not (disk / "sweep" / "table.csv").exists()

        subprocess.run(["mount", "-o", "remount,size=16m", str(disk)], check=True)
        again = sweep("disk/sweep", tmp_path)
        assert again.returncode == 0 and again.stderr == ""  # nothing was damaged
        assert table(disk / "sweep") == table(where / clean)
        assert stepsim("sweep", "--verify", "disk/sweep", cwd=tmp_path).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("rename, left", [(4, "the second run's .npz, before its rename"),
                                          (5, "the second run's .json, before its rename")])
def test_sigkill_during_a_save_then_the_same_command_ends_with_a_whole_store(
        finished, tmp_path, rename, left):
    """Renames of a sweep: 1 the plan, then each run's .npz and .json; the kill lands as
    the sweep commits ``left``."""
    where, clean = finished
    shutil.copy(where / "spec.json", tmp_path / "spec.json")
    killed = sweep("killed", tmp_path, prefix=strace_kill_at(rename))
    assert killed.returncode != 0 and "Traceback" not in killed.stderr
    runs = tmp_path / "killed" / "runs"
    names = sorted(p.name for p in runs.iterdir() if p.is_file())
    temporaries = [n for n in names if n.startswith(".")]
    assert len(temporaries) == 1  # the file being committed, written and synced
    assert len([n for n in names if n.endswith(".json") and not n.startswith(".")]) == 1
    half = rename == 5  # the second run's .npz is committed, its JSON is not

    again = sweep("killed", tmp_path)
    assert again.returncode == 0, again.stderr
    if half:
        (line,) = lines(again.stderr)
        assert line == ("stepsim sweep: 1 damaged run set aside in killed/runs/damaged "
                        "(1 .npz without its .json); redoing it")
    else:
        assert again.stderr == ""
    assert table(tmp_path / "killed") == table(where / clean)
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]  # temporaries gone
    assert stepsim("sweep", "--verify", "killed", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_two_sweeps_at_once_on_a_damaged_store_set_each_run_aside_once(finished, copy):
    where, clean = finished
    _, name = copy
    damage_every_way(where / name / "runs")
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    cmd = [sys.executable, "-m", "stepsim", "sweep", "spec.json", "--out", name, "--jobs", "1"]
    procs = [subprocess.Popen(cmd, cwd=where, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert table(where / name) == table(where / clean)
    aside = [p for p in (where / name / "runs" / "damaged").iterdir() if p.suffix == ".why"]
    assert len(aside) == 6  # each damaged run and the foreign file, once
    assert stepsim("sweep", "--verify", name, cwd=where).returncode == 0
