"""Guards for the bad-input rows: a cap on the address space (rows giving huge sizes), a
deadline (rows that could block on a FIFO), and stderr's error lines.
"""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def _address_space_limit(extra: int = 2 << 30):
    """Cap this process's address space at its current size + ``extra`` bytes.

    Rows that give huge sizes run under it: fixed code refuses them from an estimate
    (check_memory reads this limit), and code that still tries to allocate fails fast with
    MemoryError instead of touching gigabytes of a shared machine.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = used + extra if hard == resource.RLIM_INFINITY else min(hard, used + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def _deadline(seconds: int = 60):
    """Fail a row that hangs (a FIFO read blocks forever) instead of hanging the suite."""
    import signal

    def hung(signum, frame):
        raise AssertionError(f"no answer in {seconds} s: the command hangs")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _limit_if_huge(text: str):
    if "fifo" in text:
        return _deadline()
    huge = "memory" in text
    return _address_space_limit() if huge else contextlib.nullcontext()


def _error_lines(err: str) -> list[str]:
    """stderr's non-empty lines: a bad input must give exactly one (argparse's usage block
    is not printed: ``stepsim.cli.OneLineParser``)."""
    return [line for line in err.splitlines() if line.strip()]
