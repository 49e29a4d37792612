"""Counter-based random numbers shared by the numba kernels and their NumPy references.

Every random number of a simulation is a pure function of (seed, trial, coordinate,
step, stream): ``u = U01(mix64(key + counter * GOLDEN))`` with
``key = stream_key(seed, trial, coordinate)`` and ``counter = 4 * step + stream``. This is
SplitMix64 (Steele, Lea & Flood 2014) read at a given position, so results do not depend
on the number of threads, on how trials are chunked, or on the order work is done in:
the same seed gives the same bits. Normals are AS 241 inverses of one uniform. Step 0 is reserved for drawing a process's initial
state; up to four streams per step keep the uniforms a process needs independent.

Streams of two (trial, coordinate) pairs are the same SplitMix64 sequence at offsets
that differ by a pseudo-random 64-bit number, so they overlap within a run of 4 * 10^5
counters with probability below 10^-4 even for 10^6 streams — negligible here.

The NumPy functions below operate on uint64 arrays (wrap-around arithmetic) and are the
references for the numba versions in ``_kernels.py``; both give identical bits.
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
SHARED_COORD = 0xFFFFFFFF  # coordinate index of a trial's shared stream (coupled processes)
STREAMS = 4  # counters per step: 4 * step + stream, stream in 0..3
TO_UNIT = 2.0**-53


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (a bijection of uint64), element-wise on a uint64 array."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))


def stream_keys(seed: int, trials: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """uint64 key of each (trial, coordinate) pair; ``trials`` and ``coords`` broadcast."""
    trials = np.asarray(trials, dtype=np.uint64)
    coords = np.asarray(coords, dtype=np.uint64)
    base = mix64(np.array([seed], dtype=np.uint64) + GOLDEN)
    with np.errstate(over="ignore"):
        per_trial = mix64(base + trials * GOLDEN)
        return mix64(per_trial + coords * GOLDEN)


def uniform(keys: np.ndarray, step, stream: int) -> np.ndarray:
    """Uniform [0, 1) doubles (53 random bits) at ``step`` (int or array broadcasting with keys)."""
    counter = np.asarray(step, dtype=np.uint64) * np.uint64(STREAMS) + np.uint64(stream)
    with np.errstate(over="ignore"):
        z = mix64(keys + counter * GOLDEN)
    return (z >> np.uint64(11)).astype(np.float64) * TO_UNIT


def uniform_open(keys: np.ndarray, step, stream: int) -> np.ndarray:
    """Uniform (0, 1) doubles: 53 random bits plus one half, never 0 or 1."""
    counter = np.asarray(step, dtype=np.uint64) * np.uint64(STREAMS) + np.uint64(stream)
    with np.errstate(over="ignore"):
        z = mix64(keys + counter * GOLDEN)
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * TO_UNIT


def normal(keys: np.ndarray, step, stream: int = 0) -> np.ndarray:
    """Standard normals by inversion (AS 241) of one open uniform from ``stream``."""
    return ndtri(uniform_open(keys, step, stream))


def ndtri(p: np.ndarray) -> np.ndarray:
    """Standard normal quantile, Wichura's AS 241 (PPND16), same operations as the kernel."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    qc = q[central]
    r = 0.180625 - qc * qc
    num = (((((((2509.0809287301226727 * r + 33430.575583588128105) * r
                + 67265.770927008700853) * r + 45921.953931549871457) * r
              + 13731.693765509461125) * r + 1971.5909503065514427) * r
            + 133.14166789178437745) * r + 3.387132872796366608)
    den = (((((((5226.495278852545925 * r + 28729.085735721942674) * r
                + 39307.89580009271061) * r + 21213.794301586595867) * r
              + 5394.1960214247511077) * r + 687.1870074920579083) * r
            + 42.313330701600911252) * r + 1.0)
    out[central] = qc * num / den
    tail = ~central
    qt = q[tail]
    r = np.sqrt(-np.log(np.where(qt < 0.0, p[tail], 1.0 - p[tail])))
    near = r <= 5.0
    value = np.empty_like(r)
    a = r[near] - 1.6
    num = (((((((7.7454501427834140764e-4 * a + 0.0227238449892691845833) * a
                + 0.24178072517745061177) * a + 1.27045825245236838258) * a
              + 3.64784832476320460504) * a + 5.7694972214606914055) * a
            + 4.6303378461565452959) * a + 1.42343711074968357734)
    den = (((((((1.05075007164441684324e-9 * a + 5.475938084995344946e-4) * a
                + 0.0151986665636164571966) * a + 0.14810397642748007459) * a
              + 0.68976733498510000455) * a + 1.6763848301838038494) * a
            + 2.05319162663775882187) * a + 1.0)
    value[near] = num / den
    b = r[~near] - 5.0
    num = (((((((2.01033439929228813265e-7 * b + 2.71155556874348757815e-5) * b
                + 0.0012426609473880784386) * b + 0.026532189526576123093) * b
              + 0.29656057182850489123) * b + 1.7848265399172913358) * b
            + 5.4637849111641143699) * b + 6.6579046435011037772)
    den = (((((((2.04426310338993978564e-15 * b + 1.4215117583164458887e-7) * b
                + 1.8463183175100546818e-5) * b + 7.868691311456132591e-4) * b
              + 0.0148753612908506148525) * b + 0.13692988092273580531) * b
            + 0.59983220655588793769) * b + 1.0)
    value[~near] = num / den
    out[tail] = np.where(qt < 0.0, -value, value)
    return out


TWO_PI = 2.0 * np.pi
