"""Reductions of a finished run's trace that the paper checks read: plain functions of a
:class:`~stepsim.training.FitResult`.

* :func:`v_curve` — ||v||_1, ||v||_2, Z_k and the phase at ~200 log-spaced steps (Fig. 2, 3);
* :func:`z_window` — the smallest mean of Z_k = ||v_k - v_{k-1}||_1 / d over a window of
  T_w = ``criteria.window_length(beta2)`` steps, and where (what AutoSwitch compares with eps);
* :func:`table1` — the Table 1 score at the run's switch step (``analysis.table1_score``);
* :func:`score_curve` — the Table 1 score of ~60 log-spaced k0 (``analysis.table1_score``);
* :func:`flip_blocks` — the mask flip rate in ~100 block means (the successors comparison).

Every value is a JSON-ready number or list (NaN where the trace has none).
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground import libm as _libm


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


#: steps averaged at the start and up to k0 by :func:`plateau_ratio` (PROTOCOL.md, "Switch
#: premises":
#: ``plateau.window``; a test keeps the two equal)
PLATEAU_WINDOW = 20


def plateau_ratio(loss, k0, window: int = PLATEAU_WINDOW) -> float | None:
    """The mean batch loss of the ``window`` steps up to k0 over the mean of the first
    ``window`` steps (PROTOCOL.md, "Switch premises"; the window is shortened to k0 // 2 when k0 < 2
    window, at least 1). loss: per-step batch losses (step k at index k - 1). None
    without a switch or a loss at k0; NaN when either mean is not finite or the start's
    is <= 0. Phase 1 of STEP is dense Adam, so at k0 this is the dense loss's fall."""
    if k0 is None:
        return None
    k0, window = int(k0), int(window)
    if window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    if k0 < 1 or len(loss) < k0:
        return None
    w = max(1, min(window, k0 // 2))
    start = math.fsum(float(x) for x in loss[:w]) / w
    now = math.fsum(float(x) for x in loss[k0 - w:k0]) / w
    if not (math.isfinite(start) and math.isfinite(now)) or start <= 0:
        return math.nan
    return now / start


def switch(result) -> dict:
    """{"k0", "loss_ratio", "g2_over_vstar"}: the run's switch step, its batch loss at k0
    over its start (:func:`plateau_ratio`: the plateau premise, PROTOCOL.md "Switch premises"; None
    without a switch) and the g^2 / v* record of a run that froze v
    (``FreezeV.diagnose``; {} for runs stored before it existed)."""
    k0 = result.switch_step
    return {"k0": k0, "loss_ratio": plateau_ratio(result.trace.loss, k0),
            "g2_over_vstar": dict((result.diagnostics or {}).get("g2_over_vstar", {}))}


def flip_blocks(result, points: int = 100) -> dict:
    """The mask flip rate (``Trace.flip_rate``) as means over consecutive blocks of
    B = ceil(T / ``points``) steps (block b: steps b B + 1 .. (b + 1) B): {"block": B,
    "rate": [...]} (None for a block without a sparse mask, e.g. a dense run)."""
    rate = np.asarray(result.trace.flip_rate, dtype=np.float64)
    size = max(1, math.ceil(len(rate) / points))
    out = []
    for lo in range(0, len(rate), size):
        block = rate[lo:lo + size]
        block = block[np.isfinite(block)]
        out.append(float(sum(block.tolist()) / len(block)) if len(block) else None)
    return {"block": size, "rate": out}


def summary(result) -> dict:
    """What a check reads of a run: metrics, switch step, final loss, final N:M, learning
    curves and every reduction above (``v_curve``, ``z_window`` and ``v_late_ratio``
    under Adam; ``table1``; ``score_curve``)."""
    out = {"metrics": {k: float(v) for k, v in result.metrics.items()},
           "switch_step": result.switch_step,
           "final_loss": float(result.trace.loss[-1]) if len(result.trace) else math.nan,
           "nm": {k: list(v) for k, v in result.nm.items()},
           "curves": {k: np.asarray(v).tolist() for k, v in result.curves.items()},
           "v_curve": v_curve(result), "table1": table1(result), "switch": switch(result),
           "flip_blocks": flip_blocks(result)}
    if hasattr(result.recipe.optimizer, "beta2"):
        out["z_window"] = z_window(result)
        out["v_late_ratio"] = v_late_ratio(result)
        if np.all(np.isfinite(result.trace.dv_l1)) and len(result.trace) > 1:
            out["score_curve"] = score_curve(result)
    return out


__all__ = ["PLATEAU_WINDOW", "flip_blocks", "plateau_ratio", "score_curve", "summary",
           "switch", "table1", "v_curve", "v_late_ratio", "z_window"]
