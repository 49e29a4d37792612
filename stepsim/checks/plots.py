"""Small figure helpers of the paper checks (matplotlib, Agg, imported inside each function).

Every figure is readable on its own: a title naming the claim and its verdict, labelled
axes with units, a legend, and a footer with the problem, the seeds and what the error
bars are. Files are written atomically (``stepsim._ground.atomic``).
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import numpy as np


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the Student-t interval (:func:`stepsim.stats.mean_ci`); (mean,
    nan, nan) for one value; all NaN for none (every run of the group diverged)."""
    from stepsim import stats

    if len(values) == 0:
        return math.nan, math.nan, math.nan
    est = stats.mean_ci(values, confidence=level)
    return est.mean, est.low, est.high


def save(fig, path) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically and close it."""
    from stepsim._ground.atomic import atomic_path

    plt = pyplot()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def footer(fig, text: str) -> None:
    fig.text(0.01, 0.01, text, fontsize=6.5, color="0.3", ha="left", va="bottom", wrap=True)


def finish(fig, path, note: str) -> Path:
    """Lay ``fig`` out above a footer ``note`` (problem, seeds, effect) and save it."""
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    footer(fig, note)
    return save(fig, path)


def bars(path, *, title: str, groups: dict, ylabel: str, note: str, hline=None) -> Path:
    """One column per group (label -> values over seeds): the mean with its 95% t-CI as an
    error bar, the seeds as dots. The y axis fits the data (not from 0: differences
    between recipes are what matters)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(groups) + 2), 3.6), dpi=90)
    for i, (label, values) in enumerate(groups.items()):
        mean, lo, hi = t_interval(values)
        err = None if math.isnan(lo) else [[mean - lo], [hi - mean]]
        shown = f"{mean:.3g}" if math.isfinite(mean) else "no finite run"  # never "nan"
        ax.errorbar(i, mean, yerr=err, fmt="s", color=f"C{i % 10}", ms=6, capsize=5,
                    label=f"{label}: {shown}")
        ax.plot(np.full(len(values), i) + 0.12, values, ".", color="0.4", ms=4)
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8, ls="--")
    ax.set_xticks(range(len(groups)), list(groups), rotation=20, ha="right", fontsize=7)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(textwrap.fill(ylabel, 40))  # long units ("nats (test-loss gap ...)")
    ax.set_title(title, fontsize=9)
    # outside the axes, right: inside, "best" still covers a column when every corner is used
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return finish(fig, path, note)


VERDICT_COLOURS = {"REPRODUCED": "C2", "NOT REPRODUCED": "C3", "INCONCLUSIVE": "0.5"}


def _tag(reason: str) -> str:
    if reason.startswith("premise absent"):
        return "  (premise absent)"
    return "  (diverged)" if reason.startswith(("diverged", "both diverged")) else ""


def parts_figure(result, path, *, note: str = "", select=None, symmetric: bool = False) -> Path:
    """One row per part of a claim: its effect with the interval at its Holm level, the
    margin (dashed) and 0 (solid), coloured by the part's verdict (grey: inconclusive or
    premise absent). select: keep the parts whose name it accepts; symmetric: an
    equivalence claim (dashed at -margin and +margin, "inside: the claim")."""
    parts = [p if isinstance(p, dict) else dataclasses.asdict(p) for p in result.parts]
    if select is not None:
        parts = [p for p in parts if select(p["name"])]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.32 * max(len(parts), 1)), dpi=90)
    for i, p in enumerate(parts):
        e = p["effect"]
        colour = VERDICT_COLOURS.get(p["verdict"], "k")
        # a part whose runs diverged has NaN ends (JSON: "nan"): nothing to draw but its name
        est, low, high = (float(e[k]) for k in ("estimate", "ci_low", "ci_high"))
        if all(map(math.isfinite, (est, low, high))):
            ax.errorbar(est, i, xerr=[[est - low], [high - est]],
                        fmt="o", color=colour, ms=4, capsize=2, lw=1)
        ax.plot(e["values"], [i] * len(e["values"]), "|", color=colour, alpha=0.4, ms=6)
    margin = parts[0]["effect"]["margin"] if parts else 0.0
    ax.axvline(0.0, color="k", lw=0.8)
    if margin:
        ax.axvline(margin, color="k", lw=0.8, ls="--")
        if symmetric:
            ax.axvline(-margin, color="k", lw=0.8, ls="--")
    ax.set_yticks(range(len(parts)), [p["name"] + _tag(p["reason"]) for p in parts],
                  fontsize=7)
    ax.invert_yaxis()
    units = parts[0]["effect"]["units"] if parts else ""
    ax.set_xlabel(f"deviation ({units}); inside the dashed margins: the claim" if symmetric
                  else f"effect ({units}); > 0: the claim's direction; dashed: margin")
    ax.set_title(f"{result.claim} on {result.setting}: {result.verdict}", fontsize=9)
    return finish(fig, path, (note or f"{result.problem}; seeds {list(result.seeds)}") +
                  "; bars: CI at each part's Holm level; ticks: seeds; green REPRODUCED, "
                  "red NOT REPRODUCED, grey INCONCLUSIVE")
