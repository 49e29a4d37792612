"""Finished runs and tasks by digest, in one directory: :class:`RunStore`, with its claim
locks — what a sweep (``--out DIR/runs/``), ``stepsim check`` (``--out DIR/runs/``) and the
paper_checks scripts resume from, through :func:`stepsim.experiments.executors.run`.

Every file is written atomically (``stepsim._ground.atomic``). A run is finished exactly when its
JSON exists and names its digest, so a process killed at any moment — between the .npz and
the JSON included — loses at most the runs in flight.

Every file is verified when it is read (:mod:`stepsim.experiments.store_files`: the JSON's
seal, the .npz's CRC-32s and the arrays its JSON committed). Before running anything,
:func:`stepsim.experiments.executors.run` calls :meth:`RunStore.heal`: a damaged or
half-present run, and a foreign file, is moved to ``damaged/`` (never deleted) and the run
is done again; :meth:`RunStore.verify` reads a whole store and changes nothing
(``stepsim check --verify``, ``stepsim sweep --verify``).

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

from stepsim.experiments import store_files
from stepsim.experiments.store_files import CLAIMS_DIR, DamagedRun


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
        """Claim ``task``; False if another process (alive) holds it. OSError (one line,
        naming the folder) when the claim cannot be written (a full disk)."""
        try:
            return self._try_claim(task)
        except OSError as exc:
            raise write_failed(exc, "claiming a run", self.dir) from exc

    def held_elsewhere(self, digest: str) -> bool:
        """Whether another live process holds the claim of task ``digest`` now (probed
        with a shared lock, dropped at once; nothing is written)."""
        if self._fcntl is None or digest in self._held:
            return False
        try:
            fd = os.open(self.dir / f"{digest}.claim", os.O_RDONLY)
        except OSError:  # no claim file: nobody holds it
            return False
        try:
            self._fcntl.flock(fd, self._fcntl.LOCK_SH | self._fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)  # drops the shared lock
        return False

    def _try_claim(self, task) -> bool:
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
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(holder) + "\n").encode("utf-8"))
        except OSError:
            os.close(fd)
            raise
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
    the process that will save it (:meth:`claim`); ``damaged/``: files set aside by
    :meth:`heal`. A task is finished exactly when its JSON parses, names its digest and
    matches its seal, so a process killed at any moment loses only the tasks in flight;
    equal tasks (same digest) are stored, and run, once. Every read is verified
    (:mod:`stepsim.experiments.store_files`): :meth:`load` raises
    :class:`~stepsim.experiments.store_files.DamagedRun` (an OSError, one line naming the
    folder) for files that are not whole.
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
        from stepsim._ground.atomic import seal_holds

        path = self.path(task)
        if not path.is_file():  # missing, or a FIFO that would block the read
            return None
        try:
            doc = json.loads(self.path(task).read_text())
            ok = (doc["provenance"]["params"]["digest"] == task.digest
                  and seal_holds(doc) is not False)  # an unsealed (older) JSON is read as is
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
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
        :class:`TaskOutput`), sealed (:mod:`stepsim.experiments.store_files`).

        Files of the task already there that are not whole are set aside first, never
        overwritten. A save that fails leaves no half pair (its own .npz is removed when
        its JSON could not be written) and raises OSError in one line naming the folder
        (a full disk: the runs finished there are kept and the same command resumes)."""
        from stepsim._ground import atomic

        path = self.path(task)
        npz = path.with_suffix(".npz")
        if os.path.lexists(path) or os.path.lexists(npz):
            try:  # whole: an equal result (same digest) that this one replaces
                store_files.read(self.root, task.digest)
            except DamagedRun as exc:
                self._set_aside(exc.files, f"{exc.reason}; found when saving the run again",
                                note=task.digest)
        try:
            if isinstance(output, RunOutput):
                params = {"digest": task.digest, "run": task.to_dict(),
                          "runtime_s": output.runtime_s,
                          "final_sparsity": output.final_sparsity}
                output.result.save(path, params=params, seal=True)
            else:  # NaN and inf kept as JSON's NaN / Infinity: the output loads back equal
                from stepsim._ground.provenance import provenance

                doc = {"result": {"output": output.output},
                       "provenance": provenance({"digest": task.digest, "task": task.fn,
                                                 "kwargs": task.kwargs,
                                                 "runtime_s": output.runtime_s})}
                plain = json.loads(json.dumps(doc, default=_plain))  # NumPy scalars as read
                atomic.write_text(path, atomic.seal(plain, indent=1))
        except BaseException as exc:
            if not os.path.lexists(path):  # this save's .npz, never committed: not a result
                with contextlib.suppress(OSError):
                    npz.unlink()
            if isinstance(exc, OSError):
                raise write_failed(exc, "saving a run", self.root) from exc
            raise
        return path

    def load(self, task):
        """A RunSpec's :class:`~stepsim.training.FitResult` (its recipe rebuilt from the
        spec; ``dense_weights`` not stored: empty) or a Task's output dict, read verified:
        :class:`~stepsim.experiments.store_files.DamagedRun` when its files are not whole,
        FileNotFoundError when none is stored."""
        stored = store_files.read(self.root, task.digest)
        if stored is None:
            raise FileNotFoundError(f"no finished result for {task.describe()} in {self.root}")
        doc, arrays = stored
        try:
            if arrays is None:
                return doc["result"]["output"]
            return _fit_result(task, doc, arrays)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise DamagedRun(self.root, task.digest, store_files.files_of(self.root, task.digest),
                             "unreadable result", f"{type(exc).__name__}: {exc}") from None

    def heal(self, tasks) -> store_files.Healing:
        """Read the stored files of ``tasks`` (verified: :mod:`stepsim.experiments.
        store_files`) and set aside in ``damaged/`` — never delete — those that are not
        whole, and every foreign file of the folder, so that the damaged tasks are run
        again. A task another live process holds (it is writing it now) is left to that
        process. Returns what was set aside (:class:`~stepsim.experiments.store_files.
        Healing`: its ``line()`` says it in one line)."""
        found = store_files.listing(self.root)
        foreign = [path for path in found.foreign
                   if self._set_aside([path], "not a file of this store")]
        damaged = []
        for task in {t.digest: t for t in tasks}.values():
            if task.digest not in found.digests or _whole(self.root, task.digest):
                continue
            if not self._claims.try_claim(task):  # another process is writing it now
                continue
            try:  # judged again under the claim: it may have been redone meanwhile
                store_files.read(self.root, task.digest)
            except DamagedRun as exc:
                self._set_aside(exc.files, exc.reason, note=task.digest)
                damaged.append(exc)
            finally:
                self._claims.release(task, finished=False)
        return store_files.Healing(self.root, tuple(damaged), tuple(foreign))

    def _set_aside(self, files, why: str, note: str | None = None) -> list:
        try:
            return store_files.set_aside(self.root, files, why, note=note)
        except OSError as exc:  # a full disk while writing why the files were set aside
            raise write_failed(exc, "setting damaged runs aside", self.root) from exc

    def verify(self) -> store_files.StoreCheck:
        """Read every task stored here, verified, and say what is not whole; nothing is
        run, moved or written (:class:`~stepsim.experiments.store_files.StoreCheck`). A
        task another live process is writing now counts as in flight, not damaged."""
        found = store_files.listing(self.root)
        whole, damaged, in_flight = 0, [], 0
        for digest in sorted(found.digests):
            try:
                store_files.read(self.root, digest)
                whole += 1
            except DamagedRun as exc:
                if self._claims.held_elsewhere(digest):
                    in_flight += 1
                else:
                    damaged.append(exc)
        temporaries = sum(1 for t in found.temporaries
                          if not self._claims.held_elsewhere(t.name[1:65]))
        return store_files.StoreCheck(self.root, whole, tuple(damaged), found.foreign,
                                      in_flight, temporaries, found.set_aside)

    def forget(self, task) -> None:
        """Remove a finished task's files so that it runs again: a whole result the caller
        replaces on purpose (a run stored before a field it now needs existed). Damaged
        files are set aside by :meth:`heal`, never removed."""
        for path in store_files.files_of(self.root, task.digest):  # the JSON (commit) first
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def runtime_s(self, task) -> float:
        """Wall time of the task's run when it ran (seconds; NaN if not recorded)."""
        doc = self._doc(task)
        value = None if doc is None else doc["provenance"]["params"].get("runtime_s")
        return float("nan") if value is None else float(value)

    def remove_temporaries(self, task=None) -> int:
        """Delete temporary files a killed writer left (``.DIGEST.*``): ``task``'s only (call
        it holding the task's claim), or every one (None) but those of tasks another live
        process holds (it is writing them now); return how many."""
        removed = 0
        pattern = "*" if task is None else glob.escape(task.digest) + ".*"
        for tmp in self.root.glob("." + pattern):
            if task is None and (not store_files.is_temporary(tmp.name)
                                 or self._claims.held_elsewhere(tmp.name[1:65])):
                continue
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


def write_failed(exc: OSError, what: str, where) -> OSError:
    """``exc`` (a failed write: a full disk, no permission) again as one line that names the
    folder and says how to go on: "[Errno 28] No space left on device while saving a run in
    DIR; the runs finished there are kept, and the same command resumes"."""
    text = (f"{exc.strerror or exc} while {what} in {where}; the runs finished there are "
            "kept, and the same command resumes")
    return OSError(exc.errno, text) if exc.errno is not None else OSError(text)


def _whole(root, digest: str) -> bool:
    try:
        store_files.read(root, digest)
    except DamagedRun:
        return False
    return True


def _plain(value):
    if hasattr(value, "item"):  # NumPy scalars and 0-d arrays
        return value.item() if getattr(value, "ndim", 0) == 0 else value.tolist()
    raise TypeError(f"not JSON-ready: {value!r}")


def _fit_result(spec, doc: dict, data: dict):
    """The FitResult of RunSpec ``spec`` from its stored document and arrays (read once,
    verified: the trace, the weights and the curves)."""
    from stepsim.training import FitResult, Trace

    r = doc["result"]
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
