"""A sweep directory's files: its plan (``sweep.json``), its runs (a
:class:`~stepsim.experiments.store.RunStore` in ``runs/``) and the tidy table derived from
them.

Layout::

    sweep.json                the spec and every run (digest, seed index, RunSpec), grid order
    runs/DIGEST.npz           a finished run's trace and weights (written first)
    runs/DIGEST.json          its summary, with provenance (written last: its commit mark)
    runs/claims/DIGEST.claim  a run in flight: locked by the process running it
    table.csv, table.json     the tidy table, one row per finished run (derived, rewritten)

The table is rebuilt from the runs' JSONs, so a sweep killed at any moment can never lose
or duplicate a row. A sweep directory written before runs were named by digest
(``runs/NAME.json``, a plan of ``run_id``s) is converted in place by
:func:`convert_legacy` when ``stepsim sweep`` resumes it: the same runs, the same results,
renamed by digest.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import glob
import io
import json
import os
from pathlib import Path

from stepsim.experiments import store_files
from stepsim.experiments.store import CLAIMS_DIR, RunStore

SWEEP_FILE = "sweep.json"
RUNS_DIR = "runs"
TABLE_CSV = "table.csv"
TABLE_JSON = "table.json"
VERSION_KEYS = ("stepsim", "numpy", "scipy", "numba", "python")


# ------------------------------------------------------------------------ a sweep's plan
def sweep_store(out_dir) -> RunStore:
    """The :class:`RunStore` of sweep directory ``out_dir`` (``out_dir/runs``)."""
    return RunStore(Path(out_dir) / RUNS_DIR)


def write_plan(out_dir, spec_dict: dict, grid: list[tuple]) -> Path:
    """Record the spec and its runs ((RunSpec, seed index) pairs, grid order) in
    ``out_dir/sweep.json``."""
    from stepsim._ground.provenance import save_json

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
    from stepsim._ground.validate import check_input_file

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
    from stepsim._ground.atomic import seal, write_text

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
        write_text(store.path(run), seal(doc))  # rewritten: sealed as a new save is
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
        from stepsim._ground.atomic import write_text
        from stepsim._ground.provenance import provenance

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


def load_table(out_dir, grid: list[tuple] | None = None, *, verify: bool = True) -> Table:
    """Build the table of sweep directory ``out_dir`` from its finished runs' JSON files.

    grid: the planned runs, (RunSpec, seed index) pairs (default: those recorded in
    ``sweep.json``); rows follow their order, and the digests of runs without a result are
    listed in ``Table.missing``. verify: read every planned run's files whole first
    (:mod:`stepsim.experiments.store_files`) and refuse, with an OSError in one line, a
    directory where some are damaged (the sweep command sets them aside and redoes them);
    False: only the JSONs are read (``run_sweep``, which has just healed the store).
    """
    out_dir = Path(out_dir)
    if grid is None:
        grid = read_plan(out_dir)  # a spoiled plan: a ValueError naming the file
        _refuse_legacy(out_dir)
    store = sweep_store(out_dir)
    if verify:
        damaged = [exc for run, _ in grid if (exc := _damage(store, run)) is not None]
        if damaged:
            raise store_files.DamagedStore(store.root, damaged, f"`stepsim sweep SPEC --out "
                                           f"{out_dir}` (the same command)")
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


def _refuse_legacy(out_dir: Path) -> None:
    if any("run_id" in entry for entry in _plan_entries(out_dir)[0][:1]):
        raise ValueError(f"{out_dir} holds a sweep of the layout before digests; run the "
                         f"same `stepsim sweep` with --out {out_dir} once to convert it")


def _damage(store: RunStore, run):
    """The :class:`~stepsim.experiments.store_files.DamagedRun` of ``run``'s stored files,
    or None when they are whole or absent."""
    try:
        store_files.read(store.root, run.digest)
    except store_files.DamagedRun as exc:
        return exc
    return None


def verify(out_dir) -> tuple:
    """Read every run stored in sweep directory ``out_dir`` (``stepsim sweep --verify``):
    (:class:`~stepsim.experiments.store_files.StoreCheck`, planned runs stored whole,
    planned runs); nothing is run or changed."""
    out_dir = Path(out_dir)
    grid = read_plan(out_dir)  # not a sweep directory: FileNotFoundError / ValueError
    _refuse_legacy(out_dir)
    store = sweep_store(out_dir)
    check = store.verify()
    damaged = {d.digest for d in check.damaged}
    stored = sum(1 for run, _ in grid if run.digest not in damaged and store.is_finished(run))
    return check, stored, len(grid)


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
