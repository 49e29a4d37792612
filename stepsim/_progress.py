"""A dependency-free progress bar for long runs, written to stderr.

Shown only when stderr is a terminal (or ``force=True``), so logs and CI output stay
clean; ``STEPSIM_PROGRESS=0`` turns it off, ``=1`` forces it on.
"""

from __future__ import annotations

import os
import sys
import time


class Progress:
    """``with Progress(total, "label") as bar: ... bar.update(k)`` — k units done since last."""

    def __init__(self, total: int, label: str = "", *, force: bool | None = None, stream=None):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        env = os.environ.get("STEPSIM_PROGRESS")
        if force is None:
            force = {"0": False, "1": True}.get(env, None)
        self.enabled = force if force is not None else self.stream.isatty()
        self.done = 0
        self._start = time.perf_counter()
        self._last_draw = 0.0

    def __enter__(self):
        self._draw(final=False)
        return self

    def update(self, units: int = 1) -> None:
        self.done = min(self.done + int(units), self.total)
        now = time.perf_counter()
        if now - self._last_draw > 0.1 or self.done == self.total:
            self._draw(final=False)

    def _draw(self, final: bool) -> None:
        if not self.enabled:
            return
        self._last_draw = time.perf_counter()
        frac = self.done / self.total
        elapsed = self._last_draw - self._start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        bar = "#" * int(30 * frac)
        self.stream.write(
            f"\r{self.label} [{bar:<30}] {100 * frac:5.1f}%  {elapsed:6.1f}s elapsed"
            + (f", ~{eta:5.1f}s left" if frac > 0 and not final else "")
        )
        if final:
            self.stream.write("\n")
        self.stream.flush()

    def __exit__(self, *exc):
        self._draw(final=True)
        return False
