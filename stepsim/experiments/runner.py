"""Run a sweep: check the whole spec, skip finished runs, execute the rest, rebuild the table."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

from stepsim.experiments import executors, store
from stepsim.experiments.run import RunSpec, canonical_json
from stepsim.experiments.spec import Run, SweepSpec, entry_options, load_spec, parse_spec


def plan_sweep(spec) -> list[Run]:
    """Check ``spec`` completely and return its runs in grid order; nothing is trained.

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
        if run.run_id in seen:
            twice.append(run.name)
        seen.add(run.run_id)
    if twice:
        raise ValueError(f"spec: {len(twice)} runs are listed twice (e.g. {twice[0]}): two "
                         "entries give the same parameters; remove one")
    checked = set()
    for run in runs:
        key = canonical_json({k: run.params[k] for k in ("problem", "recipe", "criterion", "nm")})
        if key not in checked:
            checked.add(key)
            _named(_describe(run.params), lambda r: r.spec.check(), run)
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


def _describe(params: dict) -> str:
    crit = params["criterion"]
    n, m = params["nm"]
    return (f"run problem={params['problem']['name']} {params['problem']['options']}, "
            f"recipe={params['recipe']['name']} {params['recipe']['options']}, criterion="
            f"{None if crit is None else crit['name']}, nm={n}:{m}")


def _named(where: str, func, *args):
    """Call ``func``; re-raise a ValueError/TypeError prefixed with ``where``."""
    try:
        return func(*args)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None


def run_sweep(spec, out_dir, *, jobs: int | None = None, scheduler=None,
              progress: bool | None = None, force: bool = False) -> store.Table:
    """Run every unfinished run of ``spec`` and return the sweep's tidy table.

    Parameters
    ----------
    spec : SweepSpec, dict or path
        The grid (see :mod:`stepsim.experiments.spec`); checked completely before any run.
    out_dir : path
        The sweep directory (layout in :mod:`stepsim.experiments.store`). Runs whose
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
        A tqdm bar on stderr (runs done / total, elapsed, ETA); default: when stderr is
        a terminal (``STEPSIM_PROGRESS=0/1`` overrides).
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
    with executors.connected(scheduler) as scheduler:  # before any file is written
        return _run_planned(spec, runs, out_dir, jobs, scheduler, progress)


def check_same_sweep(out_dir, runs) -> None:
    """Refuse (ValueError, one line) a sweep directory whose plan lists other runs than
    ``runs``: resuming there would replace its plan and orphan its results. Nothing to
    check when ``out_dir`` holds no sweep.json (a new or an empty directory)."""
    out_dir = Path(out_dir)
    if not (out_dir / store.SWEEP_FILE).exists():
        return
    old = store.read_plan(out_dir)  # a spoiled plan is a ValueError naming the file
    if [r.run_id for r in old] == [r.run_id for r in runs]:
        return
    done = sum(store.is_finished(out_dir, r) for r in old)
    raise ValueError(f"{out_dir} holds another sweep ({len(old)} planned runs, {done} "
                     f"finished); this spec plans another grid ({len(runs)} runs). Use another --out, "
                     f"or --force (force=True) to replace its plan (finished runs the new grid "
                     f"shares are kept)")


def _run_planned(spec, runs, out_dir: Path, jobs, scheduler, progress) -> store.Table:
    from stepsim._progress import Progress

    store.write_plan(out_dir, spec.to_dict(), runs)
    claims = store.Claims(out_dir)

    by_spec = {run.spec: run for run in runs}

    def on_done(task, output):
        run = by_spec[task]
        store.save_run(out_dir, run, output)
        claims.release(run, finished=True)
        bar.update(1)

    label = f"sweep {spec.name or out_dir.name}"
    pending = _unfinished(out_dir, runs)
    if pending and scheduler is None:
        workers = executors.worker_count(jobs, len(pending))  # checks jobs, warns once
    waiting = False
    try:
        with Progress(len(runs), label, force=progress, initial=len(runs) - len(pending),
                      unit="run") as bar:
            while pending:
                todo = _claimed(out_dir, pending, claims)
                first = next(todo, None)
                if first is not None:
                    waiting = False
                    todo = (run.spec for run in itertools.chain([first], todo))
                    if scheduler is not None:
                        executors.run_dask(todo, on_done, scheduler)
                    elif min(workers, len(pending)) == 1:
                        executors.run_serial(todo, on_done)
                    else:
                        executors.run_pool(todo, on_done, min(workers, len(pending)))
                else:  # every unfinished run is in flight in another sweep process
                    if not waiting:
                        who = claims.holder(pending[0])
                        print(f"sweep: waiting for {len(pending)} run(s) that another sweep "
                              f"process{' (' + who + ')' if who else ''} is running in "
                              f"{out_dir}", file=sys.stderr)
                        waiting = True
                    time.sleep(_POLL_S)
                pending = _unfinished(out_dir, runs)
                bar.update(len(runs) - len(pending) - bar.done)  # runs others finished
    finally:
        claims.release_all()
    table = store.load_table(out_dir, runs)
    table.save(out_dir)
    if table.missing:  # pragma: no cover - every run above either finished or raised
        print(f"warning: {len(table.missing)} runs have no result", file=sys.stderr)
    return table


_POLL_S = 0.25  # how often a sweep with nothing to claim looks for finished or freed runs


def _unfinished(out_dir, runs) -> list[Run]:
    return [run for run in runs if not store.is_finished(out_dir, run)]


def _claimed(out_dir, pending, claims):
    """Yield the runs of ``pending`` this process claims, lazily (one per free worker).

    Lazily, so that a second sweep process started on the same directory finds the runs not
    yet started unclaimed and takes its share. A run found finished once claimed (another
    process saved it meanwhile) is given back; a claimed run's leftover temporaries (from a
    killed writer) are removed before it runs again.
    """
    for run in pending:
        if not claims.try_claim(run):
            continue
        if store.is_finished(out_dir, run):
            claims.release(run, finished=True)
            continue
        store.remove_temporaries(out_dir, run)
        yield run
