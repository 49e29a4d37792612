"""A quick report beside the committed full run: which verdicts differ, and why they can.

Quick mode is indicative: fewer seeds, a shorter timescale, the full run's learning rates,
no tuning. A reader who sees "C1 INCONCLUSIVE" in quick mode and "NOT REPRODUCED" in the
README needs to know the two disagree and that this is expected. :func:`committed` reads
the committed report's claim verdicts (:data:`COMMITTED_REPORT`, per claim and problem, the
claim's own verdict: its main timescale at its registered operating point);
:func:`differences` pairs a quick report's lines with them; :func:`why_quick_differs` says
why they can differ, from the rules.
"""

from __future__ import annotations

import json
from pathlib import Path

#: the committed full run's report (its verdicts are the README's)
COMMITTED_REPORT = Path(__file__).resolve().parents[2] / "figures" / "check" / "report.json"


def committed(path=None) -> dict:
    """{(claim, problem): verdict} of the committed full report; {} when it is missing or
    unreadable (an installed package without the repository's figures)."""
    from stepsim.checks.readme_section import cells
    from stepsim.checks.verdict_matrix import CLAIM

    path = Path(path or COMMITTED_REPORT)
    try:
        doc = json.loads(path.read_text())["result"]
        made = cells(doc)
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {(c.claim, c.problem): c.verdict for c in made if c.reading == CLAIM}


def problem_of(setting: str) -> str:
    """The problem of a report line's setting ("digits/fast@own-lr" -> "digits"; C11 and
    C12's "none" -> "no training", as :mod:`stepsim.checks.readme_section` names it)."""
    return "no training" if setting in ("", "none") else setting.split("/", 1)[0]


def differences(claims, full: dict) -> dict:
    """{index of a line in ``claims``: the full run's verdict} for each quick line whose
    claim's verdict on its problem differs from the committed full run's (``full``:
    :func:`committed`); a line with no full verdict to compare is left out."""
    out = {}
    for i, c in enumerate(claims):
        verdict = full.get((c.claim, problem_of(c.setting)))
        if verdict is not None and verdict != c.verdict:
            out[i] = verdict
    return out


def why_quick_differs(rules) -> str:
    """One sentence: how quick mode differs from the full run it is read beside."""
    quick = rules.quick
    return (f"Quick mode can differ from the committed full run: {len(rules.seeds.quick)} seeds "
            f"instead of {len(rules.seeds.full)} (wider intervals: a verdict the full run "
            f"decides can be INCONCLUSIVE here), the {quick.timescale!r} timescale instead of "
            "each problem's main one (shorter runs, another beta2: AutoSwitch's window "
            "scales with it), the full run's learning rates without tuning, and fewer "
            "operating points.")


__all__ = ["COMMITTED_REPORT", "committed", "differences", "problem_of", "why_quick_differs"]
