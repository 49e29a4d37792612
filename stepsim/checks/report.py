"""Run a set of paper checks and write their report: report.json, report.md, figures.

:func:`run_checks` collects every claim's jobs (RunSpecs and Tasks), runs the distinct
ones once and only those not already in ``OUT/runs/`` (``stepsim.experiments``: in this
process, a process pool or a Dask cluster; a RunStore by digest), reads every job back
from the store, decides each claim by its module's rule, draws its figures aside and
writes, in this order (a kill never leaves new figures beside an old report.json):

* ``figures/`` swapped in (after the old report.json is removed), with ``RUN_ID``;

* ``report.md``: the verdict table (one line of evidence each), then per claim its rule,
  effect, numbers in brief and figure links;
* ``report.json`` last: ``{"result": {"mode", "claims": [ClaimResult...], "runtime_s",
  "run_id"}, "provenance": {...}}`` (``stepsim._provenance.save_json``).

A claim's ``runtime_s`` is the wall time of its own jobs when they ran (shared jobs count
for each claim that uses them) plus its decision and figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from pathlib import Path

from stepsim.checks import claim_module, parse_claims
from stepsim.checks._setup import budget as make_budget

RUNS_DIR = "runs"  # finished runs by digest (stepsim.experiments.store.RunStore)
FIGURES_DIR = "figures"
RUN_ID_FILE = "RUN_ID"  # in figures/: the run id of the report.json they belong to


@dataclasses.dataclass(frozen=True)
class Report:
    """mode, claims (tuple of ClaimResult, report order), runtime_s, out (directory)."""

    mode: str
    claims: tuple
    runtime_s: float
    out: str | None

    def table(self) -> str:
        """The verdict table as plain text, one line per claim."""
        return "\n".join(c.line() for c in self.claims)


def default_out(mode: str) -> Path:
    """The default report directory: ``$STEPSIM_CHECK_DIR/MODE`` if set, else the user's
    cache (``$XDG_CACHE_HOME`` or ``~/.cache``) ``/stepsim/check/MODE`` — never the current
    directory, which may be read-only (a repository checkout, a system path)."""
    import os

    root = os.environ.get("STEPSIM_CHECK_DIR")
    if root:
        return Path(root) / mode
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "stepsim" / "check" / mode


def probe_out(out) -> Path:
    """Check, before any work, that report directory ``out`` can be created and written
    (a small file is created and written there: the only test that also holds for root,
    read-only mounts and full disks). Returns it as a Path; ValueError if not."""
    import tempfile

    out = Path(out)
    if not str(out).strip() or (out.exists() and not out.is_dir()):
        raise ValueError(f"--out must be a directory, got {str(out)!r}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out) as f:
            f.write(b"\0" * 4096)
            f.flush()
    except OSError as exc:
        raise ValueError(f"--out {str(out)!r} is not writable "
                         f"({exc.strerror or type(exc).__name__})") from None
    return out


def run_checks(claims=("all",), *, mode: str = "quick", out=None,
               n_jobs: int | None = None, scheduler: str | None = None, progress: bool = True,
               problem: str | None = None, problem_options: dict | None = None,
               steps: int | None = None, nm=None) -> Report:
    """Run the paper checks ``claims`` ("all" or "C1".."C12") and write the report to ``out``.

    mode: "quick" (machinery, ~a minute) or "full" (>= 5 seeds). out: a directory (probed
    before any work); its ``runs/`` keeps every finished run by digest, so the same call
    after a kill redoes only the runs in flight, and runs equal across claims run once
    (None: the runs go to a temporary directory and no report is written). n_jobs: local
    worker processes (default: every usable core, as ``run_sweep``; 1 runs in this
    process; ``stepsim.experiments.executors``: spawned, one numba and one BLAS thread,
    gone with their parent, each running many jobs); scheduler: a Dask scheduler address.
    problem, problem_options, nm: the registry problem of the fit-based claims and the runs'
    default N:M (default ``_setup.DEFAULT_PROBLEM``); steps: their run length.
    """
    import tempfile

    from stepsim._progress import Progress
    from stepsim._provenance import versions
    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    start = time.perf_counter()
    names = parse_claims(claims)
    if nm is not None:
        problem_options = dict(problem_options or {}, nm=tuple(nm))
    budget = make_budget(mode, problem=problem, problem_options=problem_options, steps=steps)
    out_dir = None if out is None else probe_out(out)
    modules = {c: claim_module(c) for c in names}
    tasks = {c: m.jobs(budget) for c, m in modules.items()}
    distinct = {t.digest: t for ts in tasks.values() for t in ts}
    for task in distinct.values():  # bad names, options or N:M: an error before any work
        if hasattr(task, "check"):
            task.check()
    if out_dir is not None:  # figures a killed check was drawing
        import shutil

        for stale in out_dir.glob(".figures-*"):
            shutil.rmtree(stale, ignore_errors=True)
    with contextlib.ExitStack() as stack:
        if out_dir is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stepsim-check")))
        else:
            root = out_dir / RUNS_DIR
        store = RunStore(root)
        store.remove_temporaries()
        todo = [t for t in distinct.values() if not store.is_finished(t)]
        bar = stack.enter_context(Progress(len(distinct), f"stepsim check ({mode})",
                                           force=None if progress else False,
                                           initial=len(distinct) - len(todo), unit="run"))

        def on_done(task, output):
            store.save(task, output)
            bar.update(1)

        if todo and scheduler:
            executors.run_dask(todo, on_done, scheduler)
        elif todo:
            workers = executors.worker_count(n_jobs, len(todo))
            if workers == 1:
                executors.run_serial(todo, on_done)
            else:
                executors.run_pool(todo, on_done, workers)
        # every claim reads its runs back from the store: a resumed check and a straight
        # one decide on the same numbers
        results = {d: _view(store, t) for d, t in distinct.items()}
    decided = []
    info = versions()
    run_id = uuid.uuid4().hex
    staging = None
    if out_dir is not None:
        staging = Path(tempfile.mkdtemp(prefix=".figures-", dir=out_dir))
    for claim, module in modules.items():
        t0 = time.perf_counter()
        result = module.decide_claim(budget, results)
        figures = ()
        if staging is not None:
            figures = _draw(module, result, staging)
            figures = tuple(str(Path(FIGURES_DIR) / Path(p).relative_to(staging))
                            for p in figures)
        job_seconds = sum(results[t.digest]["seconds"] for t in tasks[claim])
        decided.append(dataclasses.replace(
            result, figures=figures, versions=info,
            runtime_s=job_seconds + time.perf_counter() - t0))
    report = Report(mode, tuple(decided), time.perf_counter() - start,
                    None if out_dir is None else str(out_dir))
    if out_dir is not None:
        write_report(report, out_dir, params={"claims": names, "mode": mode, "jobs": n_jobs,
                                              "scheduler": scheduler, "budget": budget,
                                              "run_id": run_id}, figures=staging,
                     run_id=run_id)
    return report


def _view(store, task) -> dict:
    """What a claim reads of a finished task: a run's ``traces.summary`` or a task's output,
    with ``seconds`` (its wall time when it ran)."""
    from stepsim.experiments import traces
    from stepsim.experiments.run import RunSpec

    loaded = store.load(task)
    out = dict(traces.summary(loaded) if isinstance(task, RunSpec) else loaded)
    out["seconds"] = store.runtime_s(task)
    return out


def _draw(module, result, fig_dir: Path) -> list:
    if hasattr(module, "figures"):
        return list(module.figures(result, fig_dir))
    if hasattr(module, "figure"):
        return [module.figure(result, fig_dir / f"{result.claim.lower()}.png")]
    return []


def write_report(report: Report, out_dir, *, params: dict, figures=None,
                 run_id: str | None = None) -> tuple[Path, Path]:
    """Write report.json (with provenance) and report.md into ``out_dir``; return both.

    figures: a directory of freshly drawn figures (in ``out_dir``) that replaces
    ``out_dir/figures``. Order, so that a kill at any moment never leaves new figures
    beside an old report.json: the old report.json goes first, the figures are swapped
    in (stamped with ``run_id`` in ``figures/RUN_ID``), report.md follows, and report.json,
    carrying the same ``run_id``, is written last (atomically).
    """
    import shutil

    from stepsim._atomic import write_text
    from stepsim._provenance import save_json

    out_dir = Path(out_dir)
    json_target = out_dir / "report.json"
    json_target.unlink(missing_ok=True)
    if figures is not None:
        figures = Path(figures)
        if run_id is not None:
            write_text(figures / RUN_ID_FILE, run_id + "\n")
        target = out_dir / FIGURES_DIR
        old = None
        if target.exists():
            old = out_dir / f".figures-old-{uuid.uuid4().hex[:8]}"
            target.rename(old)
        figures.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    payload = {"mode": report.mode, "runtime_s": report.runtime_s, "run_id": run_id,
               "claims": [c.to_dict() for c in report.claims]}
    md_path = write_text(out_dir / "report.md", markdown(report))
    json_path = save_json(json_target, payload, params=params)
    return json_path, md_path


def markdown(report: Report) -> str:
    """report.md: the verdict table, then one section per claim."""
    lines = [f"# stepsim check — {report.mode} mode", "",
             f"{len(report.claims)} claim(s) in {report.runtime_s:.0f} s. Verdict rules are "
             "in each claim's section (fixed before any result was seen).", "",
             "| claim | verdict | effect [95% CI] | evidence |", "| --- | --- | --- | --- |"]
    for c in report.claims:
        effect = "—" if c.effect is None else (
            f"{c.effect.estimate:.3g} [{c.effect.ci_low:.3g}, {c.effect.ci_high:.3g}] "
            f"{c.effect.units}")
        lines.append(f"| {c.claim} | **{c.verdict}** | {effect} | {_md(c.reason)} |")
    for c in report.claims:
        lines += ["", f"## {c.claim}: {c.title}", "", f"**{c.verdict}** — {c.reason}", "",
                  f"- problem: {c.problem}", f"- seeds: {list(c.seeds)}; mode {c.mode}; "
                  f"runtime {c.runtime_s:.1f} s"]
        if c.effect is not None:
            lines.append(f"- effect: {c.effect}")
        lines += [f"- rule: {c.rule}"]
        lines += [f"- figure: ![{c.claim}]({f})" for f in c.figures]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def load_report(path) -> Report:
    """A :class:`Report` back from a report.json written by :func:`write_report`."""
    import json

    from stepsim.checks.verdict import ClaimResult, Effect

    doc = json.loads(Path(path).read_text())["result"]
    claims = []
    for c in doc["claims"]:
        effect = c["effect"]
        if effect is not None:
            effect = Effect(**{**effect, "ci_low": float(effect["ci_low"]),
                               "ci_high": float(effect["ci_high"]),
                               "values": tuple(effect["values"])})
        claims.append(ClaimResult(**{**c, "effect": effect, "seeds": tuple(c["seeds"]),
                                     "figures": tuple(c["figures"])}))
    return Report(doc["mode"], tuple(claims), doc["runtime_s"], str(Path(path).parent))


def redraw_figures(out_dir) -> list:
    """Redraw every figure of the report in ``out_dir`` from its report.json (no re-run)."""
    out_dir = Path(out_dir)
    report = load_report(out_dir / "report.json")
    paths = []
    for result in report.claims:
        paths += _draw(claim_module(result.claim), result, out_dir / "figures")
    return paths
