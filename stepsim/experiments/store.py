"""Finished runs by digest (:class:`RunStore`, with its claim locks), a sweep's plan, and
the sweep's tidy table derived from them.

Layout of a sweep directory::

    sweep.json              the spec and every run (digest, seed index, RunSpec), grid order
    runs/DIGEST.npz         a finished run's trace and weights (written first)
    runs/DIGEST.json        its summary, with provenance (written last: the run's commit mark)
    runs/claims/DIGEST.claim  a run in flight: locked by the process running it
    table.csv, table.json   the tidy table, one row per finished run (derived, rewritten)

``runs/`` is a :class:`RunStore`, the same store ``stepsim check`` keeps under ``--out
DIR/runs/``. Every file is written atomically (``stepsim._atomic``). A run is finished
exactly when its JSON exists and names its digest; the table is rebuilt from those JSONs,
so a sweep killed at any moment — between the .npz and the JSON included — loses at most
the runs in flight and can never lose or duplicate a row.

Several processes may share one store (a sweep started twice by hand, or on several
machines over a shared filesystem): each runs only the runs it claims
(:meth:`RunStore.claim`), so they split the work instead of each doing all of it (see
:class:`_Claims` for why a claim is a lock and not a file that must be judged stale).

A sweep directory written before runs were named by digest (``runs/NAME.json``, a plan of
``run_id``s) is converted in place by :func:`convert_legacy` when ``stepsim sweep`` resumes
it: the same runs, the same results, renamed by digest.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import glob
import io
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path

SWEEP_FILE = "sweep.json"
RUNS_DIR = "runs"
CLAIMS_DIR = "claims"
TABLE_CSV = "table.csv"
TABLE_JSON = "table.json"
VERSION_KEYS = ("stepsim", "numpy", "scipy", "numba", "python")


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


# ------------------------------------------------------------------------ a sweep's plan
def sweep_store(out_dir) -> RunStore:
    """The :class:`RunStore` of sweep directory ``out_dir`` (``out_dir/runs``)."""
    return RunStore(Path(out_dir) / RUNS_DIR)


def write_plan(out_dir, spec_dict: dict, grid: list[tuple]) -> Path:
    """Record the spec and its runs ((RunSpec, seed index) pairs, grid order) in
    ``out_dir/sweep.json``."""
    from stepsim._provenance import save_json

    plan = {"spec": spec_dict,
            "runs": [{"digest": run.digest, "seed_index": index, "run": run.to_dict()}
                     for run, index in grid]}
    return save_json(Path(out_dir) / SWEEP_FILE, plan, params={"spec": spec_dict})


def read_plan(out_dir) -> list[tuple]:
    """The runs recorded in ``out_dir/sweep.json``: (RunSpec, seed index) pairs, grid order.

    A plan of the layout before digests is read too (its runs as RunSpecs, the same
    digests a new plan of the same spec has); its results are found once
    :func:`convert_legacy` has renamed them.
    """
    from stepsim.experiments.run import RunSpec

    entries, path = _plan_entries(out_dir)
    try:
        if entries and "run_id" in entries[0]:
            return [_legacy_run(e["params"], e["rng_seed"]) for e in entries]
        grid = [(RunSpec.from_dict(e["run"]), e["seed_index"]) for e in entries]
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise ValueError(f"sweep plan {path} is not a sweep's plan (expected {{\"result\": "
                         f"{{\"runs\": [{{\"digest\", \"seed_index\", \"run\"}}, ...]}}}}; "
                         f"{_what(exc)})") from None
    for (run, _), entry in zip(grid, entries):
        if run.digest != entry["digest"]:
            raise ValueError(f"sweep plan {path}: run {entry['digest'][:16]} does not match "
                             "its digest (edited by hand?)")
    return grid


def _plan_entries(out_dir):
    from stepsim._validate import check_input_file

    path = Path(out_dir) / SWEEP_FILE
    if not path.exists():
        raise FileNotFoundError(f"{str(out_dir)!r} is not a sweep directory (no {SWEEP_FILE})")
    check_input_file(path, "sweep plan")
    try:
        entries = json.loads(path.read_text())["result"]["runs"]
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise TypeError("'runs' is not a list of tables")
    except ValueError as exc:  # not JSON
        raise ValueError(f"sweep plan {path} is not valid JSON ({exc})") from None
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"sweep plan {path} is not a sweep's plan (expected {{\"result\": "
                         f"{{\"runs\": [...]}}}}; {_what(exc)})") from None
    return entries, path


def _legacy_run(params: dict, seed: int) -> tuple:
    """(RunSpec, seed index) of a run of a plan before digests (``params``: the run's
    canonical parameters, ``seed``: its hashed seed), exactly as that layout ran it."""
    from stepsim.experiments.sweep_spec import as_run_spec

    run = as_run_spec(params["problem"], params["recipe"], params["criterion"], params["nm"],
                      params["steps"], params["seed"], params.get("eval_every"))
    if run.seed != seed:
        raise ValueError(f"seed {seed} is not the hash of problem and seed index")
    return run, params["seed"]


def convert_legacy(out_dir) -> int:
    """Convert a sweep directory of the layout before digests in place; return how many
    finished runs were renamed (0 and nothing done for a current or a missing plan).

    Each finished ``runs/NAME.json`` (and its .npz) becomes ``runs/DIGEST.json`` /
    ``.npz`` of the RunSpec the run was (its provenance keeps the old record under
    ``params.sweep``); the plan is rewritten last, so a conversion killed midway is simply
    done again. An unfinished run's leftovers (its .npz, a killed writer's temporaries) are
    removed: it is redone under its digest.
    """
    from stepsim._atomic import write_text

    out_dir = Path(out_dir)
    if not (out_dir / SWEEP_FILE).exists():
        return 0
    entries, _ = _plan_entries(out_dir)
    if not entries or "run_id" not in entries[0]:
        return 0
    grid = read_plan(out_dir)  # checks every entry before anything moves
    store, moved = sweep_store(out_dir), 0
    for (run, _), entry in zip(grid, entries):
        old = out_dir / RUNS_DIR / f"{entry['name']}.json"
        try:
            doc = json.loads(old.read_text())
            sweep = doc["provenance"]["params"]["sweep"]
            if sweep["run_id"] != entry["run_id"]:
                continue
        except (OSError, ValueError, KeyError, TypeError):  # not finished: redone by digest
            for stale in [old.with_suffix(".npz"), *old.parent.glob(
                    glob.escape(f".{entry['name']}.") + "*")]:
                with contextlib.suppress(OSError):
                    stale.unlink()
            continue
        npz = store.path(run).with_suffix(".npz")
        os.replace(old.with_suffix(".npz"), npz)
        doc["result"]["arrays"] = npz.name
        doc["provenance"]["params"] = {"digest": run.digest, "run": run.to_dict(),
                                       "runtime_s": sweep["runtime_s"],
                                       "final_sparsity": sweep["final_sparsity"],
                                       "sweep": sweep}
        write_text(store.path(run), json.dumps(doc, indent=2) + "\n")
        old.unlink()
        moved += 1
    spec_dict = json.loads((out_dir / SWEEP_FILE).read_text())["result"]["spec"]
    write_plan(out_dir, spec_dict, grid)
    with contextlib.suppress(OSError):  # the old claim files: nobody can hold them any more
        for claim in (out_dir / CLAIMS_DIR).glob("*.claim"):
            claim.unlink()
        (out_dir / CLAIMS_DIR).rmdir()
    return moved


def _what(exc: Exception) -> str:
    """What a KeyError/TypeError met while walking a JSON document, in a few words."""
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r}"
    return f"wrong shape: {exc}"


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


# ------------------------------------------------------------------------ the table
@dataclasses.dataclass(frozen=True)
class Table:
    """The tidy table of a sweep: one row (a dict) per finished run, in grid order.

    Columns: digest (the RunSpec's); every parameter (problem, ``problem.OPTION``, recipe,
    optimizer, ``recipe.OPTION``, criterion, ``criterion.OPTION`` (``criterion.per_module``
    when set), nm "N:M", n, m, sparsity = 1 - N/M, steps, seed (the index), rng_seed (the
    RunSpec's seed), eval_every when set); the outcome (status, stopped_at,
    switch_step, final_loss, every metric of
    ``problem.evaluate`` under its own name, final_sparsity, mask_flips_total, runtime_s);
    and ``version.PACKAGE`` for stepsim, numpy, scipy, numba, python. missing: digests of the
    planned runs without a result (yet).
    """

    rows: tuple
    columns: tuple
    missing: tuple = ()

    VOLATILE = ("runtime_s",)  # the only columns that differ between identical runs

    def __len__(self):
        return len(self.rows)

    def column(self, name: str) -> list:
        """The values of column ``name`` (None where a row lacks it)."""
        return [row.get(name) for row in self.rows]

    def where(self, **equal) -> Table:
        """The rows whose columns equal the given values, e.g. ``where(recipe="step", nm="2:4")``.

        Column names with dots are passed as a dict: ``where(**{"recipe.lr": 1e-3})``.
        """
        unknown = sorted(set(equal) - set(self.columns))
        if unknown:
            raise ValueError(f"unknown column(s) {unknown}; columns: {list(self.columns)}")
        rows = tuple(r for r in self.rows if all(r.get(k) == v for k, v in equal.items()))
        return dataclasses.replace(self, rows=rows, missing=())

    def to_csv(self) -> str:
        """The table as CSV text (lists as JSON, None as an empty cell)."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(self.columns), lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: _cell(v) for k, v in row.items()})
        return buf.getvalue()

    def save(self, out_dir) -> tuple[Path, Path]:
        """Write ``table.csv`` and ``table.json`` (rows under "result", with provenance).

        Non-finite values stay numbers: ``nan``/``inf`` cells in the CSV, JSON's ``NaN`` /
        ``Infinity`` in table.json (as Python's json and pandas read them), never text."""
        from stepsim._atomic import write_text
        from stepsim._provenance import provenance

        out_dir = Path(out_dir)
        csv_path = write_text(out_dir / TABLE_CSV, self.to_csv())
        table = {"columns": list(self.columns), "rows": list(self.rows),
                 "missing": list(self.missing)}
        doc = {"result": table, "provenance": provenance({"sweep_dir": str(out_dir)})}
        json_path = write_text(out_dir / TABLE_JSON, json.dumps(doc, indent=1) + "\n")
        return csv_path, json_path


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def load_table(out_dir, grid: list[tuple] | None = None) -> Table:
    """Build the table of sweep directory ``out_dir`` from its finished runs' JSON files.

    grid: the planned runs, (RunSpec, seed index) pairs (default: those recorded in
    ``sweep.json``); rows follow their order, and the digests of runs without a result are
    listed in ``Table.missing``.
    """
    out_dir = Path(out_dir)
    if grid is None:
        grid = read_plan(out_dir)  # a spoiled plan: a ValueError naming the file
        if any("run_id" in entry for entry in _plan_entries(out_dir)[0][:1]):
            raise ValueError(f"{out_dir} holds a sweep of the layout before digests; run the "
                             f"same `stepsim sweep` with --out {out_dir} once to convert it")
    store = sweep_store(out_dir)
    rows, missing = [], []
    for run, index in grid:
        doc = store.document(run)
        if doc is None:
            missing.append(run.digest)
            continue
        try:
            rows.append(result_row(doc, index))
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise ValueError(f"run result {store.path(run)} is not a sweep run's result "
                             f"({_what(exc)}); delete it and run the sweep again to redo "
                             "that run") from None
    columns = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    return Table(rows=tuple(rows), columns=tuple(columns), missing=tuple(missing))


def result_row(doc: dict, seed_index: int) -> dict:
    """One table row from a run's result document in a :class:`RunStore` and the run's seed
    index in its sweep (see :class:`Table` for the columns)."""
    params, result = doc["provenance"]["params"], doc["result"]
    run = params["run"]
    n, m = run["nm"]
    row = {"digest": params["digest"], "problem": run["problem"]["name"]}
    row.update({f"problem.{k}": v for k, v in sorted(run["problem"]["options"].items())})
    row["recipe"] = run["recipe"]["name"]
    row["optimizer"] = run["recipe"]["optimizer"]
    row.update({f"recipe.{k}": v for k, v in sorted(run["recipe"]["options"].items())})
    criterion = run["criterion"]
    row["criterion"] = None if criterion is None else criterion["name"]
    if criterion is not None:
        row.update({f"criterion.{k}": v for k, v in sorted(criterion["options"].items())})
        if criterion.get("per_module"):
            row["criterion.per_module"] = True
    row.update({"nm": f"{n}:{m}", "n": n, "m": m, "sparsity": 1 - n / m,
                "steps": run["steps"], "seed": seed_index, "rng_seed": run["seed"]})
    if run.get("eval_every") is not None:
        row["eval_every"] = run["eval_every"]
    # status / stopped_at: a run that diverged (a non-finite loss, gradient or weight) stops
    # early with status "non-finite"; its NaN/inf metrics, saved in JSON as text, are floats
    row.update({"status": result.get("status", "completed"), "stopped_at": result.get("stopped_at"),
                "diverged_param": result.get("diverged_param"),
                "switch_step": result["switch_step"], "final_loss": _float(result["final_loss"])})
    for name, value in result["metrics"].items():
        row[name if name not in row else f"metric.{name}"] = _float(value)
    row.update({"final_sparsity": params["final_sparsity"],
                "mask_flips_total": result["mask_flips_total"],
                "runtime_s": params["runtime_s"]})
    versions = doc["provenance"]["versions"]
    row.update({f"version.{k}": versions.get(k) for k in VERSION_KEYS})
    return row


def _float(value):
    """A saved number back as a float: "nan", "inf", "-inf" (how JSON result files keep
    non-finite values) become float NaN/inf; other values are returned as they are."""
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "infinity",
                                                             "-infinity"):
        return float(value)
    return value


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

    def save(self, task, output) -> Path:
        """Write ``task``'s output (a :class:`RunOutput` for a RunSpec, else a
        :class:`TaskOutput`)."""
        path = self.path(task)
        if isinstance(output, RunOutput):
            params = {"digest": task.digest, "run": task.to_dict(),
                      "runtime_s": output.runtime_s, "final_sparsity": output.final_sparsity}
            output.result.save(path, params=params)
        else:  # NaN and inf kept as JSON's NaN / Infinity: the output loads back equal
            from stepsim._atomic import write_text
            from stepsim._provenance import provenance

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
    import numpy as np

    from stepsim.training import FitResult, Trace

    r = doc["result"]
    trace = Trace.load_npz(npz)
    with np.load(npz) as data:
        weights = {k[len("weights/"):]: data[k] for k in data.files if k.startswith("weights/")}
        curves = {k[len("curve/"):]: data[k] for k in data.files if k.startswith("curve/")}
    return FitResult(weights=weights, dense_weights={}, trace=trace,
                     switch_step=r["switch_step"], metrics=r["metrics"],
                     initial_metrics=r["initial_metrics"],
                     nm={k: tuple(v) for k, v in r["nm"].items()}, recipe=spec.build_recipe(),
                     criterion=r["criterion"], steps=r["steps"], seed=r["seed"],
                     problem=r["problem"], status=r["status"], message=r["message"],
                     stopped_at=r["stopped_at"], module_switch_steps=r["module_switch_steps"],
                     curves=curves, diverged_param=r.get("diverged_param"),
                     diagnostics=r.get("diagnostics") or {})
