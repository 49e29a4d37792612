"""Progress of long runs on stderr: a tqdm bar on a terminal, a line at a steady interval
elsewhere (a log file, a pipe, a cluster job, a CI step).

``with Progress(total, "label") as bar: ... bar.update(k)`` — k units done since the last
update. Whether and how progress shows (``force=None``, the default):

* stderr is a terminal: a tqdm bar (done/total, elapsed time, an ETA);
* otherwise: one line every ``STEPSIM_PROGRESS_INTERVAL`` seconds (default
  :data:`DEFAULT_INTERVAL_S`), e.g. ``sweep digits: 12/40 runs (30%), 1 diverged, elapsed
  2m05s, ETA 4m52s``, printed by a background thread so the lines keep their pace while a
  long unit runs, and a last line when the work ends if any line was printed (a job
  shorter than one interval prints nothing);
* ``STEPSIM_PROGRESS=0`` turns every bar and line off, ``=1`` draws a tqdm bar on any
  stream. An explicit ``force=True`` / ``False`` overrides the environment (``--quiet``
  passes False).
"""

from __future__ import annotations

import os
import sys
import threading
import time

DEFAULT_INTERVAL_S = 30.0  # between two progress lines outside a terminal
INTERVAL_VARIABLE = "STEPSIM_PROGRESS_INTERVAL"


def progress_enabled(force: bool | None = None, stream=None) -> bool:
    """Whether to draw a tqdm bar: ``force`` if given, else ``STEPSIM_PROGRESS``, else
    whether ``stream`` (default stderr) is a terminal."""
    if force is not None:
        return bool(force)
    env = {"0": False, "1": True}.get(os.environ.get("STEPSIM_PROGRESS", ""))
    if env is not None:
        return env
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def line_interval(force: bool | None = None) -> float | None:
    """Seconds between two progress lines outside a terminal, or None when no line is to
    be printed (``force`` given, or ``STEPSIM_PROGRESS`` set). Raises ValueError naming
    ``STEPSIM_PROGRESS_INTERVAL`` when it is not a positive number of seconds."""
    if force is not None or os.environ.get("STEPSIM_PROGRESS", "") in ("0", "1"):
        return None
    text = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not (seconds > 0 and seconds < float("inf")):
        raise ValueError(f"{INTERVAL_VARIABLE} must be a positive number of seconds, "
                         f"got {text!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """"4.2s" under a minute, "2m05s" under an hour, else "1h02m"."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Progress over ``total`` units with ``label``; a context manager (see the module doc).

    total: units of work (at least 1). force: True/False to draw a bar or nothing
    regardless of the terminal; None to decide by ``STEPSIM_PROGRESS`` and whether
    ``stream`` is a terminal (then lines outside one). stream: where to write (default
    stderr). initial: units already done before (a resumed job; the ETA counts only the
    rest). unit: the name of a unit ("run": "12/40 runs"). failures: the word for failed
    units (e.g. "diverged"), counted by ``update(failed=...)`` and shown in the lines and
    the bar; None: not shown. ``done`` counts the units so far, ``failed`` the failures.
    """

    def __init__(self, total: int, label: str = "", *, force: bool | None = None, stream=None,
                 initial: int = 0, unit: str = "it", failures: str | None = None):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(force, self.stream)
        self.interval = None if self.enabled else line_interval(force)
        self.done = self.initial = min(max(int(initial), 0), self.total)
        self.failed = 0
        self.unit = unit
        self.failures = failures
        self._bar = None
        self._lines = None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm  # imported only when a bar is drawn

            self._bar = tqdm(total=self.total, initial=self.done, desc=self.label or None,
                             unit=self.unit, file=self.stream, mininterval=0.1,
                             dynamic_ncols=True)
        elif self.interval is not None:
            self._lines = _Lines(self, self.interval)
        return self

    def update(self, units: int = 1, *, failed: int = 0) -> None:
        """``units`` more done, ``failed`` of them failures (see ``failures``)."""
        self.failed += max(int(failed), 0)
        units = min(int(units), self.total - self.done)  # never past the total
        if units <= 0:
            return
        self.done += units
        if self._bar is not None:
            if self.failures and failed:
                self._bar.set_postfix_str(f"{self.failed} {self.failures}", refresh=False)
            self._bar.update(units)

    def line(self, elapsed: float) -> str:
        """The progress line after ``elapsed`` seconds: label, done/total, failures,
        elapsed time and an ETA from the pace of the units done here."""
        unit = self.unit if self.total == 1 else self.unit + "s"
        parts = [f"{self.done}/{self.total} {unit} ({100 * self.done // self.total}%)"]
        if self.failures:
            parts.append(f"{self.failed} {self.failures}")
        parts.append(f"elapsed {format_duration(elapsed)}")
        here = self.done - self.initial
        if self.done >= self.total:
            parts.append("done")
        elif here > 0:
            parts.append(f"ETA {format_duration(elapsed / here * (self.total - self.done))}")
        else:
            parts.append("ETA unknown")
        return f"{self.label + ': ' if self.label else ''}{', '.join(parts)}"

    def __exit__(self, exc_type, *exc):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._lines is not None:
            self._lines.stop(final=exc_type is None)
            self._lines = None
        return False


class _Lines:
    """Prints ``progress.line()`` every ``interval`` seconds from a daemon thread until
    :meth:`stop`; the pace is the clock's, not the updates' (a unit may take minutes)."""

    def __init__(self, progress: Progress, interval: float):
        self.progress, self.interval = progress, interval
        self.start = time.monotonic()
        self.printed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepsim-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ticks = 1
        # each line is due at start + k * interval, whatever the time a line took to write
        while not self._stop.wait(max(0.0, self.start + ticks * self.interval - time.monotonic())):
            self._print()
            ticks += 1

    def _print(self) -> None:
        try:
            print(self.progress.line(time.monotonic() - self.start), file=self.progress.stream,
                  flush=True)
            self.printed += 1
        except (OSError, ValueError):  # a closed pipe or stream: progress is not the work
            self._stop.set()

    def stop(self, *, final: bool) -> None:
        self._stop.set()
        self._thread.join()
        if final and self.printed:  # a log that showed progress also shows the end
            self._print()
