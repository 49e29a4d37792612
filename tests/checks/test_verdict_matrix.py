"""The verdict matrix: claims x problems x readings, from verdicts only."""

from __future__ import annotations

import pytest

from stepsim.checks.verdict_matrix import (
    CLAIM,
    Cell,
    compact_table,
    draw,
    figure,
    paragraphs,
    table,
)

R, NR, INC = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"


def _cells():
    return [
        Cell("C1", "digits", CLAIM, R, "+3.2 [0.5, 6.0] points"),
        Cell("C5", "digits", CLAIM, R),
        Cell("C5", "digits", "in place", NR, "-30 [-41, -20]", diverging=True),
        Cell("C5", "digits", "own", R, "+2.4 [0.2, 4.7]"),
        Cell("C5", "lm", CLAIM, INC, "no gap of the claimed size"),
        Cell("C5", "lm", "in place", INC),
        Cell("C11", "none", CLAIM, NR),
    ]


def test_table_has_a_column_per_problem_and_reading_and_marks_missing_cells():
    text = table(_cells())
    head = text.splitlines()[0]
    assert head == ("| claim | digits: claim | digits: in place | digits: own | lm: claim | "
                    "lm: in place | none: claim |")
    c1 = next(line for line in text.splitlines() if line.startswith("| C1 "))
    assert "**REPRODUCED**: +3.2 [0.5, 6.0] points" in c1 and c1.count("—") == 5
    c5 = next(line for line in text.splitlines() if line.startswith("| C5 "))
    assert "**NOT REPRODUCED**: -30 [-41, -20] (STEP diverges here)" in c5


def test_compact_table_names_the_readings_that_differ_from_the_claim():
    rows = compact_table(_cells()).splitlines()
    assert rows[0] == "| claim | digits | lm | none |"
    c5 = next(r for r in rows if r.startswith("| C5 "))
    assert "**REPRODUCED**; in place: NOT REPRODUCED |" in c5  # own agrees: not listed
    assert "| **INCONCLUSIVE** |" in c5


def test_paragraphs_say_what_holds_where():
    digits, lm, none = paragraphs(_cells())
    assert digits.startswith("**digits** — reproduced: C1, C5.")
    assert "C5 (REPRODUCED): NOT REPRODUCED at in place (STEP diverges there)" in digits
    assert lm == "**lm** — inconclusive: C5."
    assert none == "**none** — not reproduced: C11."


def test_bad_cells_are_refused():
    with pytest.raises(ValueError, match="verdict"):
        Cell("C1", "digits", CLAIM, "MAYBE")
    with pytest.raises(TypeError, match="problem"):
        Cell("C1", "", CLAIM, R)
    with pytest.raises(ValueError, match="two cells"):
        table([Cell("C1", "digits", CLAIM, R), Cell("C1", "digits", CLAIM, NR)])
    with pytest.raises(ValueError, match="no cells"):
        figure([], "unused.png")


def test_figure_is_written_and_no_label_leaves_the_canvas(tmp_path):
    import matplotlib
    import matplotlib.pyplot as plt

    path = figure(_cells(), tmp_path / "matrix.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = draw(_cells())
    try:
        fig.canvas.draw()  # the layout as saved: positions are final only after a draw
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        for text in fig.findobj(matplotlib.text.Text):
            if not text.get_visible() or not text.get_text():
                continue
            e = text.get_window_extent(renderer)
            assert (e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1 and e.y0 >= box.y0 - 1
                    and e.y1 <= box.y1 + 1), f"{text.get_text()!r} leaves the figure"
    finally:
        plt.close(fig)
