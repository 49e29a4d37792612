"""Checks that stopped before their report: counted in the next report's ledger.

A report's ledger (``compute.checks``, :func:`stepsim.checks.merging.check_ledger`) lists
the checks that wrote it. A check that stops before its report (killed, out of memory, a
bug: the registered draft-5 run of 2026-11-28 stopped after 39.5 min in its last stage)
used to leave no entry, so the report's wall time missed it. Now each check with an
``--out`` folder leaves a *start mark* there (``DIR/.checks/RUN_ID.json``: when it started,
its mode, claims, rules, process and host) and removes it once its report is written. The
next check that writes a report in that folder takes every mark left by a check that is
no longer running (same host, its process gone; a mark from another host or a live process
is left alone) and made under the same mode and rules, and adds it to the ledger as a
*stopped* check:

* ``wall_s``: from its start to the last run it saved (the store's files written after its
  start and before the next check started) — a lower bound of the time it ran;
* ``runs_made``: those runs.

Those marks are then removed (their checks are in the ledger). Nothing here runs anything.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

MARKS_DIR = ".checks"


def mark_started(out_dir, run_id: str, entry: dict) -> Path:
    """Write this check's start mark in ``out_dir`` (atomically); returns its path.
    entry: its ledger fields known at the start (mode, claims, started_utc, jobs) and
    ``rules_sha256``."""
    from stepsim._ground.atomic import write_json

    marks = Path(out_dir) / MARKS_DIR
    marks.mkdir(exist_ok=True)
    return write_json(marks / f"{run_id}.json",
                      {**entry, "run_id": run_id, "started_epoch": time.time(),
                       "pid": os.getpid(), "host": socket.gethostname()})


def _running(mark: dict) -> bool:
    """Whether the check of ``mark`` may still be running: on another host (cannot tell),
    or its process is alive here and is not this one (a process runs one check at a time:
    an earlier check of this process that raised has stopped)."""
    if mark.get("host") != socket.gethostname():
        return True
    if mark.get("pid") == os.getpid():
        return False
    try:
        os.kill(int(mark["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError, TypeError, KeyError):
        return True
    return True


def _read(path: Path) -> dict | None:
    try:
        mark = json.loads(path.read_text())
        float(mark["started_epoch"])
        return mark
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a mark cut short: nothing to count


def stopped_checks(out_dir, runs_dir, *, mode: str, rules_sha256: str,
                   this_run_id: str) -> tuple[list[dict], list[Path]]:
    """(ledger entries of the checks that stopped before their report in ``out_dir``,
    oldest first, and the marks they came from). runs_dir: the folder of the run store
    (its ``*.json`` files' modification times date the runs)."""
    marks = []
    for path in sorted((Path(out_dir) / MARKS_DIR).glob("*.json")):
        mark = _read(path)
        if mark is not None:  # this check's own too: its start ends the one before
            marks.append((float(mark["started_epoch"]), path, mark))
    marks.sort(key=lambda m: m[0])
    starts = [s for s, _, _ in marks]
    saved = sorted(p.stat().st_mtime for p in Path(runs_dir).glob("[!.]*.json"))
    entries, used = [], []
    for i, (start, path, mark) in enumerate(marks):
        if (mark.get("run_id") == this_run_id or _running(mark) or mark.get("mode") != mode
                or mark.get("rules_sha256") != rules_sha256):
            continue
        until = starts[i + 1] if i + 1 < len(starts) else time.time()
        mine = [t for t in saved if start <= t < until]
        entries.append({"run_id": mark["run_id"], "mode": mode,
                        "claims": list(mark.get("claims") or []),
                        "started_utc": mark.get("started_utc"), "jobs": mark.get("jobs"),
                        "runs_made": len(mine), "worker_s_made": None, "found_in_store": None,
                        "wall_s": (max(mine) - start) if mine else 0.0, "stopped": True})
        used.append(path)
    return entries, used


def remove(out_dir, paths) -> None:
    """Remove marks (this check's own once its report is written, and those counted), and
    the marks' folder once it is empty."""
    for path in paths:
        try:
            Path(path).unlink()
        except FileNotFoundError:
            pass
    try:
        (Path(out_dir) / MARKS_DIR).rmdir()
    except OSError:  # another check's mark is still there (or the folder is gone)
        pass


__all__ = ["MARKS_DIR", "mark_started", "remove", "stopped_checks"]
