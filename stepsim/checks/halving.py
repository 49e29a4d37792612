"""Successive halving of a config's lr grids (PROTOCOL.md, the amendment "Successive halving,
SH-3/2" of "Tuning: each baseline's own regulariser").

Only the configs whose runs do not depend on T are halved (:func:`applies`: a recipe of
``halving.recipes`` at a constant lr). Each regulariser value's lr grid is a **lane**,
halved on its own: every lr of the lane runs on the tuning seeds to the first rung (T/4,
rounded down); the ``halving.kept`` share of the lane (a third, rounded up) with the lowest
mean validation error there runs from scratch to the next rung (T/2), and the best
``finalists`` at the last rung run from scratch to T. A mean is +infinity when a seed's run
diverged (the blow-up rule included); equal means go to the smaller lr. An lr added by a
grid's edge extension is no part of the halving: it runs to T at once, a finalist of every
lane.

Pure: a candidate is an index, and its mean at a number of steps is asked of a ``score``
function (None while some of its runs are not known), so the same walk serves the
execution (one round of runs at a time: :func:`climb`'s pending runs) and the dry-run (a
score that knows everything: every run the halving will make, in number and steps).
"""

from __future__ import annotations

import math


def applies(halving, recipe: str, schedule: str = "constant") -> bool:
    """Whether a config of recipe key ``recipe`` tuned under lr schedule ``schedule`` is
    halved: ``halving`` registered (not None), the recipe one of its ``recipes`` (one
    optimizer phase, nothing scheduled on a fraction of T) and the lr constant (a schedule
    over T makes a rung's run another run than the T-step run's prefix)."""
    return halving is not None and recipe in halving.recipes and schedule == "constant"


def ladder(halving, steps: int) -> tuple[int, ...]:
    """The steps of the rungs, T last: each rung's fraction of ``steps`` (T) rounded down,
    then T (SH-3/2 at T = 2000: (500, 1000, 2000)). ValueError when a rung would be empty."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    out = tuple(math.floor(steps * float(r)) for r in halving.rungs) + (steps,)
    if out[0] < 1:
        raise ValueError(f"halving rungs {list(halving.rungs)} of T = {steps} steps: the first "
                         f"rung has no step")
    return out


def promote(means, lrs, keep: int) -> list[int]:
    """The positions of the ``keep`` best of a rung (lowest mean; +infinity for a diverged
    candidate; equal means to the smaller lr), in the lane's order."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep!r}")
    order = sorted(range(len(means)), key=lambda i: (float(means[i]), float(lrs[i])))
    return sorted(order[:keep])


def keep_after(halving, rung: int, rungs: int, lane_size: int) -> int:
    """How many candidates of a lane of ``lane_size`` lrs go on after rung number ``rung``
    (0 the first) of ``rungs`` rungs below T: the finalists after the last one, the kept
    share of the grid (``halving.kept``) after an earlier one."""
    if rung == rungs - 1:
        return min(lane_size, halving.finalists)
    return halving.kept(lane_size)


def climb(halving, lanes, finalists, steps: int, score) -> tuple[dict, list]:
    """Walk every lane up the :func:`ladder` as far as ``score`` knows.

    lanes: per regulariser value the halved candidates, [(candidate, lr), ...] in the lr
    grid's order; finalists: candidates that run to T at once (an edge extension's lrs);
    score(candidate, steps) -> its mean validation error over the tuning seeds at that many
    steps (+infinity if a run diverged), or None while one of its runs is not known.
    Returns (reached, pending): reached maps every candidate to the steps of the highest
    rung it runs to so far (T for the finalists), pending lists the (candidate, steps) runs
    whose turn has come but whose score is not known (empty: the halving is done)."""
    rungs = ladder(halving, steps)
    reached, pending = {}, []
    for lane in lanes:
        alive = list(lane)
        for k, at in enumerate(rungs):
            for c, _ in alive:
                reached[c] = at
            means = [score(c, at) for c, _ in alive]
            missing = [(c, at) for (c, _), m in zip(alive, means) if m is None]
            if missing:
                pending += missing
                break
            if at == steps:
                break
            chosen = promote(means, [lr for _, lr in alive],
                             keep_after(halving, k, len(rungs) - 1, len(lane)))
            alive = [alive[i] for i in chosen]
    for c in finalists:
        reached[c] = steps
        if score(c, steps) is None:
            pending.append((c, steps))
    return reached, pending


__all__ = ["applies", "climb", "keep_after", "ladder", "promote"]
