"""Faults in a check's run store, through the real CLI: each case on a copy of a finished
``stepsim check C3 --quick`` folder (9 runs: the smallest quick claim that trains), then
the same command again (subprocesses, nothing patched).

A .npz cut to its first 100 bytes, a flipped byte (same size) in a .npz or a JSON, half a
pair (.npz gone, .json kept, and the reverse), a foreign file in runs/, a few at a time
(each to another run): ``stepsim check --verify DIR`` exits 1 and lists them without
running anything; the same check says in one line what it set aside in DIR/runs/damaged
and of which kinds, redoes those runs and writes the clean report
(apart from times); --verify then exits 0. A full disk in the middle of a save (a small
tmpfs) is one line naming the folder, with no report written; SIGKILL as a save commits
its file (strace) leaves at most half a pair; both end whole after the same command. Two
checks started at once on a damaged folder both finish with the clean report.

Slow: the clean check and each case run the CLI in subprocesses.
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

# --jobs 1: the runs in the check's own process. What a fault test reaches (the store's
# verify, heal, claims and saves) is the check process's own work whatever the executor;
# a pool would only add two spawned workers' start-up to each of the file's 10 checks
# (the pool's paths: tests/experiments/test_workers.py, tests/cli/test_interrupt.py,
# tests/checks/test_check_cli.py)
COMMAND = ["check", "C3", "--quick", "--jobs", "1", "--out"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="POSIX, tmpfs, strace")]


def check(out, cwd, prefix=()) -> subprocess.CompletedProcess:
    """The command every case runs, and runs again."""
    return stepsim(*COMMAND, out, cwd=cwd, prefix=prefix)


def report_numbers(out: Path) -> dict:
    """report.json without what differs between equal checks (times, versions, run id)."""
    doc = json.loads((out / "report.json").read_text())["result"]
    claims = [{k: v for k, v in c.items() if k not in ("runtime_s", "versions")}
              for c in doc["claims"]]
    # the ledger (checks, wall_s) is the history of the checks that wrote it, not a result
    compute = {k: v for k, v in doc["compute"].items()
               if k not in ("worker_s", "checks", "wall_s")}
    return {"claims": claims, "tuning": doc["tuning"], "lrs": doc["lrs"], "compute": compute,
            "protocol": doc["protocol"], "mode": doc["mode"], "operating": doc["operating"]}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished quick C3 check, made once by the CLI: (its parent folder, name)."""
    where = tmp_path_factory.mktemp("checks")
    done = check("clean", where)
    assert done.returncode == 0, done.stderr
    return where, "clean"


@pytest.fixture
def copy(finished, tmp_path):
    """A fresh copy of the finished check folder: (parent, name)."""
    where, clean = finished
    shutil.copytree(where / clean, tmp_path / "copy")
    return tmp_path, "copy"


def runs_of(out: Path) -> list[str]:
    """The digests of the runs stored in ``out/runs``, sorted."""
    return sorted(p.stem for p in (out / "runs").glob("[!.]*.npz"))


def truncate(runs, d):
    npz = runs / f"{d}.npz"
    npz.write_bytes(npz.read_bytes()[:100])


def flip_npz(runs, d):
    flip(runs / f"{d}.npz", inside_an_array(runs / f"{d}.npz"))


def flip_json(runs, d):
    js = runs / f"{d}.json"
    text = js.read_text()
    at = text.index('"final_loss": ') + len('"final_loss": ') + 3
    js.write_text(text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1:])


def foreign(runs, _):
    (runs / "report copy.json").write_text('{"result": {}}')


# fault -> (what is done to a stored run, how the store names that damage; None: a foreign
# file, which damages no run)
FAULTS = {
    "truncated .npz": (truncate, "unreadable .npz"),
    "flipped .npz byte": (flip_npz, "unreadable .npz"),
    "flipped .json byte": (flip_json, ".json changed since it was saved"),
    ".npz gone, .json kept": (lambda runs, d: (runs / f"{d}.npz").unlink(),
                              ".json without its .npz"),
    ".json gone, .npz kept": (lambda runs, d: (runs / f"{d}.json").unlink(),
                              ".npz without its .json"),
    "foreign file": (foreign, None),
}
# each case: faults done at once, each to another stored run (every fault is in one case;
# a case a check, so three checks redo what six did one fault at a time)
CASES = {
    "three runs damaged three ways": ("truncated .npz", "flipped .json byte",
                                      ".npz gone, .json kept"),
    "two runs damaged two ways and a foreign file": ("flipped .npz byte",
                                                     ".json gone, .npz kept", "foreign file"),
    "a foreign file alone": ("foreign file",),
}


def said_line(runs: str, faults) -> tuple:
    """(the line's start, its damage kinds as a set, its end) that the same check prints
    after setting ``faults`` aside (the kinds are listed in the order the store met them)."""
    kinds = [FAULTS[f][1] for f in faults if FAULTS[f][1] is not None]
    parts = [f"{len(kinds)} damaged run{'s' * (len(kinds) != 1)}"] if kinds else []
    if len(kinds) < len(faults):
        parts.append("1 foreign file")
    head = f"stepsim check: {' and '.join(parts)} set aside in {runs}/damaged"
    counted = {f"{kinds.count(k)} {k}" for k in kinds}
    tail = "" if not kinds else "; redoing " + (
        "the runs" if len(kinds) < len(faults) else "it" if len(kinds) == 1 else "them")
    return head, counted, tail


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_check_folder_is_verified_then_healed_by_the_same_command(finished, copy,
                                                                          case):
    where, clean = finished
    parent, name = copy
    out, runs = parent / name, parent / name / "runs"
    faults = CASES[case]
    for fault, digest in zip(faults, runs_of(out)):
        FAULTS[fault][0](runs, digest)

    verify = stepsim("check", "--verify", name, cwd=parent)
    assert verify.returncode == 1 and verify.stderr == "", verify.stdout + verify.stderr
    assert lines(verify.stdout)[-1].startswith(f"{name}/runs: ")
    damages_runs = any(FAULTS[f][1] for f in faults)
    assert lines(verify.stdout)[-1].endswith(
        f"`stepsim check ... --out {name}` (the same command) sets them aside in "
        f"{name}/runs/damaged" + (" and redoes the damaged runs" if damages_runs else ""))

    again = check(name, parent)
    assert again.returncode == 0, again.stderr
    (line,) = lines(again.stderr)
    head, kinds, tail = said_line(f"{name}/runs", faults)
    if kinds:
        assert line.startswith(head + " (") and line.endswith(")" + tail), line
        assert set(line[len(head) + 2:len(line) - len(tail) - 1].split(", ")) == kinds, line
    else:
        assert line == head
    assert report_numbers(out) == report_numbers(where / clean)
    assert runs_of(out) == runs_of(where / clean)
    whole = stepsim("check", "--verify", name, cwd=parent)
    assert whole.returncode == 0 and lines(whole.stdout)[-1].endswith("the store is whole")


def test_every_fault_is_in_a_case_and_the_expected_lines_are_the_stores():
    # the expected lines above are built the way Healing.line builds them: checked on
    # the store's own class, so that a wrong expectation cannot pass unnoticed
    from stepsim.experiments.store_files import DamagedRun, Healing

    assert {f for faults in CASES.values() for f in faults} == set(FAULTS)
    for faults in CASES.values():
        labels = [FAULTS[f][1] for f in faults if FAULTS[f][1] is not None]
        healing = Healing(Path("R"), tuple(DamagedRun("R", f"d{i}", (), label)
                                           for i, label in enumerate(labels)),
                          (Path("R/x"),) * (len(labels) < len(faults)))
        head, kinds, tail = said_line("R", faults)
        line = "stepsim check: " + healing.line()
        assert line.startswith(head) and line.endswith(tail)
        if kinds:
            assert set(line[len(head) + 2:len(line) - len(tail) - 1].split(", ")) == kinds


def test_a_full_disk_in_the_middle_of_a_save_is_one_line_then_the_same_command_resumes(
        finished, tmp_path):
    where, clean = finished
    redo = runs_of(where / clean)[:3]
    with tmpfs(tmp_path / "disk", "64m") as disk:
        shutil.copytree(where / clean / "runs", disk / "check" / "runs")  # no report
        for d in redo:  # three runs still to do
            for suffix in (".json", ".npz"):
                (disk / "check" / "runs" / f"{d}{suffix}").unlink()
        used = shutil.disk_usage(disk).used
        room = 48 * 1024  # one run's files (~35 KB in 9 pages), not two
        subprocess.run(["mount", "-o", f"remount,size={used + room}", str(disk)], check=True)
        full = check("disk/check", tmp_path)
        assert full.returncode == 1 and "Traceback" not in full.stderr
        (line,) = lines(full.stderr)
        assert line.startswith("stepsim check: error: [Errno 28] No space left on device "
                               "while ")
        # the save or the claim of a run, whichever meets the full disk first
        resumes = "; the runs finished there are kept, and the same command resumes"
        assert line.endswith((f" in disk/check/runs{resumes}",
                              f" in disk/check/runs/claims{resumes}"))
        assert not (disk / "check" / "report.json").exists()
        stored = runs_of(disk / "check")
        assert set(stored) < set(runs_of(where / clean))  # no half pair, nothing new
        assert {p.stem for p in (disk / "check" / "runs").glob("[!.]*.json")} == set(stored)

        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = check("disk/check", tmp_path)
        assert again.returncode == 0 and lines(again.stderr) == [], again.stderr
        assert report_numbers(disk / "check") == report_numbers(where / clean)


def test_sigkill_as_a_save_commits_then_the_same_command_ends_whole(finished, tmp_path):
    where, clean = finished
    shutil.copytree(where / clean / "runs", tmp_path / "killed" / "runs")
    for d in runs_of(where / clean)[:2]:  # two runs still to do
        for suffix in (".json", ".npz"):
            (tmp_path / "killed" / "runs" / f"{d}{suffix}").unlink()
    # the check's process first commits its start mark (one rename: stepsim.checks.stopped),
    # then the first run it saves with two renames (.npz, .json): SIGKILL as it enters the
    # third rename leaves that run's .npz without its .json
    killed = check("killed", tmp_path, prefix=strace_kill_at(3))
    assert killed.returncode != 0 and not (tmp_path / "killed" / "report.json").exists()
    runs = tmp_path / "killed" / "runs"
    npz, js = runs_of(tmp_path / "killed"), {p.stem for p in runs.glob("[!.]*.json")}
    assert len(npz) == len(js) + 1 == len(runs_of(where / clean)) - 1

    again = check("killed", tmp_path)
    assert again.returncode == 0, again.stderr
    want = "1 damaged run set aside in killed/runs/damaged (1 .npz without its .json)"
    assert lines(again.stderr) == [f"stepsim check: {want}; redoing it"]
    assert report_numbers(tmp_path / "killed") == report_numbers(where / clean)
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]
    assert stepsim("check", "--verify", "killed", cwd=tmp_path).returncode == 0


def test_two_checks_at_once_on_a_damaged_folder_both_finish_with_the_clean_report(
        finished, copy):
    where, clean = finished
    parent, name = copy
    runs = parent / name / "runs"
    first, second = runs_of(parent / name)[:2]
    truncate(runs, first)
    (runs / f"{second}.json").unlink()
    env = dict(os.environ, PYTHONPATH=str(ROOT), STEPSIM_PROGRESS="0")
    cmd = [sys.executable, "-m", "stepsim", *COMMAND, name]
    procs = [subprocess.Popen(cmd, cwd=parent, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=1800) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    tables = [out.splitlines()[:-1] for out, _ in outs]  # the verdicts, not the time line
    assert tables[0] == tables[1]
    assert report_numbers(parent / name) == report_numbers(where / clean)
    notes = sorted(p.stem for p in (runs / "damaged").glob("*.why"))
    assert notes == sorted([first, second])  # each set aside once, by one of the two
    assert stepsim("check", "--verify", name, cwd=parent).returncode == 0
