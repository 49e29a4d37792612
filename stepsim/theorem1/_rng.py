"""Counter-based random numbers shared by the numba kernels and their NumPy references.

Every random number of a simulation is a pure function of (seed, trial, coordinate,
step, stream), so results do not depend on the number of threads, on how trials are
chunked, or on the order work is done in: the same seed gives the same bits.

* ``stream_keys``: a 64-bit key per (trial, coordinate) from SplitMix64's finaliser
  (Steele, Lea & Flood 2014), computed once per stream.
* ``key_words``: three 32-bit words (mul, a, b) of each key: ``mul`` = low half | 1
  (odd), ``a`` = high half, ``b`` = high half of mix64(key + GOLDEN).
* ``bits``: one 32-bit draw at counter ``c = 4 * step + stream`` (uint32, so step <
  MAX_STEP = 2^30)::

      x = lowbias32((c * mul) ^ a);   x = half_round(x ^ b)

  with ``lowbias32`` Wellons' 32-bit integer hash (xorshift-multiply-xorshift-multiply-
  xorshift) and ``half_round`` its first half (one multiply). Everything is 32-bit, so
  the kernels hash 8 lanes per AVX2 instruction (AVX2 has no 64-bit multiply), and the
  four multiplies per draw are what a draw costs. The key enters every stage: the
  counter is scaled by a per-stream odd multiplier (a per-stream Weyl sequence), xored
  with ``a`` before the full round and with ``b`` before the half round. So streams are
  not time-shifted copies of one sequence (their Weyl steps differ), and two streams
  share their first round only if both ``mul`` and ``a`` (63 bits) coincide.
  ``tests/theorem1/test_theorem1.py`` checks uniformity, 32 fair bits, serial and cross-stream
  correlations and that neighbouring streams share no more values than chance.
* ``uniform``: ``(x ^ 2^31) / 2^32``, computed as ``(int32(x) + 2^31) * 2^-32`` (exact),
  a multiple of 2^-32 in [0, 1). 32 bits are enough here: g^2 = G u is averaged over
  ~1/(1 - beta2) >= 10^3 steps, so a 2^-32 grid changes statistics by ~10^-10, and
  probabilities p compared with u are realised to within 2^-32. ``uniform_open`` adds
  one half (never 0 or 1); its normal quantile (AS 241) stays within |z| <= 6.34, a
  truncation of the normal law's mass beyond, 2.3e-10, far below Monte-Carlo error.

Step 0 is reserved for drawing a process's initial state; up to four streams per step
keep the uniforms a process needs independent. The NumPy functions below are the
references for the numba versions in ``_kernels.py``; both give identical bits.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground import libm as _libm

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
LB1 = np.uint32(0x7FEB352D)  # lowbias32's multipliers (Wellons, "hash-prospector")
LB2 = np.uint32(0x846CA68B)
SHARED_COORD = 0xFFFFFFFF  # coordinate index of a trial's shared stream (coupled processes)
STREAMS = 4  # counters per step: 4 * step + stream, stream in 0..3
MAX_STEP = 2**30  # 4 * step + stream must fit 32 bits: steps 0 .. MAX_STEP - 1
TWO31 = 2.0**31
OPEN_OFFSET = 2.0**31 + 0.5
TO_UNIT = 2.0**-32


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


def key_words(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three uint32 words (mul, a, b) of each uint64 key (see the module docstring)."""
    keys = np.asarray(keys, dtype=np.uint64)
    mul = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32) | np.uint32(1)
    a = (keys >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        b = (mix64(keys + GOLDEN) >> np.uint64(32)).astype(np.uint32)
    return mul, a, b


def lowbias32(x: np.ndarray) -> np.ndarray:
    """Wellons' lowbias32 (a bijection of uint32), element-wise on a uint32 array."""
    x = np.asarray(x, dtype=np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * LB1
    x = x ^ (x >> np.uint32(15))
    x = x * LB2
    return x ^ (x >> np.uint32(16))


def half_round(x: np.ndarray) -> np.ndarray:
    """lowbias32's first half (xorshift, multiply, xorshift): one multiply, a bijection."""
    x = np.asarray(x, dtype=np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * LB1
    return x ^ (x >> np.uint32(15))


def counter(step, stream: int) -> np.ndarray:
    """uint32 counter 4 * step + stream; ValueError unless 0 <= step < MAX_STEP."""
    step = np.asarray(step, dtype=np.int64)
    if step.size and (step.min() < 0 or step.max() >= MAX_STEP):
        raise ValueError(f"step must be in [0, {MAX_STEP}), got {step.min()}..{step.max()}")
    return (step * STREAMS + stream).astype(np.uint32)


def bits(keys: np.ndarray, step, stream: int) -> np.ndarray:
    """uint32 draw of each key at ``step`` (int or array broadcasting with keys)."""
    mul, a, b = key_words(keys)
    c = counter(step, stream)
    with np.errstate(over="ignore"):
        x = lowbias32((c * mul) ^ a)
        return half_round(x ^ b)


def uniform(keys: np.ndarray, step, stream: int) -> np.ndarray:
    """Uniform [0, 1) doubles on the 2^-32 grid at ``step``."""
    return (bits(keys, step, stream).view(np.int32).astype(np.float64) + TWO31) * TO_UNIT


def uniform_open(keys: np.ndarray, step, stream: int) -> np.ndarray:
    """Uniform (0, 1) doubles: 32 random bits plus one half, never 0 or 1."""
    return (bits(keys, step, stream).view(np.int32).astype(np.float64) + OPEN_OFFSET) * TO_UNIT


def normal(keys: np.ndarray, step, stream: int = 0) -> np.ndarray:
    """Standard normals by inversion (AS 241) of one open uniform from ``stream``."""
    return ndtri(uniform_open(keys, step, stream))


#: Wichura's AS 241 (PPND16) rational approximations of the normal quantile, each a
#: (numerator, denominator) pair of polynomial coefficients, highest power first: the
#: central region |p - 1/2| <= 0.425 in r = 0.180625 - q^2, the tails in
#: r = sqrt(-log(min(p, 1 - p))) - 1.6 (r <= 5) and r - 5 beyond. The one copy of them:
#: :func:`ndtri` below and the kernels' ``_kernels.ndtri`` evaluate these tuples.
NDTRI_CENTRAL = ((2509.0809287301226727, 33430.575583588128105, 67265.770927008700853,
                  45921.953931549871457, 13731.693765509461125, 1971.5909503065514427,
                  133.14166789178437745, 3.387132872796366608),
                 (5226.495278852545925, 28729.085735721942674, 39307.89580009271061,
                  21213.794301586595867, 5394.1960214247511077, 687.1870074920579083,
                  42.313330701600911252, 1.0))
NDTRI_NEAR = ((7.7454501427834140764e-4, 0.0227238449892691845833, 0.24178072517745061177,
               1.27045825245236838258, 3.64784832476320460504, 5.7694972214606914055,
               4.6303378461565452959, 1.42343711074968357734),
              (1.05075007164441684324e-9, 5.475938084995344946e-4, 0.0151986665636164571966,
               0.14810397642748007459, 0.68976733498510000455, 1.6763848301838038494,
               2.05319162663775882187, 1.0))
NDTRI_FAR = ((2.01033439929228813265e-7, 2.71155556874348757815e-5, 0.0012426609473880784386,
              0.026532189526576123093, 0.29656057182850489123, 1.7848265399172913358,
              5.4637849111641143699, 6.6579046435011037772),
             (2.04426310338993978564e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5,
              7.868691311456132591e-4, 0.0148753612908506148525, 0.13692988092273580531,
              0.59983220655588793769, 1.0))


def horner(coefficients, x):
    """sum_i c_i x^(n-i) by Horner's rule, highest power first: ((c_0 x + c_1) x + ...)."""
    acc = coefficients[0] * x + coefficients[1]
    for c in coefficients[2:]:
        acc = acc * x + c
    return acc


def ndtri(p: np.ndarray) -> np.ndarray:
    """Standard normal quantile, Wichura's AS 241 (PPND16), same operations as the kernel."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    qc = q[central]
    r = 0.180625 - qc * qc
    num, den = NDTRI_CENTRAL
    out[central] = qc * horner(num, r) / horner(den, r)
    tail = ~central
    qt = q[tail]
    r = np.sqrt(-_libm.log(np.where(qt < 0.0, p[tail], 1.0 - p[tail])))
    near = r <= 5.0
    value = np.empty_like(r)
    a = r[near] - 1.6
    num, den = NDTRI_NEAR
    value[near] = horner(num, a) / horner(den, a)
    b = r[~near] - 5.0
    num, den = NDTRI_FAR
    value[~near] = horner(num, b) / horner(den, b)
    out[tail] = np.where(qt < 0.0, -value, value)
    return out


TWO_PI = 2.0 * np.pi
