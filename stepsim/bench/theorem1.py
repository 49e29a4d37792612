"""Bench section: the Theorem 1 engine in coordinate-steps per second, beside NumPy.

One coordinate-step is one step of v_k = b2 v_{k-1} + (1 - b2) g_k^2 for one coordinate of
one trial, including drawing g_k^2 and recording |vhat_k - vhat_k0| at the lags. Rows:

* numba fused (built-in ``uniform``): sampling + recurrence in one parallel kernel;
* numpy plain: the same recurrence vectorised over trials x coordinates with NumPy's
  PCG64 ``rng.random`` drawn in time chunks and in-place updates (the baseline: a careful
  NumPy version);
* numpy naive: the textbook loop (a draw per step, temporaries, vhat every step);
* numpy reference: stepsim's bit-identical NumPy reference (counter-based hash);
* numba fused ``ar1`` and ``clipped_gaussian`` (the costliest built-ins: normal
  quantile and erfc per step), and the generic path (a Python process's chunks fed to
  the numba recurrence).
"""

from __future__ import annotations

import numpy as np

TITLE = "theorem1: Monte-Carlo engine (coordinate-steps per second)"

BETA2 = 0.999
HORIZON = 10_000


def numpy_plain(trials: int, dim: int, k0: int, lags: np.ndarray, seed: int = 0) -> np.ndarray:
    """The recurrence in plain vectorised NumPy with rng.random: stats (trials*dim, n_lags)."""
    rng = np.random.default_rng(seed)
    n = trials * dim
    k_end = k0 + int(lags[-1])
    v = np.zeros(n)
    vk0 = np.zeros(n)
    tmp = np.empty(n)
    out = np.empty((n, len(lags)))
    record = {k0 + int(lag): i for i, lag in enumerate(lags)}
    chunk = max(1, min(k_end, (8 << 20) // (8 * n)))
    power = 1.0
    for k_first in range(1, k_end + 1, chunk):
        g2 = rng.random((min(chunk, k_end + 1 - k_first), n))
        for j in range(g2.shape[0]):
            k = k_first + j
            v *= BETA2
            np.multiply(g2[j], 1.0 - BETA2, out=tmp)
            v += tmp
            power *= BETA2
            if k == k0:
                np.divide(v, 1.0 - power, out=vk0)
            elif k in record:
                np.divide(v, 1.0 - power, out=tmp)
                tmp -= vk0
                np.abs(tmp, out=out[:, record[k]])
    return out


def numpy_naive(trials: int, dim: int, k0: int, lags: np.ndarray, seed: int = 0) -> np.ndarray:
    """The textbook NumPy loop: one rng.random(n) per step, temporaries, vhat every step."""
    rng = np.random.default_rng(seed)
    n = trials * dim
    v = np.zeros(n)
    out = np.empty((n, len(lags)))
    record = {k0 + int(lag): i for i, lag in enumerate(lags)}
    vk0 = None
    for k in range(1, k0 + int(lags[-1]) + 1):
        v = BETA2 * v + (1.0 - BETA2) * rng.random(n)
        vhat = v / (1.0 - BETA2**k)
        if k == k0:
            vk0 = vhat
        elif k in record:
            out[:, record[k]] = np.abs(vhat - vk0)
    return out


class _PythonUniform:
    """A user-style Python process (i.i.d. U[0, 1] from a Generator) for the generic path."""

    name, G, stationary, independent_coordinates = "python-uniform", 1.0, True, True

    def start(self, seed, shape):
        return {"rng": np.random.default_rng(seed), "shape": shape}

    def sample(self, state, k_first, n_steps):
        return state["rng"].random((n_steps, *state["shape"]))


def run(bench) -> None:
    from stepsim.theorem1 import k0_statement, lag_grid, simulate

    k0 = k0_statement(BETA2)
    lags = lag_grid(HORIZON)
    k_end = k0 + HORIZON
    trials, dim = (20, 100) if bench.quick else (200, 100)
    steps = trials * dim * k_end
    repeats = 3 if bench.quick else 5

    def fused(process, t=trials):
        return lambda: simulate(process, beta2=BETA2, k0=k0, lags=lags, trials=t, dim=dim,
                                seed=1)

    times = bench.compare({"numba fused": fused("uniform"),
                           "numpy plain": lambda: numpy_plain(trials, dim, k0, lags),
                           "numpy naive": lambda: numpy_naive(trials, dim, k0, lags)},
                          repeats=repeats)
    ratio = times["numpy plain"] / times["numba fused"]
    naive = times["numpy naive"] / times["numba fused"]
    case = f"uniform {trials}x{dim}x{k_end}"
    for impl, extra in (("numba fused", {"ratio": f"{ratio:.1f}x numpy plain, {naive:.1f}x naive"}),
                        ("numpy plain", {}), ("numpy naive", {})):
        _emit(bench, case, impl, times[impl], steps, **extra)

    small_trials = 2 if bench.quick else 10  # the hashed NumPy reference is slow
    small = small_trials * dim * k_end
    times = bench.compare({"numba fused": fused("uniform", small_trials),
                           "numpy reference": lambda: simulate(
                               "uniform", beta2=BETA2, k0=k0, lags=lags, trials=small_trials,
                               dim=dim, seed=1, engine="numpy")}, repeats=1)
    ratio = times["numpy reference"] / times["numba fused"]
    _emit(bench, f"uniform {small_trials}x{dim}x{k_end}", "numpy reference",
          times["numpy reference"], small, ratio=f"numba {ratio:.0f}x faster")

    heavy_trials = max(2, trials // 4)
    heavy = heavy_trials * dim * k_end
    for name in ("ar1", "clipped_gaussian"):
        t = bench.compare({name: fused(name, heavy_trials)}, repeats=repeats)[name]
        _emit(bench, f"{name} {heavy_trials}x{dim}x{k_end}", "numba fused", t, heavy)
    t = bench.compare({"generic": fused(_PythonUniform(), heavy_trials)},
                      repeats=repeats)["generic"]
    _emit(bench, f"python process {heavy_trials}x{dim}x{k_end}", "generic (numba rec.)", t,
          heavy)


def _emit(bench, case, impl, seconds, units, **extra) -> None:
    """Record and print one row, with its rate in millions of coordinate-steps a second."""
    bench.emit("theorem1", case, impl, seconds, units=units, unit="coord-step",
               suffix=f"  ({units / seconds / 1e6:.0f} M coord-steps/s)", **extra)
