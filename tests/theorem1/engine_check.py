"""A bound against the engine's own simulation, shared by the Chernoff-bound tests."""

from __future__ import annotations

import numpy as np

from stepsim.theorem1 import simulate
from stepsim.theorem1.bounds import bound


def assert_bound_holds_in_the_engine(kind: str, process, *, beta2, k0, lags) -> None:
    """``kind``'s bound for ``process`` at d = 1 and d = 6, delta = 0.1, against 1000 x 6
    simulated coordinates (seed 13): violations below delta (one-sided binomial test at
    1e-4, 6000 / 1000 samples), and the bound at least the empirical (1 - delta)-quantile
    (a necessary condition)."""
    from scipy.stats import binom

    sim = simulate(process, beta2=beta2, k0=k0, lags=lags, trials=1000, dim=6, seed=13)
    for d, sample in ((1, sim.stats.reshape(-1, len(lags))), (6, sim.stats.max(axis=1))):
        b = bound(kind, process, beta2=beta2, k0=k0, lags=lags, delta=0.1, dim=d)
        worst = binom.ppf(1 - 1e-4, sample.shape[0], 0.1)
        assert np.all(np.count_nonzero(sample > b, axis=0) <= worst), d
        q = np.quantile(sample, 0.9, axis=0, method="inverted_cdf")
        assert np.all(b >= q), (d, b / q)
