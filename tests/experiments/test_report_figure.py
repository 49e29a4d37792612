"""The figures of `stepsim report` and `stepsim theorem1` read right: no text cut at the
edge, series told apart beyond ten, intervals inside the metric's range (tests/figures.py
holds the checks, for every figure)."""

from __future__ import annotations

import math

import pytest

from stepsim.experiments import run_sweep
from stepsim.experiments.sweep_report import metric_range, summarize, vs_sparsity_figure
from tests.figures import assert_series_distinct, assert_text_inside, text_outside


def test_the_check_finds_a_label_cut_at_the_edge():
    """The helper itself can fail: a label pushed past the right edge is reported."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlabel("a label that is far too long to fit in a four-inch-wide figure at all")
    assert text_outside(fig)
    fig.set_layout_engine("constrained")  # the layout cannot shorten it: still cut
    assert text_outside(fig)
    ax.set_xlabel("short")
    assert_text_inside(fig)


@pytest.fixture(scope="module")
def twelve_lrs(tmp_path_factory):
    """12 series (a grid over lr) at 2 N:M, 2 seeds; lr 1e300 diverges at every point."""
    lrs = [1e-4 * 2**k for k in range(11)] + [1e300]
    spec = {"recipes": ["dense"], "nm": ["2:4", "1:8"], "steps": 3, "seeds": 2,
            "problem": {"name": "regression", "options": {"d_in": 16, "d_hidden": 8}}}
    spec["recipes"] = [{"name": "dense", "grid": {"lr": lrs}}]
    return run_sweep(spec, tmp_path_factory.mktemp("lrs"), jobs=1, progress=False)


def test_twelve_series_each_have_their_own_style_and_no_text_is_cut(twelve_lrs):
    """matplotlib's cycle repeats its ten colours: series 1 and 11 looked the same. The
    diverged notes at the rightmost sparsity stay inside the figure."""
    fig = vs_sparsity_figure(twelve_lrs, "test_loss")
    (ax,) = fig.axes
    assert len([line for line in ax.get_lines() if not line.get_label().startswith("_")]) == 12
    assert_series_distinct(ax)
    assert_text_inside(fig)
    notes = [t.get_text() for t in ax.texts]
    assert notes.count("2 diverged") == 2  # lr 1e300, at both N:M


@pytest.fixture(scope="module")
def digits_two_seeds(tmp_path_factory):
    spec = {"recipes": ["dense", "sr-ste"], "nm": ["1:8"], "steps": 20, "seeds": 2,
            "problem": {"name": "digits", "options": {"hidden": [16], "batch_size": 16}}}
    return run_sweep(spec, tmp_path_factory.mktemp("digits"), jobs=1, progress=False)


def test_an_accuracy_interval_stays_in_zero_one_and_the_figure_says_it_was_clipped(
        digits_two_seeds):
    """With 2 seeds a t-interval (t = 12.7) of accuracies ran from -4 to 5: now clipped to
    [0, 1] in the table and the figure, and both say so."""
    import numpy as np

    from stepsim import stats

    assert metric_range("test_accuracy") == (0.0, 1.0)
    assert metric_range("test_loss") == (0.0, math.inf) and metric_range("gap")[0] == -math.inf
    summary = summarize(digits_two_seeds, "test_accuracy")
    for row, rows in zip(summary, _runs_by_recipe(digits_two_seeds)):
        raw = stats.mean_ci(np.array([r["test_accuracy"] for r in rows]))
        assert row["low"] == max(raw.low, 0.0) and row["high"] == min(raw.high, 1.0)
        assert 0.0 <= row["low"] <= row["mean"] <= row["high"] <= 1.0
    assert summary.clipped >= 1  # 20 steps, 2 seeds: at least one interval reached past 1
    fig = vs_sparsity_figure(digits_two_seeds, "test_accuracy")
    (ax,) = fig.axes
    assert "clipped to [0, 1]" in ax.get_title()
    assert "(fraction correct)" in ax.get_ylabel()
    low, high = ax.get_ylim()
    assert low > -0.2 and high < 1.2
    assert_text_inside(fig)
    assert_series_distinct(ax)


def _runs_by_recipe(table):
    out = {}
    for row in table.rows:
        out.setdefault(row["recipe"], []).append(row)
    return list(out.values())


def test_the_theorem1_figure_keeps_its_text_and_legends_inside():
    from stepsim.theorem1 import check_theorem1
    from stepsim.theorem1.plot import result_figure

    result = check_theorem1("ar1", process_params={"rho": 0.99}, trials=20, dim=3,
                            horizon=300, bound="gaussian")
    fig = result_figure(result)
    assert_text_inside(fig)
    assert "(steps)" in fig.axes[0].get_xlabel() and "g²" in fig.axes[0].get_ylabel()
