"""Statements A+ and B+ (issue 25): the exact m.g.f.s behind the Chernoff bounds and the
bounds themselves — each numerically checkable step of paper_checks/theorem1.md §5.9."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.linalg import toeplitz
from scipy.stats import beta as beta_dist

from stepsim.theorem1 import make_process, simulate
from stepsim.theorem1.bounds import bound, chernoff_psi, corrected_bound
from stepsim.theorem1.chernoff import (
    StateModel,
    chernoff_radius,
    gaussian_eigenvalues,
    gaussian_log_mgf,
    lam_grid,
    markov_log_mgf,
    state_model,
)
from stepsim.theorem1.corrected import weights

B2, K0, LAGS = 0.9, 25, np.array([1, 4, 15, 60])


def _gaussian_d(w, gamma_g, draws, seed):
    """draws of D = sum_j w_j g_j^2, g ~ N(0, toeplitz(gamma_g)) (Cholesky)."""
    chol = np.linalg.cholesky(toeplitz(gamma_g[:w.size]))
    g = chol @ np.random.default_rng(seed).standard_normal((w.size, draws))
    return w @ (g * g)


@pytest.mark.parametrize("rho", [0.0, 0.7, 0.97, -0.6])
def test_ar1_tridiagonal_log_mgf_equals_the_eigenvalue_formula(rho):
    """A+: the O(k) LDL' path and the dense eigenvalues agree, admissibility included."""
    w = weights(0.9, 30, 25)
    s2 = 0.3
    gamma = s2 * rho ** np.arange(w.size)
    a = gaussian_eigenvalues(w, gamma)
    # 2 lam max a = 1 (the boundary itself) is avoided: rounding decides either side there
    lams = np.concatenate([(np.linspace(-0.9, 0.9, 25) + 0.0013) / np.max(np.abs(a)), [0.0]])
    fast = gaussian_log_mgf(w, lams, ar1=(s2, rho))
    dense = gaussian_log_mgf(w, lams, gamma_g=gamma)
    assert np.array_equal(np.isfinite(fast), np.isfinite(dense))
    ok = np.isfinite(dense)
    assert ok.sum() > 5 and (~ok).sum() > 5  # both sides of the admissible interval tested
    np.testing.assert_allclose(fast[ok], dense[ok], rtol=1e-8, atol=1e-12)
    # the boundary: admissible iff 2 lam a_j < 1 for every eigenvalue a_j
    np.testing.assert_array_equal(ok, [np.all(2 * lam * a < 1) for lam in lams])


def test_gaussian_mgf_matches_monte_carlo():
    """A+: exp(psi) against the sample mean of e^{lam (D - E D)} within 4.5 standard errors."""
    w = weights(0.9, 30, 20)
    rho, s2 = 0.8, 1.0
    gamma = s2 * rho ** np.arange(w.size)
    d = _gaussian_d(w, gamma, 200_000, seed=5)
    mean = s2 * w.sum()
    a = gaussian_eigenvalues(w, gamma)
    for lam in np.array([-0.2, -0.1, 0.1, 0.2]) / np.max(np.abs(a)):  # 4 lam a < 1: finite var
        sample = np.exp(lam * (d - mean))
        exact = math.exp(gaussian_log_mgf(w, np.array([lam]), ar1=(s2, rho))[0])
        se = sample.std() / math.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 4.5 * se, (lam, sample.mean(), exact, se)


def test_gaussian_chernoff_tail_is_above_the_empirical_tail():
    """A+, hypothesis-free: at every x the Chernoff bound inf_lam e^{psi - lam x} is at least
    the empirical tail (Clopper-Pearson lower end at 1e-4 <= bound), both tails."""
    w = weights(0.9, 30, 20)
    gamma = 0.95 ** np.arange(w.size)
    d = _gaussian_d(w, gamma, 200_000, seed=6) - w.sum()
    lams = lam_grid(float(d.std()))
    for sign in (1.0, -1.0):
        psi = gaussian_log_mgf(w, sign * lams, ar1=(1.0, 0.95))
        for x in np.linspace(0.5, 5.0, 10) * d.std():
            tail = np.count_nonzero(sign * d >= x)
            chern = float(np.min(np.exp(np.where(np.isfinite(psi), psi, np.inf) - lams * x)))
            lower = beta_dist.ppf(1e-4, tail, d.size - tail + 1) if tail else 0.0
            assert lower <= chern, (sign, x, tail / d.size, chern)


def test_chernoff_radius_achieves_its_tail():
    """The returned x has e^{psi(lam) - lam x} <= e^{-L} at its own lam (rounded up), and no
    grid exponent gives a smaller x."""
    w = weights(0.999, 200, 300)
    model = state_model(make_process("regime", q=0.01))
    lams = lam_grid(0.01)
    psi = markov_log_mgf(w, lams, model)
    for L in (1.0, math.log(2 / 0.05), math.log(200 / 0.01)):
        x, lam = chernoff_radius(lams, psi, L)
        i = int(np.nonzero(lams == lam)[0][0])
        assert psi[i] - lam * x <= -L
        assert np.all((psi + L) / lams >= x / (1 + 1e-8))
    with pytest.raises(ValueError, match="no admissible"):
        chernoff_radius(lams, np.full(lams.size, np.inf), 1.0)


def _brute_force_mgf(model, w, lam):
    """E e^{lam D} by enumerating every state path (m^n of them): the path's probability
    times prod_j E[e^{lam w_j Y} | s_j], each factor computed from the law directly."""
    def cond(s, t):
        total = 0.0
        for p, lo, hi in model.laws[s]:
            total += p * (math.exp(t * lo) if hi == lo else
                          (math.exp(t * hi) - math.exp(t * lo)) / (t * (hi - lo)))
        return total

    out = 0.0
    for path in itertools.product(range(model.pi.size), repeat=w.size):
        prob = model.pi[path[0]] * math.prod(model.P[path[i], path[i + 1]]
                                             for i in range(w.size - 1))
        out += prob * math.prod(cond(s, lam * wj) for s, wj in zip(path, w))
    return out


def test_markov_mgf_equals_brute_force_enumeration():
    """B+: the transfer-matrix product against all 3^8 state paths of a non-reversible
    3-state chain with point-mass, uniform and mixed conditional laws, mixed-sign weights."""
    P = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.4, 0.1, 0.5]])
    ev, vec = np.linalg.eig(P.T)
    pi = np.real(vec[:, np.argmin(abs(ev - 1))])
    pi = pi / pi.sum()
    model = StateModel(P, pi, (((1.0, 0.2, 0.2),), ((1.0, 0.0, 1.0),),
                               ((0.3, 1.0, 1.0), (0.7, 0.1, 0.6))))
    w = np.array([-0.4, -0.3, 0.9, -0.2, 0.5, 0.3, -0.8, 0.6])
    for lam in (-2.5, -0.3, 0.7, 3.0):
        exact = math.log(_brute_force_mgf(model, w, lam)) - lam * model.mean() * w.sum()
        assert markov_log_mgf(w, np.array([lam]), model)[0] == pytest.approx(exact, rel=1e-10,
                                                                               abs=1e-12)


def test_markov_mgf_is_stable_at_large_exponents():
    """No overflow where e^{lam w_j Y} alone would overflow: the log-m.g.f. stays finite and
    below lam * (max D - E D) (D <= sum of positive weights times G)."""
    w = weights(0.999, 1228, 3000)
    model = state_model(make_process("twostate", a=0.005, b=0.005))
    lams = np.array([1e4, 1e6])
    psi = markov_log_mgf(w, lams, model)
    assert np.all(np.isfinite(psi))
    top = w[w > 0].sum() - model.mean() * w.sum()
    assert np.all(psi <= lams * top * (1 + 1e-9))


@pytest.mark.parametrize("name, params, kind", [
    ("regime", {"q": 0.05}, "markov-chernoff"),
    ("twostate", {"a": 0.1, "b": 0.2}, "markov-chernoff"),
    ("uniform", {}, "markov-chernoff"),
    ("gauss_ar1", {"rho": 0.9}, "gaussian-chernoff"),
])
def test_chernoff_bounds_hold_in_the_engine(name, params, kind):
    """A+ / B+, d = 1 and d = 6, delta = 0.1: violations stay below delta (one-sided binomial
    test at 1e-4 on 6000 / 1000 samples)."""
    from scipy.stats import binom

    process = make_process(name, **params)
    sim = simulate(process, beta2=B2, k0=K0, lags=LAGS, trials=1000, dim=6, seed=13)
    for d, sample in ((1, sim.stats.reshape(-1, len(LAGS))), (6, sim.stats.max(axis=1))):
        b = bound(kind, process, beta2=B2, k0=K0, lags=LAGS, delta=0.1, dim=d)
        worst = binom.ppf(1 - 1e-4, sample.shape[0], 0.1)
        assert np.all(np.count_nonzero(sample > b, axis=0) <= worst), d


@pytest.mark.parametrize("name, params, exact, relaxed", [
    ("gauss_ar1", {"rho": 0.9}, "gaussian-chernoff", "gaussian"),
    ("twostate", {"a": 0.1, "b": 0.2}, "markov-chernoff", "markov"),
    ("regime", {"q": 0.05}, "markov-chernoff", "markov"),
])
def test_exact_chernoff_is_at_most_its_relaxation(name, params, exact, relaxed):
    """Laurent-Massart and Jiang-Sun-Fan bound the same m.g.f. from above, so the exact
    Chernoff radius is at most theirs (up to the grid: 1e-3 relative)."""
    p = make_process(name, **params)
    for d, delta in ((1, 0.05), (100, 0.01)):
        a = bound(exact, p, beta2=B2, k0=K0, lags=LAGS, delta=delta, dim=d)
        b = bound(relaxed, p, beta2=B2, k0=K0, lags=LAGS, delta=delta, dim=d)
        assert np.all(a <= b * (1 + 1e-3)), (d, delta, a / b)


def test_corrected_bound_takes_every_applicable_statement():
    p = make_process("regime", q=0.01)
    best, used = corrected_bound(p, beta2=0.999, k0=1228, lags=[10, 1000], delta=0.05, dim=100)
    assert used == "markov+markov-chernoff"
    for kind in ("markov", "markov-chernoff", "chebyshev"):
        assert np.all(best <= bound(kind, p, beta2=0.999, k0=1228, lags=[10, 1000],
                                    delta=0.05, dim=100))
    assert chernoff_psi("markov-chernoff", p, 0.999, 1228, 10)[0] is not None


def test_bad_inputs_raise_clear_errors():
    w = weights(0.9, 10, 5)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        gaussian_log_mgf(w, np.array([0.1]), gamma_g=np.r_[1.0, 2.0, np.zeros(20)])
    with pytest.raises(ValueError, match="exactly one of"):
        gaussian_log_mgf(w, np.array([0.1]))
    with pytest.raises(ValueError, match=r"ar1=\(s2, rho\)"):
        gaussian_log_mgf(w, np.array([0.1]), ar1=(1.0, 1.0))
    with pytest.raises(ValueError, match="row-stochastic"):
        StateModel(np.array([[0.5, 0.6], [0.5, 0.5]]), np.array([0.5, 0.5]),
                   (((1.0, 0, 1),), ((1.0, 0, 1),)))
    with pytest.raises(ValueError, match="stationary law"):
        StateModel(np.array([[0.9, 0.1], [0.5, 0.5]]), np.array([0.5, 0.5]),
                   (((1.0, 0, 1),), ((1.0, 0, 1),)))
    with pytest.raises(ValueError, match="sd"):
        lam_grid(0.0)
    p = make_process("regime")
    for kw, msg in (({"delta": 0.0}, "delta must be in"), ({"delta": 1.0}, "delta must be in"),
                    ({"dim": 0}, "dim must be >= 1")):
        args = {"delta": 0.05, "dim": 1, **kw}
        with pytest.raises(ValueError, match=msg):
            bound("markov-chernoff", p, beta2=B2, k0=K0, lags=LAGS, **args)
    with pytest.raises(ValueError, match="Statement B\\+ does not apply"):
        bound("markov-chernoff", make_process("ar1"), beta2=B2, k0=K0, lags=LAGS, delta=0.1)
    with pytest.raises(ValueError, match="Statement A\\+ does not apply"):
        bound("gaussian-chernoff", p, beta2=B2, k0=K0, lags=LAGS, delta=0.1)


def test_chernoff_tightness_script_quick(tmp_path):
    """paper_checks/theorem1_chernoff.py --quick rescoring the committed verification JSON:
    rows for B+ and the corrected bound, which is never above the previous corrected one."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "paper_checks" / "theorem1_chernoff.py"
    spec = importlib.util.spec_from_file_location("theorem1_chernoff", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "theorem1_chernoff_quick.json").read_text())["result"]["rows"]
    assert {r["bound"] for r in rows} == {"markov-chernoff", "corrected"}
    assert {(r["d"], r["delta"]) for r in rows} == {(1, 0.05), (100, 0.05), (1, 0.01),
                                                    (100, 0.01)}
    source = json.loads((path.parent / "theorem1_bounds.json").read_text())["result"]
    regime = next(r for r in source["results"] if r["label"] == "regime q=1e-3")
    for row in rows:
        case = next(c for c in regime["cases"]
                    if c["d"] == row["d"] and c["delta"] == row["delta"])
        old = case["bounds"]["corrected"]["bound"][:6]
        if row["bound"] == "corrected":
            assert all(b <= o for b, o in zip(row["bound_values"], old))
    assert "| regime q=1e-3 | markov-chernoff |" in (
        tmp_path / "theorem1_chernoff_quick.md").read_text()
