"""Progress bars for long runs, on stderr, drawn by tqdm.

``with Progress(total, "label") as bar: ... bar.update(k)`` — k units done since the last
update; the bar shows done/total, elapsed time and an ETA. It is shown only when stderr is a
terminal (or ``force=True``), so logs and CI output stay clean; the environment variable
``STEPSIM_PROGRESS=0`` turns every bar off, ``=1`` turns every bar on (it overrides
``force``'s default of None, never an explicit True/False).
"""

from __future__ import annotations

import os
import sys


def progress_enabled(force: bool | None = None, stream=None) -> bool:
    """Whether to draw a bar: ``force`` if given, else ``STEPSIM_PROGRESS``, else whether
    ``stream`` (default stderr) is a terminal."""
    if force is not None:
        return bool(force)
    env = {"0": False, "1": True}.get(os.environ.get("STEPSIM_PROGRESS", ""))
    if env is not None:
        return env
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Progress:
    """A tqdm bar over ``total`` units with ``label``; a context manager (see the module doc).

    total: units of work (at least 1). force: True/False to show/hide regardless of the
    terminal; None to decide by ``STEPSIM_PROGRESS`` and whether ``stream`` is a tty.
    stream: where to draw (default stderr). initial: units already done before this bar
    (a resumed job; the ETA counts only the rest). unit: the name of a unit in the rate.
    ``done`` counts the units so far.
    """

    def __init__(self, total: int, label: str = "", *, force: bool | None = None, stream=None,
                 initial: int = 0, unit: str = "it"):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(force, self.stream)
        self.done = min(max(int(initial), 0), self.total)
        self.unit = unit
        self._bar = None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm  # imported only when a bar is drawn

            self._bar = tqdm(total=self.total, initial=self.done, desc=self.label or None,
                             unit=self.unit, file=self.stream, mininterval=0.1,
                             dynamic_ncols=True)
        return self

    def update(self, units: int = 1) -> None:
        units = min(int(units), self.total - self.done)  # never past the total
        if units <= 0:
            return
        self.done += units
        if self._bar is not None:
            self._bar.update(units)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        return False
