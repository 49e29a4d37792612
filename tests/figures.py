"""Checks a reader would make of a figure, for every test that renders one.

* :func:`text_outside` / :func:`assert_text_inside` — no text (title, axis label, tick
  label, legend entry, annotation, footer) is cut at the figure's edge: every visible text
  artist's bounding box, as drawn, lies inside the figure;
* :func:`assert_series_distinct` — every line or marker series of an axes has its own
  (colour, marker, line style), so a legend of more than ten series still tells them apart.

Pass the :class:`matplotlib.figure.Figure` exactly as it is saved (the plotting function's
figure builder, before ``savefig``).
"""

from __future__ import annotations


def _renderer(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def text_outside(fig, *, tolerance_px: float = 1.0) -> list[str]:
    """The visible, non-empty texts of ``fig`` whose drawn bounding box leaves the figure
    (by more than ``tolerance_px`` pixels), each as "'TEXT' at (x0, y0, x1, y1) outside
    (0, 0, W, H)"."""
    from matplotlib.text import Text

    renderer = _renderer(fig)
    width, height = fig.bbox.width, fig.bbox.height
    undrawn = _undrawn_tick_labels(fig)
    out = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or id(text) in undrawn:
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        box = text.get_window_extent(renderer)
        if (box.x0 < -tolerance_px or box.y0 < -tolerance_px
                or box.x1 > width + tolerance_px or box.y1 > height + tolerance_px):
            out.append(f"{text.get_text()!r} at ({box.x0:.0f}, {box.y0:.0f}, {box.x1:.0f}, "
                       f"{box.y1:.0f}) outside (0, 0, {width:.0f}, {height:.0f})")
    return out


def _undrawn_tick_labels(fig) -> set[int]:
    """ids of the tick labels matplotlib keeps but does not draw: their tick lies outside
    its axis's view interval."""
    out = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * max(abs(low), abs(high), 1.0)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= tick.get_loc() <= high + slack:
                    out.update((id(tick.label1), id(tick.label2)))
    return out


def assert_text_inside(fig) -> None:
    """Fail, listing them, if any text of ``fig`` is cut at its edge."""
    outside = text_outside(fig)
    assert not outside, "text cut at the figure's edge: " + "; ".join(outside)


def series_styles(ax) -> list[tuple]:
    """(colour, marker, line style) of every labelled line of ``ax`` (legend entries)."""
    from matplotlib.colors import to_hex

    return [(to_hex(line.get_color()), line.get_marker(), line.get_linestyle())
            for line in ax.get_lines() if not line.get_label().startswith("_")]


def assert_series_distinct(ax) -> None:
    """Fail if two labelled series of ``ax`` share colour, marker and line style."""
    styles = series_styles(ax)
    assert len(set(styles)) == len(styles), f"series share a style: {styles}"
