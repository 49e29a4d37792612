"""The README's verdict section, made from a check's ``report.json`` (never typed).

:func:`cells` reads a report's verdict lines as :class:`~stepsim.checks.verdict_matrix.Cell`
(a setting such as ``digits/main@own-lr`` is problem ``digits``, reading ``own``; the
problem's main timescale at its registered operating point is the claim's own verdict);
:func:`section` writes the README section: the compact matrix, what holds where, and what
the verdicts rest on (runs, worker time, the run's wall time when the report records it).
:func:`update` rewrites the section between the README's markers in place::

    python -m stepsim.checks.readme_section README.md figures/check/report.json

``tests/package/test_readme_numbers.py`` fails when the README's section differs from what
the committed report gives.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from stepsim.checks import verdict_matrix as vm
from stepsim.checks.verdict import interval_text

BEGIN = "<!-- verdicts: generated from figures/check/report.json; do not edit -->"
END = "<!-- verdicts: end -->"


#: a report line's operating point (after "@") -> its reading's name in the matrix
POINTS = {"own-lr": "own", "in-place": "in place"}


def reading_of(setting: str, main_timescale: dict) -> tuple[str, str]:
    """(problem, reading) of a report's setting: ``digits/main`` -> ("digits", "claim"),
    ``digits/main@own-lr`` -> ("digits", "own"), ``digits/main@in-place`` -> ("digits",
    "in place"), ``digits/main-cosine@own-lr`` -> ("digits", "cosine own"),
    ``digits/fast`` -> ("digits", "fast") when "fast" is not the report's main timescale,
    ``none`` (C11, C12) -> ("no training", "claim"); main_timescale: problem -> the
    timescale of the claim's own verdict (its main one; quick mode's in a quick report)."""
    if setting == "none":
        return "no training", vm.CLAIM
    problem, rest = setting.split("/", 1)
    where, _, point = rest.partition("@")
    timescale, _, schedule = where.partition("-")
    words = []
    if timescale != main_timescale.get(problem, timescale):
        words.append(timescale)
    if schedule:
        words.append(schedule)
    if point:
        words.append(POINTS.get(point) or (
            f"tie {point.removeprefix('sr-ste ')}" if point.startswith("sr-ste ") else point))
    return problem, " ".join(words) or vm.CLAIM


def cells_of(lines, mode: str, version) -> list:
    """The matrix cells of a report's verdict lines (objects or dicts with claim, setting
    and verdict), made in ``mode`` under protocol draft ``version`` (its problems' main
    timescales, or quick mode's)."""
    from stepsim.checks import protocol

    rules = protocol.TYPED.get(version, protocol.RULES)
    main = {name: (rules.quick.timescale if mode == "quick" else p.timescales[0])
            for name, p in rules.problems.items()}
    out = []
    for line in lines:
        get = (line.get if isinstance(line, dict)
               else lambda k, line=line: getattr(line, k, None))
        problem, reading = reading_of(get("setting"), main)
        parts = get("parts") or []
        reason = get("reason") or ""
        name, text, short = _deciding_part(parts, get("verdict"))
        out.append(vm.Cell(get("claim"), problem, reading, get("verdict"),
                           effect=f"{name}: {text}" if name and text else "", short=short,
                           # a reading's line: STEP diverged in most of its runs; a claim's
                           # combined line: in every reading that decides it
                           diverging=("STEP diverges here" in reason if parts
                                      else "decided only where STEP diverges" in reason)))
    return _combined_effects(out)


def _field(obj, key):
    """``obj[key]`` of a report.json dict, else the attribute (a ClaimResult's objects)."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _interval(effect) -> tuple[str, str]:
    """(text, short) of an effect (dict or Effect): "estimate [low, high]" to 3 significant
    digits (both); where runs diverged and no interval exists, the divergence counts
    ("diverged: better-claimed side 16/16, worse-claimed 0/16"; short "diverged 16/16 vs
    0/16"); ("", "") when there is neither."""
    if effect is None:
        return "", ""
    try:
        est, low, high = (float(_field(effect, k)) for k in ("estimate", "ci_low", "ci_high"))
    except (TypeError, ValueError):
        return "", ""
    if all(map(math.isfinite, (est, low, high))):
        text = interval_text(est, low, high)
        return text, text
    d = _field(effect, "divergence") or {}
    if not d.get("seeds"):
        return "", ""
    n = d["seeds"]
    return (f"diverged: better-claimed side {d['minus']}/{n}, worse-claimed {d['plus']}/{n}",
            f"diverged {d['minus']}/{n} vs {d['plus']}/{n}")


def _deciding_part(parts, verdict) -> tuple[str, str, str]:
    """(name, effect text, short) of the first part whose verdict is the line's (the part
    that shows it), else of the first part; empty for a line without parts."""
    if not parts:
        return "", "", ""
    pick = next((p for p in parts if _field(p, "verdict") == verdict), parts[0])
    return (str(_field(pick, "name")), *_interval(_field(pick, "effect")))


def _combined_effects(cells: list) -> list:
    """A claim's own cell whose line has no parts (its readings combined, D5.5) says which
    reading gave what ("in place NR, own I"): its readings' cells hold the effects."""
    label = {v: s for v, (s, _) in vm.STYLE.items()}
    out = []
    for c in cells:
        if c.reading == vm.CLAIM and not c.effect:
            others = [o for o in cells if (o.claim, o.problem) == (c.claim, c.problem)
                      and o.reading != vm.CLAIM]
            if others:
                text = ", ".join(f"{o.reading} {label[o.verdict]}" for o in others)
                c = dataclasses.replace(c, effect=text, short=text)
        out.append(c)
    return out


def cells(doc: dict) -> list:
    """The matrix cells of a report.json's ``result``."""
    version = (doc.get("protocol") or {}).get("rules_version")
    return cells_of(doc["claims"], doc["mode"], version)


def section(doc: dict) -> str:
    """The README section (markers included) for a report.json's ``result``."""
    p = doc.get("protocol") or {}
    c = doc.get("compute") or {}
    made = cells(doc)
    rest = (f"The verdicts rest on {c['runs']:,} runs and tasks ({c['tuning_runs']:,} of them "
            f"tuning runs) and {c['worker_s'] / 3600:.2f} hours of worker time.")
    if c.get("checks"):
        rest += (f" The run as a whole took {c['wall_s'] / 60:.0f} minutes of wall time over "
                 f"{len(c['checks'])} check(s) (report.json's ledger).")
    else:
        rest += (" This report predates the wall-time ledger: report.json records no wall "
                 "time for the run as a whole (`paper_checks/claims.md` gives the measured "
                 "one).")
    lines = [BEGIN, "",
             (f"{p.get('rules_version') and 'Protocol draft ' + str(p['rules_version']) or ''}"
              f" — {doc['mode']} mode. A cell is the claim's verdict on a problem, then each "
              "reading (operating point) whose verdict differs from it."), "",
             vm.compact_table(made), "", *[f"{t}\n" for t in vm.paragraphs(made)], rest, "",
             END]
    return "\n".join(lines)


def update(readme: Path, report: Path) -> bool:
    """Rewrite ``readme``'s section from ``report``; True when it changed. The README
    must hold the markers once each."""
    from stepsim._ground.atomic import write_text

    text = Path(readme).read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"readme {readme} must hold the markers {BEGIN!r} and {END!r} once "
                         "each")
    doc = json.loads(Path(report).read_text())["result"]
    head, rest = text.split(BEGIN)
    new = head + section(doc) + rest.split(END, 1)[1]
    if new != text:
        write_text(Path(readme), new)
    return new != text


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m stepsim.checks.readme_section README.md REPORT.json",
              file=sys.stderr)
        return 2
    changed = update(Path(args[0]), Path(args[1]))
    print(f"{args[0]}: {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["BEGIN", "END", "POINTS", "cells", "cells_of", "main", "reading_of", "section",
           "update"]
