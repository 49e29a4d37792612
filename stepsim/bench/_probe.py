"""Bandwidth probe: a streaming numba loop with Adam's memory traffic.

It reads 4 float32 arrays and writes 3 (28 bytes an element) and does almost no
arithmetic, so its GB/s is what this machine's memory can feed a kernel; every kernel's
GB/s is compared with it, timed in the same run.
"""

from __future__ import annotations

from numba import prange

from stepsim._jit import njit


@njit(parallel=True)
def stream_4r3w(a, b, c, d, x, y, z):
    """x = a + b, y = c + d, z = a + d for every element (4 reads, 3 writes)."""
    for i in prange(a.shape[0]):
        ai = a[i]
        di = d[i]
        x[i] = ai + b[i]
        y[i] = c[i] + di
        z[i] = ai + di
