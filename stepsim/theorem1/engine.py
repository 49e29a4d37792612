"""Monte-Carlo engine: Adam's second moment under a gradient process, |vhat_k - vhat_k0|.

For every trial and coordinate, from v_0 = 0 (SPEC section 1)::

    v_k = beta2 v_{k-1} + (1 - beta2) g_k^2,     vhat_k = v_k / (1 - beta2^k),

run to step k0 + max(lags) and record ``|vhat_{k0+lag} - vhat_{k0}|`` at each lag.
``simulate`` returns those statistics as float64 (trials, dim, n_lags).

Engines: ``"numba"`` (default) fuses sampling and recurrence for built-in processes
(parallel over trial x coordinate pairs; counter-based random numbers, so the bits do
not depend on thread count or chunking), and for any other process feeds its chunks of
g^2 through a numba recurrence; ``"numpy"`` is the plain NumPy reference (the process's
NumPy ``sample`` and a vectorised recurrence), used by the tests and the bench.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from stepsim._ground import libm as _libm
from stepsim._ground.validate import check_choice, check_int, check_real
from stepsim.theorem1._rng import MAX_STEP
from stepsim.theorem1.processes import BuiltinProcess, check_process, make_process, process_name

CHUNK_BYTES = 32 << 20  # g^2 chunk size of the generic path (bytes)


def k0_statement(beta2: float) -> int:
    """Smallest integer k0 > log_{beta2}(1 - 1/sqrt(2)) (the theorem's statement)."""
    beta2 = check_beta2(beta2)
    return math.floor(math.log(1.0 - 1.0 / math.sqrt(2.0)) / math.log(beta2)) + 1


def k0_proof(beta2: float) -> int:
    """Smallest integer k0 > log(1/2) / log(beta2) (the constant written in the proof)."""
    beta2 = check_beta2(beta2)
    return math.floor(math.log(0.5) / math.log(beta2)) + 1


def lag_grid(horizon: int, per_decade: int = 8) -> np.ndarray:
    """Log-spaced integer lags 1 .. horizon (int64, increasing), with every power of 10."""
    horizon = check_int("horizon", horizon, minimum=1)
    per_decade = check_int("per_decade", per_decade, minimum=1)
    n = max(2, round(per_decade * math.log10(horizon)) + 1)
    lags = np.round(_libm.logspace(0.0, math.log10(horizon), n)).astype(np.int64)
    powers = 10 ** np.arange(int(math.log10(horizon)) + 1, dtype=np.int64)
    return np.unique(np.concatenate([lags, powers[powers <= horizon], [1, horizon]]))


def denominators(beta2: float, k_end: int) -> np.ndarray:
    """den[k] = 1 - beta2^k for k = 0..k_end (float64), beta2^k by a running product.

    Every engine divides by this same table, so they agree bit for bit (den[0] = 0).
    """
    power = np.cumprod(np.full(k_end + 1, beta2))  # power[k - 1] = beta2^k, k = 1..
    den = np.empty(k_end + 1)
    den[0] = 0.0
    den[1:] = 1.0 - power[:k_end]
    return den


def record_slots(k0: int, lags: np.ndarray) -> np.ndarray:
    """slot[k] (int64, k = 0..k0+max(lags)): -2 at k0, i at k0 + lags[i], -1 elsewhere."""
    slot = np.full(k0 + int(lags[-1]) + 1, -1, dtype=np.int64)
    slot[k0] = -2
    slot[k0 + lags] = np.arange(len(lags))
    return slot


def vhat_reference(g2: np.ndarray, beta2: float) -> np.ndarray:
    """Direct NumPy recurrence: vhat for steps 1..n of g2 (n, ...) -> float64 (n, ...)."""
    g2 = np.asarray(g2, dtype=np.float64)
    den = denominators(beta2, g2.shape[0])
    one_m_b2 = 1.0 - beta2
    v = np.zeros(g2.shape[1:])
    out = np.empty(g2.shape)
    for j in range(g2.shape[0]):
        v = beta2 * v + one_m_b2 * g2[j]
        out[j] = v / den[j + 1]
    return out


class Simulation(NamedTuple):
    """Raw output of :func:`simulate`.

    stats: float64 (trials, dim, n_lags), |vhat_{k0+lag} - vhat_k0|; max_g2: largest g^2
    drawn; coordinate_steps: trials * dim * (k0 + max lag); seconds: wall time.
    """

    stats: np.ndarray
    max_g2: float
    coordinate_steps: int
    seconds: float


def simulate(process, *, beta2: float, k0: int, lags, trials: int, dim: int, seed: int,
             engine: str = "numba", chunk_trials: int | None = None,
             chunk_steps: int | None = None, progress=None) -> Simulation:
    """Run ``trials`` independent runs of ``dim`` coordinates and record the statistic.

    process: a built-in name, a :class:`BuiltinProcess` or any object following the
    protocol in ``processes.py``. lags: increasing integers >= 1. seed: 0 <= seed < 2^64.
    chunk_trials (numba, built-ins) and chunk_steps (generic and NumPy paths) only change
    how work is split, never the result. progress: an object with ``update(n_trials)``
    or None.
    """
    if isinstance(process, str):
        process = make_process(process)
    check_process(process)
    beta2 = check_beta2(beta2)
    k0 = check_int("k0", k0, minimum=1)
    lags = check_lags(lags)
    trials = check_int("trials", trials, minimum=1)
    dim = check_int("dim", dim, minimum=1, maximum=2**32 - 2)
    seed = check_int("seed", seed, minimum=0, maximum=2**64 - 1)
    engine = check_choice("engine", engine, ("numba", "numpy"))
    k_end = k0 + int(lags[-1])
    if isinstance(process, BuiltinProcess) and k_end >= MAX_STEP:
        raise ValueError(f"k0 + max(lags) = {k_end} steps: built-in processes draw random "
                         f"numbers for steps < {MAX_STEP} (2^30) only")
    den = denominators(beta2, k_end)
    slot = record_slots(k0, lags)
    t0 = time.perf_counter()
    if engine == "numba" and isinstance(process, BuiltinProcess):
        stats, max_g2 = _run_builtin(process, seed, trials, dim, slot, den, beta2,
                                     chunk_trials, progress)
    else:
        stats, max_g2 = _run_generic(process, seed, trials, dim, slot, den, beta2, engine,
                                     chunk_steps, progress)
    if max_g2 > process.G:
        raise ValueError(f"process {process_name(process)!r} drew g^2 = {max_g2!r} > G = "
                         f"{process.G!r}: it violates its own bound")
    return Simulation(stats, float(max_g2), trials * dim * k_end, time.perf_counter() - t0)


def check_lags(lags) -> np.ndarray:
    arr = np.asarray(lags)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"lags must be a non-empty 1-D sequence of integers, got {lags!r}")
    arr = arr.astype(np.int64)
    if arr[0] < 1 or np.any(np.diff(arr) <= 0):
        raise ValueError(f"lags must be increasing integers >= 1, got {arr.tolist()}")
    return arr


def check_beta2(beta2) -> float:
    return check_real("beta2", beta2, minimum=0.0, maximum=1.0, min_open=True, max_open=True)


def _run_builtin(process, seed, trials, dim, slot, den, beta2, chunk_trials, progress):
    from stepsim.theorem1 import _kernels

    n_lags = int(np.count_nonzero(slot >= 0))
    if chunk_trials is None:  # 2e8 coordinate-steps per call: progress often enough,
        # and each call has hundreds of work items, so the threads finish together
        chunk_trials = max(1, int(2e8 // (dim * len(slot))))
    chunk_trials = check_int("chunk_trials", chunk_trials, minimum=1)
    stats = np.empty((trials, dim, n_lags))
    g2max = np.empty((trials, dim))
    p = process.kernel_params()
    pid = np.int64(_kernels.PROCESS_IDS[process.name])
    for lo in range(0, trials, chunk_trials):
        hi = min(trials, lo + chunk_trials)
        _kernels.simulate_builtin(
            pid, p, np.float64(process.G), np.uint64(seed),
            np.uint64(lo), slot, den, np.float64(beta2), np.float64(1.0 - beta2),
            stats[lo:hi], g2max[lo:hi],
        )
        if progress is not None:
            progress.update(hi - lo)
    return stats, float(g2max.max())


def _run_generic(process, seed, trials, dim, slot, den, beta2, engine, chunk_steps, progress):
    name = process_name(process)
    n = trials * dim
    k_end = len(slot) - 1
    n_lags = int(np.count_nonzero(slot >= 0))
    if chunk_steps is None:
        chunk_steps = max(1, min(k_end, CHUNK_BYTES // (8 * n)))
    chunk_steps = check_int("chunk_steps", chunk_steps, minimum=1)
    v = np.zeros(n)
    vk0 = np.zeros(n)
    out = np.empty((n, n_lags))
    one_m_b2 = 1.0 - beta2
    state = process.start(seed, (trials, dim))
    max_g2 = 0.0
    done, reported = 0.0, 0  # progress in trials (Progress counts whole units)
    if engine == "numba":
        from stepsim.theorem1 import _kernels
    for k_first in range(1, k_end + 1, chunk_steps):
        steps = min(chunk_steps, k_end + 1 - k_first)
        g2 = _checked_chunk(process.sample(state, k_first, steps), (steps, trials, dim),
                            process.G, name, k_first)
        max_g2 = max(max_g2, float(g2.max()))
        g2 = g2.reshape(steps, n)
        if engine == "numba":
            _kernels.advance(g2, np.int64(k_first), slot, den, np.float64(beta2),
                             np.float64(one_m_b2), v, vk0, out)
        else:
            _advance_numpy(g2, k_first, slot, den, beta2, one_m_b2, v, vk0, out)
        done += trials * steps / k_end
        if progress is not None and int(done) > reported:
            progress.update(int(done) - reported)
            reported = int(done)
    return out.reshape(trials, dim, n_lags), max_g2


def _advance_numpy(g2, k_first, slot, den, beta2, one_m_b2, v, vk0, out):
    """NumPy reference of ``_kernels.advance`` (same operations, same order)."""
    for j in range(g2.shape[0]):
        k = k_first + j
        v[:] = beta2 * v + one_m_b2 * g2[j]
        s = slot[k]
        if s >= 0:
            out[:, s] = np.abs(v / den[k] - vk0)
        elif s == -2:
            vk0[:] = v / den[k]


def _checked_chunk(g2, shape, G, name, k_first) -> np.ndarray:
    """The chunk as C-contiguous float64, or a clear error naming the process and steps."""
    where = f"process {name!r}, steps {k_first}..{k_first + shape[0] - 1}"
    if not isinstance(g2, np.ndarray):
        raise TypeError(f"{where}: sample() must return a NumPy array, got {type(g2).__name__}")
    if g2.shape != shape:
        raise ValueError(f"{where}: sample() returned shape {g2.shape}, expected "
                         f"(n_steps, trials, dim) = {shape}")
    if not (np.issubdtype(g2.dtype, np.floating) or np.issubdtype(g2.dtype, np.integer)):
        raise TypeError(f"{where}: sample() must return real numbers, got dtype {g2.dtype}")
    g2 = np.ascontiguousarray(g2, dtype=np.float64)
    if not np.all(np.isfinite(g2)):
        raise ValueError(f"{where}: sample() returned NaN or inf")
    low, high = float(g2.min()), float(g2.max())
    if low < 0.0:
        raise ValueError(f"{where}: sample() returned a negative g^2 ({low!r})")
    if high > G:
        raise ValueError(f"{where}: sample() returned g^2 = {high!r} > G = {G!r}")
    return g2
