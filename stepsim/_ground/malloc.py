"""Keep freed memory inside the process while it trains (glibc's malloc only).

A training step allocates its large temporaries (activations, gradients, attention
scores) and frees them again. glibc serves every block above its mmap threshold (128 KiB,
rising to at most 32 MiB as such blocks are freed) with a fresh ``mmap`` and returns it to
the kernel on ``free``, and it trims the top of its heap once more than the trim threshold
is free, so the next step touches fresh pages again: ~5,300 page faults a step on the
``lm`` bench model (2x128, context 64, batch 32), ~16% of its step; ~600 (22%) at the
``paper_checks/lm.md`` settings. :func:`keep_freed_memory` raises both thresholds once per
process, so freed blocks stay in the heap and the next step reuses them: page faults
drop to ~0 in steady state. The process keeps the memory of its largest step (what it
needed anyway) instead of handing it back between steps.

Results do not change: which addresses the arrays get is not part of any computation
stepsim runs (tests/cpu_digests.py gives the same digests with and without). On other C
libraries (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
KEEP_BELOW = 1 << 30  # blocks up to 1 GiB come from the heap and stay there when freed

_state: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once); True if set."""
    global _state
    if _state is None:
        _state = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except OSError:
            return False
        if not hasattr(libc, "gnu_get_libc_version"):  # glibc only: musl's does nothing
            return False
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        _state = bool(mallopt(M_MMAP_THRESHOLD, KEEP_BELOW)) and bool(
            mallopt(M_TRIM_THRESHOLD, KEEP_BELOW))
    return _state
