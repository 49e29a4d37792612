"""Stationary Markov and Gaussian processes for the corrected Theorem 1.

Processes that follow the protocol of :mod:`.processes` (NumPy only; the engine runs them
through its generic path) and that carry what the proved bounds of :mod:`.bounds` need:

* ``gauss_ar1``: Gaussian g (Statement A): g_k = sqrt(G) x_k / 10, x a stationary AR(1)
  with Corr(x_i, x_j) = rho^|i-j|, so g^2 = G x^2 / 100 is a quadratic form in Gaussians.
  g^2 is not bounded: ``G`` is only the engine's sanity cap (it is reached at |x| = 10,
  probability 1.5e-23 per draw, and the engine raises if it ever is, so a finished run is
  an exact Gaussian sample). The paper's bound and the trivial bound need a true bound on
  g^2: n/a here.
* ``sticky``: g^2 = G u_k with u_k = u_{k-1} with probability 1 - q, a fresh U[0, 1]
  otherwise (u_0 ~ U[0, 1]). Transition P = (1-q) I + q Pi: reversible, absolute spectral
  gap q (lambda = 1 - q), autocovariance G^2 (1-q)^h / 12.
* ``twostate``: g^2 in {low G, G}, a two-state chain that moves low -> high with
  probability a and high -> low with probability b, started from its stationary law
  P(high) = a / (a + b). Every two-state chain is reversible; its eigenvalues are 1 and
  1 - a - b, so lambda = |1 - a - b|, autocovariance Var (1 - a - b)^h.

Randomness: one ``np.random.default_rng(seed)`` per run, drawn in time order, so the same
seed gives the same path whatever the engine's chunk size.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from stepsim._ground.validate import check_real


class _Chain:
    """Shared protocol plumbing: parameters, description, start, i.i.d. coordinates."""

    name = "?"
    stationary = True
    independent_in_time = False
    independent_coordinates = True
    defaults: ClassVar[dict] = {}  # parameter name -> default
    law = ""

    def __init__(self, G: float = 1.0, **params):
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)} for process "
                             f"{self.name!r}; it takes {sorted(self.defaults)}")
        self.G = check_real("G", G, minimum=0.0, min_open=True)
        self.params = {k: float(params.get(k, v)) for k, v in self.defaults.items()}
        self._check(self.params)

    def _check(self, p):
        """Raise ValueError for parameters outside their domain."""

    def describe(self) -> str:
        params = ", ".join(f"{k}={v:g}" for k, v in self.params.items())
        return (f"{self.name}: stationary, dependent over time; {params}; G = {self.G:g}. "
                f"{self.law}")

    def start(self, seed: int, shape) -> dict:
        rng = np.random.default_rng(seed)
        state = {"rng": rng, "shape": tuple(shape)}
        state["x"] = self._initial(rng, state["shape"])
        return state

    def sample(self, state, k_first: int, n_steps: int) -> np.ndarray:
        """g^2 for steps k_first .. k_first + n_steps - 1: float64 (n_steps, trials, dim)."""
        out = np.empty((n_steps, *state["shape"]))
        for j in range(n_steps):
            out[j] = self._step(state)
        return out


class GaussAR1(_Chain):
    name = "gauss_ar1"
    defaults: ClassVar[dict] = {"rho": 0.9}
    law = ("Gaussian g: g_k = sqrt(G) x_k / 10, x_k = rho x_{k-1} + sqrt(1 - rho^2) Z_k, "
           "x_0 ~ N(0, 1); g^2 is unbounded (G is a sanity cap at |x| = 10 only).")

    def _check(self, p):
        check_real("rho", p["rho"], minimum=-1.0, maximum=1.0, min_open=True, max_open=True)

    def _initial(self, rng, shape):
        return rng.standard_normal(shape)

    def _step(self, state):
        rho = self.params["rho"]
        state["x"] = rho * state["x"] + math.sqrt(1.0 - rho * rho) * state["rng"].standard_normal(
            state["shape"])
        return (self.G / 100.0) * (state["x"] * state["x"])

    def gaussian_autocovariance(self, max_lag: int) -> np.ndarray:
        """gamma_g(h) = Cov(g_j, g_{j+h}) = (G/100) rho^h, h = 0..max_lag (g, not g^2)."""
        return self.G / 100.0 * np.array([math.pow(self.params["rho"], h)
                                          for h in range(max_lag + 1)])

    def autocovariance(self, max_lag: int) -> np.ndarray:
        """gamma_Y(h) = Cov(g_j^2, g_{j+h}^2) = 2 gamma_g(h)^2 (Isserlis)."""
        return 2.0 * self.gaussian_autocovariance(max_lag) ** 2

    def mean_g2(self) -> float:
        return self.G / 100.0


class Sticky(_Chain):
    name = "sticky"
    defaults: ClassVar[dict] = {"q": 0.01}
    law = ("sticky chain: g^2 = G u_k, u_k = u_{k-1} with probability 1 - q, else a fresh "
           "U[0, 1] (u_0 ~ U[0, 1]); lambda = 1 - q.")

    def _check(self, p):
        check_real("q", p["q"], minimum=0.0, maximum=1.0, min_open=True)

    def _initial(self, rng, shape):
        return rng.random(shape)

    def _step(self, state):
        rng, shape = state["rng"], state["shape"]
        move = rng.random(shape) < self.params["q"]
        fresh = rng.random(shape)
        state["x"] = np.where(move, fresh, state["x"])
        return self.G * state["x"]

    def markov_lambda(self) -> float:
        return 1.0 - self.params["q"]

    def autocovariance(self, max_lag: int) -> np.ndarray:
        lam = 1.0 - self.params["q"]
        return self.G ** 2 / 12.0 * np.array([math.pow(lam, h) for h in range(max_lag + 1)])

    def mean_g2(self) -> float:
        return self.G / 2.0


class TwoState(_Chain):
    name = "twostate"
    defaults: ClassVar[dict] = {"a": 0.05, "b": 0.05, "low": 0.0}
    law = ("two-state chain: g^2 in {low G, G}; low -> high with probability a, high -> low "
           "with probability b, P(high) = a / (a + b); lambda = |1 - a - b|.")

    def _check(self, p):
        check_real("a", p["a"], minimum=0.0, maximum=1.0, min_open=True)
        check_real("b", p["b"], minimum=0.0, maximum=1.0, min_open=True)
        check_real("low", p["low"], minimum=0.0, maximum=1.0)

    def _p_high(self) -> float:
        return self.params["a"] / (self.params["a"] + self.params["b"])

    def _initial(self, rng, shape):
        return (rng.random(shape) < self._p_high()).astype(np.float64)

    def _step(self, state):
        rng, shape = state["rng"], state["shape"]
        u = rng.random(shape)
        high = state["x"] != 0.0
        flip = np.where(high, u < self.params["b"], u < self.params["a"])
        state["x"] = np.where(flip, 1.0 - state["x"], state["x"])
        return self.G * np.where(state["x"] != 0.0, 1.0, self.params["low"])

    def markov_lambda(self) -> float:
        return abs(1.0 - self.params["a"] - self.params["b"])

    def autocovariance(self, max_lag: int) -> np.ndarray:
        p = self._p_high()
        var = p * (1.0 - p) * (1.0 - self.params["low"]) ** 2 * self.G ** 2
        r = 1.0 - self.params["a"] - self.params["b"]
        return var * np.array([math.pow(r, h) for h in range(max_lag + 1)])

    def mean_g2(self) -> float:
        p = self._p_high()
        return self.G * (p + (1.0 - p) * self.params["low"])


CHAINS = {cls.name: cls for cls in (GaussAR1, Sticky, TwoState)}


def make_chain(name: str, G: float = 1.0, **params):
    """A process of this module by name, e.g. ``make_chain("sticky", q=0.01)``."""
    if name not in CHAINS:
        raise ValueError(f"unknown process {name!r}; choose one of {sorted(CHAINS)}")
    return CHAINS[name](G, **params)


__all__ = ["CHAINS", "GaussAR1", "Sticky", "TwoState", "make_chain"]
