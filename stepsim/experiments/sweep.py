"""Run a sweep: check the whole spec, skip finished runs, execute the rest, rebuild the table."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from stepsim.experiments import executors, sweep_dir
from stepsim.experiments.run import RunSpec
from stepsim.experiments.sweep_spec import SweepSpec, entry_options, load_spec, parse_spec


def plan_sweep(spec) -> list[RunSpec]:
    """Check ``spec`` completely and return its runs (RunSpecs) in grid order; nothing is
    trained.

    spec: a :class:`SweepSpec`, a spec dict, or the path of a TOML/JSON spec file.
    Every distinct problem, recipe and criterion is built once (``RunSpec.build_*``), and
    every run is checked as ``fit`` would check it (``RunSpec.check``: N:M against every
    problem's sparse parameters, the recipe/criterion pair). Raises ValueError/TypeError
    naming the offending entry, e.g. ``recipes[1] ('asp'): unknown option(s) ['lamb'] ...``.
    """
    spec = _as_spec(spec)
    # each entry on its own first, so an error names the entry of the spec at fault
    for i, entry in enumerate(spec.problems):
        for options in entry_options(entry):
            _named(f"problems[{i}] ({entry['name']!r})", _problem_alone, entry["name"], options)
    for where, entry in _criterion_entries(spec):
        for options in entry_options(entry):
            _named(where, _criterion_alone, entry["name"], options)
    for i, entry in enumerate(spec.recipes):
        for options in entry_options(entry):
            _named(f"recipes[{i}] ({entry['name']!r})", _recipe_alone, entry, options)
    # then every combination (tied options, a missing criterion, N:M against the layers)
    runs = spec.runs(_needs_criterion)
    if not runs:
        raise ValueError("spec: the grid is empty (no runs)")
    seen, twice = set(), []
    for run in runs:
        if run.digest in seen:
            twice.append(run.describe())
        seen.add(run.digest)
    if twice:
        raise ValueError(f"spec: {len(twice)} runs are listed twice (e.g. {twice[0]}): two "
                         "entries give the same parameters; remove one")
    checked = set()
    for run in runs:  # steps and seed change nothing check() looks at but the switch plan
        key = run.replace(seed=0, eval_every=None).digest
        if key not in checked:
            checked.add(key)
            _named(_describe(run), RunSpec.check, run)
    return runs


def _problem_alone(name: str, options: dict) -> None:
    RunSpec(problem=name, problem_options=options, criterion=None).build_problem()


def _recipe_alone(entry: dict, options: dict) -> None:
    RunSpec(recipe=entry["name"], optimizer=entry["optimizer"], recipe_options=options,
            criterion=None).build_recipe()


def _criterion_alone(name: str, options: dict) -> None:
    options = dict(options)
    per_module = options.pop("per_module", False)
    RunSpec(criterion=name, criterion_options=options, per_module=per_module).build_criterion()


def _needs_criterion(entry: dict, options: dict) -> bool:
    """Whether recipe ``entry`` with ``options`` has a dense phase with no fixed end (STEP)."""
    return RunSpec(recipe=entry["name"], optimizer=entry["optimizer"], recipe_options=options,
                   criterion=None).build_recipe().needs_criterion


def _criterion_entries(spec: SweepSpec):
    if spec.criterion is not None:
        yield "criterion", spec.criterion
    for i, recipe in enumerate(spec.recipes):
        for j, entry in enumerate(recipe["criteria"]):
            yield f"recipes[{i}] ({recipe['name']!r}) criteria[{j}] ({entry['name']!r})", entry


def _as_spec(spec) -> SweepSpec:
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    return parse_spec(spec)


def _describe(run: RunSpec) -> str:
    n, m = run.nm
    return (f"run problem={run.problem} {dict(run.problem_options)}, "
            f"recipe={run.recipe} {dict(run.recipe_options)}, criterion={run.criterion}, "
            f"nm={n}:{m}")


def _named(where: str, func, *args):
    """Call ``func``; re-raise a ValueError/TypeError prefixed with ``where``."""
    try:
        return func(*args)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None


def run_sweep(spec, out_dir, *, jobs: int | None = None, scheduler=None,
              progress: bool | None = None, force: bool = False) -> sweep_dir.Table:
    """Run every unfinished run of ``spec`` and return the sweep's tidy table.

    Parameters
    ----------
    spec : SweepSpec, dict or path
        The grid (see :mod:`stepsim.experiments.sweep_spec`); checked completely before any run.
    out_dir : path
        The sweep directory (layout in :mod:`stepsim.experiments.sweep_dir`). Runs whose
        result is already there are skipped, so the same call resumes a killed sweep.
        A directory that holds another sweep (a plan with other runs) is refused with a
        ValueError before anything is written, unless ``force``.
        Several sweep processes may share it (the same call started twice, or on several
        machines): each claims a run before running it, so they split the runs, and each
        returns once every run is finished, waiting for the runs the others have in
        flight; the table is the same as a single process's.
    jobs : int, optional
        Local workers (default: every usable core; 1 runs in this process). Ignored with
        ``scheduler``. Workers are spawned processes: in a script, call ``run_sweep``
        under ``if __name__ == "__main__":`` (as for any multiprocessing code).
    scheduler : str, distributed.Client or cluster, optional
        Run on Dask distributed instead: a scheduler address such as "tcp://10.0.0.5:8786",
        or a Client / LocalCluster object. Workers need stepsim installed, and should run
        one thread each (``dask worker ADDRESS --nthreads 1``): the BLAS limit is per
        process. Results come back to this process, which writes every file (no shared
        filesystem needed). An address is connected to before anything is written, so
        a scheduler that cannot be reached leaves no directory, plan or claim behind.
    progress : bool, optional
        Progress on stderr (runs done / total, diverged, elapsed, ETA); default None: a
        tqdm bar on a terminal, else a line every ``STEPSIM_PROGRESS_INTERVAL`` seconds
        (:mod:`stepsim._ground.progress`; ``STEPSIM_PROGRESS=0/1`` overrides); False: none.
    force : bool
        Replace the plan of another sweep in ``out_dir`` (its finished runs that the new
        grid also has are kept and not run again; the others stay in ``runs/``, out of
        the table).

    Returns
    -------
    Table
        One row per run, in grid order, rebuilt from the result files (also written to
        ``out_dir/table.csv`` and ``table.json``).
    """
    spec = _as_spec(spec)
    runs = plan_sweep(spec)
    out_dir = Path(out_dir)
    if not force:
        check_same_sweep(out_dir, runs)
    with executors.connected(scheduler) as client:  # before any file is written
        sweep_dir.convert_legacy(out_dir)  # a sweep directory from before digests: resumed
        with _said(out_dir, "writing the sweep's plan"):
            sweep_dir.write_plan(out_dir, spec.to_dict(), spec.grid(_needs_criterion))
        executors.run(runs, jobs=jobs, scheduler=client,
                      store=sweep_dir.sweep_store(out_dir), progress=progress,
                      label=f"sweep {spec.name or out_dir.name}", wait_note="sweep")
    table = sweep_dir.load_table(out_dir, verify=False)  # executors.run verified every run
    with _said(out_dir, "writing the sweep's table"):
        table.save(out_dir)
    if table.missing:  # pragma: no cover - every run above either finished or raised
        print(f"warning: {len(table.missing)} runs have no result", file=sys.stderr)
    return table


@contextlib.contextmanager
def _said(out_dir, what: str):
    """A failed write (a full disk) as one line naming the folder and how to go on."""
    from stepsim.experiments.store import write_failed

    try:
        yield
    except OSError as exc:
        raise write_failed(exc, what, out_dir) from exc


def check_same_sweep(out_dir, runs) -> None:
    """Refuse (ValueError, one line) a sweep directory whose plan lists other runs than
    ``runs``: resuming there would replace its plan and orphan its results. Nothing to
    check when ``out_dir`` holds no sweep.json (a new or an empty directory)."""
    out_dir = Path(out_dir)
    if not (out_dir / sweep_dir.SWEEP_FILE).exists():
        return
    old = [run for run, _ in sweep_dir.read_plan(out_dir)]  # a spoiled plan: a ValueError
    if [r.digest for r in old] == [r.digest for r in runs]:
        return
    done = sum(map(sweep_dir.sweep_store(out_dir).is_finished, old))
    raise ValueError(f"{out_dir} holds another sweep ({len(old)} planned runs, {done} "
                     f"finished); this spec plans another grid ({len(runs)} runs). Use another "
                     f"--out, or --force (force=True) to replace its plan (finished runs the "
                     f"new grid shares are kept)")
