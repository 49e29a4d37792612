"""report.md: a check's report as Markdown, rendered from its
:class:`~stepsim.checks.outputs.Report` alone (so ``outputs.rewrite_markdown`` renders it
again from report.json, byte for byte).

The protocol record, the verdict table per setting, the learning rates with their tuning
means, the switch findings, the tie sets, the operating points not run, the stability
map, then one section per claim and setting (rule, parts with premises, a claim's own
table, switch causes, figures).
"""

from __future__ import annotations

import dataclasses

from stepsim.checks.registry import get_claim

#: the verdict matrix's figure, in the report's figures/
MATRIX_FIGURE = "verdict_matrix.png"


def matrix_cells(report) -> list:
    """The report's verdicts as the verdict matrix's cells (claims x problems x readings)."""
    from stepsim.checks.readme_section import cells_of

    return cells_of(report.claims, report.mode, (report.protocol or {}).get("rules_version"))


def _matrix_markdown(report) -> list:
    """The first screen: does STEP hold, and where — the matrix, then a paragraph a
    problem (each claim's own verdict, then the readings that differ from it)."""
    from stepsim.checks import verdict_matrix as vm

    made = matrix_cells(report)
    if not made:
        return []
    lines = ["## Verdict matrix", "",
             ("One row a claim; a column a problem and reading (\"claim\": the claim's own "
              "verdict, its readings combined by the registered rule). The parts behind every "
              "verdict follow below."), "", vm.table(made), ""]
    if report.out is not None:
        lines += [f"![verdict matrix](figures/{MATRIX_FIGURE})", ""]
    return lines + [text for p in vm.paragraphs(made) for text in (p, "")]


def ledger_text(compute: dict) -> str:
    """The wall time of the checks that made a report, as a sentence (a report from before
    the ledger: none recorded)."""
    checks = compute.get("checks") or []
    if not checks:
        return "No wall time was recorded for the run as a whole (a report from before it was)."
    parts = "; ".join(
        f"{c['mode']} {', '.join(c['claims'])} {c['wall_s'] / 60:.1f} min with "
        f"{c['jobs'] or 'every usable core'} worker(s), "
        + (f"stopped before its report (to its last saved run; {c['runs_made']} runs saved)"
           if c.get("stopped") else
           f"{c['runs_made']} runs made and {c['found_in_store']} found in the store")
        for c in checks)
    return (f"Wall time: {compute['wall_s'] / 60:.1f} min over {len(checks)} check(s) that "
            f"made this report ({parts}); a check stopped before its report counts from "
            "its start to the last run it saved, when its start mark was left in this "
            "folder.")


def markdown(report) -> str:
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
                  f"time, counted also when a resumed check found it finished). "
                  + ledger_text(c), ""]
    settings = sorted({c.setting for c in report.claims},  # operating points after theirs
                      key=lambda k: (k == "none", k.split("/")[0], "@" in k or "-" in k,
                                     not k.split("@")[0].endswith("/main"), k))
    lines += _matrix_markdown(report)
    differ = report.beside_full()
    if quick:
        from stepsim.checks import protocol
        from stepsim.checks.beside_full import why_quick_differs

        rules = protocol.TYPED.get(p.get("rules_version"), protocol.RULES)
        lines += [f"{len(differ)} of {len(report.claims)} line(s) differ from the committed "
                  "full run's verdict of the same claim on the same problem (column \"full "
                  "run\"). " + why_quick_differs(rules), ""]
    index = {id(c): i for i, c in enumerate(report.claims)}
    for setting in settings:
        rows = [c for c in report.claims if c.setting == setting]
        lines += [f"## {'no training' if setting == 'none' else setting}", "",
                  "| claim | verdict | first part's effect [CI] | evidence |"
                  + (" full run |" if quick else ""),
                  "| --- | --- | --- | --- |" + (" --- |" if quick else "")]
        for c in rows:
            effect = "—" if c.effect is None else effect_text(c.effect)
            full = differ.get(index[id(c)])
            beside = "" if not quick else (f" **differs: {full}** |" if full else " same |")
            lines.append(f"| {c.claim} | **{c.verdict}** | {effect} | {_md(c.reason)} |"
                         + beside)
        lines.append("")
    if report.lrs:
        marked = p.get("provisional_configs")
        every = bool(p.get("choices")) and not marked  # every choice is provisional

        def source(setting, key):  # a row of the table below without a tuning of its own
            provisional = every or key in (marked or {}).get(setting.split("/")[0], ())
            return "**provisional**" if provisional else "from the committed full run"

        lines += ["## Learning rates", ""]
        if p.get("choices"):
            lines += [f"The choices are {_md(p['choices'])}.", ""]
        if any("reached" in t for configs in report.tuning.values() for t in configs.values()):
            lines += [("Successive halving: a mean marked \"at n\" is its candidate's at the "
                       "rung of n steps it reached (it ran no further); every other mean is "
                       "at T. The choice and the tie set are made among the candidates run "
                       "to T."), ""]
        lines += ["| setting | config | lr | tuning means (grid) | edge |",
                  "| --- | --- | --- | --- | --- |"]
        for setting, configs in sorted(report.lrs.items()):
            for key, chosen in sorted(configs.items()):
                t = report.tuning.get(setting, {}).get(key)
                means = source(setting, key) if t is None else ", ".join(
                    f"{_candidate_text(g)}: {m:.3g}{_rung_text(t, i)}"
                    for i, (g, m) in enumerate(zip(t.get("candidates", t["grid"]),
                                                   t["means"])))
                edge = "" if t is None or not t["edge"] else f"**{t['edge']} edge**"
                lines.append(f"| {setting} | {_md(key)} | {_candidate_text(chosen)} | "
                             f"{means} | {edge} |")
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
        table = get_claim(c.claim).markdown
        if table is not None:  # a comparison's own table (S1)
            lines += [""] + table(c) + [""]
        switches = c.numbers.get("switches") if isinstance(c.numbers, dict) else None
        if switches:
            lines.append("- switch steps (k0) and causes: " + "; ".join(
                f"{name}: " + _causes(rows) for name, rows in flat_switches(switches)))
        lines += [f"- figure: ![{c.claim}]({f})" for f in c.figures]
    return "\n".join(lines) + "\n"


def _rung_text(row: dict, i: int) -> str:
    """" at 500" when candidate ``i`` of a tuning row stopped at a rung of successive
    halving (500 steps) before T; "" when it ran to T (or the row has no halving)."""
    reached = row.get("reached")
    if not reached or reached[i] == row.get("steps"):
        return ""
    return f" at {reached[i]}"


def _candidate_text(chosen) -> str:
    """A config's choice in words: "0.001" (a learning rate) or "lr 0.001, lam 0.02"."""
    if not isinstance(chosen, dict):
        return f"{chosen:g}"
    return ", ".join(f"{k} {v:g}" for k, v in [("lr", chosen["lr"]), *sorted(
        (k, v) for k, v in chosen.items() if k != "lr")])


def _operating_markdown(report) -> list:
    """Draft 4's sections: the switch findings, the tie sets, the stability map."""
    op = report.operating or {}
    lines = []
    findings = op.get("switch_findings") or {}
    if findings:
        lines += ["## Switch findings (PROTOCOL §D4.5)", "",
                  ("How the STEP runs the claims report switched: AutoSwitch's cause (`fired`: "
                   "its test chose the step; `window` / `clip`: the first or last step it "
                   "allows; `fixed`: a fixed fraction) and how many switched on the initial "
                   "plateau (batch loss at k0 above "
                   f"{_plateau_max():g} x its start)."), "",
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
    if op.get("extensions"):
        lines += ["## Claims on more seeds (PROTOCOL.md, divergence-only parts)", ""] + [
            f"- {_md(s)}" for s in op["extensions"]]
        lines.append("")
    if op.get("skipped"):
        lines += ["## Operating points not run", ""] + [f"- {_md(s)}" for s in op["skipped"]]
        lines.append("")
    if op.get("extended_set"):
        title = ("## Not run by this check: the extended set (PROTOCOL.md \"Budget, quick "
                 "mode, the extended set\"; `stepsim check --extended all S1`)")
        lines += [title, ""] + [f"- {_md(s)}" for s in op["extended_set"]]
        lines.append("")
    for setting, per in sorted((op.get("stability") or {}).items()):
        lines += [f"## Stability map: {setting} (PROTOCOL §D4.3)", "",
                  ("| N:M | recipe | lr: mean error of finite runs (diverged k/n, 95% CP) | "
                   "smallest diverging | largest stable |"), "| --- | --- | --- | --- | --- |"]
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


__all__ = ["MATRIX_FIGURE", "ledger_text", "markdown", "matrix_cells"]
