"""Corrected Theorem 1 bounds (issue 25): each numerically checkable step of the proofs in
paper_checks/theorem1.md §5, the bounds against simulation, the plug-in, C11 part (c)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stepsim.theorem1 import make_process, simulate
from stepsim.theorem1.bounds import (
    bound,
    corrected_bound,
    exact_mean,
    exact_variance,
    gaussian_eigen_norms,
    markov_bernstein_bound,
    markov_lambda,
    plugin_bound,
    sokal_autocovariance,
    toeplitz_quadratic_form,
)
from stepsim.theorem1.corrected import autocovariance, weights

B2, K0, LAGS = 0.9, 25, np.array([1, 4, 15, 60])


def _samples(process, trials, dim, seed=3):
    """D = vhat_{k0+lag} - vhat_k0 is only recorded as |D|: E D^2 = E |D|^2 is what we need."""
    sim = simulate(process, beta2=B2, k0=K0, lags=LAGS, trials=trials, dim=dim, seed=seed)
    return sim.stats.reshape(-1, len(LAGS))


@pytest.mark.parametrize("process", [
    make_process("ar1", rho=0.95), make_process("regime", q=0.05),
    make_process("sticky", q=0.1), make_process("twostate", a=0.1, b=0.3, low=0.2),
    make_process("gauss_ar1", rho=0.8), make_process("sine", period=40.0),
], ids=lambda p: p.name)
def test_exact_variance_matches_monte_carlo_within_sampling_error(process):
    """§5.1: Var D = sum_ij w_i w_j gamma_Y(i-j) (and E D = 0, so E D^2 = Var D)."""
    x2 = _samples(process, 1500, 8) ** 2
    n = x2.shape[0]
    var = exact_variance(autocovariance(process, K0 + LAGS[-1]), B2, K0, LAGS)
    se = x2.std(axis=0, ddof=1) / math.sqrt(n)
    # 4.5 standard errors: all 6 x 4 comparisons pass together with probability > 0.999
    assert np.all(np.abs(x2.mean(axis=0) - var) < 4.5 * se), (x2.mean(axis=0), var, se)


def test_mean_of_d_is_zero_because_both_weight_vectors_are_bias_corrected():
    assert np.max(np.abs(exact_mean(1.0, 0.999, 1228, [1, 100, 10_000]))) < 1e-12
    w = weights(0.999, 1228, 50)
    assert w[1228:].sum() > 0 and w[:1228].min() < 0  # mixed signs: the lemma must allow them


def test_toeplitz_quadratic_form_equals_the_dense_sum():
    rng = np.random.default_rng(0)
    w, gamma = rng.normal(size=37), rng.normal(size=37)
    dense = sum(w[i] * w[j] * gamma[abs(i - j)] for i in range(37) for j in range(37))
    assert toeplitz_quadratic_form(w, gamma) == pytest.approx(dense, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("rho", [0.0, 0.6, 0.97, -0.5])
def test_ar1_eigen_norms_equal_the_dense_eigenvalues(rho):
    """§5.2: ||a||_2, ||a||_inf, sum a of C^1/2 diag(w) C^1/2; O(k) path vs eigvalsh."""
    w = weights(0.95, 120, 80)
    gamma = np.array([math.pow(rho, h) for h in range(w.size)])
    fast = gaussian_eigen_norms(w, ar1_rho=rho)
    dense = gaussian_eigen_norms(w, gamma)
    assert fast[0] == pytest.approx(dense[0], rel=1e-9)
    assert dense[1] <= fast[1] <= dense[1] * (1 + 1e-5)  # an upper bound, tight
    assert fast[2] == pytest.approx(dense[2], abs=1e-12)


def test_log_mgf_inequalities_of_the_mixed_sign_lemma():
    """§5.2 step 1: f(u) = -u - log(1-2u)/2 <= u^2/(1-2u) on [0, 1/2), <= u^2 on u <= 0."""
    u = np.linspace(0.0, 0.4999, 5001)
    assert np.all(-u - 0.5 * np.log1p(-2 * u) <= u * u / (1 - 2 * u) + 1e-15)
    u = -np.geomspace(1e-6, 50.0, 5001)
    assert np.all(-u - 0.5 * np.log1p(-2 * u) <= u * u + 1e-15)


def test_mixed_sign_chi_square_tail_by_monte_carlo():
    """§5.2: P(|sum a_i (Z_i^2 - 1)| >= 2||a||_2 sqrt(x) + 2||a||_inf x) <= 2 e^-x."""
    rng = np.random.default_rng(1)
    for a in (np.array([1.0, -1.0]), np.array([3.0, -1.0, -1.0, 0.5, -0.2]),
              rng.normal(size=40)):
        z2 = rng.standard_normal((200_000, a.size)) ** 2
        s = (z2 - 1.0) @ a
        for x in (0.5, 1.0, 2.0, 4.0):
            t = 2 * np.linalg.norm(a) * math.sqrt(x) + 2 * np.max(np.abs(a)) * x
            assert np.mean(np.abs(s) >= t) <= 2 * math.exp(-x)


def _two_state_mgf(P, pi, values, t, w):
    """Exact E_pi exp(t sum_j w_j (h(X_j) - pi h)) of a two-state chain (transfer matrices)."""
    centred = values - pi @ values
    v = pi * np.exp(t * w[0] * centred)
    for wj in w[1:]:
        v = (v @ P) * np.exp(t * wj * centred)
    return float(v.sum())


@pytest.mark.parametrize("a, b", [(0.1, 0.1), (0.02, 0.05), (0.3, 0.6), (0.9, 0.8)])
def test_jiang_sun_fan_mgf_bound_holds_exactly_on_two_state_chains(a, b):
    """§5.4: the cited m.g.f. bound, with time-varying f_j = w_j (h - pi h), checked exactly."""
    P = np.array([[1 - a, a], [b, 1 - b]])
    pi = np.array([b, a]) / (a + b)
    lam = abs(1 - a - b)
    values = np.array([0.0, 1.0])
    w = weights(0.9, 15, 10)
    var = pi[0] * pi[1]
    c = np.max(np.abs(w)) * max(pi @ values, 1 - pi @ values)
    v = var * np.dot(w, w)
    t_max = (1 - lam) / (5 * c)
    for t in np.linspace(0.05, 0.95, 10) * t_max:
        for sign in (1.0, -1.0):
            exact = _two_state_mgf(P, pi, values, t, sign * w)
            psi = v / c**2 * (math.expm1(t * c) - t * c) + v * lam * t * t / (1 - lam - 5 * c * t)
            assert math.log(exact) <= psi * (1 + 1e-9)


def test_markov_bound_chernoff_is_at_most_the_closed_form_and_iid_is_bernstein():
    w = weights(0.999, 1228, 500)
    for lam in (0.0, 0.5, 0.9):
        L = math.log(2 / 0.05)
        A = (1 + lam) / (1 - lam)
        B = 1 / 3 if lam == 0 else 5 / (1 - lam)
        v, c = np.dot(w, w) / 12, np.max(np.abs(w)) * 0.5
        closed = B * c * L + math.sqrt((B * c * L) ** 2 + 2 * A * v * L)
        assert markov_bernstein_bound(w, 1 / 12, 0.5, lam, 0.05, 1) <= closed


def test_spectral_gap_metadata():
    assert markov_lambda(make_process("uniform")) == 0.0
    assert markov_lambda(make_process("ar1", rho=-0.7)) == 0.7
    assert markov_lambda(make_process("regime", q=0.01)) == pytest.approx(0.98)
    assert markov_lambda(make_process("sticky", q=0.01)) == pytest.approx(0.99)
    assert markov_lambda(make_process("twostate", a=0.05, b=0.15)) == pytest.approx(0.8)
    assert markov_lambda(make_process("sine")) is None
    assert markov_lambda(make_process("drift")) is None


@pytest.mark.parametrize("name, params, kinds", [
    ("gauss_ar1", {"rho": 0.9}, ("gaussian", "chebyshev")),
    ("ar1", {"rho": 0.9}, ("gaussian", "markov", "chebyshev")),
    ("twostate", {"a": 0.1, "b": 0.1}, ("markov", "chebyshev")),
    ("sticky", {"q": 0.2}, ("markov", "chebyshev")),
])
def test_proved_bounds_hold_in_the_engine(name, params, kinds):
    """Each proved bound, d = 1 and d = 6, delta = 0.1: violations stay below delta (a
    one-sided binomial test at 1e-4 on 6000 / 1000 samples)."""
    from scipy.stats import binom

    process = make_process(name, **params)
    sim = simulate(process, beta2=B2, k0=K0, lags=LAGS, trials=1000, dim=6, seed=11)
    for d, sample in ((1, sim.stats.reshape(-1, len(LAGS))), (6, sim.stats.max(axis=1))):
        for kind in kinds:
            b = bound(kind, process, beta2=B2, k0=K0, lags=LAGS, delta=0.1, dim=d)
            worst = binom.ppf(1 - 1e-4, sample.shape[0], 0.1)
            assert np.all(np.count_nonzero(sample > b, axis=0) <= worst), (kind, d)


def test_corrected_bound_is_the_minimum_and_names_what_it_used():
    p = make_process("ar1", rho=0.99)
    best, used = corrected_bound(p, beta2=0.999, k0=1228, lags=[10, 1000], delta=0.05, dim=100)
    assert used == "gaussian+markov+copula-chernoff"
    for kind in ("gaussian", "markov", "copula-chernoff", "chebyshev"):
        assert np.all(best <= bound(kind, p, beta2=0.999, k0=1228, lags=[10, 1000],
                                    delta=0.05, dim=100))
    assert corrected_bound(make_process("sine"), beta2=0.9, k0=25, lags=[1], delta=0.1)[1] == ""


def test_sokal_window_recovers_the_integrated_autocorrelation_time():
    rng = np.random.default_rng(2)
    rho, m = 0.8, 200_000
    x = np.empty(m)
    x[0] = rng.standard_normal()
    noise = rng.standard_normal(m) * math.sqrt(1 - rho * rho)
    for i in range(1, m):
        x[i] = rho * x[i - 1] + noise[i]
    gamma, M = sokal_autocovariance(x)
    tau = 1 + 2 * np.sum(gamma[1:] / gamma[0])
    assert tau == pytest.approx((1 + rho) / (1 - rho), rel=0.1)  # 9
    assert M >= 5 * tau - 1
    b, tau_beta = plugin_bound(x[:5000], 0.9, 25, LAGS, 0.05, 1)
    assert np.all(np.isfinite(b) & (b > 0)) and 1 < tau_beta < 9 * 1.5


def test_check_theorem1_scores_the_chosen_bound():
    from stepsim.theorem1 import check_theorem1

    r = check_theorem1("twostate", process_params={"a": 0.2, "b": 0.2}, beta2=B2, k0=K0,
                       lags=LAGS, trials=50, dim=3, bound="markov")
    rep = r.bound_report
    assert rep["kind"] == "markov" and rep["proved"] and rep["coord"]["n"] == 150
    assert "bound 'markov' (PROVED" in r.summary()
    assert r.process_params == {"a": 0.2, "b": 0.2, "low": 0.0}
    r = check_theorem1("ar1", process_params={"rho": 0.9}, beta2=B2, k0=K0, lags=LAGS,
                       trials=20, dim=2, bound="plugin")
    assert not r.bound_report["proved"] and r.bound_report["inf"]["n"] == 20


def test_verification_script_quick(tmp_path):
    """paper_checks/theorem1_bounds.py --quick on two processes: files and their content."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "paper_checks" / "theorem1_bounds.py"
    spec = importlib.util.spec_from_file_location("theorem1_bounds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--only", "ar1 rho=0.5,twostate lambda=0.9",
                        "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "theorem1_bounds_quick.json").read_text())
    results = doc["result"]["results"]
    assert [r["label"] for r in results] == ["ar1 rho=0.5", "twostate lambda=0.9"]
    assert "provenance" in doc
    kinds = set(results[0]["cases"][0]["bounds"])
    assert kinds == {"paper", "chebyshev", "gaussian", "markov", "copula-chernoff", "plugin",
                     "corrected"}
    assert "gaussian" in results[1]["not_applicable"]
    assert {"markov-chernoff", "corrected"} <= set(results[1]["cases"][0]["bounds"])
    assert "gaussian-chernoff" in results[0]["not_applicable"]
    assert (tmp_path / "theorem1_bounds_quick.png").stat().st_size > 0
    assert "| twostate lambda=0.9 | markov | 1 | 0.05 |" in (
        tmp_path / "theorem1_bounds_quick.md").read_text()


def test_verification_script_more_trials(tmp_path):
    """--trials N: that many trials, into theorem1_bounds_<N>trials.* (the default files are
    left alone); a count below 1 is refused before any work."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "paper_checks" / "theorem1_bounds.py"
    spec = importlib.util.spec_from_file_location("theorem1_bounds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["--quick", "--trials", "0", "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())
    assert module.main(["--quick", "--trials", "12", "--seed", "1", "--only", "regime q=1e-3",
                        "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"theorem1_bounds_quick_12trials.{ext}" for ext in ("json", "md", "png")]
    doc = json.loads((tmp_path / "theorem1_bounds_quick_12trials.json").read_text())
    assert doc["result"]["trials"] == 12 and doc["provenance"]["params"]["trials"] == 12
    case = doc["result"]["results"][0]["cases"][0]
    assert case["d"] == 1 and case["bounds"]["markov-chernoff"]["n"] == 12 * 4
    md = (tmp_path / "theorem1_bounds_quick_12trials.md").read_text()
    assert "--trials 12 --seed 1 --only 'regime q=1e-3'" in md


def _part_c_entry(share, overall="HOLDS", failing=10):
    form = {"overall": overall, "uses": "markov", "share_below_trivial_where_paper_fails": share,
            "paper_failing_lags": failing}
    return {"stationary": True, "part_c": {"coord": dict(form), "inf": dict(form)}}


@pytest.mark.parametrize("entries, expected", [
    ({"x": _part_c_entry(1.0)}, "MET"),
    ({"x": _part_c_entry(1.0), "y": _part_c_entry(0.5)}, "NOT MET"),
    ({"x": _part_c_entry(0.95, "VIOLATED")}, "NOT MET"),
    ({"x": _part_c_entry(0.95, "INCONCLUSIVE")}, "INCONCLUSIVE"),
    ({"x": _part_c_entry(0.0, failing=0)}, "MET"),  # the paper's bound never fails: no claim
    ({"x": {"stationary": True, "part_c": None}}, "NOT EVALUATED"),
])
def test_c11_part_c_rule(entries, expected):
    from stepsim.checks.c11_theorem1 import decide_part_c

    assert decide_part_c(entries)[0] == expected


def test_c11_process_job_reports_part_c():
    from stepsim.checks.c11_theorem1 import process_job

    out = process_job(process="ar1", params={"rho": 0.99}, trials=20, dim=4, per_decade=1,
                      seed=0, horizon=100)
    c = out["part_c"]
    assert c["coord"]["uses"] == "gaussian+markov+copula-chernoff" and c["inf"]["n"] == 20
    assert len(c["coord"]["bound"]) == len(out["lags"])
    assert process_job(process="sine", params={}, trials=5, dim=2, per_decade=1, seed=0,
                       horizon=10)["part_c"] is None
