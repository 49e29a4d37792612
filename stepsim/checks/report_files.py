"""The files of a paper-check report: write report.json, report.md and figures/, read
report.json back, redraw its figures.

:func:`write_report` writes what :func:`stepsim.checks.report.run_checks` decided (in the
order that never leaves new figures beside an old report.json), :func:`markdown` renders
report.md, :func:`load_report` reads a report.json back into a
:class:`~stepsim.checks.report.Report`, :func:`redraw_figures` draws its figures again and
:func:`rewrite_markdown` its report.md, without re-running anything.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from stepsim.checks import claim_module
from stepsim.checks.report import FIGURES_DIR, RUN_ID_FILE, Report, _draw

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


def markdown(report: Report) -> str:
    """report.md: the protocol record, the verdict table per problem, the tuned learning
    rates, then one section per claim and setting (rule, parts with premises, switch
    causes, figures)."""
    from stepsim.checks.operating import flat_switches
    from stepsim.checks.verdict import Effect, effect_text

    p = report.protocol or {}
    quick = report.mode != "full"
    lines = [f"# stepsim check — {report.mode} mode" + (" (indicative, not evidence)" if quick
                                                        else ""), "",
             f"{len(report.claims)} verdict(s) by the registered "
             f"protocol `paper_checks/PROTOCOL.md` (commit {p.get('commit') or 'unknown'}, "
             f"rules SHA-256 {str(p.get('rules_sha256', ''))[:16]}…"
             + ("; ALTERED FOR TESTING" if p.get("altered_for_testing") else "") + ")"
             + "".join(f"; {name} by its own registered rules (PROTOCOL.md section {name}, "
                       f"commit {e.get('commit') or 'unknown'}, rules SHA-256 "
                       f"{str(e.get('rules_sha256', ''))[:16]}…)"
                       for name, e in sorted((p.get("extras") or {}).items()))
             + (f"; earlier claims under commit(s) {', '.join(p['earlier_commits'])}"
                if p.get("earlier_commits") else "") + ".", ""]
    c = report.compute or {}
    if c:
        lines += [f"They rest on {c['runs']} runs and tasks ({c['tuning_runs']} of them tuning "
                  f"runs), {c['worker_s'] / 3600:.2f} hours of worker time (each run's own "
                  f"time, counted also when a resumed check found it finished); this report "
                  f"took {report.runtime_s:.0f} s to make.", ""]
    settings = sorted({c.setting for c in report.claims},  # operating points after theirs
                      key=lambda k: (k == "none", k.split("/")[0], "@" in k or "-" in k,
                                     not k.split("@")[0].endswith("/main"), k))
    for setting in settings:
        rows = [c for c in report.claims if c.setting == setting]
        lines += [f"## {'no training' if setting == 'none' else setting}", "",
                  "| claim | verdict | first part's effect [CI] | evidence |",
                  "| --- | --- | --- | --- |"]
        for c in rows:
            effect = "—" if c.effect is None else effect_text(c.effect)
            lines.append(f"| {c.claim} | **{c.verdict}** | {effect} | {_md(c.reason)} |")
        lines.append("")
    if report.lrs:
        lines += ["## Learning rates", "", "| setting | config | lr | tuning means (grid) | edge |",
                  "| --- | --- | --- | --- | --- |"]
        for setting, configs in sorted(report.lrs.items()):
            for key, lr in sorted(configs.items()):
                t = report.tuning.get(setting, {}).get(key)
                means = "from the committed full run" if t is None else ", ".join(
                    f"{g:g}: {m:.3g}" for g, m in zip(t["grid"], t["means"]))
                edge = "" if t is None or not t["edge"] else f"**{t['edge']} edge**"
                lines.append(f"| {setting} | {_md(key)} | {lr:g} | {means} | {edge} |")
        lines.append("")
    lines += _operating_markdown(report)
    for c in report.claims:
        lines += ["", f"## {c.claim} on {c.setting}: {c.title}", "",
                  f"**{c.verdict}** — {c.reason}", "", f"- problem: {c.problem}",
                  f"- seeds: {list(c.seeds)}; mode {c.mode}; runtime {c.runtime_s:.1f} s",
                  f"- rule: {c.rule}"]
        for part in c.parts:
            part = part if isinstance(part, dict) else dataclasses.asdict(part)
            e = part["effect"]
            lines.append(f"- part **{part['name']}**: {part['verdict']} — {part['reason']}; "
                         f"{e['name']} = {effect_text(Effect(**e))} "
                         f"at {100 * part['level']:.4g}%")
        table = getattr(claim_module(c.claim), "markdown_table", None)
        if table is not None:  # a comparison's own table (S1)
            lines += [""] + table(c) + [""]
        switches = c.numbers.get("switches") if isinstance(c.numbers, dict) else None
        if switches:
            lines.append("- switch steps (k0) and causes: " + "; ".join(
                f"{name}: " + _causes(rows) for name, rows in flat_switches(switches)))
        lines += [f"- figure: ![{c.claim}]({f})" for f in c.figures]
    return "\n".join(lines) + "\n"


def _operating_markdown(report: Report) -> list:
    """Draft 4's sections: the switch findings, the tie sets, the stability map."""
    op = report.operating or {}
    lines = []
    findings = op.get("switch_findings") or {}
    if findings:
        lines += ["## Switch findings (PROTOCOL §D4.5)", "",
                  "How the STEP runs the claims report switched: AutoSwitch's cause (`fired`: "
                  "its test chose the step; `window` / `clip`: the first or last step it "
                  "allows; `fixed`: a fixed fraction) and how many switched on the initial "
                  "plateau (batch loss at k0 above "
                  f"{_plateau_max():g} x its start).", "",
                  "| setting | runs | causes | switched on the plateau |",
                  "| --- | --- | --- | --- |"]
        for setting, f in sorted(findings.items()):
            causes = ", ".join(f"{k} {n}" for k, n in sorted(f["causes"].items()))
            lines.append(f"| {setting} | {f['runs']} | {causes} | {f['on_plateau']} of "
                         f"{f['switched']} |")
        lines.append("")
    if op.get("robustness"):
        lines += ["## The in-place verdicts across the tie set (PROTOCOL §D4.2)", ""]
        for name, r in sorted(op["robustness"].items()):
            lines.append(f"- {name}: **{'robust' if r['robust'] else 'fragile (lr choice)'}** "
                         "— " + "; ".join(f"{k}: {v}" for k, v in sorted(r["verdicts"].items())))
        lines.append("")
    if op.get("skipped"):
        lines += ["## Operating points not run", ""] + [f"- {_md(s)}" for s in op["skipped"]]
        lines.append("")
    for setting, per in sorted((op.get("stability") or {}).items()):
        lines += [f"## Stability map: {setting} (PROTOCOL §D4.3)", "",
                  "| N:M | recipe | lr: mean error of finite runs (diverged k/n, 95% CP) | "
                  "smallest diverging | largest stable |", "| --- | --- | --- | --- | --- |"]
        for where, rows in sorted(per.items()):
            for recipe, s in sorted(rows.items()):
                if recipe == "step_vs_srste":
                    continue
                cells = ", ".join(
                    f"{lr:g}: {'—' if m is None else f'{m:.3g}'} ({k}/{n}, "
                    f"[{lo:.2f}, {hi:.2f}])"
                    for lr, m, k, n, (lo, hi) in zip(s["lr"], s["mean"], s["diverged"], s["n"],
                                                     s["ci"]))
                lines.append(f"| {where} | {recipe} | {cells} | "
                             f"{_g(s['smallest_diverging'])} | {_g(s['largest_stable'])} |")
            for recipe, rel in sorted(rows.get("step_vs_srste", {}).items()):
                ratio = "—" if rel["ratio"] is None else f"{rel['bound']} {rel['ratio']:.3g}"
                lines.append(f"| {where} | {recipe} / sr-ste stable range | {ratio} | | |")
        lines.append("")
    lines += [f"![stability]({f})" for f in op.get("stability_figures", [])]
    return lines


def _plateau_max() -> float:
    from stepsim.checks import protocol

    return float(protocol.RULES.plateau.max_ratio)


def _g(value) -> str:
    return "none" if value is None else f"{value:g}"



def _causes(rows) -> str:
    from collections import Counter

    counts = Counter(r["cause"] for r in rows)
    k0 = [r["k0"] for r in rows if r["k0"] is not None]
    span = f"k0 {min(k0)}-{max(k0)}" if k0 else "never switched"
    return f"{span} ({', '.join(f'{n} {c}' for c, n in sorted(counts.items()))})"


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
        paths += _draw(claim_module(result.claim), result, out_dir / "figures")
    return paths


def rewrite_markdown(out_dir) -> Path:
    """Write report.md again from the report.json in ``out_dir`` (no re-run; report.json and
    the figures are left as they are): for a change in how report.md renders a report."""
    from stepsim._ground.atomic import write_text

    out_dir = Path(out_dir)
    return write_text(out_dir / "report.md", markdown(load_report(out_dir / "report.json")))
