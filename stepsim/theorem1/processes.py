"""Gradient processes g_k^2 for the Theorem 1 checker.

Theorem 1 assumes g_k^2 is *stationary* with ``||g_k^2||_inf <= G``. The built-ins cover
that assumption literally — independent families and stationary processes that are NOT
independent over time — and add nonstationary negative controls. Every built-in draws
``g_k^2 = G * u_k`` with ``u_k`` in [0, 1] from the counter-based generator of ``_rng``,
has a numba fast path (``_kernels.fill``) and the NumPy implementation below, and
both give the same numbers (bit for bit for the processes built from +, *, / only;
in practice also for those calling log/sin/exp/erfc, which use the same libm here).

Plugging in your own process (the protocol)
-------------------------------------------
Any object with these members works (``name``, ``stationary`` and
``independent_coordinates`` are optional)::

    G: float                          # the bound: every g^2 must be <= G
    start(seed: int, shape) -> state  # shape = (trials, dim); draw the state at step 0
                                      # from the stationary law (e.g. a Generator + x_0)
    sample(state, k_first, n_steps) -> ndarray (n_steps, trials, dim) of g^2 >= 0
                                      # steps k_first .. k_first + n_steps - 1, in order;
                                      # may update ``state`` in place (Markov processes
                                      # continue across chunks)
    independent_coordinates: bool     # True if the dim coordinates of a trial are
                                      # i.i.d. (default False: only coordinate 0 is used
                                      # for per-coordinate rates)

The engine calls ``sample`` with consecutive chunks starting at step 1 and checks every
chunk (shape, finite, >= 0, <= G). A process that draws from
``np.random.default_rng(seed)`` in time order gives the same bits for the same seed
whatever the chunk size. ``sample`` may itself call a numba function for speed. Example::

    class Beta:
        name, G, stationary, independent_coordinates = "beta", 1.0, True, True
        def start(self, seed, shape):
            return {"rng": np.random.default_rng(seed), "shape": shape}
        def sample(self, state, k_first, n_steps):
            return state["rng"].beta(0.5, 2.0, size=(n_steps, *state["shape"]))
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from stepsim._ground import libm as _libm
from stepsim._ground.validate import check_real
from stepsim.theorem1 import _rng


@dataclasses.dataclass(frozen=True)
class BuiltinProcess:
    """A built-in process: ``g_k^2 = G * u_k``; subclasses define the law of u_k.

    ``params`` holds the process's parameters (a dict, shown in results). Class attributes:
    ``name`` (also the key of its numba kernel), ``stationary`` (does it satisfy
    Theorem 1's assumption?), ``independent_in_time``, ``law`` (its stationary law).
    """

    G: float = 1.0
    params: dict = dataclasses.field(default_factory=dict)

    name = "?"
    stationary = True
    independent_in_time = True
    independent_coordinates = True
    law = ""
    defaults: ClassVar[dict] = {}  # parameter name -> default (not a dataclass field)

    def __post_init__(self):
        check_real("G", self.G, minimum=0.0, min_open=True)
        unknown = set(self.params) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {sorted(unknown)} for process {self.name!r}; "
                f"it takes {sorted(self.defaults) or 'none'}"
            )
        merged = {**self.defaults, **self.params}
        object.__setattr__(self, "params", {k: float(merged[k]) for k in self.defaults})
        self._check_params(self.params)

    def _check_params(self, p: dict) -> None:
        """Raise ValueError for parameters outside their domain."""

    def kernel_params(self) -> np.ndarray:
        """float64 (4,) parameter vector p read by the process's numba kernel."""
        values = list(self.params.values())
        return np.array(values + [0.0] * (4 - len(values)), dtype=np.float64)

    # --- the NumPy implementation (the protocol) --------------------------------------
    def start(self, seed: int, shape) -> dict:
        trials, dim = shape
        keys = _rng.stream_keys(seed, np.arange(trials)[:, None], np.arange(dim)[None, :])
        skeys = _rng.stream_keys(seed, np.arange(trials)[:, None], _rng.SHARED_COORD)
        state = {"keys": keys, "skeys": np.broadcast_to(skeys, keys.shape)}
        state["x"] = self._initial(state)
        return state

    def _initial(self, state) -> np.ndarray:
        return np.zeros(state["keys"].shape)

    def sample(self, state, k_first: int, n_steps: int) -> np.ndarray:
        """g^2 for steps k_first .. k_first + n_steps - 1: float64 (n_steps, trials, dim)."""
        out = np.empty((n_steps, *state["keys"].shape))
        for j in range(n_steps):
            out[j] = self.G * self._unit(state, k_first + j)
        return out

    def _unit(self, state, k: int) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        kind = "stationary" if self.stationary else "NONSTATIONARY (negative control)"
        dep = "independent over time" if self.independent_in_time else "dependent over time"
        params = ", ".join(f"{k}={v:g}" for k, v in self.params.items()) or "no parameters"
        return f"{self.name}: {kind}, {dep}; {params}; G = {self.G:g}. {self.law}"


class Uniform(BuiltinProcess):
    name = "uniform"
    law = "i.i.d. g^2 ~ U[0, G]."

    def _unit(self, state, k):
        return _rng.uniform(state["keys"], k, 0)


class TwoPoint(BuiltinProcess):
    name = "twopoint"
    defaults: ClassVar[dict] = {"p": 0.5, "low": 0.0}
    law = "i.i.d. two-point: g^2 = G with probability p, else low * G."

    def _check_params(self, p):
        check_real("p", p["p"], minimum=0.0, maximum=1.0)
        check_real("low", p["low"], minimum=0.0, maximum=1.0)

    def _unit(self, state, k):
        return np.where(_rng.uniform(state["keys"], k, 0) < self.params["p"], 1.0,
                        self.params["low"])


class Rademacher(BuiltinProcess):
    name = "rademacher"
    law = ("g = +-sqrt(G) with random signs (Rademacher-scaled): g^2 = G is constant, so "
           "vhat_k = G for all k and the statistic is 0 (a degenerate sanity control).")

    def _unit(self, state, k):
        return np.ones(state["keys"].shape)


class ClippedGaussian(BuiltinProcess):
    name = "clipped_gaussian"
    defaults: ClassVar[dict] = {"mu": 0.0, "sigma": 0.5}
    law = ("i.i.d. g = sqrt(G) * clip(mu + sigma * Z, -1, 1), Z ~ N(0, 1); mu, sigma in "
           "units of sqrt(G).")

    def _check_params(self, p):
        check_real("mu", p["mu"])
        check_real("sigma", p["sigma"], minimum=0.0)

    def _unit(self, state, k):
        y = self.params["mu"] + self.params["sigma"] * _rng.normal(state["keys"], k, 0)
        y = np.minimum(np.maximum(y, -1.0), 1.0)
        return y * y


class Spikes(BuiltinProcess):
    name = "spikes"
    defaults: ClassVar[dict] = {"p": 1e-3, "base": 0.01}
    law = "i.i.d. rare spikes: g^2 = G with probability p, else base * G * U[0, 1]."

    def _check_params(self, p):
        check_real("p", p["p"], minimum=0.0, maximum=1.0)
        check_real("base", p["base"], minimum=0.0, maximum=1.0)

    def _unit(self, state, k):
        spike = _rng.uniform(state["keys"], k, 0) < self.params["p"]
        return np.where(spike, 1.0, self.params["base"] * _rng.uniform(state["keys"], k, 1))


class AR1(BuiltinProcess):
    name = "ar1"
    independent_in_time = False
    defaults: ClassVar[dict] = {"rho": 0.999}
    law = ("stationary Gaussian AR(1) x_k = rho x_{k-1} + sqrt(1 - rho^2) Z_k, x_0 ~ N(0, 1), "
           "squashed g^2 = G * Phi(x_k): the marginal law is U[0, G] (as 'uniform'), only "
           "the dependence differs; correlation time ~ 1/(1 - rho) steps.")

    def _check_params(self, p):
        check_real("rho", p["rho"], minimum=-1.0, maximum=1.0, min_open=True, max_open=True)

    def kernel_params(self):
        rho = self.params["rho"]
        return np.array([rho, math.sqrt(1.0 - rho * rho), 0.0, 0.0])

    def _initial(self, state):
        return _rng.normal(state["keys"], 0, 0)

    def _unit(self, state, k):
        rho, s = self.kernel_params()[:2]
        state["x"] = rho * state["x"] + s * _rng.normal(state["keys"], k, 0)
        # math.erfc (libm) element-wise: the same function numba calls, so the bits agree
        # (scipy.special.erfc differs in the last ulp)
        return 0.5 * _erfc(-state["x"] * _INV_SQRT2).astype(np.float64)


_INV_SQRT2 = 1.0 / np.sqrt(2.0)
_erfc = np.frompyfunc(math.erfc, 1, 1)


class Regime(BuiltinProcess):
    name = "regime"
    independent_in_time = False
    defaults: ClassVar[dict] = {"q": 1e-3, "low": 0.1, "shared": 0.0}
    law = ("stationary regime switching: a two-state Markov chain s_k flips with probability "
           "q per step (started from its stationary law, P(s=1) = 1/2); g^2 ~ U[0, G] when "
           "s = 1 and U[0, low * G] when s = 0. shared=1 makes all coordinates of a trial "
           "share one chain (coupled coordinates).")

    def _check_params(self, p):
        check_real("q", p["q"], minimum=0.0, maximum=1.0)
        check_real("low", p["low"], minimum=0.0, maximum=1.0)
        if p["shared"] not in (0.0, 1.0):
            raise ValueError(f"shared must be 0 or 1, got {p['shared']}")

    @property
    def independent_coordinates(self):
        return self.params["shared"] == 0.0

    def _chain(self, state):
        return state["skeys"] if self.params["shared"] else state["keys"]

    def _initial(self, state):
        return np.where(_rng.uniform(self._chain(state), 0, 2) < 0.5, 1.0, 0.0)

    def _unit(self, state, k):
        flip = _rng.uniform(self._chain(state), k, 2) < self.params["q"]
        state["x"] = np.where(flip, 1.0 - state["x"], state["x"])
        scale = np.where(state["x"] != 0.0, 1.0, self.params["low"])
        return scale * _rng.uniform(state["keys"], k, 0)


class Sine(BuiltinProcess):
    name = "sine"
    independent_in_time = False
    defaults: ClassVar[dict] = {"period": 50_000.0}
    law = ("random-phase sinusoid g^2 = G (1 + sin(2 pi k / period + phi)) / 2, phi ~ U[0, 2 pi): "
           "strictly stationary (arcsine marginal on [0, G]) but not mixing.")

    def _check_params(self, p):
        check_real("period", p["period"], minimum=0.0, min_open=True)

    def _initial(self, state):
        return _rng.TWO_PI * _rng.uniform(state["keys"], 0, 0)

    def _unit(self, state, k):
        return 0.5 * (1.0 + _libm.sin(state["x"] + _rng.TWO_PI * k / self.params["period"]))


class Drift(BuiltinProcess):
    name = "drift"
    stationary = False
    defaults: ClassVar[dict] = {"ramp": 10_000.0}
    law = "g^2 = G * min(1, k / ramp) * U[0, 1] (the mean grows, then levels off)."

    def _check_params(self, p):
        check_real("ramp", p["ramp"], minimum=0.0, min_open=True)

    def _unit(self, state, k):
        return min(1.0, k / self.params["ramp"]) * _rng.uniform(state["keys"], k, 0)


class Decay(BuiltinProcess):
    name = "decay"
    stationary = False
    defaults: ClassVar[dict] = {"tau": 2000.0}
    law = ("g^2 = G * exp(-k / tau) * U[0, 1] (gradients die out, as in "
           "converging dense training).")

    def _check_params(self, p):
        check_real("tau", p["tau"], minimum=0.0, min_open=True)

    def _unit(self, state, k):
        return math.exp(-k / self.params["tau"]) * _rng.uniform(state["keys"], k, 0)


PROCESSES = {
    cls.name: cls
    for cls in (Uniform, TwoPoint, Rademacher, ClippedGaussian, Spikes, AR1, Regime, Sine,
                Drift, Decay)
}


def make_process(name: str, G: float = 1.0, **params) -> BuiltinProcess:
    """A built-in process by name, e.g. ``make_process("ar1", G=1.0, rho=0.99)``."""
    if not isinstance(name, str):
        raise TypeError(f"process name must be a string, got {name!r}")
    if name not in PROCESSES:
        from stepsim.theorem1.chains import CHAINS, make_chain

        if name in CHAINS:  # the corrected bounds' NumPy-only chains (the generic path)
            return make_chain(name, G, **params)
        raise ValueError(f"unknown process {name!r}; choose one of "
                         f"{sorted(PROCESSES) + sorted(CHAINS)}")
    return PROCESSES[name](G=G, params=params)


def check_process(process) -> None:
    """TypeError/ValueError unless ``process`` follows the protocol above."""
    for member in ("G", "start", "sample"):
        if not hasattr(process, member):
            raise TypeError(
                f"process {process!r} lacks {member!r}: a process needs G, "
                "start(seed, shape) and sample(state, k_first, n_steps)"
            )
    check_real("process.G", process.G, minimum=0.0, min_open=True)


def process_name(process) -> str:
    return getattr(process, "name", type(process).__name__)
