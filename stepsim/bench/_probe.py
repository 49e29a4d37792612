"""Bandwidth probes: streaming numba loops with a kernel's memory traffic and no work.

* ``stream_4r3w`` reads four float32 arrays (w, g, m, v) and writes three back in place
  (w, m, v): 28 bytes an element, an in-place optimizer step's pattern.
* ``stream_4r1w`` reads a float32 array and writes a fresh byte array: an N:M mask's.

Each probe's GB/s is what this machine's memory can feed a kernel with that pattern,
timed in the same run as the kernels compared with it. (A probe of another pattern would
mislead: writing fresh arrays costs read-for-ownership traffic that an in-place update
does not pay.)
"""

from __future__ import annotations

from numba import prange

from stepsim._ground.jit import njit


@njit(parallel=True)
def stream_4r3w(w, g, m, v):
    """w += g, m += g, v += g for every element (4 reads, 3 in-place writes)."""
    for i in prange(w.shape[0]):
        gi = g[i]
        w[i] += gi
        m[i] += gi
        v[i] += gi


@njit(parallel=True)
def stream_4r1w(x_bits, out):
    """out[i] = (x_bits[i] != 0): a mask's traffic (read 4 bytes, write 1) with no selection."""
    for i in prange(x_bits.shape[0]):
        out[i] = x_bits[i] != 0
