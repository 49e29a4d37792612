"""Analysis of a run's trace: numbers computed from what a run recorded, not criteria.

* :func:`table1_score` (and :class:`Table1Score`, ``TABLE1_HORIZON``): the paper's Table 1
  metric of a switch step k0, from the per-step ||v_k - v_{k-1}||_1 of a profiling run.
* :func:`run_criteria_on_v`: criteria (:mod:`stepsim.recipes.criteria`) fed a hand-made v
  trajectory step by step, as training would feed them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from stepsim._ground.validate import check_int, check_open_unit

# ------------------------------------------------------------------------- Table 1


@dataclasses.dataclass(frozen=True)
class Table1Score:
    """The paper's Table 1 metric for a switch step k0 (lower is better).

    score = (1 / steps_available) * sum_{k=k0}^{k0+steps_available-1} ||v_{k+1} - v_k||_1,
    normally with steps_available = horizon (1000 in the paper). It is always reported
    with its k0: the change of v shrinks along a run, so a later switch scores lower for
    free. ``truncated``: the trace ended before k0 + horizon, and fewer steps were averaged.
    """

    k0: int
    score: float
    horizon: int
    steps_available: int

    @property
    def truncated(self) -> bool:
        return self.steps_available < self.horizon

    def __repr__(self) -> str:
        note = f", truncated to {self.steps_available}" if self.truncated else ""
        return (f"Table1Score(k0={self.k0}, score={self.score:.4g}, "
                f"horizon={self.horizon}{note})")


#: The paper's Table 1 horizon: the score averages this many steps after k0.
TABLE1_HORIZON = 1000


def table1_score(dv_l1_trace, k0: int, horizon: int = TABLE1_HORIZON) -> Table1Score:
    """The paper's Table 1 score of switching at step k0.

    dv_l1_trace: 1-D, ``dv_l1_trace[k-1] = ||v_k - v_{k-1}||_1`` for steps k = 1..T (the
    ``dv_l1`` of each step's :class:`~stepsim.core.optim.AdamStats`, with v_0 = 0), from a run
    that keeps updating v (a profiling run, as the paper does: in a STEP run v is frozen
    after k0 and every later change is 0).

    score = (1/horizon) * sum_{k=k0}^{k0+horizon-1} ||v_{k+1} - v_k||_1
          = mean(dv_l1_trace[k0 : k0 + horizon]). (The paper prints
    10^-3 * sum_{t=t0}^{t0+1000}, 1001 terms; SPEC's horizon terms differ by <= 0.1%.)
    If the trace ends before step k0 + horizon, the available steps are averaged and
    ``steps_available`` (< horizon) says how many; none available is a ValueError.

    Parameters
    ----------
    dv_l1_trace : array_like, shape (T,)
        ||v_k - v_{k-1}||_1 per step (finite, >= 0).
    k0 : int >= 1
    horizon : int >= 1

    Returns
    -------
    Table1Score
    """
    trace = np.asarray(dv_l1_trace, dtype=np.float64)
    if trace.ndim != 1:
        raise ValueError(f"dv_l1_trace must be 1-D (one norm per step), got shape {trace.shape}")
    k0 = check_int("k0", k0, minimum=1)
    horizon = check_int("horizon", horizon, minimum=1)
    if not np.all(np.isfinite(trace)) or np.any(trace < 0):
        raise ValueError("dv_l1_trace must hold finite non-negative norms")
    window = trace[k0:k0 + horizon]  # ||v_{k+1} - v_k||_1 is trace[k], k = k0, k0+1, ...
    if window.size == 0:
        raise ValueError(f"k0={k0}: the trace (T={trace.size} steps) has no change after "
                         f"step k0 (needs ||v_{{k0+1}} - v_k0||_1, i.e. T > k0)")
    return Table1Score(k0=k0, score=math.fsum(window.tolist()) / window.size,
                       horizon=horizon, steps_available=int(window.size))


# ------------------------------------------------------------ criteria over a trajectory


def run_criteria_on_v(v_trajectory, criteria, *, beta2: float = 0.999, v0=None,
                      total_steps: int | None = None):
    """Feed a hand-made v trajectory through criteria, step by step, as training would.

    v_trajectory: float array of shape (T, ...) holding v_1, ..., v_T (row k-1 is v_k).
    v0: v_0 (default zeros, Adam's start). criteria: one criterion, or a mapping
    label -> criterion. beta2: for the bias correction of criteria with stats_on="vhat"
    (vhat_0 = 0, as :func:`~stepsim.adam_step`). total_steps: the run length given to
    ``init`` (default T; clipping fractions are of it). The statistics of each step are
    :func:`stepsim.core.reference.adam_stats`, with sum log|dv| always included.

    Returns the final state(s), in the shape given: a state, or a dict label -> state;
    ``state.fired_at`` is the switch step or None.

    Parameters
    ----------
    v_trajectory : ndarray, shape (T, ...)
    criteria : criterion or dict label -> criterion
    beta2 : float
    v0 : ndarray, optional
    total_steps : int, optional

    Returns
    -------
    state or dict label -> state
    """
    from stepsim.core.optim_hyper import AdamStats, vhat_scales
    from stepsim.core.reference import adam_stats

    single = not isinstance(criteria, dict)
    table = {None: criteria} if single else dict(criteria)
    for label, c in table.items():
        if not (hasattr(c, "init") and hasattr(c, "update")):
            where = "criteria" if single else f"criteria[{label!r}]"
            raise TypeError(f"{where} must be a criterion (see make_criterion) or a dict "
                            f"label -> criterion, got {type(c).__name__}")
    v = np.asarray(v_trajectory)
    if v.dtype.kind != "f":
        raise TypeError(f"v_trajectory must be a float array, got dtype {v.dtype}")
    if v.ndim < 2 or v.shape[0] < 1 or v[0].size < 1:
        raise ValueError(f"v_trajectory must have shape (T, ...) with T >= 1 and at least one "
                         f"coordinate, got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("v_trajectory must be finite")
    v = v.reshape(v.shape[0], -1)
    prev = np.zeros(v.shape[1]) if v0 is None else np.asarray(v0, dtype=np.float64).reshape(-1)
    if prev.shape != (v.shape[1],):
        raise ValueError(f"v0 has {prev.size} coordinates but v_trajectory rows have {v.shape[1]}")
    beta2 = check_open_unit("beta2", beta2)
    steps = v.shape[0]
    total_steps = steps if total_steps is None else check_int("total_steps", total_steps,
                                                              minimum=1)
    states = {label: c.init(total_steps) for label, c in table.items()}
    for k in range(1, steps + 1):
        live = [label for label in table if states[label].fired_at is None]
        if not live:
            break
        cache = {}
        for label in live:
            on = table[label].stats_on
            if on not in cache:
                scale_prev, scale_new = vhat_scales(beta2, k) if on == "vhat" else (1.0, 1.0)
                d = adam_stats(prev, v[k - 1], scale_prev=scale_prev, scale_new=scale_new)
                cache[on] = AdamStats(size=v.shape[1], **d)
            states[label], _ = table[label].update(states[label], k, cache[on])
        prev = v[k - 1]
    return states[None] if single else states
