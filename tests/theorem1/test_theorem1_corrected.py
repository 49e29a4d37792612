"""The corrected Theorem 1 bounds: the exact variance of vhat_k - vhat_k0 under dependence."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepsim.theorem1 import k0_statement, make_process, simulate
from stepsim.theorem1.closed_forms import hoeffding_bound
from stepsim.theorem1.corrected import autocovariance, corrected_bounds, variance, weights


def test_weights_sum_to_zero_and_match_the_recurrence():
    beta2, k0, lag = 0.99, 123, 40
    w = weights(beta2, k0, lag)
    assert w.shape == (k0 + lag,) and abs(w.sum()) < 1e-12
    rng = np.random.default_rng(0)
    g2 = rng.random(k0 + lag)
    v, vhat = 0.0, {}
    for k, g in enumerate(g2, start=1):
        v = beta2 * v + (1 - beta2) * g
        vhat[k] = v / (1 - beta2**k)
    assert np.dot(w, g2) == pytest.approx(vhat[k0 + lag] - vhat[k0], abs=1e-14)


def test_iid_variance_is_gamma0_times_the_hoeffding_sum_of_squares():
    beta2, k0, lags, delta = 0.99, 123, np.array([1, 10, 100]), 0.05
    gamma = autocovariance(make_process("uniform"), 300)
    assert gamma[0] == pytest.approx(1 / 12) and not gamma[1:].any()
    var, s = variance(gamma, beta2, k0, lags)
    # hoeffding_bound = G sqrt(S log(2/delta) / 2) gives S back
    s_closed = (hoeffding_bound(1.0, beta2, k0, lags, delta) ** 2) * 2 / math.log(2 / delta)
    np.testing.assert_allclose(s, s_closed, rtol=1e-9)
    np.testing.assert_allclose(var, s / 12, rtol=1e-9)


def test_closed_form_autocovariances():
    ar1 = autocovariance(make_process("ar1", rho=0.9), 3)
    assert ar1[0] == pytest.approx(1 / 12)  # Phi(x) of a stationary N(0, 1) is U[0, 1]
    assert ar1[2] == pytest.approx(math.asin(0.81 / 2) / (2 * math.pi))
    sine = autocovariance(make_process("sine", period=8.0), 4)
    np.testing.assert_allclose(sine, [1 / 8, np.cos(np.pi / 4) / 8, 0.0, -np.cos(np.pi / 4) / 8,
                                      -1 / 8], atol=1e-15)
    regime = autocovariance(make_process("regime", q=0.1, low=0.0), 1)
    assert regime[1] == pytest.approx(0.8 / 16)
    with pytest.raises(ValueError, match="not stationary"):
        autocovariance(make_process("drift"), 3)


@pytest.mark.parametrize("name, params", [("uniform", {}), ("ar1", {"rho": 0.95}),
                                          ("regime", {"q": 0.02}), ("sine", {"period": 300.0}),
                                          ("twopoint", {})])
def test_exact_variance_agrees_with_simulation(name, params):
    """E X_n^2 over 4000 simulated coordinates within 15% (about 5 Monte-Carlo sigmas)."""
    beta2 = 0.99
    k0, lags = k0_statement(beta2), np.array([5, 50, 300])
    proc = make_process(name, **params)
    sim = simulate(proc, beta2=beta2, k0=k0, lags=lags, trials=200, dim=20, seed=3)
    measured = (sim.stats.reshape(-1, len(lags)) ** 2).mean(axis=0)
    var, _ = variance(autocovariance(proc, k0 + 300), beta2, k0, lags)
    np.testing.assert_allclose(measured / var, 1.0, atol=0.15)


def test_corrected_bounds_order_and_cap():
    proc = make_process("ar1", rho=0.999)
    b = corrected_bounds(proc, beta2=0.999, k0=1228, lags=[1, 100, 10_000], delta=0.05, dim=100)
    assert np.all(b["chebyshev_coord"] <= b["chebyshev_inf"])
    assert np.all(b["gauss_coord"] <= b["chebyshev_coord"])  # sqrt(2 log 40) < sqrt(20)
    assert np.all(b["chebyshev_inf"] <= b["worst_case"])
    assert b["kappa"][1] > 10  # strongly dependent: far from the i.i.d. kappa = 1
