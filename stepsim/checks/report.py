"""Run a set of paper checks and write their report: report.json, report.md, figures.

:func:`run_checks` collects every claim's jobs, runs the distinct ones once (in this
process, a process pool or a Dask cluster), decides each claim by its module's rule, draws
its figures and writes, atomically:

* ``report.json``: ``{"result": {"mode", "claims": [ClaimResult...], "runtime_s"},
  "provenance": {...}}`` (``stepsim._provenance.save_json``: seed, parameters, versions);
* ``report.md``: the verdict table (one line of evidence each), then per claim its rule,
  effect, numbers in brief and figure links.

A claim's ``runtime_s`` is the wall time of its own jobs (shared jobs count for each claim
that uses them) plus its decision and figures.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from stepsim.checks import claim_module, parse_claims
from stepsim.checks._setup import budget as make_budget


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


def run_checks(claims=("all",), *, mode: str = "quick", out=None, n_jobs: int = 1,
               scheduler: str | None = None, progress: bool = True, problem: str | None = None,
               problem_options: dict | None = None, steps: int | None = None) -> Report:
    """Run the paper checks ``claims`` ("all" or "C1".."C12") and write the report to ``out``.

    mode: "quick" (machinery, ~a minute) or "full" (>= 5 seeds). out: a directory (None:
    nothing written). n_jobs: worker processes; scheduler: a Dask scheduler address.
    problem, problem_options: the registry problem of the fit-based claims (default
    ``_setup.DEFAULT_PROBLEM``); steps: their run length instead of the mode's.
    """
    from stepsim._progress import Progress
    from stepsim._provenance import versions
    from stepsim.checks._runs import run_jobs

    start = time.perf_counter()
    names = parse_claims(claims)
    budget = make_budget(mode, problem=problem, problem_options=problem_options, steps=steps)
    modules = {c: claim_module(c) for c in names}
    jobs = {c: m.jobs(budget) for c, m in modules.items()}
    distinct = {j.key for js in jobs.values() for j in js}
    bar = Progress(len(distinct), f"stepsim check ({mode})",
                   force=None if progress else False)
    with bar:
        results = run_jobs([j for js in jobs.values() for j in js], n_jobs=n_jobs,
                           scheduler=scheduler, progress=bar)
    out_dir = None if out is None else Path(out)
    decided = []
    info = versions()
    for claim, module in modules.items():
        t0 = time.perf_counter()
        result = module.decide_claim(budget, results)
        figures = ()
        if out_dir is not None:
            figures = _draw(module, result, out_dir / "figures")
            figures = tuple(str(Path(p).relative_to(out_dir)) for p in figures)
        job_seconds = sum(results[j.key]["seconds"] for j in jobs[claim])
        decided.append(dataclasses.replace(
            result, figures=figures, versions=info,
            runtime_s=job_seconds + time.perf_counter() - t0))
    report = Report(mode, tuple(decided), time.perf_counter() - start,
                    None if out_dir is None else str(out_dir))
    if out_dir is not None:
        write_report(report, out_dir, params={"claims": names, "mode": mode, "jobs": n_jobs,
                                              "scheduler": scheduler, "budget": budget})
    return report


def _draw(module, result, fig_dir: Path) -> list:
    if hasattr(module, "figures"):
        return list(module.figures(result, fig_dir))
    if hasattr(module, "figure"):
        return [module.figure(result, fig_dir / f"{result.claim.lower()}.png")]
    return []


def write_report(report: Report, out_dir, *, params: dict) -> tuple[Path, Path]:
    """Write report.json (with provenance) and report.md into ``out_dir``; return both."""
    from stepsim._atomic import write_text
    from stepsim._provenance import save_json

    out_dir = Path(out_dir)
    payload = {"mode": report.mode, "runtime_s": report.runtime_s,
               "claims": [c.to_dict() for c in report.claims]}
    json_path = save_json(out_dir / "report.json", payload, params=params)
    md_path = write_text(out_dir / "report.md", markdown(report))
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
