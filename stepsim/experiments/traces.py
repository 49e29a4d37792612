"""Reductions of a finished run's trace that the paper checks read: plain functions of a
:class:`~stepsim.training.FitResult`.

* :func:`v_curve` — ||v||_1, ||v||_2, Z_k and the phase at ~200 log-spaced steps (Fig. 2, 3);
* :func:`z_window` — the smallest mean of Z_k = ||v_k - v_{k-1}||_1 / d over a window of
  T_w = ``criteria.window_length(beta2)`` steps, and where (what AutoSwitch compares with eps);
* :func:`table1` — the Table 1 score at the run's switch step (``analysis.table1_score``);
* :func:`score_curve` — the Table 1 score of ~60 log-spaced k0 (``analysis.table1_score``).

Every value is a JSON-ready number or list (NaN where the trace has none).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim import _libm


def v_curve(result, points: int = 200) -> dict:
    """{"step", "v_l1", "v_l2", "z", "phase"} at ``points`` log-spaced steps 1..T (T: the
    steps the trace holds; fewer than asked when the run stopped)."""
    trace = result.trace
    at = np.unique(_libm.geomspace(1, max(len(trace), 1), points).astype(int))[:len(trace)]
    return {"step": at.tolist(), "v_l1": trace.v_l1[at - 1].tolist(),
            "v_l2": trace.v_l2[at - 1].tolist(), "z": trace.z[at - 1].tolist(),
            "phase": trace.phase[at - 1].tolist()}


def z_window(result) -> dict:
    """{"window", "min_mean", "at_step", "first_z"}: the smallest T_w-step mean of Z_k
    (``at_step``: the window's last step; NaN / None when the run is shorter than T_w)."""
    from stepsim.recipes.criteria import window_length

    window = window_length(result.recipe.optimizer.beta2)
    z = result.trace.z
    first = float(z[0]) if z.size else math.nan
    if z.size < window:
        return {"window": window, "min_mean": math.nan, "at_step": None, "first_z": first}
    means = np.convolve(z, np.ones(window) / window, mode="valid")
    i = int(np.argmin(means))
    return {"window": window, "min_mean": float(means[i]), "at_step": i + window,
            "first_z": first}


def table1(result) -> dict:
    """{"k0", "score", "steps_available"}: the Table 1 score of the run's switch step
    (score None when the run never switched or switched at its last step)."""
    from stepsim.recipes.analysis import table1_score

    k0 = result.switch_step
    if k0 is None or not 1 <= k0 < len(result.trace):
        return {"k0": k0, "score": None, "steps_available": 0}
    s = table1_score(result.trace.dv_l1, k0)
    return {"k0": k0, "score": s.score, "steps_available": s.steps_available}


def score_curve(result, points: int = 60) -> dict:
    """{"k0", "score"}: the Table 1 score of every k0 on a log grid 1..T - horizon."""
    from stepsim.recipes.analysis import TABLE1_HORIZON, table1_score

    at = np.unique(_libm.geomspace(1, max(len(result.trace) - TABLE1_HORIZON, 1),
                                points).astype(int))
    return {"k0": at.tolist(),
            "score": [table1_score(result.trace.dv_l1, int(k)).score for k in at]}


def v_late_ratio(result, tail: float = 0.1) -> float:
    """R = mean ||v||_1 over the last ``tail`` of the steps / its peak over the run (Fig. 2:
    near 1 when v stays large late, small when it decays); NaN without a trace."""
    v = result.trace.v_l1
    if v.size == 0 or not np.all(np.isfinite(v)) or float(np.max(v)) <= 0:
        return math.nan
    last = v[-max(1, int(tail * v.size)):]
    return float(np.mean(last)) / float(np.max(v))


def summary(result) -> dict:
    """What a check reads of a run: metrics, switch step, final loss, final N:M, learning
    curves and every reduction above (``v_curve``, ``z_window`` and ``v_late_ratio``
    under Adam; ``table1``; ``score_curve``)."""
    out = {"metrics": {k: float(v) for k, v in result.metrics.items()},
           "switch_step": result.switch_step,
           "final_loss": float(result.trace.loss[-1]) if len(result.trace) else math.nan,
           "nm": {k: list(v) for k, v in result.nm.items()},
           "curves": {k: np.asarray(v).tolist() for k, v in result.curves.items()},
           "v_curve": v_curve(result), "table1": table1(result)}
    if hasattr(result.recipe.optimizer, "beta2"):
        out["z_window"] = z_window(result)
        out["v_late_ratio"] = v_late_ratio(result)
        if np.all(np.isfinite(result.trace.dv_l1)) and len(result.trace) > 1:
            out["score_curve"] = score_curve(result)
    return out


__all__ = ["score_curve", "summary", "table1", "v_curve", "v_late_ratio", "z_window"]
