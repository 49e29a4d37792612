"""Finished runs and tasks by digest, in one directory: :class:`RunStore`, with its claim
locks — what a sweep (``--out DIR/runs/``), ``stepsim check`` (``--out DIR/runs/``) and the
paper_checks scripts resume from, through :func:`stepsim.experiments.executors.run`.

Every file is written atomically (``stepsim._ground.atomic``). A run is finished exactly when its
JSON exists and names its digest, so a process killed at any moment — between the .npz and
the JSON included — loses at most the runs in flight.

Several processes may share one store (a sweep started twice by hand, or on several
machines over a shared filesystem): each runs only the runs it claims
(:meth:`RunStore.claim`), so they split the work instead of each doing all of it (see
:class:`_Claims` for why a claim is a lock and not a file that must be judged stale).
A sweep directory's plan and table are :mod:`stepsim.experiments.sweep_dir`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path

CLAIMS_DIR = "claims"


@dataclasses.dataclass(frozen=True)
class RunOutput:
    """What a worker sends back for one run.

    result: the :class:`~stepsim.training.FitResult`. runtime_s: wall time of ``fit`` (s).
    final_sparsity: fraction of the sparsified entries pruned at the end. finished_at: when
    the worker finished (``time.time()``; for monitoring, not saved).
    """

    result: object
    runtime_s: float
    final_sparsity: float
    finished_at: float


@dataclasses.dataclass(frozen=True)
class TaskOutput:
    """What a worker sends back for a :class:`~stepsim.experiments.tasks.Task`: its output
    (a JSON-ready dict) and its wall time (s)."""

    output: dict
    runtime_s: float


class _Claims:
    """The runs (tasks) this process has claimed in a :class:`RunStore` (``ROOT/claims/``).

    A claim is ``claims/DIGEST.claim`` held under an exclusive ``flock``; the file's text says
    who holds it (host, pid, time), for messages only. A lock rather than a file created
    with ``O_EXCL`` and judged stale later: the kernel drops a process's locks when it dies,
    SIGKILL included, so a killed sweep's claims never block a resume — no guessing from
    pids (reused), hosts or leases (too short for a long run, too long for a resume). On
    Linux NFS clients ``flock`` is carried by NFS locks, so sweeps on several machines
    sharing the directory also split the work. Where files cannot be locked (no ``fcntl``,
    or a filesystem without locks) every run counts as claimed, with a warning, as before
    claims existed: then run one sweep process per directory.

    Claims are taken by the process that writes results (never by pool or Dask workers),
    so they live exactly as long as the sweep process that will save the run.
    """

    def __init__(self, directory):
        self.dir = Path(directory)
        self._held: dict[str, int] = {}  # digest -> the locked file's descriptor
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            fcntl = None
        self._fcntl = fcntl

    def path(self, task) -> Path:
        return self.dir / f"{task.digest}.claim"

    def try_claim(self, task) -> bool:
        """Claim ``task``; False if another process (alive) holds it."""
        if self._fcntl is None:
            return True
        path = self.path(task)
        self.dir.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                self._fcntl.flock(fd, self._fcntl.LOCK_EX | self._fcntl.LOCK_NB)
            except BlockingIOError:  # held by a live process
                os.close(fd)
                return False
            except OSError as exc:  # no locks on this filesystem (ENOLCK, EOPNOTSUPP ...)
                os.close(fd)
                warnings.warn(f"cannot lock files in {self.dir} ({exc}); runs are not "
                              "claimed: run one sweep process per directory", stacklevel=2)
                self._fcntl = None
                return True
            # the holder before us may have finished and removed the file between our open
            # and our lock: then we locked a file nobody else will see; open the path again
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        holder = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
                  "argv": sys.argv}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(holder) + "\n").encode("utf-8"))
        self._held[task.digest] = fd
        return True

    def release(self, task, *, finished: bool) -> None:
        """Give ``task`` up; when ``finished`` (its JSON is written) remove its claim file too.

        The file of an unfinished run stays (unlocked), so a process that opened it in the
        meantime still locks the same file as the next claimer.
        """
        fd = self._held.pop(task.digest, None)
        if fd is None:
            return
        if finished:
            with contextlib.suppress(FileNotFoundError):
                self.path(task).unlink()
        os.close(fd)  # closing the last descriptor drops the lock

    def release_all(self) -> None:
        """Give up every claim still held (a failed or interrupted sweep)."""
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()

    def holder(self, task) -> str:
        """Who holds ``task``'s claim, as its file says ("pid 123 on host x"), or "" if unknown."""
        try:
            info = json.loads(self.path(task).read_text())
            return f"pid {info['pid']} on {info['host']}"
        except (OSError, ValueError, KeyError, TypeError):
            return ""


# ------------------------------------------------------------------ runs by digest
class RunStore:
    """Finished runs and tasks by digest, in one directory: what a sweep, ``stepsim check``
    and the paper_checks scripts resume from (:func:`stepsim.experiments.executors.run`).

    Layout: ``DIGEST.npz`` (a RunSpec's trace and weights, written first) and
    ``DIGEST.json`` (its summary with provenance, holding the RunSpec and the digest;
    written last, the run's commit mark); a :class:`~stepsim.experiments.tasks.Task`'s
    output is ``DIGEST.json`` alone; ``claims/DIGEST.claim``: a task in flight, locked by
    the process that will save it (:meth:`claim`). A task is finished exactly when its JSON
    parses and names its digest, so a process killed at any moment loses only the tasks in
    flight; equal tasks (same digest) are stored, and run, once.
    """

    def __init__(self, root):
        self.root = Path(root)
        self._claims = _Claims(self.root / CLAIMS_DIR)

    def path(self, task) -> Path:
        return self.root / f"{task.digest}.json"

    def document(self, task) -> dict | None:
        """The task's result document ({"result", "provenance"}), or None if not finished."""
        return self._doc(task)

    def _doc(self, task) -> dict | None:
        path = self.path(task)
        if not path.is_file():  # missing, or a FIFO that would block the read
            return None
        try:
            doc = json.loads(self.path(task).read_text())
            ok = doc["provenance"]["params"]["digest"] == task.digest
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return doc if ok else None

    def is_finished(self, task) -> bool:
        return self._doc(task) is not None

    def lacks(self, task, key: str) -> bool:
        """True when ``task`` is finished but its stored result has no ``key`` (a field a
        later version records, e.g. a run's ``diagnostics``: a caller may redo it)."""
        doc = self._doc(task)
        return doc is not None and key not in doc.get("result", {})

    def save(self, task, output) -> Path:
        """Write ``task``'s output (a :class:`RunOutput` for a RunSpec, else a
        :class:`TaskOutput`)."""
        path = self.path(task)
        if isinstance(output, RunOutput):
            params = {"digest": task.digest, "run": task.to_dict(),
                      "runtime_s": output.runtime_s, "final_sparsity": output.final_sparsity}
            output.result.save(path, params=params)
        else:  # NaN and inf kept as JSON's NaN / Infinity: the output loads back equal
            from stepsim._ground.atomic import write_text
            from stepsim._ground.provenance import provenance

            doc = {"result": {"output": output.output},
                   "provenance": provenance({"digest": task.digest, "task": task.fn,
                                             "kwargs": task.kwargs,
                                             "runtime_s": output.runtime_s})}
            write_text(path, json.dumps(doc, indent=1, default=_plain) + "\n")
        return path

    def load(self, task):
        """A RunSpec's :class:`~stepsim.training.FitResult` (its recipe rebuilt from the
        spec; ``dense_weights`` not stored: empty) or a Task's output dict."""
        doc = self._doc(task)
        if doc is None:
            raise FileNotFoundError(f"no finished result for {task.describe()} in {self.root}")
        if "run" not in doc["provenance"]["params"]:
            return doc["result"]["output"]
        return _fit_result(task, doc, self.path(task).with_suffix(".npz"))

    def runtime_s(self, task) -> float:
        """Wall time of the task's run when it ran (seconds; NaN if not recorded)."""
        doc = self._doc(task)
        value = None if doc is None else doc["provenance"]["params"].get("runtime_s")
        return float("nan") if value is None else float(value)

    def remove_temporaries(self, task=None) -> int:
        """Delete temporary files a killed writer left (``.DIGEST.*``): ``task``'s only (call
        it holding the task's claim: another process may be writing other tasks here), or
        every one (None); return how many."""
        removed = 0
        pattern = "*" if task is None else glob.escape(task.digest) + ".*"
        for tmp in self.root.glob("." + pattern):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed += 1
        return removed

    # ------------------------------------------------------------------ claims
    def claim(self, task) -> bool:
        """Lock ``task`` for this process; False if another live process holds it
        (:class:`_Claims`). A task finished meanwhile is not claimed (False)."""
        if not self._claims.try_claim(task):
            return False
        if self.is_finished(task):
            self._claims.release(task, finished=True)
            return False
        self.remove_temporaries(task)  # a killed writer's leftovers
        return True

    def release(self, task, *, finished: bool) -> None:
        """Give ``task``'s claim up (``finished``: its claim file is removed too)."""
        self._claims.release(task, finished=finished)

    def release_all(self) -> None:
        """Give up every claim this process holds (a failed or interrupted run)."""
        self._claims.release_all()

    def holder(self, task) -> str:
        """Who holds ``task``'s claim ("pid 123 on host x"), or "" if unknown."""
        return self._claims.holder(task)


def _plain(value):
    if hasattr(value, "item"):  # NumPy scalars and 0-d arrays
        return value.item() if getattr(value, "ndim", 0) == 0 else value.tolist()
    raise TypeError(f"not JSON-ready: {value!r}")


def _fit_result(spec, doc: dict, npz: Path):
    from stepsim.fit_result import read_npz
    from stepsim.training import FitResult, Trace

    r = doc["result"]
    data = read_npz(npz)  # once: the pair check, the trace, the weights and the curves
    trace = Trace.from_arrays(data)
    weights = {k[len("weights/"):]: data[k] for k in data if k.startswith("weights/")}
    curves = {k[len("curve/"):]: data[k] for k in data if k.startswith("curve/")}
    return FitResult(weights=weights, dense_weights={}, trace=trace,
                     switch_step=r["switch_step"], metrics=r["metrics"],
                     initial_metrics=r["initial_metrics"],
                     nm={k: tuple(v) for k, v in r["nm"].items()}, recipe=spec.build_recipe(),
                     criterion=r["criterion"], steps=r["steps"], seed=r["seed"],
                     problem=r["problem"], status=r["status"], message=r["message"],
                     stopped_at=r["stopped_at"], module_switch_steps=r["module_switch_steps"],
                     curves=curves, diverged_param=r.get("diverged_param"),
                     diagnostics=r.get("diagnostics") or {})
