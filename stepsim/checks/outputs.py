"""A check's report and its files: report.json, report.md, figures/ and the runs/ folder.

:class:`Report` is what a check decided; :func:`write_report` writes it (in the order that
never leaves new figures beside an old report.json), :func:`load_report` reads a
report.json back, :func:`rewrite_markdown` renders its report.md again and
:func:`redraw_figures` its figures, without re-running anything. :func:`default_out` and
:func:`probe_out` choose and check the report directory before any work.

The files of a report directory ``OUT``:

* ``runs/``: every finished run and task by digest (``stepsim.experiments.store.RunStore``);
* ``figures/``: swapped in whole (after the old report.json is removed), with ``RUN_ID``,
  the run id of the report.json they belong to;
* ``report.md``: the verdict table, then per claim its rule, parts and figures
  (:func:`stepsim.checks.markdown.markdown`);
* ``report.json`` last: ``{"result": {"mode", "claims": [ClaimResult...], "runtime_s",
  "run_id", ...}, "provenance": {...}}`` (``stepsim._ground.provenance.save_json``).
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from stepsim.checks import verdict_matrix
from stepsim.checks.drawing import FIGURES_DIR, draw_one
from stepsim.checks.markdown import MATRIX_FIGURE, markdown, matrix_cells

RUNS_DIR = "runs"  # finished runs by digest (stepsim.experiments.store.RunStore)
RUN_ID_FILE = "RUN_ID"  # in figures/: the run id of the report.json they belong to


@dataclasses.dataclass(frozen=True)
class Report:
    """mode, claims (tuple of ClaimResult, report order; one per claim and setting),
    runtime_s, out (directory), protocol (``merging.protocol_record``), tuning (setting ->
    config -> {"grid", "means", "choice", "edge", ...}; empty when the lrs were not tuned
    in this run), lrs (setting -> config -> the learning rate used), compute ({"runs",
    "tuning_runs", "worker_s"}: every distinct run and task the report rests on and the
    sum of their own run times, also for runs a resumed check found finished), operating
    ({"stability": operating.stability_map, "stability_figures", "switch_findings":
    operating.switch_findings, "robustness": claim and setting -> the tie set's verdicts,
    "skipped": operating points without a learning rate, "extended": bool})."""

    mode: str
    claims: tuple
    runtime_s: float
    out: str | None
    protocol: dict = dataclasses.field(default_factory=dict)
    tuning: dict = dataclasses.field(default_factory=dict)
    lrs: dict = dataclasses.field(default_factory=dict)
    compute: dict = dataclasses.field(default_factory=dict)
    operating: dict = dataclasses.field(default_factory=dict)

    def table(self) -> str:
        """The verdict table as plain text, one line per claim and setting, each at most
        :data:`LINE_WIDTH` characters (the claim, where — "no training" for the claims
        that train nothing —, the verdict, and its headline or, failing one, its reason cut
        short: every part is in report.md)."""
        label = "" if self.mode == "full" else f"[{self.mode}: indicative, not evidence]\n"
        wheres = [where_of(c) for c in self.claims]
        width = min(max((len(w) for w in wheres), default=0), WHERE_WIDTH)
        differ = self.beside_full()
        lines = [fit(f"{c.claim:<4} {w:<{width}} {c.verdict + ('*' if i in differ else ''):<15} "
                     f"{c.headline or c.reason}")
                 for i, (c, w) in enumerate(zip(self.claims, wheres))]
        if differ:
            lines.append(fit(f"* differs from the committed full run ({len(differ)} line(s); "
                             "report.md says why quick mode can)"))
        return label + "\n".join(lines)

    def beside_full(self) -> dict:
        """{index of a line: the committed full run's verdict} where this quick report's
        claim verdict differs from it ({} in full mode)."""
        from stepsim.checks import beside_full

        if self.mode == "full":
            return {}
        return beside_full.differences(self.claims, beside_full.committed())


#: a printed verdict line's most characters (a terminal's width)
LINE_WIDTH = 100
#: the widest "where" column of the printed table (a tie set's key is cut)
WHERE_WIDTH = 28


def where_of(result) -> str:
    """Where a verdict was made, as a line says it: "no training" for C11 and C12 (their
    setting key is "none"), else the setting key."""
    return "no training" if result.setting in ("", "none") else result.setting


def fit(line: str, width: int = LINE_WIDTH) -> str:
    """``line`` cut to ``width`` characters, ending in "…" when cut."""
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


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

    if not str(out).strip():  # before Path(""), which is "." (the current directory)
        raise ValueError("--out: empty path; give a directory")
    out = Path(out)
    if out.exists() and not out.is_dir():
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

    from stepsim._ground.atomic import write_text
    from stepsim._ground.provenance import save_json

    out_dir = Path(out_dir)
    json_target = out_dir / "report.json"
    text = markdown(report)  # before anything is removed: a failure here changes nothing
    json_target.unlink(missing_ok=True)
    if figures is not None:
        figures = Path(figures)
        made = matrix_cells(report)
        if made:  # the first screen's figure (report.md links it)
            verdict_matrix.figure(made, figures / MATRIX_FIGURE)
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
               "protocol": report.protocol, "tuning": report.tuning, "lrs": report.lrs,
               "compute": report.compute, "operating": report.operating,
               "claims": [c.to_dict() for c in report.claims]}
    md_path = write_text(out_dir / "report.md", text)
    json_path = save_json(json_target, payload, params=params)
    return json_path, md_path


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
                                     "figures": tuple(c["figures"]),
                                     "parts": tuple(c.get("parts", ()))}))
    tuning = {setting: {key: {**t, "means": [float(m) for m in t["means"]]}  # "inf" -> inf
                        for key, t in configs.items()}
              for setting, configs in doc.get("tuning", {}).items()}
    return Report(doc["mode"], tuple(claims), doc["runtime_s"], str(Path(path).parent),
                  doc.get("protocol", {}), tuning, doc.get("lrs", {}),
                  doc.get("compute", {}), doc.get("operating", {}))


def redraw_figures(out_dir) -> list:
    """Redraw every figure of the report in ``out_dir`` from its report.json (no re-run)."""
    out_dir = Path(out_dir)
    report = load_report(out_dir / "report.json")
    paths = []
    for result in report.claims:
        figures, _ = draw_one(result, out_dir / FIGURES_DIR)
        paths += [out_dir / f for f in figures]
    return paths


def rewrite_markdown(out_dir) -> Path:
    """Write report.md again from the report.json in ``out_dir`` (no re-run; report.json and
    the claims' figures are left as they are), and the verdict matrix's figure it links:
    for a change in how report.md renders a report."""
    from stepsim._ground.atomic import write_text

    out_dir = Path(out_dir)
    report = load_report(out_dir / "report.json")
    made = matrix_cells(report)
    if made and (out_dir / FIGURES_DIR).is_dir():
        verdict_matrix.figure(made, out_dir / FIGURES_DIR / MATRIX_FIGURE)
    return write_text(out_dir / "report.md", markdown(report))


__all__ = ["FIGURES_DIR", "LINE_WIDTH", "RUNS_DIR", "RUN_ID_FILE", "Report", "default_out",
           "fit", "load_report", "probe_out", "redraw_figures", "rewrite_markdown",
           "where_of", "write_report"]
