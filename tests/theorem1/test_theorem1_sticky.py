"""Statement B'+ (issue 25): the Chernoff bound for the sticky chain g^2 = G u (keep u with
probability 1 - q, else a fresh U[0, 1]) — each numerically checkable step of
paper_checks/theorem1.md §5.13."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.theorem1 import make_process
from tests.theorem1.engine_check import assert_bound_holds_in_the_engine
from stepsim.theorem1 import sticky
from stepsim.theorem1.bounds import bound, chernoff_psi, corrected_bound
from stepsim.theorem1.chernoff import StateModel, markov_log_mgf
from stepsim.theorem1.closed_forms import worst_case
from stepsim.theorem1.corrected import weights

B2, K0, LAGS = 0.9, 25, np.array([1, 4, 15, 60])

finite = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=25, deadline=None)
@given(w=st.lists(finite, min_size=1, max_size=10),
       lams=st.lists(st.floats(-20.0, 20.0), min_size=1, max_size=4),
       q=st.floats(1e-3, 1.0), G=st.floats(0.1, 4.0))
def test_kernels_agree_with_their_numpy_references(w, lams, q, G):
    """The exact O(n^2) kernel equals its NumPy reference (log-sum-exp rows) to 1e-12, and the
    bracket kernel (exp anchored every 32 nodes) its reference (exp at every node) to 1e-11
    relative, on random weights, exponents, q and G."""
    w, lams = np.array(w), np.array(lams)
    a = sticky.log_mgf_exact(w, lams, q=q, G=G)
    b = sticky.log_mgf_exact_reference(w, lams, q=q, G=G)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    from stepsim.theorem1._sticky_kernel import grid_kernel

    for upper in (True, False):
        k = grid_kernel(w, lams, q, G, 100, upper)
        r = sticky.log_mgf_bracket_reference(w, lams, q=q, G=G, nodes=100, upper=upper)
        np.testing.assert_allclose(k, r, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_exact_mgf_equals_the_sum_over_run_patterns(n):
    """Step 1 (the recursion and its unrolling): the O(n^2) m.g.f. equals brute force over the
    2^(n-1) keep/redraw patterns (each run's value an independent U[0, 1], integrated
    exactly by phi); for n = 2 also the closed form r phi(G(a1 + a2)) + q phi(G a1) phi(G a2)."""
    rng = np.random.default_rng(n)
    w = rng.normal(size=n)
    lams = np.array([-7.0, -1.0, -1e-3, 0.0, 0.5, 6.0])
    for q in (0.01, 0.3, 1.0):
        exact = sticky.log_mgf_exact(w, lams, q=q, G=1.7, centred=False)
        runs = sticky.log_mgf_runs(w, lams, q=q, G=1.7)
        np.testing.assert_allclose(exact, runs, rtol=1e-13, atol=1e-13)
        if n == 2:
            phi = lambda s: np.where(s == 0, 1.0, np.expm1(s) / np.where(s == 0, 1.0, s))
            a1, a2 = 1.7 * lams * w[0], 1.7 * lams * w[1]
            closed = (1 - q) * phi(a1 + a2) + q * phi(a1) * phi(a2)
            np.testing.assert_allclose(exact, np.log(closed), rtol=1e-13, atol=1e-13)


def test_q_one_is_the_iid_uniform_mgf_of_b_plus():
    """q = 1 (a fresh draw every step) gives B+'s i.i.d. uniform m.g.f. (transfer matrices)."""
    w = weights(B2, K0, 15)
    lams = np.array([-40.0, -3.0, 2.0, 40.0])
    uniform = StateModel(np.ones((1, 1)), np.ones(1), (((1.0, 0.0, 2.0),),))
    np.testing.assert_allclose(sticky.log_mgf_exact(w, lams, q=1.0, G=2.0),
                               markov_log_mgf(w, lams, uniform), rtol=1e-10, atol=1e-12)


def test_bracket_contains_the_exact_mgf_and_is_tight():
    """Step 2 (convexity): lower <= exact <= upper on the Theorem 1 weights (b2 = 0.9, k0 = 25,
    lag 60: 85 steps) at q = 0.01 and 0.2, for every exponent of the grid (lam sd(D) in
    [0.01, 1000]); and what the grid costs the bound: the Chernoff radius from the lower end
    is within 1e-4 (relative) of the one from the upper end at L = log 40 and log 20000
    (d = 1, delta = 0.05 and d = 100, delta = 0.01)."""
    from stepsim.theorem1.chernoff import chernoff_radius

    w = weights(B2, K0, 60)
    for q in (0.01, 0.2):
        p = make_process("sticky", q=q)
        lams = chernoff_psi("sticky-chernoff", p, B2, K0, 60)[0]
        both = np.concatenate([lams, -lams])
        exact = sticky.log_mgf_exact(w, both, q=q)
        lo, up = sticky.log_mgf_bracket(w, both, q=q)
        assert np.all(lo <= exact) and np.all(exact <= up), (q, np.min(exact - lo),
                                                              np.min(up - exact))
        np.testing.assert_array_equal(sticky.log_mgf(w, both, q=q), up)
        for L in (math.log(40.0), math.log(20000.0)):
            for part in (slice(None, lams.size), slice(lams.size, None)):
                r_up = chernoff_radius(lams, up[part], L)[0]
                r_lo = chernoff_radius(lams, lo[part], L)[0]
                assert r_lo <= r_up <= r_lo * (1 + 1e-4), (q, L, r_up / r_lo - 1)


def _engine_d(process, lag, trials=60_000, seed=3):
    """Signed D = vhat_k - vhat_k0 at one lag, one coordinate per trial, from the process's own
    sampler (the path the engine's generic route draws; the engine records only |D|)."""
    w = weights(B2, K0, lag)
    state = process.start(seed, (trials,))
    y = process.sample(state, 1, w.size)  # (k, trials)
    return w @ y, w


def test_mgf_matches_monte_carlo_within_its_error():
    """The exact m.g.f. equals a seeded Monte-Carlo mean of exp(lam D) (60k paths of the
    process's own sampler, lag 15: 40 steps) within 4 standard errors, both signs of lam."""
    p = make_process("sticky", q=0.05)
    d, w = _engine_d(p, 15)
    lams = np.array([-60.0, -15.0, -3.0, 3.0, 15.0, 60.0])
    exact = sticky.log_mgf_exact(w, lams, q=0.05, centred=False)
    for lam, ex in zip(lams, exact):
        e = np.exp(lam * d)
        m, se = e.mean(), e.std() / math.sqrt(d.size)
        assert abs(math.exp(ex) - m) <= 4 * se, (lam, math.exp(ex), m, se)


def test_chernoff_tail_is_above_the_empirical_tail():
    """At 8 values of x per tail, inf_lam e^{psibar(lam) - lam x} (the Chernoff bound on
    P(D - E D >= x) from B'+) is >= the Clopper-Pearson lower end (at 1e-4) of the empirical
    tail of 60k draws of D (the process's own sampler)."""
    from scipy.stats import beta as beta_dist

    p = make_process("sticky", q=0.02)
    d, w = _engine_d(p, 60, seed=4)
    d = d - 0.5 * w.sum()
    lams = np.geomspace(0.1, 1e4, 120)
    for sign in (1.0, -1.0):
        psi = sticky.log_mgf(w, sign * lams, q=0.02)
        for level in np.linspace(0.5, 0.9999, 8):
            xq = float(np.quantile(sign * d, level))
            k = int(np.count_nonzero(sign * d >= xq))
            lower = beta_dist.ppf(1e-4, k, d.size - k + 1)
            chern = float(np.min(np.exp(np.minimum(psi - lams * xq, 0.0))))
            assert chern >= lower, (sign, level, chern, lower)


def test_bound_holds_in_the_engine():
    """B'+ from the engine's own sticky simulation: d = 1 and d = 6, delta = 0.1, violations
    below delta (one-sided binomial test at 1e-4, 6000 / 1000 samples), and the bound is at
    least the empirical (1 - delta)-quantile."""
    assert_bound_holds_in_the_engine("sticky-chernoff", make_process("sticky", q=0.05),
                                     beta2=B2, k0=K0, lags=LAGS)


def test_below_the_trivial_bound_where_the_old_statements_were_not():
    """What B'+ is for: sticky q = 0.01 at lag 100 (b2 = 0.999, the statement's k0 = 1228;
    the paper's bound fails there), d = 1 and 100, delta = 0.05: Chebyshev and B are at or
    above the trivial bound; B'+ is below 0.9 x trivial and enters the corrected bound."""
    p = make_process("sticky", q=0.01)
    lags = [100]
    trivial = worst_case(1.0, 0.999, 1228, lags)
    for d in (1, 100):
        b = bound("sticky-chernoff", p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)
        old = min(bound(k, p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)[0]
                  for k in ("chebyshev", "markov"))
        assert old >= trivial[0] and b[0] < 0.9 * trivial[0], (d, b / trivial)
        best, used = corrected_bound(p, beta2=0.999, k0=1228, lags=lags, delta=0.05, dim=d)
        assert used == "markov+sticky-chernoff" and best[0] == b[0]


def test_bad_inputs_raise_clear_errors():
    w = weights(0.9, 10, 5)
    for q in (0.0, -0.1, 1.5, math.nan, "x"):
        with pytest.raises(ValueError, match="q must be"):
            sticky.log_mgf(w, np.array([0.1]), q=q)
    for fn in (sticky.log_mgf, sticky.log_mgf_exact, sticky.log_mgf_bracket):
        with pytest.raises(ValueError, match="w must be a non-empty"):
            fn(np.array([]), np.array([0.1]), q=0.1)
        with pytest.raises(ValueError, match="G must be"):
            fn(w, np.array([0.1]), q=0.1, G=0.0)
        with pytest.raises(ValueError, match="lams must be finite"):
            fn(w, np.array([np.inf]), q=0.1)
    with pytest.raises(ValueError, match="w must be a non-empty"):
        sticky.log_mgf(np.array([1.0, np.nan]), np.array([0.1]), q=0.1)
    with pytest.raises(ValueError, match="nodes must be an integer"):
        sticky.log_mgf_bracket(w, np.array([0.1]), q=0.1, nodes=0)
    with pytest.raises(ValueError, match="Statement B'\\+ does not apply"):
        bound("sticky-chernoff", make_process("ar1"), beta2=0.9, k0=10, lags=[1], delta=0.1)
