"""The first screen of a check's report: claims x problems x readings, one verdict a cell.

A reader opens ``report.md`` to learn whether STEP holds, and where. This module turns the
report's verdicts into that answer, from data only (nothing here reads runs):

* :class:`Cell`: one verdict — a claim, a problem, a reading ("claim" for the claim's own
  verdict, else an operating point such as "in place", "own", "freeze sparse", "cosine",
  "k0=0.3T"), its verdict, a short effect text (estimate and interval) and whether STEP
  diverged in most of its runs there;
* :func:`table`: the markdown table (one row per claim, one column per problem and
  reading); :func:`compact_table`: one column per problem, for the README;
  :func:`draw` / :func:`figure`: the same as a coloured grid, one panel per problem;
  :func:`paragraphs`: one paragraph per problem saying what holds where.

The README shows the same table, generated from ``report.json``, never typed.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

#: verdict -> (short label in a figure cell, colour)
STYLE = {
    "REPRODUCED": ("R", "#4daf4a"),
    "NOT REPRODUCED": ("NR", "#e41a1c"),
    "INCONCLUSIVE": ("I", "#bdbdbd"),
}
#: the column of a claim's own verdict (its readings combined by the registered rule)
CLAIM = "claim"


@dataclasses.dataclass(frozen=True)
class Cell:
    """One verdict of the matrix. claim: "C1".."C12", "S1"; problem: "digits", "lm",
    "mnist1d" or "none" (C11, C12 train nothing); reading: :data:`CLAIM` or an operating
    point's name; verdict: one of :data:`STYLE`'s keys; effect: a short text (estimate
    [interval] with units, or a reason such as "no gap of the claimed size"); short: the
    same in a few characters for a figure's cell (e.g. "-3.52 [-5.38, -1.65]"); diverging:
    STEP diverged in more than half of its runs at this reading."""

    claim: str
    problem: str
    reading: str
    verdict: str
    effect: str = ""
    diverging: bool = False
    short: str = ""

    def __post_init__(self):
        if self.verdict not in STYLE:
            raise ValueError(f"verdict must be one of {list(STYLE)}, got {self.verdict!r}")
        for name in ("claim", "problem", "reading"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(f"{name} must be a non-empty string, got "
                                f"{getattr(self, name)!r}")


def _axes(cells) -> tuple[list, list, dict]:
    """(claims, problems, problem -> readings) in first-seen order, the claim's own column
    first; a duplicate (claim, problem, reading) is an error."""
    claims, problems, readings, seen = [], [], {}, set()
    for c in cells:
        key = (c.claim, c.problem, c.reading)
        if key in seen:
            raise ValueError(f"two cells for claim {c.claim}, problem {c.problem}, "
                             f"reading {c.reading!r}")
        seen.add(key)
        if c.claim not in claims:
            claims.append(c.claim)
        if c.problem not in problems:
            problems.append(c.problem)
        row = readings.setdefault(c.problem, [])
        if c.reading not in row:
            row.append(c.reading)
    for problem, row in readings.items():
        readings[problem] = sorted(row, key=lambda r: r != CLAIM)  # stable: CLAIM first
    return claims, problems, readings


def _text(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    mark = " (STEP diverges here)" if cell.diverging else ""
    effect = f": {cell.effect}" if cell.effect else ""
    return f"**{cell.verdict}**{effect}{mark}"


def table(cells) -> str:
    """The markdown table: one row per claim, one column per (problem, reading); a cell
    the check did not make reads "—"."""
    cells = list(cells)
    claims, problems, readings = _axes(cells)
    by = {(c.claim, c.problem, c.reading): c for c in cells}
    columns = [(p, r) for p in problems for r in readings[p]]
    head = "| claim | " + " | ".join(f"{p}: {r}" for p, r in columns) + " |"
    rule = "| --- " * (len(columns) + 1) + "|"
    rows = ["| " + claim + " | " + " | ".join(_text(by.get((claim, p, r))) for p, r in columns)
            + " |" for claim in claims]
    return "\n".join([head, rule, *rows])


def compact_table(cells) -> str:
    """The matrix for a README: one row per claim, one column per problem; a cell is the
    claim's verdict, then the readings whose verdict differs from it ("NOT REPRODUCED;
    own: REPRODUCED"), "—" where the check made no verdict."""
    cells = list(cells)
    claims, problems, readings = _axes(cells)
    by = {(c.claim, c.problem, c.reading): c for c in cells}

    def one(claim, p):
        own = by.get((claim, p, CLAIM))
        if own is None:
            return "—"
        other = [f"{r}: {by[(claim, p, r)].verdict}" for r in readings[p] if r != CLAIM
                 and (claim, p, r) in by and by[(claim, p, r)].verdict != own.verdict]
        return "; ".join([f"**{own.verdict}**", *other])

    head = "| claim | " + " | ".join(problems) + " |"
    rule = "| --- " * (len(problems) + 1) + "|"
    rows = ["| " + claim + " | " + " | ".join(one(claim, p) for p in problems) + " |"
            for claim in claims]
    return "\n".join([head, rule, *rows])


def paragraphs(cells) -> list[str]:
    """One paragraph per problem: which claims hold (REPRODUCED), which do not, which the
    check could not decide, by the claim's own verdict, then the readings that differ from
    it (e.g. "C5: NOT REPRODUCED; REPRODUCED at own")."""
    cells = list(cells)
    claims, problems, readings = _axes(cells)
    by = {(c.claim, c.problem, c.reading): c for c in cells}
    out = []
    for p in problems:
        groups = {v: [] for v in STYLE}
        notes = []
        for claim in claims:
            own = by.get((claim, p, CLAIM))
            if own is None:
                continue
            groups[own.verdict].append(claim)
            other = [f"{by[(claim, p, r)].verdict} at {r}"
                     + (" (STEP diverges there)" if by[(claim, p, r)].diverging else "")
                     for r in readings[p] if r != CLAIM and (claim, p, r) in by
                     and by[(claim, p, r)].verdict != own.verdict]
            if other:
                notes.append(f"{claim} ({own.verdict}): " + "; ".join(other))
        said = [f"{v.lower()}: {', '.join(cs)}" for v, cs in groups.items() if cs]
        text = f"**{p}** — " + ("; ".join(said) if said else "no verdict") + "."
        if notes:
            text += " Readings that differ from the claim's verdict: " + "; ".join(notes) + "."
        out.append(text)
    return out


def draw(cells, *, title: str = "Verdicts by claim, problem and reading"):
    """The matrix as a matplotlib figure (Agg): one panel per problem (claims down,
    readings across), each cell coloured by its verdict with its short label ("R", "NR",
    "I"; hatched where STEP diverged in most runs), a legend of the colours. The caller
    saves and closes it (:func:`figure` does both)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    cells = list(cells)
    if not cells:
        raise ValueError("no cells: a verdict matrix needs at least one verdict")
    claims, problems, readings = _axes(cells)
    by = {(c.claim, c.problem, c.reading): c for c in cells}
    widths = [max(1, len(readings[p])) for p in problems]
    width = max(5.0, 1.3 + 1.25 * sum(widths) + 0.4 * len(problems))  # inches
    fig, axes = plt.subplots(1, len(problems), squeeze=False, dpi=100,
                             figsize=(width, 1.6 + 0.5 * len(claims)),
                             gridspec_kw={"width_ratios": widths})
    for ax, p in zip(axes[0], problems):
        cols = readings[p]
        for i, claim in enumerate(claims):
            for j, r in enumerate(cols):
                cell = by.get((claim, p, r))
                colour = "white" if cell is None else STYLE[cell.verdict][1]
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white",
                                       lw=1.5, hatch="///" if cell and cell.diverging else None))
                label = "—" if cell is None else STYLE[cell.verdict][0]
                under = cell is not None and bool(cell.short)
                # text on the cell's colour, so that a hatched cell stays readable
                box = None if cell is None else {"facecolor": colour, "edgecolor": "none",
                                                 "pad": 0.6}
                ax.text(j + 0.5, i + (0.36 if under else 0.5), label, ha="center",
                        va="center", fontsize=8, color="0.45" if cell is None else "black",
                        bbox=box)
                if under:  # the effect and its interval (or the readings) under the label
                    ax.text(j + 0.5, i + 0.74, textwrap.shorten(cell.short, 30), ha="center",
                            va="center", fontsize=5.5, color="black", bbox=box)
        if CLAIM in cols and len(cols) > 1:  # the claim's own verdict apart from its readings
            ax.axvline(cols.index(CLAIM) + 1, color="0.2", lw=2)
        ax.set_xlim(0, len(cols))
        ax.set_ylim(len(claims), 0)
        ax.set_xticks([j + 0.5 for j in range(len(cols))], cols, rotation=35, ha="right",
                      fontsize=7.5)
        ax.set_yticks([i + 0.5 for i in range(len(claims))], claims, fontsize=8)
        ax.tick_params(length=0)
        ax.set_title(p, fontsize=9)
        for side in ax.spines.values():
            side.set_visible(False)
    legend = [Patch(facecolor=colour, label=verdict) for verdict, (_, colour) in STYLE.items()]
    legend.append(Patch(facecolor="white", edgecolor="0.3", hatch="///",
                        label="STEP diverged in most runs"))
    columns = max(1, min(len(legend), int(width // 2.2)))  # a legend entry is ~2 inches
    fig.legend(handles=legend, loc="lower center", ncol=columns, fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(textwrap.fill(title, int(width * 11)), fontsize=10)
    rows = -(-len(legend) // columns)
    fig.tight_layout(rect=(0, 0.035 + 0.16 * rows / (1.6 + 0.5 * len(claims)), 1, 0.97))
    return fig


def figure(cells, path, **kw) -> Path:
    """:func:`draw` written to ``path`` as a PNG, atomically; returns ``path``."""
    import matplotlib.pyplot as plt

    from stepsim._ground.atomic import atomic_path

    fig = draw(cells, **kw)
    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
    return path
