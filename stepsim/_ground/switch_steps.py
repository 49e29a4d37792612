"""Steps of a run named by fractions of it, and AutoSwitch's clip: defined once, no NumPy.

One arithmetic turns a fraction of a run of T steps into a step (a fixed-fraction switch,
a clip bound), and one constant says where AutoSwitch clips its switch when clipping is on
(the paper's (0.1 T, 0.5 T]). They are read by the criterion
(:mod:`stepsim.recipes.criteria`), the switch schedules (:mod:`stepsim.recipes.switch`),
the registered protocol (:mod:`stepsim.checks.protocol`, whose import must not load
NumPy, hence this module at the ground floor) and the checks' ``switch_cause``; none of
them computes a bound its own way (``math.floor(0.29 * 100)`` is 28, the bound meant is 29).

Pure Python: importing it imports nothing of NumPy or numba.
"""

from __future__ import annotations

import math
import numbers

#: AutoSwitch's clip when ``clip=True`` and no bound is given (the paper, Section 4):
#: (t_min, t_max) as fractions of the run; the switch lands in (t_min T, t_max T].
CLIP_BOUNDS = (0.1, 0.5)

# A real number this close (relatively) to an integer is taken to be that integer when
# rounding: 1/(1-0.999) is 999.9999999999991 in binary floating point, meant to be 1000;
# 0.29 * 100 is 28.999999999999996, meant to be 29.
_INTEGER_RTOL = 1e-9


def _near_integer(x: float) -> int | None:
    nearest = round(x)
    if abs(x - nearest) <= _INTEGER_RTOL * max(1.0, abs(x)):
        return int(nearest)
    return None


def robust_floor(x: float) -> int:
    """floor(x), except that x within 1e-9 (relative) of an integer gives that integer."""
    near = _near_integer(x)
    return math.floor(x) if near is None else near


def fraction_to_step(fraction: float, total_steps: int) -> int:
    """Step k0 = ceil(fraction * total_steps), at least 1, computed robustly.

    In floating point 0.55 * 100 is 55.00000000000001, whose plain ceil is 56; a product
    within 1e-9 (relative) of an integer is taken as that integer, so the Figure 7 sweep
    switches at the step the fraction names.

    Parameters
    ----------
    fraction : float in [0, 1]
    total_steps : int
        The run length T.

    Returns
    -------
    int
        k0 >= 1.
    """
    x = float(fraction) * total_steps
    near = _near_integer(x)
    return max(1, math.ceil(x) if near is None else near)


def bound_step(value, total_steps: int) -> int | None:
    """A clip bound in steps: an int as given, a float fraction as floor(fraction * T)
    (robust), None as None. A switch at step k is past the bound when k > the result:
    k > fraction * T  <=>  k > floor(fraction * T) for integer k, so flooring loses nothing."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    return robust_floor(float(value) * total_steps)


def clip_steps(total_steps: int, t_min=None, t_max=None) -> tuple[int, int]:
    """(T_min, T_max) in steps of AutoSwitch's clip for a run of ``total_steps``: ``t_min``,
    ``t_max`` a step (int) or a fraction of the run (float); None: :data:`CLIP_BOUNDS`.
    The criterion may fire at k > T_min and must fire at k = T_max + 1."""
    lo = CLIP_BOUNDS[0] if t_min is None else t_min
    hi = CLIP_BOUNDS[1] if t_max is None else t_max
    return bound_step(lo, total_steps), bound_step(hi, total_steps)


def legal_switch_steps(total_steps: int, window: int, *, clip: bool, t_min=None,
                       t_max=None) -> tuple[int, int | None]:
    """(first, forced): the first step clipped or unclipped AutoSwitch (full window of
    ``window`` = T_w steps) can fire at by its test — T_w, and with ``clip`` also > T_min —
    and the step the clip forces it at (T_max + 1; None unclipped). :func:`clip_steps`
    gives T_min and T_max from ``t_min``, ``t_max``."""
    if not clip:
        return window, None
    lo, hi = clip_steps(total_steps, t_min, t_max)
    return max(window, lo + 1), hi + 1


__all__ = ["CLIP_BOUNDS", "bound_step", "clip_steps", "fraction_to_step",
           "legal_switch_steps", "robust_floor"]
