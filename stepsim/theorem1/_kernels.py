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

from stepsim._ground.jit import njit
from stepsim.theorem1._rng import (  # the references' constants, one copy
    GOLDEN,
    LB1,
    LB2,
    MIX1,
    MIX2,
    NDTRI_CENTRAL,
    NDTRI_FAR,
    NDTRI_NEAR,
    OPEN_OFFSET,
    TO_UNIT,
    TWO31,
    TWO_PI,
)

SH30 = np.uint64(30)
SH27 = np.uint64(27)
SH31 = np.uint64(31)
SH32 = np.uint64(32)
LOW32 = np.uint64(0xFFFFFFFF)
S15 = np.uint32(15)
S16 = np.uint32(16)
ONE32 = np.uint32(1)
FOUR32 = np.uint32(4)
STREAMS = np.uint64(4)
SHARED_COORD = np.uint64(0xFFFFFFFF)  # _rng's, as the kernels' uint64
INV_SQRT2 = 1.0 / np.sqrt(2.0)
(CENTRAL_NUM, CENTRAL_DEN), (NEAR_NUM, NEAR_DEN), (FAR_NUM, FAR_DEN) = (
    NDTRI_CENTRAL, NDTRI_NEAR, NDTRI_FAR)  # tuples: numba freezes them as constants
U32 = np.uint32  # every 32-bit operation is wrapped in U32(...): numba widens uint32
# arithmetic to 64 bits; the truncation tells LLVM that 32-bit instructions suffice


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
def key_words(key):
    """(mul, a, b) uint32 words of a uint64 key. Same as ``_rng.key_words``."""
    mul = U32(U32(key & LOW32) | ONE32)
    return mul, U32(key >> SH32), U32(mix64(key + GOLDEN) >> SH32)


@njit
def lowbias32(x):
    x = U32(x ^ (x >> S16))
    x = U32(x * LB1)
    x = U32(x ^ (x >> S15))
    x = U32(x * LB2)
    return U32(x ^ (x >> S16))


@njit
def half_round(x):
    x = U32(x ^ (x >> S16))
    x = U32(x * LB1)
    return U32(x ^ (x >> S15))


@njit
def hash32(c, mul, a, b):
    """The uint32 draw at counter c of the stream with words (mul, a, b) (see _rng)."""
    return half_round(U32(lowbias32(U32(U32(c * mul) ^ a)) ^ b))


@njit
def to_uniform(x):
    """uint32 -> [0, 1) double, exact: int32 -> double is one AVX2 instruction."""
    return (np.float64(np.int32(x)) + TWO31) * TO_UNIT


@njit
def to_uniform_open(x):
    return (np.float64(np.int32(x)) + OPEN_OFFSET) * TO_UNIT


@njit
def draw(key, step, stream):
    """uint32 draw of a uint64 key at step (int64, 0 <= step < 2^30), stream 0..3."""
    mul, a, b = key_words(key)
    return hash32(U32(step * 4 + stream), mul, a, b)


@njit
def uniform(key, step, stream):
    """Uniform [0, 1) double (32 random bits)."""
    return to_uniform(draw(key, step, stream))


@njit
def uniform_open(key, step, stream):
    """Uniform (0, 1) double: 32 random bits plus one half, never 0 or 1."""
    return to_uniform_open(draw(key, step, stream))


@njit(inline="always")
def horner(c, x):
    """_rng.horner: ((c_0 x + c_1) x + ...) + c_7 for an 8-coefficient tuple."""
    acc = c[0] * x + c[1]
    for i in range(2, len(c)):
        acc = acc * x + c[i]
    return acc


@njit
def ndtri(p):
    """Standard normal quantile, Wichura's AS 241 (PPND16, relative error ~1e-16): the
    coefficients of ``_rng`` (NDTRI_CENTRAL, NDTRI_NEAR, NDTRI_FAR), its operations."""
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * horner(CENTRAL_NUM, r) / horner(CENTRAL_DEN, r)
    r = p if q < 0.0 else 1.0 - p
    r = math.sqrt(-math.log(r))
    if r <= 5.0:
        r = r - 1.6
        value = horner(NEAR_NUM, r) / horner(NEAR_DEN, r)
    else:
        r = r - 5.0
        value = horner(FAR_NUM, r) / horner(FAR_DEN, r)
    return -value if q < 0.0 else value


@njit
def normal(key, step, stream):
    """Standard normal by inversion of one open uniform (one stream)."""
    return ndtri(uniform_open(key, step, stream))


# ---------------------------------------------------------------------------------------
# Built-in processes. A work item runs up to LANES (trial, coordinate) pairs side by side,
# in blocks of BLOCK steps, in three loops that LLVM vectorises across lanes (the lane loop
# is innermost and each lane's work is independent):
#   1. fill_bits: the uint32 draws of a block (8 lanes per AVX2 instruction);
#   2. fill: the process turns them into g^2 (float64, BLOCK x LANES: 32 KiB, in L1);
#   3. advance_block: the recurrence, v[lane] and the running max of g^2
#      (advance_uniform does 2 and 3 in one loop for the uniform process).
# Long lane loops amortise the per-step work (slot check, loop set-up): 256 lanes ran
# faster than 64. Each lane performs exactly the operations of the one-pair
# NumPy reference, in order.
# ---------------------------------------------------------------------------------------

LANES = 256
BLOCK = 16

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
def fill_bits(bits, words, k_first, stream, n):
    """bits[j, l] = draw of lane l (words: uint32 (3, lanes)) at step k_first + j, j < n."""
    mul, a, b = words[0], words[1], words[2]
    c0 = U32(k_first * 4 + stream)
    for j in range(n):
        c = U32(c0 + U32(FOUR32 * U32(j)))
        for lane in range(bits.shape[1]):
            bits[j, lane] = hash32(c, mul[lane], a[lane], b[lane])


@njit
def fill(pid, p, G, words, cwords, x, k_first, n, bits, bits2, buf):
    """buf[j, l] = g^2 of lane l at step k_first + j, j < n; x (lanes,) is the state.

    words: the lanes' key words; cwords: those of the regime chain. Mirrors the NumPy
    implementations in processes.py operation for operation.
    """
    lanes = buf.shape[1]
    if pid == RADEMACHER:  # g = +-sqrt(G): g^2 = G whatever the sign
        for j in range(n):
            for lane in range(lanes):
                buf[j, lane] = G * 1.0
        return
    if pid == SINE:
        for j in range(n):
            for lane in range(lanes):
                angle = x[lane] + TWO_PI * (k_first + j) / p[0]
                buf[j, lane] = G * (0.5 * (1.0 + math.sin(angle)))
        return
    fill_bits(bits, words, k_first, 0, n)
    if pid == UNIFORM:
        for j in range(n):
            for lane in range(lanes):
                buf[j, lane] = G * to_uniform(bits[j, lane])
    elif pid == TWOPOINT:
        for j in range(n):
            for lane in range(lanes):
                # branch-free select (a coin-flip branch mispredicts half the time);
                # exact: gives 1.0 or p[1] bit for bit, as np.where does
                b = 1.0 if to_uniform(bits[j, lane]) < p[0] else 0.0
                buf[j, lane] = G * (b * 1.0 + (1.0 - b) * p[1])
    elif pid == CLIPPED_GAUSSIAN:
        for j in range(n):
            for lane in range(lanes):
                z = ndtri(to_uniform_open(bits[j, lane]))
                y = min(max(p[0] + p[1] * z, -1.0), 1.0)
                buf[j, lane] = G * (y * y)
    elif pid == SPIKES:
        fill_bits(bits2, words, k_first, 1, n)
        for j in range(n):
            for lane in range(lanes):
                spike = to_uniform(bits[j, lane]) < p[0]
                u = 1.0 if spike else p[1] * to_uniform(bits2[j, lane])
                buf[j, lane] = G * u
    elif pid == AR1:
        for j in range(n):
            for lane in range(lanes):
                x[lane] = p[0] * x[lane] + p[1] * ndtri(to_uniform_open(bits[j, lane]))
                buf[j, lane] = G * (0.5 * math.erfc(-x[lane] * INV_SQRT2))
    elif pid == REGIME:
        fill_bits(bits2, cwords, k_first, 2, n)
        for j in range(n):
            for lane in range(lanes):
                if to_uniform(bits2[j, lane]) < p[0]:
                    x[lane] = 1.0 - x[lane]
                scale = 1.0 if x[lane] != 0.0 else p[1]
                buf[j, lane] = G * (scale * to_uniform(bits[j, lane]))
    elif pid == DRIFT:
        for j in range(n):
            ramp = min(1.0, (k_first + j) / p[0])
            for lane in range(lanes):
                buf[j, lane] = G * (ramp * to_uniform(bits[j, lane]))
    elif pid == DECAY:
        for j in range(n):
            scale = math.exp(-(k_first + j) / p[0])
            for lane in range(lanes):
                buf[j, lane] = G * (scale * to_uniform(bits[j, lane]))


@njit
def two_steps(lane, g0, g1, beta2, one_m_b2, v, gmax):
    """Steps k, k+1 of one lane: v[lane] and gmax[lane] are loaded and stored once."""
    m = gmax[lane]
    # max() is a compare-select, one vmaxpd (g is never NaN); its stored value is not a select
    # of the loaded one, which LLVM would emit as a masked store (microcoded on AMD)
    m = max(g0, m)
    gmax[lane] = max(g1, m)
    x = beta2 * v[lane] + one_m_b2 * g0
    v[lane] = beta2 * x + one_m_b2 * g1


@njit
def one_step(lane, g, beta2, one_m_b2, v, gmax):
    gmax[lane] = np.maximum(gmax[lane], g)
    v[lane] = beta2 * v[lane] + one_m_b2 * g


@njit
def record(s, k, den, v, vk0, out, first):
    """Step k's record (slot s): vhat_k0 into vk0, or |vhat_k - vhat_k0| into out."""
    dim = out.shape[1]
    if s == -2:
        for lane in range(v.shape[0]):
            vk0[lane] = v[lane] / den[k]
    elif s >= 0:
        for lane in range(v.shape[0]):
            pair = first + lane
            out[pair // dim, pair % dim, s] = abs(v[lane] / den[k] - vk0[lane])


@njit
def advance_block(buf, n, k_first, slot, den, beta2, one_m_b2, v, vk0, gmax, out, first):
    """The recurrence over buf[:n] (g^2) for the lanes of pairs first.. (simulate_builtin).

    Two steps per pass over the lanes wherever the first of them records nothing (fewer
    loads and stores of v and gmax); the same operations in the same order as one step
    at a time.
    """
    j = 0
    while j < n:
        k = k_first + j
        if j + 1 < n and slot[k] == -1:
            for lane in range(buf.shape[1]):
                two_steps(lane, buf[j, lane], buf[j + 1, lane], beta2, one_m_b2, v, gmax)
            j += 2
            k += 1
        else:
            for lane in range(buf.shape[1]):
                one_step(lane, buf[j, lane], beta2, one_m_b2, v, gmax)
            j += 1
        record(slot[k], k, den, v, vk0, out, first)


@njit
def advance_uniform(bits, G, n, k_first, slot, den, beta2, one_m_b2, v, vk0, gmax, out,
                    first):
    """``advance_block`` for the uniform process, g^2 = G * to_uniform(bits) computed in
    the loop (no pass through buf: ~10% faster); same values as fill + advance_block."""
    j = 0
    while j < n:
        k = k_first + j
        if j + 1 < n and slot[k] == -1:
            for lane in range(bits.shape[1]):
                two_steps(lane, G * to_uniform(bits[j, lane]), G * to_uniform(bits[j + 1, lane]),
                          beta2, one_m_b2, v, gmax)
            j += 2
            k += 1
        else:
            for lane in range(bits.shape[1]):
                one_step(lane, G * to_uniform(bits[j, lane]), beta2, one_m_b2, v, gmax)
            j += 1
        record(slot[k], k, den, v, vk0, out, first)


@njit(parallel=True)
def simulate_builtin(pid, p, G, seed, trial0, slot, den, beta2, one_m_b2, out, g2max):
    """out[t, c, i] = |vhat_{k0+lag_i} - vhat_k0| for trials trial0 + t and coordinates c.

    pid: int64 process id (PROCESS_IDS); p: float64 (4,) parameters; G, beta2, one_m_b2:
    float64; seed, trial0: uint64; slot: int64 (k_end + 1,); den: float64 (k_end + 1,);
    out: float64 (trials, dim, n_lags); g2max: float64 (trials, dim) <- largest g^2 drawn.
    Work item w runs the flattened pairs w*LANES .. min(w*LANES + LANES, n_pairs) - 1
    (pair = t*dim + c); its arrays have one column per pair it runs.
    """
    dim = out.shape[1]
    n_pairs = out.shape[0] * dim
    k_end = slot.shape[0] - 1
    for w in prange((n_pairs + LANES - 1) // LANES):
        first = w * LANES
        lanes = min(LANES, n_pairs - first)
        words = np.empty((3, lanes), dtype=np.uint32)
        cwords = np.empty((3, lanes), dtype=np.uint32)
        x = np.empty(lanes)
        v = np.zeros(lanes)
        vk0 = np.zeros(lanes)
        gmax = np.zeros(lanes)
        bits = np.empty((BLOCK, lanes), dtype=np.uint32)
        bits2 = np.empty((BLOCK, lanes), dtype=np.uint32)
        buf = np.empty((BLOCK, lanes))
        for lane in range(lanes):
            pair = first + lane
            trial = trial0 + np.uint64(pair // dim)
            key = stream_key(seed, trial, np.uint64(pair % dim))
            skey = stream_key(seed, trial, SHARED_COORD)
            words[0, lane], words[1, lane], words[2, lane] = key_words(key)
            chain = skey if pid == REGIME and p[2] != 0.0 else key
            cwords[0, lane], cwords[1, lane], cwords[2, lane] = key_words(chain)
            x[lane] = initial_state(pid, p, key, skey)
        for k_first in range(1, k_end + 1, BLOCK):
            n = min(BLOCK, k_end + 1 - k_first)
            if pid == UNIFORM:
                fill_bits(bits, words, k_first, 0, n)
                advance_uniform(bits, G, n, k_first, slot, den, beta2, one_m_b2, v, vk0, gmax,
                                out, first)
            else:
                fill(pid, p, G, words, cwords, x, k_first, n, bits, bits2, buf)
                advance_block(buf, n, k_first, slot, den, beta2, one_m_b2, v, vk0, gmax, out,
                              first)
        for lane in range(lanes):
            pair = first + lane
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
