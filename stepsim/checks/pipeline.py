"""``stepsim check``: plan -> execute -> decide -> merge -> write.

:func:`run_checks` composes the stages, each a module of its own:

1. :func:`stepsim.checks.planning.plan` — every run and task (the tuning stage, the
   evaluation stage or its description when it waits for the tuning), nothing run;
2. :func:`stepsim.checks.execution.execute` — the runs not already in ``OUT/runs/``, on an
   :class:`~stepsim.checks.execution.Executor`, every job read back from the store;
3. :func:`stepsim.checks.decisions.decide` — one verdict per claim and setting, and the
   figures drawn aside (:mod:`stepsim.checks.drawing`);
4. :func:`stepsim.checks.merging.merge` — into the report already in ``OUT`` (refused, in
   one line before any work, when that report was made in another mode or under other
   rules);
5. :func:`stepsim.checks.outputs.write_report` — figures/, report.md, report.json last.

A claim's ``runtime_s`` is the wall time of its own jobs when they ran (shared jobs count
for each claim that uses them) plus its decision and figures. A selection that gives no
verdict at all (e.g. ``C1 --quick --problem lm``: quick mode has no LM setting) is an
error, not an empty report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from pathlib import Path

from stepsim.checks import decisions, drawing, merging, operating, planning, stopped
from stepsim.checks.execution import Executor, execute
from stepsim.checks.outputs import RUNS_DIR, Report, probe_out, write_report
from stepsim.checks.registry import ORDER


def run_checks(claims=("all",), *, mode: str = "quick", out=None,
               jobs: int | None = None, scheduler: str | None = None, progress: bool = True,
               problems=None, steps: int | None = None, lrs: dict | None = None,
               extended: bool = False) -> Report:
    """Run the paper checks ``claims`` ("all" or "C1".."C12") by the registered protocol
    (``paper_checks/PROTOCOL.md``, :mod:`stepsim.checks.protocol`) and write the report.

    mode: "full" (the evidence: learning rates, and under draft 5 regularisers, tuned on
    the tuning seeds, then 8 evaluation seeds, every problem of the protocol) or "quick"
    (the problems, run lengths, claims and N:M of the rules' ``quick`` block, 3 seeds, the
    primary readings, the choices of the committed full run — labelled provisional when
    they were made under other rules: indicative, not evidence).
    out: a directory (probed before any work); its ``runs/`` keeps every finished run by
    digest, so the same call after a kill redoes only the runs in flight, and runs equal
    across claims run once (None: a temporary directory, no report written). jobs: local
    worker processes (default every usable core; 1 runs here); scheduler: a Dask address.
    problems: restrict to these protocol problems ("digits", "lm", "mnist1d"). steps,
    lrs: for tests of the machinery only — shorter runs, and learning rates {setting:
    {config: lr or candidate}} instead of tuning or the committed ones; a report made
    with either is labelled so.
    extended: full mode plus the extended set of PROTOCOL.md "Budget and the extended set"
    (meant for Dask).

    Beside each setting the claims run at its readings (draft 5: STEP's own choices for
    every claim about STEP; in full mode freeze scope "sparse", fixed switch fractions, the
    cosine schedule and, after tuning, SR-STE's tie set), each a verdict line of its own;
    in full mode a claim whose divergence alone differs gets more seeds (the extension
    stage); the report adds the stability map, the switch findings and whether each
    in-place verdict is robust across its tie set.
    """
    import tempfile

    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    start, started_at = time.perf_counter(), _utc_now()
    made = planning.plan(claims, mode, problems=problems, extended=extended, steps=steps,
                         lrs=lrs)
    record = merging.protocol_record(made.altered, made.claims, made.rules)
    if made.choices:  # quick mode's choices are not a full run's under these rules
        record["choices"] = made.choices
    if made.provisional:  # the configs whose choices are provisional, when only some are
        record["provisional_configs"] = made.provisional
    out_dir = None if out is None else probe_out(out)  # after every argument is checked
    previous = None if out_dir is None else merging.previous_report(
        out_dir, mode, record, made.covered)
    if out_dir is not None:  # figures a killed check was drawing
        import shutil

        for stale in out_dir.glob(".figures-*"):
            shutil.rmtree(stale, ignore_errors=True)
    executor = Executor(jobs, scheduler, progress, label=f"stepsim check ({mode})")
    run_id = uuid.uuid4().hex
    mark = None if out_dir is None else stopped.mark_started(out_dir, run_id, {
        "mode": mode, "claims": list(made.claims), "started_utc": started_at,
        "jobs": executor.jobs, "rules_sha256": record["rules_sha256"]})
    # one pool of local workers for the whole check: every tuning round, stage and the
    # figures (a new pool for each spawned and warmed its workers again; same bits)
    with executors.kept_pool():
        with contextlib.ExitStack() as stack:
            if out_dir is None:
                root = Path(stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="stepsim-check")))
            else:
                root = out_dir / RUNS_DIR
            store = RunStore(root)
            store.remove_temporaries()
            executed = execute(made, store, executor)
        staging = None if out_dir is None else _staging(out_dir)
        results = _with_figures(decisions.decide(executed.evaluation, executed.results),
                                staging, drawing.figure_workers(jobs, scheduler))
    ev, compute = executed.evaluation, executed.compute()
    earlier = (previous.compute if previous is not None else
               None if out_dir is None else merging.replaced_ledger(out_dir, mode, record))
    # this check in the report's ledger: the runs it made itself (the others it found in
    # the store: a resume, or runs shared with claims decided before)
    this_check = {"run_id": run_id, "mode": mode, "claims": list(made.claims),
                  "started_utc": started_at, "jobs": executor.jobs,
                  "runs_made": len(executor.made), "worker_s_made": sum(executor.made.values()),
                  "found_in_store": compute["runs"] - len(executor.made), "wall_s": None}
    # the checks that stopped in out_dir before their report (their marks, stopped.py)
    gone, counted = (([], []) if out_dir is None else stopped.stopped_checks(
        out_dir, out_dir / RUNS_DIR, mode=mode, rules_sha256=record["rules_sha256"],
        this_run_id=run_id))
    new = merging.Merged(
        claims=decisions.robustness(results), tuning=ev.table, lrs=ev.chosen,
        skipped=list(ev.skipped), protocol=record,
        compute={**compute, **merging.check_ledger(earlier, this_check, gone)},
        stability_input=executed.stability_table or ev.table)
    merged = merging.merge(previous, new, made.covered, None if previous is None else
                           merging.store_compute(out_dir / RUNS_DIR))
    record_of_operating, kept_stability = _operating(merged, extended, staging)
    if ev.extensions:  # the claims the extension stage gave more seeds
        record_of_operating["extensions"] = list(ev.extensions)
    left_out = planning.extended_set_left_out(made)
    if left_out:  # the registered parts this (full, not --extended) check did not run
        record_of_operating["extended_set"] = left_out
    if staging is not None:  # the old report's figures that stay
        _keep(merged.kept_figures + kept_stability, out_dir, staging)
    wall_s = time.perf_counter() - start  # the report.json that follows: milliseconds
    report = Report(mode, tuple(sorted(merged.claims, key=lambda r: (ORDER.index(r.claim),
                                                                     r.setting))),
                    wall_s, None if out_dir is None else str(out_dir),
                    merged.protocol, merged.tuning, merged.lrs,
                    merging.close_ledger(merged.compute, wall_s), record_of_operating)
    if out_dir is not None:
        write_report(report, out_dir, params={"claims": list(made.claims), "mode": mode,
                                              "jobs": jobs, "scheduler": _address(scheduler),
                                              "problems": problems, "steps": steps,
                                              "run_id": run_id, "extended": extended},
                     figures=staging, run_id=run_id)
        stopped.remove(out_dir, [mark, *counted])  # in the ledger now
    return report


def _utc_now() -> str:
    """Now, UTC, to the second (ISO 8601): when a check started, in its ledger entry."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _staging(out_dir: Path) -> Path:
    """A fresh folder in ``out_dir`` that the figures are drawn into (swapped in whole as
    figures/, so made with the umask's mode, as figures/ would be: not mkdtemp's 0700)."""
    staging = out_dir / f".figures-{uuid.uuid4().hex}"
    staging.mkdir()
    return staging


def _with_figures(decided: list, staging, workers: int) -> list:
    """The decided results with their figures (drawn into ``staging``), the versions and
    their runtime (jobs, decision and drawing)."""
    from stepsim._ground.provenance import versions

    info = versions()
    drawn = drawing.draw_all([d.result for d in decided], staging, workers)
    return [dataclasses.replace(d.result, figures=figures, versions=info,
                                runtime_s=d.seconds + draw_s)
            for d, (figures, draw_s) in zip(decided, drawn)]


def _operating(merged: merging.Merged, extended: bool, staging) -> tuple[dict, list]:
    """(the report's operating-point record of the merged claims, ``Report.operating``;
    the old report's stability figures that stay). The stability figures of the settings
    made again are drawn into ``staging``."""
    table = merged.stability_input
    if merged.remake is not None:
        table = {k: v for k, v in table.items() if k in merged.remake}
    stability = operating.stability_map(table) if table else {}
    figures = drawing.draw_stability(stability, staging)
    robustness = {f"{c.claim} {c.setting}": c.numbers["tie_set"] for c in merged.claims
                  if isinstance(c.numbers, dict) and "tie_set" in c.numbers}
    kept = [f for f in merged.old_stability_figures if f not in figures]
    return {"stability": {**merged.old_stability, **stability},
            "stability_figures": kept + figures,
            "switch_findings": operating.switch_findings(merged.claims),
            "robustness": robustness, "skipped": merged.skipped,
            "extended": bool(extended)}, kept


def _keep(figures, out_dir: Path, staging: Path) -> None:
    """Copy kept figures (report.json names, under ``figures/``) from ``out_dir`` into the
    new figures folder."""
    import shutil

    for figure in figures:
        source = out_dir / figure
        if source.is_file():
            target = staging / Path(figure).relative_to(drawing.FIGURES_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _address(scheduler):
    """A scheduler as recorded in the report: its address (a Client: the one it is on)."""
    if scheduler is None or isinstance(scheduler, str):
        return scheduler
    return getattr(getattr(scheduler, "scheduler", None), "address", None) or repr(scheduler)


__all__ = ["run_checks"]
