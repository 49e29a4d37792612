"""Styles that keep many series of one figure apart: colour, marker and line style.

``series_style(i)`` is the i-th series' ``{"color", "marker", "linestyle"}``: matplotlib's
ten-colour cycle alone repeats after ten series (the eleventh drew in the first's colour);
with seven markers beside ten colours (coprime counts), the first 70 series differ in
(colour, marker), and the line style changes every 70. Standard library only: the figure
code that uses it imports matplotlib.
"""

from __future__ import annotations

# matplotlib's "tab10" cycle, written out so this module needs no matplotlib
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")


def series_style(index: int) -> dict:
    """The style of series ``index`` (0, 1, ...): distinct for every index below 280."""
    return {"color": COLORS[index % len(COLORS)], "marker": MARKERS[index % len(MARKERS)],
            "linestyle": LINESTYLES[(index // (len(COLORS) * len(MARKERS))) % len(LINESTYLES)]}
