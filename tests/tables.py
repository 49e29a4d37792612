"""Test helper: a sweep table's rows without the columns that differ between identical runs
(``Table.VOLATILE``: the runtime), to compare two tables bit for bit."""


def stable_rows(table) -> list[dict]:
    """``table.rows`` without the ``VOLATILE`` columns (equal for equal runs, bit for bit)."""
    return [{k: v for k, v in row.items() if k not in table.VOLATILE} for row in table.rows]
