"""numba kernels of the Theorem 1 checker (private; the wrappers in ``engine.py`` validate).

Two kernels, both parallel over the flattened (trial, coordinate) pairs and sequential in
time within a pair, so every pair's numbers are independent of thread count and chunking:

* ``simulate_builtin``: draws g_k^2 of a built-in process (counter-based random numbers,
  see ``_rng.py``) and runs Adam's second moment in one pass, recording
  |vhat_k - vhat_k0| at the requested lags. Nothing of size (steps x pairs) is stored.
* ``advance``: runs the same recurrence over a chunk of g_k^2 handed in by a Python
  process (the generic path), carrying v and vhat_k0 between chunks.

The recurrence, shared by both and by the NumPy reference (``engine.vhat_reference``):
``v = beta2 * v + one_m_b2 * g2`` (one_m_b2 = 1 - beta2 computed once), and at recorded
steps ``vhat = v / den[k]`` with ``den[k] = 1 - beta2**k`` built once by a running product.
``slot[k]`` says what step k records: -1 nothing, -2 vhat_k0, i >= 0 lag number i.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from stepsim._jit import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
SH30 = np.uint64(30)
SH27 = np.uint64(27)
SH31 = np.uint64(31)
SH11 = np.uint64(11)
STREAMS = np.uint64(4)
SHARED_COORD = np.uint64(0xFFFFFFFF)
TO_UNIT = 2.0**-53
TWO_PI = 2.0 * np.pi
INV_SQRT2 = 1.0 / np.sqrt(2.0)


@njit
def mix64(z):
    z = (z ^ (z >> SH30)) * MIX1
    z = (z ^ (z >> SH27)) * MIX2
    return z ^ (z >> SH31)


@njit
def stream_key(seed, trial, coord):
    """seed, trial, coord: uint64. Same as ``_rng.stream_keys``."""
    base = mix64(seed + GOLDEN)
    return mix64(mix64(base + trial * GOLDEN) + coord * GOLDEN)


@njit
def uniform(key, step, stream):
    """step: int64 >= 0; stream: 0..3. Uniform [0, 1) double."""
    counter = np.uint64(step) * STREAMS + np.uint64(stream)
    z = mix64(key + counter * GOLDEN)
    # z >> 11 < 2^53 fits int64: the signed conversion is one instruction, the unsigned
    # one a branchy sequence (measured ~1.4x faster overall); both are exact
    return np.float64(np.int64(z >> SH11)) * TO_UNIT


@njit
def uniform_open(key, step, stream):
    """Uniform (0, 1) double: 53 random bits plus one half, never 0 or 1."""
    counter = np.uint64(step) * STREAMS + np.uint64(stream)
    z = mix64(key + counter * GOLDEN)
    return (np.float64(np.int64(z >> SH11)) + 0.5) * TO_UNIT


@njit
def ndtri(p):
    """Standard normal quantile, Wichura's AS 241 (PPND16, relative error ~1e-16)."""
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        num = (((((((2509.0809287301226727 * r + 33430.575583588128105) * r
                    + 67265.770927008700853) * r + 45921.953931549871457) * r
                  + 13731.693765509461125) * r + 1971.5909503065514427) * r
                + 133.14166789178437745) * r + 3.387132872796366608)
        den = (((((((5226.495278852545925 * r + 28729.085735721942674) * r
                    + 39307.89580009271061) * r + 21213.794301586595867) * r
                  + 5394.1960214247511077) * r + 687.1870074920579083) * r
                + 42.313330701600911252) * r + 1.0)
        return q * num / den
    r = p if q < 0.0 else 1.0 - p
    r = math.sqrt(-math.log(r))
    if r <= 5.0:
        r = r - 1.6
        num = (((((((7.7454501427834140764e-4 * r + 0.0227238449892691845833) * r
                    + 0.24178072517745061177) * r + 1.27045825245236838258) * r
                  + 3.64784832476320460504) * r + 5.7694972214606914055) * r
                + 4.6303378461565452959) * r + 1.42343711074968357734)
        den = (((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r
                    + 0.0151986665636164571966) * r + 0.14810397642748007459) * r
                  + 0.68976733498510000455) * r + 1.6763848301838038494) * r
                + 2.05319162663775882187) * r + 1.0)
    else:
        r = r - 5.0
        num = (((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r
                    + 0.0012426609473880784386) * r + 0.026532189526576123093) * r
                  + 0.29656057182850489123) * r + 1.7848265399172913358) * r
                + 5.4637849111641143699) * r + 6.6579046435011037772)
        den = (((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r
                    + 1.8463183175100546818e-5) * r + 7.868691311456132591e-4) * r
                  + 0.0148753612908506148525) * r + 0.13692988092273580531) * r
                + 0.59983220655588793769) * r + 1.0)
    value = num / den
    return -value if q < 0.0 else value


@njit
def normal(key, step, stream):
    """Standard normal by inversion of one open uniform (one stream)."""
    return ndtri(uniform_open(key, step, stream))


# ---------------------------------------------------------------------------------------
# Built-in processes. The recurrence of one (trial, coordinate) pair is a serial chain
# (multiply, add: ~6 cycles a step), so the kernel runs LANES pairs side by side: each
# work item fills a block of g^2 for its lanes (BLOCK steps x LANES, one process dispatch
# per block, not per step), then advances the lanes' recurrences over the block — the
# inner loop over lanes is independent work the CPU (and LLVM's vectoriser) overlaps.
# Each lane performs exactly the operations of the one-pair reference, in the same order.
# ---------------------------------------------------------------------------------------

LANES = 8  # simulate_builtin writes its eight lanes out by hand
BLOCK = 128

UNIFORM, TWOPOINT, RADEMACHER, CLIPPED_GAUSSIAN, SPIKES, AR1, REGIME, SINE, DRIFT, DECAY = (
    range(10))
PROCESS_IDS = {
    "uniform": UNIFORM, "twopoint": TWOPOINT, "rademacher": RADEMACHER,
    "clipped_gaussian": CLIPPED_GAUSSIAN, "spikes": SPIKES, "ar1": AR1, "regime": REGIME,
    "sine": SINE, "drift": DRIFT, "decay": DECAY,
}


@njit
def initial_state(pid, p, key, skey):
    """A process's state at step 0, drawn from its stationary law with step-0 counters."""
    if pid == AR1:
        return normal(key, 0, 0)  # x_0 ~ N(0, 1)
    if pid == REGIME:
        chain = skey if p[2] != 0.0 else key  # shared: one chain per trial
        return 1.0 if uniform(chain, 0, 2) < 0.5 else 0.0  # P(state = 1) = 1/2
    if pid == SINE:
        return TWO_PI * uniform(key, 0, 0)  # the phase
    return 0.0


@njit
def fill(pid, p, G, keys, skeys, x, k_first, n, buf):
    """buf[j, l] = g^2 of lane l at step k_first + j, j < n; x (LANES,) is the state.

    Mirrors the NumPy implementations in processes.py operation for operation.
    """
    lanes = LANES
    if pid == UNIFORM:
        for j in range(n):
            for lane in range(lanes):
                buf[j, lane] = G * uniform(keys[lane], k_first + j, 0)
    elif pid == TWOPOINT:
        for j in range(n):
            for lane in range(lanes):
                # branch-free select (a coin-flip branch mispredicts half the time);
                # exact: gives 1.0 or p[1] bit for bit, as np.where does
                b = 1.0 if uniform(keys[lane], k_first + j, 0) < p[0] else 0.0
                buf[j, lane] = G * (b * 1.0 + (1.0 - b) * p[1])
    elif pid == RADEMACHER:  # g = +-sqrt(G): g^2 = G whatever the sign
        for j in range(n):
            for lane in range(lanes):
                buf[j, lane] = G * 1.0
    elif pid == CLIPPED_GAUSSIAN:
        for j in range(n):
            for lane in range(lanes):
                y = min(max(p[0] + p[1] * normal(keys[lane], k_first + j, 0), -1.0), 1.0)
                buf[j, lane] = G * (y * y)
    elif pid == SPIKES:
        for j in range(n):
            for lane in range(lanes):
                k = k_first + j
                if uniform(keys[lane], k, 0) < p[0]:
                    u = 1.0
                else:
                    u = p[1] * uniform(keys[lane], k, 1)
                buf[j, lane] = G * u
    elif pid == AR1:
        for j in range(n):
            for lane in range(lanes):
                x[lane] = p[0] * x[lane] + p[1] * normal(keys[lane], k_first + j, 0)
                buf[j, lane] = G * (0.5 * math.erfc(-x[lane] * INV_SQRT2))
    elif pid == REGIME:
        for j in range(n):
            for lane in range(lanes):
                k = k_first + j
                chain = skeys[lane] if p[2] != 0.0 else keys[lane]
                if uniform(chain, k, 2) < p[0]:
                    x[lane] = 1.0 - x[lane]
                scale = 1.0 if x[lane] != 0.0 else p[1]
                buf[j, lane] = G * (scale * uniform(keys[lane], k, 0))
    elif pid == SINE:
        for j in range(n):
            for lane in range(lanes):
                angle = x[lane] + TWO_PI * (k_first + j) / p[0]
                buf[j, lane] = G * (0.5 * (1.0 + math.sin(angle)))
    elif pid == DRIFT:
        for j in range(n):
            ramp = min(1.0, (k_first + j) / p[0])
            for lane in range(lanes):
                buf[j, lane] = G * (ramp * uniform(keys[lane], k_first + j, 0))
    elif pid == DECAY:
        for j in range(n):
            scale = math.exp(-(k_first + j) / p[0])
            for lane in range(lanes):
                buf[j, lane] = G * (scale * uniform(keys[lane], k_first + j, 0))


@njit
def store(out, w, n_pairs, dim, s, vhat, vk0):
    """out[pair, s] = |vhat[lane] - vk0[lane]| for the real pairs of work item w."""
    for lane in range(LANES):
        pair = w * LANES + lane
        if pair < n_pairs:
            out[pair // dim, pair % dim, s] = abs(vhat[lane] - vk0[lane])


@njit(parallel=True)
def simulate_builtin(pid, p, G, seed, trial0, slot, den, beta2, one_m_b2, out, g2max):
    """out[t, c, i] = |vhat_{k0+lag_i} - vhat_k0| for trials trial0 + t and coordinates c.

    pid: int64 process id (PROCESS_IDS); p: float64 (4,) parameters; G, beta2, one_m_b2:
    float64; seed, trial0: uint64; slot: int64 (k_end + 1,); den: float64 (k_end + 1,);
    out: float64 (trials, dim, n_lags); g2max: float64 (trials, dim) <- largest g^2 drawn.
    Work item w runs the flattened pairs w*LANES .. w*LANES + 7 (pair = t*dim + c); lanes
    past the last pair repeat it and are not stored. The eight recurrences are written out
    as scalars (v0..v7) so they live in registers: kept in arrays, each step paid a
    store-to-load round trip and the kernel ran ~4x slower.
    """
    dim = out.shape[1]
    n_pairs = out.shape[0] * dim
    k_end = slot.shape[0] - 1
    for w in prange((n_pairs + LANES - 1) // LANES):
        keys = np.empty(LANES, dtype=np.uint64)
        skeys = np.empty(LANES, dtype=np.uint64)
        x = np.empty(LANES)
        vhat = np.empty(LANES)
        vk0 = np.zeros(LANES)
        buf = np.empty((BLOCK, LANES))
        for lane in range(LANES):
            pair = min(w * LANES + lane, n_pairs - 1)
            trial = trial0 + np.uint64(pair // dim)
            keys[lane] = stream_key(seed, trial, np.uint64(pair % dim))
            skeys[lane] = stream_key(seed, trial, SHARED_COORD)
            x[lane] = initial_state(pid, p, keys[lane], skeys[lane])
        v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = 0.0
        m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = 0.0
        for k_first in range(1, k_end + 1, BLOCK):
            n = min(BLOCK, k_end + 1 - k_first)
            fill(pid, p, G, keys, skeys, x, k_first, n, buf)
            for j in range(n):
                g0, g1, g2, g3 = buf[j, 0], buf[j, 1], buf[j, 2], buf[j, 3]
                g4, g5, g6, g7 = buf[j, 4], buf[j, 5], buf[j, 6], buf[j, 7]
                m0, m1, m2, m3 = max(m0, g0), max(m1, g1), max(m2, g2), max(m3, g3)
                m4, m5, m6, m7 = max(m4, g4), max(m5, g5), max(m6, g6), max(m7, g7)
                v0 = beta2 * v0 + one_m_b2 * g0
                v1 = beta2 * v1 + one_m_b2 * g1
                v2 = beta2 * v2 + one_m_b2 * g2
                v3 = beta2 * v3 + one_m_b2 * g3
                v4 = beta2 * v4 + one_m_b2 * g4
                v5 = beta2 * v5 + one_m_b2 * g5
                v6 = beta2 * v6 + one_m_b2 * g6
                v7 = beta2 * v7 + one_m_b2 * g7
                k = k_first + j
                s = slot[k]
                if s != -1:
                    d = den[k]
                    vhat[0], vhat[1], vhat[2], vhat[3] = v0 / d, v1 / d, v2 / d, v3 / d
                    vhat[4], vhat[5], vhat[6], vhat[7] = v4 / d, v5 / d, v6 / d, v7 / d
                    if s == -2:
                        vk0[:] = vhat
                    else:
                        store(out, w, n_pairs, dim, s, vhat, vk0)
        gmax = (m0, m1, m2, m3, m4, m5, m6, m7)
        for lane in range(LANES):
            pair = w * LANES + lane
            if pair < n_pairs:
                g2max[pair // dim, pair % dim] = gmax[lane]


@njit(parallel=True)
def advance(g2, k_first, slot, den, beta2, one_m_b2, v, vk0, out):
    """Run the recurrence over g2 (n_steps, n) for steps k_first.., updating v, vk0 (n,).

    out: float64 (n, n_lags). Parallel over blocks of columns; each block walks the chunk
    row by row so reads stay contiguous.
    """
    n_steps, n = g2.shape
    block = 256
    n_blocks = (n + block - 1) // block
    for b in prange(n_blocks):
        lo = b * block
        hi = min(n, lo + block)
        for j in range(n_steps):
            k = k_first + j
            s = slot[k]
            d = den[k]
            for i in range(lo, hi):
                vi = beta2 * v[i] + one_m_b2 * g2[j, i]
                v[i] = vi
                if s >= 0:
                    out[i, s] = abs(vi / d - vk0[i])
                elif s == -2:
                    vk0[i] = vi / d
