"""How busy other processes kept this machine's cores while a bench row was timed.

A timing taken while other processes compete for the cores measures the competition: on
a busy 2-core machine numba's threaded Adam printed 960 ns/element against NumPy's 5,
with a narrow spread, because every repeat was slowed alike. The spread cannot see that;
the CPU time the machine spent on other work can:

    other = (busy CPU time of the cores this process may use, from /proc/stat, including
    time stolen by a hypervisor) - (CPU time of this process, its live children and its
    finished children), over the same wall-clock window,

as a fraction of those cores (0: the cores did nothing else; 1: all of them were busy with
other work). Linux only; elsewhere :meth:`LoadMeter.other` returns None and only the
spread judges a row. ``os.getloadavg`` is printed in the bench's header beside it: a
1-minute average that also counts this process.
"""

from __future__ import annotations

import os
import resource
import time

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cores() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return set(range(os.cpu_count() or 1))


def _busy_seconds(cores: set[int]) -> float | None:
    """CPU seconds the ``cores`` spent not idle since boot (user, nice, system, irq,
    softirq, steal); None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cores:
            continue
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        busy += user + nice + system + irq + softirq + steal  # idle and iowait: not busy
    return busy / _TICKS


def _process_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of stat(5)


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def own_seconds() -> float:
    """CPU seconds of this process, its live descendants (pool workers, a PyTorch peer)
    and its finished, reaped children."""
    total = _process_seconds(os.getpid())
    todo = _children(os.getpid())
    while todo:
        pid = todo.pop()
        total += _process_seconds(pid)
        todo += _children(pid)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + done.ru_utime + done.ru_stime


MIN_WINDOW_S = 1.0  # /proc/stat counts 10 ms ticks: a shorter window is too coarse


class LoadMeter:
    """``mark()`` the end of one timed window, ``other()`` the fraction of this process's
    usable cores that other work kept busy since the last mark (None where /proc/stat is
    missing). A window shorter than ``MIN_WINDOW_S`` reaches back to the latest earlier
    mark that makes it long enough: rows timed back to back share their estimate."""

    def __init__(self):
        self.cores = _cores()
        self._marks = []  # (wall, busy, own), oldest first
        self.mark()

    def mark(self) -> None:
        self._marks.append((time.perf_counter(), _busy_seconds(self.cores), own_seconds()))
        del self._marks[:-64]

    def other(self) -> float | None:
        now, busy, own = time.perf_counter(), _busy_seconds(self.cores), own_seconds()
        start = next((m for m in reversed(self._marks) if now - m[0] >= MIN_WINDOW_S),
                     self._marks[0])
        wall = now - start[0]
        if busy is None or start[1] is None or wall <= 0:
            return None
        other = (busy - start[1]) - (own - start[2])
        return min(max(other / (wall * len(self.cores)), 0.0), 1.0)


def load_average() -> float | None:
    """The 1-minute load average (processes running or waiting for a core), or None."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover
        return None
