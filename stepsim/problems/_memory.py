"""Refuse a problem whose arrays could not fit in memory, before allocating any of them.

A local estimate (until a shared ``stepsim._validate.check_memory`` exists): the limit is
half the machine's physical memory, so a typo such as ``width=1_000_000`` is a clear
ValueError instead of a swap storm or a MemoryError deep inside NumPy.
"""

from __future__ import annotations

import os


def physical_memory() -> int | None:
    """Bytes of physical memory, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(what: str, nbytes: int, *, limit: int | None = None) -> None:
    """Raise ValueError if ``what`` needs more than ``limit`` bytes (default: half the RAM)."""
    if limit is None:
        total = physical_memory()
        if total is None:
            return
        limit = total // 2
    if nbytes > limit:
        raise ValueError(f"{what} needs about {nbytes / 2**30:.2f} GiB, more than the "
                         f"{limit / 2**30:.2f} GiB allowed (half the physical memory); "
                         f"choose smaller sizes")
