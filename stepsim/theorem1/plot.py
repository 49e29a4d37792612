"""The Theorem 1 figure: bound vs empirical quantiles (log-log) and violation rates.

``plot_result(result, path)`` writes a small PNG with two panels against the lag k - k0:
left, the paper's bound, the worst case over all [0, G] sequences, the Hoeffding bound
valid for independent g^2 and the empirical (1 - delta)-quantiles of the statistic per
coordinate and for the inf-norm; right, the violation rates with their Clopper-Pearson
intervals and the line at delta. matplotlib is imported here only (Agg canvas).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_result(result, path, *, dpi: int = 120) -> Path:
    """Save :func:`result_figure` of a :class:`Theorem1Result` to ``path`` (PNG whatever
    the name's suffix), atomically; returns the path."""
    from stepsim._ground.atomic import atomic_path

    fig = result_figure(result)
    path = Path(path)
    with atomic_path(path) as tmp:  # whole file or none; PNG whatever the name's suffix
        fig.savefig(tmp, format="png", dpi=dpi)
    return path


def result_figure(result):
    """The two panels of a :class:`Theorem1Result` as a matplotlib Figure (Agg canvas, no
    pyplot state); each panel's legend sits below it, off the curves."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lags = np.asarray(result.lags, dtype=float)
    fig = Figure(figsize=(11, 5.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    col = result.column
    ax1.loglog(lags, col("bound"), "k-", lw=2, label="paper's bound")
    ax1.loglog(lags, col("worst_case"), "k:", label="worst case, any sequence")
    ax1.loglog(lags, col("hoeffding_bound"), "g--", label="Hoeffding (independent g²)")
    for values, style, label in (
        (col("coord.quantile"), "C0o-", "per coordinate"),
        (col("inf.quantile"), "C3s-", f"inf-norm, d={result.dim}"),
    ):
        v = np.asarray(values, dtype=float)
        keep = v > 0  # log axes: a zero quantile (e.g. constant g^2) is not drawn
        ax1.loglog(lags[keep], v[keep], style, ms=3,
                   label=f"{label}: {1 - result.delta:g}-quantile")
    ax1.set_xlabel("lag k - k0 (steps)")
    ax1.set_ylabel("|vhat_k - vhat_k0| (units of g²)")
    params = ", ".join(f"{k}={v:g}" for k, v in result.process_params.items())
    ax1.set_title(f"{result.process}" + (f" ({params})" if params else "")
                  + f": k0={result.k0}, beta2={result.beta2:g}", fontsize=9)
    if result.bound_report is not None:  # the chosen corrected bound, both forms
        r = result.bound_report
        ax1.loglog(lags, r["coord"]["bound"], "C4--", label=f"{r['kind']} bound, coordinate")
        ax1.loglog(lags, r["inf"]["bound"], "C4:", label=f"{r['kind']} bound, inf-norm")
    ax1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)
    for sample, style, label in (("coord", "C0o", "per coordinate"), ("inf", "C3s", "inf-norm")):
        rate, lo, hi = (col(f"{sample}.{x}").astype(float) for x in ("rate", "ci_low", "ci_high"))
        ax2.errorbar(lags, rate, yerr=[rate - lo, hi - rate], fmt=style, ms=3, capsize=2,
                     lw=0.8, label=label)
    ax2.axhline(result.delta, color="k", lw=1, ls="--", label=f"delta = {result.delta:g}")
    ax2.set_xscale("log")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_xlabel("lag k - k0 (steps)")
    ax2.set_ylabel("P(statistic >= bound), over trials")
    ax2.set_title(f"violations ({100 * result.ci_level:g}% Clopper-Pearson): "
                  f"coord {result.coord_overall}, inf {result.inf_overall}", fontsize=9)
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=3)
    return fig
