"""Numerical verification of the corrected Theorem 1 bounds (paper_checks/theorem1.md §5),
in the engine.

``verify(specs, ...)`` simulates each process with :func:`.engine.simulate` and, for each
delta and each d in (1, dim), evaluates every bound of :mod:`.bounds` whose assumptions
the process meets, plus the corrected bound min(Chebyshev, A, A+, B, B+ where they apply,
trivial): per lag the
violations (statistic > bound; >= for the paper's strict bound), their Clopper-Pearson
interval, and the tightness bound / empirical (1 - delta)-quantile and bound / trivial.
The plug-in bound is estimated per trial from the g^2 of that trial before k0 (the
process's NumPy path with the same seed, which is the path the engine simulated):
coordinate 0 for d = 1, the first ``scoring.POOL`` coordinates pooled for the inf-norm.
Driven by ``paper_checks/theorem1_bounds.py`` (full and ``--quick``).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim.theorem1.bounds import (
    CORRECTED_TERMS,
    KINDS,
    PROVED,
    applicable,
    bound,
)
from stepsim.theorem1.closed_forms import worst_case
from stepsim.theorem1.engine import k0_statement, lag_grid, simulate
from stepsim.theorem1.scoring import plugin_bounds, pre_switch_g2, score


def default_specs():
    """(label, process) pairs of the verification: AR(1) rho 0.5/0.9/0.99 (squashed: B,
    A' and A'+ apply; Gaussian g: A and A+ apply), sticky (B, B'+), regime switching and
    two-state chains with known lambda (B and B+), and the sine (no spectral gap: Chebyshev
    and the plug-in)."""
    from stepsim.theorem1.chains import make_chain
    from stepsim.theorem1.processes import make_process

    specs = [(f"ar1 rho={r}", make_process("ar1", rho=r)) for r in (0.5, 0.9, 0.99)]
    specs += [(f"gauss_ar1 rho={r}", make_chain("gauss_ar1", rho=r)) for r in (0.5, 0.9, 0.99)]
    specs += [("sticky q=0.01", make_chain("sticky", q=0.01)),
              ("regime q=1e-3", make_process("regime")),
              ("twostate lambda=0.9", make_chain("twostate", a=0.05, b=0.05)),
              ("twostate lambda=0.99", make_chain("twostate", a=0.005, b=0.005)),
              ("sine", make_process("sine"))]
    return specs


def verify_one(label, process, *, beta2=0.999, trials=1000, dim=100, horizon=10_000,
               per_decade=8, seed=0, deltas=(0.05, 0.01)) -> dict:
    """Everything for one process (see the module docstring); a JSON-able dict."""
    k0 = k0_statement(beta2)
    lags = lag_grid(horizon, per_decade)
    sim = simulate(process, beta2=beta2, k0=k0, lags=lags, trials=trials, dim=dim, seed=seed)
    gaussian_g = hasattr(process, "gaussian_autocovariance")
    trivial = None if gaussian_g else worst_case(float(process.G), beta2, k0, lags)
    independent = bool(getattr(process, "independent_coordinates", False))
    samples = {1: sim.stats.reshape(-1, len(lags)) if independent else sim.stats[:, 0, :],
               dim: sim.stats.max(axis=1)}
    pre = pre_switch_g2(process, seed, trials, dim, k0)  # (k0, trials, <= POOL)
    why = {kind: applicable(kind, process) for kind in KINDS}
    if gaussian_g:
        why["paper"] = "g^2 is unbounded: the paper's G does not exist"
    out = {"label": label, "process": process.name, "params": dict(process.params),
           "trials": trials, "dim": dim, "k0": k0, "beta2": beta2, "seed": seed,
           "lags": lags.tolist(), "trivial": None if trivial is None else trivial.tolist(),
           "not_applicable": {k: v for k, v in why.items() if v is not None},
           "seconds": sim.seconds, "cases": []}
    for delta in deltas:
        for d, sample in samples.items():
            case = {"delta": delta, "d": d, "n": int(sample.shape[0]),
                    "quantile": np.quantile(sample, 1 - delta, axis=0,
                                            method="inverted_cdf").tolist(), "bounds": {}}
            values = {}
            for kind in KINDS:
                if why[kind] is not None:
                    continue
                if kind == "plugin":
                    if d == 1:  # coordinate 0 of each trial, its own pre-k0 path
                        b = plugin_bounds(pre[:, :, :1], beta2, k0, lags, delta, 1)
                        s = sim.stats[:, 0, :]
                    else:
                        b = plugin_bounds(pre, beta2, k0, lags, delta, d)
                        s = sample
                    case["bounds"][kind] = score(s, b, False, delta, trivial)
                    continue
                values[kind] = bound(kind, process, beta2=beta2, k0=k0, lags=lags,
                                     delta=delta, dim=d)
                case["bounds"][kind] = score(sample, values[kind], kind == "paper", delta,
                                              trivial)
            proved = [values[k] for k in CORRECTED_TERMS[1:] if k in values]
            if proved:
                best = np.minimum(np.min(proved, axis=0), values["chebyshev"])
                if trivial is not None:
                    best = np.minimum(best, trivial)
                case["bounds"]["corrected"] = score(sample, best, False, delta, trivial)
            for kind in ("gaussian", "gaussian-chernoff", "markov-chernoff", "copula-chernoff",
                         "sticky-chernoff"):
                if kind in values:  # A / Chebyshev, A+, B+, ... too
                    key = "gaussian_over_chebyshev" if kind == "gaussian" else \
                        f"{kind}_over_chebyshev"
                    case[key] = (values[kind] / values["chebyshev"]).tolist()
            out["cases"].append(case)
    return out


def summary_rows(result: dict) -> list[dict]:
    """One row per (bound, d, delta): the numbers of the closing table."""
    rows = []
    for case in result["cases"]:
        for kind, s in case["bounds"].items():
            proved = PROVED.get(kind, True)
            rt = np.asarray(s["ratio_trivial"], dtype=float)
            rq = np.asarray(s["ratio_quantile"], dtype=float)
            rq = rq[np.isfinite(rq)]
            rows.append({
                "process": result["label"], "bound": kind, "d": case["d"],
                "delta": case["delta"], "proved": proved, "n": s["n"],
                "max_rate": float(np.max(s["rate"])), "max_ci_high": s["max_ci_high"],
                "holds": s["max_ci_high"] <= case["delta"],
                "ratio_quantile_median": float(np.median(rq)) if rq.size else math.nan,
                "ratio_quantile_min": float(np.min(rq)) if rq.size else math.nan,
                "ratio_trivial_median": float(np.nanmedian(rt)) if np.any(np.isfinite(rt))
                else math.nan,
                "share_below_trivial": float(np.mean(rt < 1.0)) if np.any(np.isfinite(rt))
                else math.nan,
                "gaussian_over_chebyshev_median": (
                    float(np.median(case["gaussian_over_chebyshev"]))
                    if kind == "gaussian" and "gaussian_over_chebyshev" in case else None),
                "over_chebyshev": _over_chebyshev(case, kind),
                "share_below_trivial_where_paper_fails": (
                    _share_where_paper_fails(case, rt) if kind == "corrected" else None),
            })
    return rows


def _over_chebyshev(case: dict, kind: str) -> tuple[float, float, float] | None:
    """(median, min, max) over lags of bound / Chebyshev for A, A+, A'+, B+, B'+, else None."""
    key = "gaussian_over_chebyshev" if kind == "gaussian" else f"{kind}_over_chebyshev"
    if key not in case:
        return None
    r = np.asarray(case[key], dtype=float)
    return float(np.median(r)), float(np.min(r)), float(np.max(r))


def _share_where_paper_fails(case: dict, ratio_trivial: np.ndarray) -> float | None:
    """Share of the lags where the paper's bound FAILS (its violation rate's Clopper-Pearson
    lower end > delta) at which the bound is strictly below the trivial bound; None if the
    paper's bound fails at no lag (or is not defined: Gaussian g)."""
    paper = case["bounds"].get("paper")
    if paper is None or not np.any(np.isfinite(ratio_trivial)):
        return None
    failing = np.asarray(paper["ci_low"], dtype=float) > case["delta"]
    if not failing.any():
        return None
    return float(np.mean(ratio_trivial[failing] < 1.0))


__all__ = ["default_specs", "summary_rows", "verify_one"]
