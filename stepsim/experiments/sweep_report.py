"""Statistics of a sweep's table: a metric per condition over seeds, paired comparisons, a figure.

A *condition* is a row's parameters minus its seed (problem and its options, recipe,
optimizer and options, criterion and options, N:M, steps). :func:`summarize` gives each
condition's mean and confidence interval over seeds; :func:`compare` pairs every condition
with a baseline recipe on the same problem, N:M, steps and seed index (same initial weights
and minibatches, see :mod:`stepsim.experiments.sweep_spec`) and tests the paired differences;
:func:`plot_vs_sparsity` draws the metric against sparsity 1 - N/M, one line per recipe
with its confidence band.
"""

from __future__ import annotations

import json
import math
import numbers

from stepsim import stats

# parameter columns of a table row (sweep_dir.result_row); the rest are outcomes and versions
PARAMETER_COLUMNS = ("digest", "problem", "recipe", "optimizer", "criterion", "nm", "n", "m",
                     "sparsity", "steps", "seed", "rng_seed", "eval_every")
PARAMETER_PREFIXES = ("problem.", "recipe.", "criterion.")
NOT_CONDITION = ("digest", "seed", "rng_seed", "n", "m", "sparsity")
# what a paired comparison holds fixed besides the seed: the problem, the N:M and the length
CONTEXT_COLUMNS = ("problem", "nm", "steps")


# metrics whose values lie in a known range, by name: an interval over seeds is clipped to
# it (with 2 seeds a t-interval of accuracies ran from -4 to 5)
BOUNDED_METRICS = (("accuracy", (0.0, 1.0)), ("loss", (0.0, math.inf)))


def metric_range(metric: str) -> tuple[float, float]:
    """The values ``metric`` can take: [0, 1] for an accuracy (a name containing
    "accuracy"), [0, inf) for a loss (cross-entropy or squared error: a name ending in
    "loss"), else the real line."""
    for word, bounds in BOUNDED_METRICS:
        if word in metric and (word != "loss" or metric.endswith("loss")):
            return bounds
    return (-math.inf, math.inf)


class Summary(list):
    """:func:`summarize`'s rows (a list of dicts) with ``range``, the metric's range
    (:func:`metric_range`), and ``clipped``, how many intervals reached past it and were
    clipped to it."""

    range: tuple[float, float] = (-math.inf, math.inf)
    clipped: int = 0

    def range_text(self) -> str:
        """The range as an interval, e.g. "[0, 1]" or "[0, inf)"."""
        lo, hi = self.range
        return (f"{'(' if lo == -math.inf else '['}{lo:g}, {hi:g}"
                f"{')' if hi == math.inf else ']'}")

    def note(self) -> str:
        """A sentence saying what was clipped ("" if nothing was)."""
        if not self.clipped:
            return ""
        return (f"{self.clipped} interval(s) clipped to the metric's range "
                f"{self.range_text()} (a t-interval over few seeds reaches past it)")


def is_parameter(column: str) -> bool:
    """True for a parameter column (see :class:`~stepsim.experiments.sweep_dir.Table`)."""
    return column in PARAMETER_COLUMNS or column.startswith(PARAMETER_PREFIXES)


def condition_columns(table) -> list[str]:
    """The parameter columns that define a condition (everything but the seed and run id)."""
    return [c for c in table.columns if is_parameter(c) and c not in NOT_CONDITION]


def varying_columns(table, columns) -> list[str]:
    """Those of ``columns`` that take more than one value in ``table`` (recipe, nm always)."""
    out = []
    for c in columns:
        if c in ("recipe", "nm") or len({_key(v) for v in table.column(c)}) > 1:
            out.append(c)
    return out


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _groups(rows, columns):
    """rows grouped by their values in ``columns``, in first-appearance order."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(_key(row.get(c)) for c in columns), []).append(row)
    return groups


def diverged(row) -> bool:
    """True for a run that diverged: ``fit`` stopped it at a non-finite loss, gradient or
    weight (status "non-finite") or at a blown-up loss (status "blow-up", when the run
    watched for one). Such a run is an outcome to count, never a number to average: its
    metrics are left out of every mean and comparison."""
    return row.get("status") in ("non-finite", "blow-up")


def _metric_values(rows, metric: str):
    """(finite float values of the runs that did not diverge, count of the others: diverged
    runs and runs whose ``metric`` is missing, NaN or inf) of ``metric`` over ``rows``."""
    if any(metric not in row for row in rows):
        raise ValueError(f"metric {metric!r} is not a column of the table")
    values = [_number(row, metric) for row in rows if not diverged(row)]
    finite = [v for v in values if math.isfinite(v)]
    return finite, len(rows) - len(finite)


def _check_table(table, metric) -> None:
    """``table`` must be a sweep's :class:`~stepsim.experiments.sweep_dir.Table` and ``metric``
    one of its columns (a missing column would otherwise give NaN rows, not an error)."""
    from stepsim.experiments.sweep_dir import Table

    if not isinstance(table, Table):
        raise TypeError(f"table must be a stepsim.experiments.Table (from load_table or "
                        f"run_sweep), got {type(table).__name__}")
    if not isinstance(metric, str) or metric not in table.columns:
        raise ValueError(f"metric {metric!r} is not a column of the table; columns: "
                         f"{list(table.columns)}")


def _number(row, metric: str) -> float:
    """Row ``row``'s ``metric`` as a float (None: NaN); a text value is a ValueError."""
    value = row.get(metric)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"metric {metric!r} is not numeric: run {row.get('digest')} has "
                         f"{value!r}")
    return float(value)


def summarize(table, metric: str, *, confidence: float = 0.95, method: str = "t",
              rng=None) -> list[dict]:
    """Mean and confidence interval of ``metric`` over seeds, one dict per condition.

    Each dict: the varying condition columns, ``n`` (runs summarised), ``mean``, ``low``,
    ``high``, ``std`` and ``diverged`` (runs left out: they diverged, or their metric is
    missing, NaN or inf). A condition whose every run diverged has n = 0 and NaN figures.
    method: "t" or "bootstrap" (:func:`stepsim.stats.mean_ci`; ``rng`` seeds the bootstrap).
    ``low`` and ``high`` are clipped to the metric's range (:func:`metric_range`); the
    returned :class:`Summary` counts the clipped intervals.
    """
    _check_table(table, metric)
    cond = condition_columns(table)
    shown = varying_columns(table, cond)
    out = Summary()
    out.range = lo, hi = metric_range(metric)
    for rows in _groups(table.rows, cond).values():
        values, bad = _metric_values(rows, metric)
        row = {c: rows[0].get(c) for c in shown}
        row["sparsity"] = rows[0]["sparsity"]
        if values:
            est = stats.mean_ci(values, confidence=confidence, method=method, rng=rng)
            low, high = max(est.low, lo), min(est.high, hi)
            out.clipped += (low, high) != (est.low, est.high)
            row.update(n=est.n, mean=est.mean, low=low, high=high, std=est.std)
        else:
            row.update(n=0, mean=math.nan, low=math.nan, high=math.nan, std=math.nan)
        row["diverged"] = bad
        out.append(row)
    return out


def compare(table, metric: str, *, baseline: str = "dense", confidence: float = 0.95) -> list[dict]:
    """Every condition minus the ``baseline`` recipe, paired on seeds.

    A condition's run with seed index s is paired with the baseline's run on the same
    problem (and options), N:M, steps and s that also agrees on every recipe option both
    set (so with a grid over lr, each recipe meets the baseline at its own lr). Each dict:
    the varying condition columns, ``baseline``, ``n`` (pairs where neither run diverged
    and both values are finite), ``diverged`` (pairs left out for that),
    ``mean_diff`` (condition - baseline), ``low``, ``high`` (t-interval), ``cohen_dz``,
    ``t_pvalue``, ``wilcoxon_pvalue`` (:func:`stepsim.stats.paired_difference`; NaN when
    n < 2). A run that matches several baseline runs is a ValueError (ambiguous baseline).
    """
    _check_table(table, metric)
    cond = condition_columns(table)
    shown = varying_columns(table, cond)
    context = [c for c in cond if c in CONTEXT_COLUMNS or c.startswith("problem.")]
    shared = [c for c in cond if c == "optimizer" or c.startswith("recipe.")]
    base = {}
    for row in table.rows:
        if row["recipe"] == baseline:
            base.setdefault(_pair_key(row, context), []).append(row)
    if not base:
        raise ValueError(f"baseline recipe {baseline!r} has no runs in the table; recipes: "
                         f"{sorted(set(table.column('recipe')))}")

    def partner(row):
        found = [b for b in base.get(_pair_key(row, context), ())
                 if all(row.get(c) is None or b.get(c) is None or row[c] == b[c]
                        for c in shared)]
        if len(found) > 1:
            raise ValueError(f"run {row['digest'][:16]} matches {len(found)} runs of baseline "
                             f"{baseline!r} (they differ in options it does not set); compare "
                             "needs one baseline condition per pairing")
        return found[0] if found else None

    out = []
    for rows in _groups(table.rows, cond).values():
        if rows[0]["recipe"] == baseline:
            continue
        a, b, lost = [], [], 0
        for row in rows:
            other = partner(row)
            if other is None:
                continue
            x, y = (math.nan if diverged(r) else _number(r, metric) for r in (row, other))
            if math.isfinite(x) and math.isfinite(y):
                a.append(x)
                b.append(y)
            else:
                lost += 1
        res = {c: rows[0].get(c) for c in shown}
        res.update(baseline=baseline, n=len(a), diverged=lost)
        if len(a) >= 2:
            p = stats.paired_difference(a, b, confidence=confidence)
            res.update(mean_diff=p.mean_diff, low=p.low, high=p.high, cohen_dz=p.cohen_dz,
                       t_pvalue=p.t_pvalue, wilcoxon_pvalue=p.wilcoxon_pvalue)
        else:
            res.update(mean_diff=math.nan, low=math.nan, high=math.nan, cohen_dz=math.nan,
                       t_pvalue=math.nan, wilcoxon_pvalue=math.nan)
        out.append(res)
    return out


def _pair_key(row, context) -> tuple:
    return tuple(_key(row.get(c)) for c in context) + (row["seed"],)


def plot_vs_sparsity(table, metric: str, path, *, confidence: float = 0.95,
                     method: str = "t", rng=None, log_y: bool | None = None):
    """Write :func:`vs_sparsity_figure` to ``path`` (any matplotlib format, by extension),
    atomically; returns the path."""
    from stepsim._ground.atomic import atomic_path

    fig = vs_sparsity_figure(table, metric, confidence=confidence, method=method, rng=rng,
                             log_y=log_y)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    return path


def vs_sparsity_figure(table, metric: str, *, confidence: float = 0.95, method: str = "t",
                       rng=None, log_y: bool | None = None):
    """A matplotlib Figure of ``metric`` against sparsity 1 - N/M, one line per condition.

    Lines join the mean over seeds at each sparsity, each series in its own colour, marker
    and line style (:func:`stepsim._ground.plot_style.series_style`); the error bars are the
    confidence interval (:func:`summarize`), the series' points spread a little around
    their sparsity so that no two bars overlap. Diverged runs are left out of the means and
    marked: an ``x`` near the top of the axes with their count, at their sparsity. A dense
    recipe is drawn at every N:M of the grid, as the reference. The interval is clipped to
    the metric's range
    (:func:`metric_range`), and the title says so when it was.
    log_y: logarithmic metric axis (default: when every mean is positive and they span more
    than a factor of 10).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from stepsim._ground.plot_style import series_style

    summary = summarize(table, metric, confidence=confidence, method=method, rng=rng)
    label_cols = [c for c in summary[0] if c not in ("nm", "sparsity", "n", "mean", "low",
                                                      "high", "std", "diverged")]
    lines = {}
    for row in summary:
        label = ", ".join(str(row[c]) if c == "recipe" else f"{c}={row[c]}"
                          for c in label_cols if row[c] is not None)
        lines.setdefault(label, []).append(row)
    xs = sorted({r["sparsity"] for r in summary})
    span = (xs[-1] - xs[0]) or 0.2
    # the lines' points at one sparsity are spread a little, so their bars never overlap
    dodge = min(0.015 * span, 0.3 * span / max(len(lines), 1))
    fig = Figure(figsize=(7.2, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    stacked = {}  # sparsity -> diverged notes drawn there so far
    for i, (label, rows) in enumerate(lines.items()):
        rows = sorted(rows, key=lambda r: r["sparsity"])
        shift = (i - (len(lines) - 1) / 2) * dodge
        x = [r["sparsity"] + shift for r in rows]
        mean = [r["mean"] for r in rows]
        style = series_style(i)
        ax.plot(x, mean, label=label, markersize=6, **style)
        ax.errorbar(x, mean, yerr=[[max(m - r["low"], 0) for m, r in zip(mean, rows)],
                                   [max(r["high"] - m, 0) for m, r in zip(mean, rows)]],
                    fmt="none", ecolor=style["color"], capsize=3, linewidth=1)
        for r in rows:
            if r["diverged"]:
                k = stacked[r["sparsity"]] = stacked.get(r["sparsity"], -1) + 1
                y = 0.96 - 0.06 * k
                right_half = r["sparsity"] > (xs[0] + xs[-1]) / 2
                ax.plot([r["sparsity"] + shift], [y], marker="x", color=style["color"],
                        transform=ax.get_xaxis_transform(), clip_on=False)
                ax.annotate(f"{r['diverged']} diverged", (r["sparsity"] + shift, y),
                            xycoords=ax.get_xaxis_transform(), textcoords="offset points",
                            xytext=(-6 if right_half else 6, -3), fontsize=7,
                            ha="right" if right_half else "left", color=style["color"])
    means = [r["mean"] for r in summary if math.isfinite(r["mean"])]
    if log_y is None:
        log_y = bool(means) and min(means) > 0 and max(means) > 10 * min(means)
    if log_y:
        ax.set_yscale("log")
    seeds = sorted({r["n"] for r in summary})
    pad = max(0.1 * span, 2 * dodge * len(lines))
    ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    nms = {}
    for r in summary:  # label each grid sparsity with its N:M
        nms.setdefault(r["sparsity"], set()).add(str(r.get("nm")))
    ax.set_xticks(xs, [f"{x:g}\n{' / '.join(sorted(nms[x]))}" for x in xs])
    lost = sum(r["diverged"] for r in summary)
    ax.set_xlabel("sparsity 1 - N/M (N:M)" + (f"; {lost} diverged run(s) left out, marked x"
                                               if lost else ""))
    ax.set_ylabel(metric + (" (fraction correct)" if "accuracy" in metric else ""))
    clipped = f", clipped to {summary.range_text()}" if summary.clipped else ""
    n_text = str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]} to {seeds[-1]}"
    ax.set_title(f"{metric}: mean over seeds (n={n_text}), "
                 f"{confidence:.0%} {method} CI{clipped}", fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2 if len(lines) <= 6 else 3, fontsize=8)
    return fig


def report_markdown(table, metric: str, *, baseline: str | None = "dense",
                    confidence: float = 0.95, method: str = "t", rng=None) -> str:
    """The summary table and (when the baseline ran) the paired comparisons, as markdown."""
    summary = summarize(table, metric, confidence=confidence, method=method, rng=rng)
    level = f"{confidence:.0%}"
    text = (f"### {metric}: mean over seeds, {level} CI ({method})\n\n"
            + stats.markdown_table(summary)
            + "\nsparsity is the grid's 1 - N/M (a dense recipe is the reference at each N:M); "
              "diverged counts runs left out of n: they diverged (stopped at a non-finite "
              "loss, gradient or weight) or their value is missing, NaN or inf."
            + (f" {summary.note()}." if summary.clipped else "") + "\n")
    if baseline is not None and baseline in set(table.column("recipe")):
        pairs = compare(table, metric, baseline=baseline, confidence=confidence)
        text += (f"\n### {metric}: paired difference vs {baseline} (same seeds), {level} t-CI; "
                 "effect size Cohen's d_z = mean/sd of the differences\n\n"
                 + (stats.markdown_table(pairs) if pairs else
                    f"No condition besides {baseline} to pair with it.\n"))
    if table.missing:
        text += f"\n{len(table.missing)} planned runs have no result yet.\n"
    return text
