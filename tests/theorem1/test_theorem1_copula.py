"""Statement A'+ (issue 25): the Chernoff bound for g^2 = G Phi(x), x a Gaussian AR(1), through
a quadratic majorant — each numerically checkable step of paper_checks/theorem1.md §5.11."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from stepsim.theorem1 import make_process
from tests.theorem1.engine_check import assert_bound_holds_in_the_engine
from stepsim.theorem1.bounds import bound, corrected_bound
from stepsim.theorem1.closed_forms import worst_case
from stepsim.theorem1.copula import TANGENTS, log_mgf, majorant, majorant_curvature
from stepsim.theorem1.corrected import weights

B2, K0, LAGS = 0.9, 25, np.array([1, 4, 15, 60])


def test_majorant_lies_above_phi_and_is_not_loose():
    """Step 1: M_t >= Phi on a grid 2.5x finer than the one gamma was computed on (and
    offset from it), over x in [-45, 12]; and gamma is within 1e-3 of the sup it bounds."""
    x = np.linspace(-45.0, 12.0, 570_001)  # spacing 1e-4
    phi_x = ndtr(x)
    for t in TANGENTS:
        A, B, gam = majorant(t)
        gap = A + B * x + 0.5 * gam * x * x - phi_x
        assert gap.min() >= -1e-15, (t, gap.min(), x[np.argmin(gap)])
        # the sup the curvature bounds, on the same fine grid (x < t)
        left = x < t
        tangent = ndtr(t) + math.exp(-t * t / 2) / math.sqrt(2 * math.pi) * (x[left] - t)
        sup = np.max(2 * (phi_x[left] - tangent) / (x[left] - t) ** 2)
        assert sup <= gam <= sup + 1e-3, (t, sup, gam)


def test_minorant_by_symmetry():
    """Step 1': m_t(x) = 1 - M_t(-x) <= Phi(x)."""
    x = np.linspace(-12.0, 45.0, 100_001)
    for t in (0.25, 1.0, 3.0):
        A, B, gam = majorant(t)
        assert np.all(1.0 - (A - B * x + 0.5 * gam * x * x) <= ndtr(x) + 1e-15)


def _dense_bound(w, lam, rho, t):
    """Step 2 by dense linear algebra: log E exp(sum_j Q_j(x_j)) - lam E D, x ~ N(0, C)."""
    k = w.size
    C = rho ** np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
    A, B, g = majorant(t)
    c = lam * w
    const = float(np.sum(np.where(c > 0, c * A, c * (1 - A))))
    P = np.linalg.inv(C) - np.diag(np.abs(c) * g)
    if np.min(np.linalg.eigvalsh(P)) <= 0:
        return math.inf
    b = c * B
    return (const - 0.5 * np.linalg.slogdet(C)[1] - 0.5 * np.linalg.slogdet(P)[1]
            + 0.5 * b @ np.linalg.solve(P, b) - lam * 0.5 * w.sum())


@pytest.mark.parametrize("rho", [0.0, 0.6, 0.97, -0.5])
def test_tridiagonal_sweep_equals_the_dense_formula(rho):
    """Step 2: the O(k) LDL' sweep of log_mgf = the dense Gaussian formula, both signs of
    lam, each tangent point, admissibility included (k = 1 too)."""
    rng = np.random.default_rng(3)
    for k in (1, 2, 7):
        w = rng.normal(size=k)
        lams = np.array([-40.0, -3.0, -0.2, 0.1, 2.5, 40.0])
        for t in (0.25, 1.0, 2.5):
            got = log_mgf(w, lams, rho=rho, tangents=(t,))
            want = np.array([_dense_bound(w, lam, rho, t) for lam in lams])
            assert np.array_equal(np.isinf(got), np.isinf(want)), (k, t, got, want)
            ok = np.isfinite(want)
            assert np.allclose(got[ok], want[ok], rtol=1e-10, atol=1e-12), (k, t)


def _exact_psi_quadrature(w, lams, rho, nodes=60):
    """psi(lam) = log E exp(lam D) - lam E D, D = sum_j w_j Phi(x_j), by Gauss-Hermite
    quadrature over the k <= 3 independent normals driving the AR(1)."""
    z, q = np.polynomial.hermite_e.hermegauss(nodes)
    q = q / q.sum()
    k = w.size
    grids = np.meshgrid(*([z] * k), indexing="ij")
    weights_ = np.ones_like(grids[0])
    for g in range(k):
        weights_ = weights_ * q[tuple(slice(None) if i == g else None for i in range(k))]
    x = grids[0]
    d = w[0] * ndtr(x)
    for j in range(1, k):
        x = rho * x + math.sqrt(1 - rho * rho) * grids[j]
        d = d + w[j] * ndtr(x)
    return np.array([math.log(np.sum(weights_ * np.exp(lam * d))) - lam * 0.5 * w.sum()
                     for lam in lams])


@pytest.mark.parametrize("rho", [0.95, 0.3, -0.7])
def test_bound_is_above_the_exact_mgf_by_quadrature(rho):
    """Steps 1-3 together: for k = 2, 3 steps the bound on psi is >= psi computed by
    quadrature (accurate to ~1e-12 here), for every exponent; and near lam = 0 it is above
    psi by no more than the majorant's bias |lam| sum|w| min_t (E M_t(x) - E Phi(x)), E M_t =
    A + gamma / 2 (plus 1e-4 for the second-order terms at |lam| = 0.01)."""
    rng = np.random.default_rng(5)
    lams = np.array([-30.0, -8.0, -1.0, -0.01, 0.01, 1.0, 8.0, 30.0])
    for k in (2, 3):
        w = rng.normal(size=k)
        exact = _exact_psi_quadrature(w, lams, rho, nodes=60 if k == 2 else 40)
        upper = log_mgf(w, lams, rho=rho)
        assert np.all(upper >= exact - 1e-10), (k, upper - exact)
        small = np.abs(lams) <= 0.01
        bias = min(majorant(t)[0] + majorant(t)[2] / 2 - 0.5 for t in TANGENTS)
        assert np.all(upper[small] - exact[small] <= 0.01 * np.abs(w).sum() * bias + 1e-4)


def test_bound_is_above_a_monte_carlo_mgf():
    """The bound on psi is >= a Monte-Carlo estimate of psi (200k AR(1) paths, seed 0, k = 50
    steps of the EMA weights) minus 4 of its standard errors (delta method), at exponents
    around the Chernoff optimum."""
    rho = 0.95
    w = weights(B2, K0, 25)
    rng = np.random.default_rng(0)
    n = 200_000
    x = rng.standard_normal(n)
    d = w[0] * ndtr(x)
    for j in range(1, w.size):
        x = rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
        d += w[j] * ndtr(x)
    lams = np.array([-60.0, -20.0, -5.0, 5.0, 20.0, 60.0])
    upper = log_mgf(w, lams, rho=rho)
    for lam, u in zip(lams, upper):
        e = np.exp(lam * (d - 0.5 * w.sum()))
        m, se = e.mean(), e.std() / math.sqrt(n)
        assert math.log(m) - 4 * se / m <= u, (lam, math.log(m), u)


def test_chernoff_tail_is_above_the_empirical_tail():
    """At 8 values of x per tail, inf_lam e^{psibar(lam) - lam x} (the Chernoff bound on
    P(D - E D >= x) from A'+) is >= the Clopper-Pearson lower end (at 1e-4) of the
    empirical tail of 2e5 exact AR(1) draws (seed 1): no hypothesis about which x matter."""
    from scipy.stats import beta as beta_dist

    rho, n = 0.9, 200_000
    w = weights(B2, K0, 10)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n)
    d = w[0] * ndtr(x)
    for j in range(1, w.size):
        x = rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
        d += w[j] * ndtr(x)
    d -= 0.5 * w.sum()
    lams = np.geomspace(0.1, 1e4, 200)
    for sign in (1.0, -1.0):
        psi = log_mgf(w, sign * lams, rho=rho)
        for q in np.linspace(0.5, 0.9999, 8):
            xq = float(np.quantile(sign * d, q))
            k = int(np.count_nonzero(sign * d >= xq))
            lower = beta_dist.ppf(1e-4, k, n - k + 1)
            chern = float(np.min(np.exp(np.minimum(psi - lams * xq, 0.0))))
            assert chern >= lower, (sign, q, chern, lower)


def test_bound_holds_in_the_engine():
    """The Chernoff bound A'+ from the engine's own ar1 simulation: d = 1 and d = 6,
    delta = 0.1, violations below delta (one-sided binomial test at 1e-4, 6000 / 1000)."""
    assert_bound_holds_in_the_engine("copula-chernoff", make_process("ar1", rho=0.97),
                                     beta2=B2, k0=K0, lags=LAGS)


def test_below_the_trivial_bound_where_the_old_statements_were_not():
    """What A'+ is for: ar1 rho = 0.99 at lag 100 (the paper's bound fails there), d = 1 and
    100, delta = 0.05: the corrected bound used to equal the trivial bound; A'+ is below it
    and enters the corrected bound."""
    p = make_process("ar1", rho=0.99)
    lags = [100]
    trivial = worst_case(1.0, 0.999, 1228, lags)
    for d in (1, 100):
        a = bound("copula-chernoff", p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)
        old = min(bound(k, p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)[0]
                  for k in ("chebyshev", "gaussian", "markov"))
        assert old >= trivial[0] and a[0] < 0.96 * trivial[0], (d, a / trivial)
        best, used = corrected_bound(p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)
        assert "copula-chernoff" in used and best[0] == a[0]


def test_bad_inputs_raise_clear_errors():
    for t in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="tangent point t must be"):
            majorant_curvature(t)
    w = weights(0.9, 10, 5)
    for rho in (1.0, -1.0, 2.0):
        with pytest.raises(ValueError, match="rho must be in"):
            log_mgf(w, np.array([0.1]), rho=rho)
    with pytest.raises(ValueError, match="G must be"):
        log_mgf(w, np.array([0.1]), rho=0.5, G=0.0)
    with pytest.raises(ValueError, match="w must be"):
        log_mgf(np.array([]), np.array([0.1]), rho=0.5)
    with pytest.raises(ValueError, match="Statement A'\\+ does not apply"):
        bound("copula-chernoff", make_process("regime"), beta2=B2, k0=K0, lags=LAGS,
              delta=0.1)
