"""What one optimizer step takes and returns, below the engine that runs it (SPEC section 1).

* :class:`AdamHyper` / :func:`adam_hyper` — one Adam step's validated scalars
  (:func:`adam_hyper_checked` for values checked once per run), :func:`vhat_scales`;
* :class:`AdamStats` — what a step measured of v (the switch criteria read it);
* the checks of a step's arrays (:func:`check_state`) and of its scalars in the arrays'
  dtype (:func:`kernel_scalars`, :func:`sgdm_fits`), and the lazily loaded kernels
  (:func:`load_kernels`).

:mod:`stepsim.core.optim_many` runs the kernels on a table of many arrays with these;
:mod:`stepsim.core.optim` is the one-array API on top (``adam_step``, ``sgdm_step``).
The arithmetic of a step is in :mod:`stepsim.core.optim`'s docstring.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import (
    check_beta,
    check_c_contiguous,
    check_choice,
    check_float_array,
    check_int,
    check_real,
    check_same_layout,
)

OPT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class AdamStats(NamedTuple):
    """What one :func:`adam_step` measured of v, reduced in float64 in the same pass.

    With ``stats_on="v"`` the differences are of raw v: dv = v_k - v_{k-1}; with
    ``stats_on="vhat"`` of the bias-corrected vhat (vhat_0 = 0).
    """

    dv_l1: float  # sum_i |dv_i|
    dv_log_sum: float  # sum of log|dv_i| over dv_i != 0 (nan unless log_stats=True)
    dv_zeros: int  # how many dv_i are exactly 0 (all of them when v is frozen)
    v_l1: float  # ||v_k||_1 (of vhat_k with stats_on="vhat")
    v_l2sq: float  # ||v_k||_2^2 (squared, so that layers add up)
    size: int  # number of coordinates d

    @property
    def v_l2(self) -> float:
        """||v_k||_2."""
        return float(np.sqrt(self.v_l2sq))

    @classmethod
    def combine(cls, parts) -> AdamStats:
        """Statistics of several arrays (layers) taken together as one vector."""
        columns = tuple(zip(*parts))  # one per field: each summed in the parts' order
        if not columns:
            return cls(0, 0, 0, 0, 0, 0)
        return cls(*map(sum, columns))


def check_state(names_arrays):
    (w_name, w), *rest = names_arrays
    check_float_array(w_name, w, dtypes=OPT_DTYPES)
    check_same_layout(w_name, w, **dict(rest))
    for j, (name, array) in enumerate(names_arrays):
        if j != 1:  # g (second) is only read: any layout will do
            check_c_contiguous(name, array)
    # no two arrays may overlap: the kernel reads g while it writes w, m and v. For
    # C-contiguous arrays the cheap bounds test is exact (np.shares_memory costs far more).
    for i, (name_a, a) in enumerate(names_arrays):
        for name_b, b in names_arrays[i + 1:]:
            if np.may_share_memory(a, b):
                raise ValueError(
                    f"{name_b} shares memory with {name_a}; each array must be its own")


class AdamHyper(NamedTuple):
    """One Adam step's validated scalars (Python floats), from :func:`adam_hyper`.

    Made once per step and applied to every parameter array with :func:`adam_apply`.
    """

    step: int
    beta1: float
    beta2: float
    inv_bc1: float  # 1 / (1 - beta1**step)
    inv_bc2: float  # 1 / bias_correction2
    eps_inside: float  # eps under the square root (0 with eps_mode="outside")
    eps_outside: float  # eps added to the root (0 with eps_mode="inside")
    lr: float
    decay: float  # 1 - lr * weight_decay (decoupled weight decay)
    freeze_v: bool
    stats: bool
    log_stats: bool
    scale_prev: float  # statistics are of scale_new * v_k - scale_prev * v_{k-1}
    scale_new: float


def vhat_scales(beta2: float, step: int, *, frozen: bool = False) -> tuple[float, float]:
    """(scale_prev, scale_new) with vhat_{k-1} = scale_prev v_{k-1}, vhat_k = scale_new v_k.

    vhat_0 = 0 by definition (scale_prev = 0 at step 1). A frozen v does not change, so its
    difference is 0 whatever the correction: scale_prev = scale_new.
    """
    scale_new = 1.0 / (1.0 - beta2**step)
    if frozen:
        return scale_new, scale_new
    return (0.0 if step == 1 else 1.0 / (1.0 - beta2 ** (step - 1))), scale_new


def adam_hyper(*, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, eps_mode="inside",
               weight_decay=0.0, freeze_v=False, bias_correction2=None, stats=True,
               log_stats=False, stats_on="v") -> AdamHyper:
    """Validate one step's hyper-parameters (see :func:`adam_step`) into an :class:`AdamHyper`."""
    step = check_int("step", step, minimum=1)
    lr = check_real("lr", lr, minimum=0.0)
    beta1 = check_beta("beta1", beta1)
    beta2 = check_beta("beta2", beta2)
    # eps = 0 would make the step 0/0 = NaN wherever g and v are both 0
    eps = check_real("eps", eps, minimum=0.0, min_open=True)
    check_choice("eps_mode", eps_mode, ("inside", "outside"))
    weight_decay = check_real("weight_decay", weight_decay, minimum=0.0)
    check_choice("stats_on", stats_on, ("v", "vhat"))
    if bias_correction2 is not None:
        bias_correction2 = check_real("bias_correction2", bias_correction2, minimum=0.0,
                                      maximum=1.0, min_open=True)
    return adam_hyper_checked(step, lr, beta1, beta2, eps, eps_mode, weight_decay, freeze_v,
                              bias_correction2, stats, log_stats, stats_on)


def adam_hyper_checked(step, lr, beta1, beta2, eps, eps_mode, weight_decay, freeze_v,
                       bias_correction2, stats, log_stats, stats_on) -> AdamHyper:
    """:func:`adam_hyper` for values its checks have already passed (positional, in its
    order): for a caller that validated them once per run (``optimizers.Adam`` does at
    construction, ``fit`` the step numbers), so a step skips a dozen checks. The same
    arithmetic, so the same hyper."""
    if bias_correction2 is None:
        bc2 = 1.0 - beta2**step  # > 0: beta2 < 1 and step >= 1
    else:
        bc2 = bias_correction2
    if stats_on == "vhat":
        scale_prev, scale_new = vhat_scales(beta2, step, frozen=freeze_v)
    else:
        scale_prev = scale_new = 1.0
    inside = eps_mode == "inside"
    return AdamHyper(step, beta1, beta2, 1.0 / (1.0 - beta1**step), 1.0 / bc2,
                     eps if inside else 0.0, 0.0 if inside else eps, lr,
                     1.0 - lr * weight_decay, bool(freeze_v), bool(stats), bool(log_stats),
                     scale_prev, scale_new)


_kernels = None  # stepsim.core._optim_kernels once loaded (it imports numba: never at import time)


def load_kernels():
    global _kernels
    if _kernels is None:
        from stepsim.core import _optim_kernels

        _kernels = _optim_kernels
    return _kernels


def _check_fits(dtype: np.dtype, scalars: dict, *, lr: float, gain: float,
                eps: float | None = None) -> None:
    """Refuse hyper-parameters that overflow or underflow in the arrays' dtype, once a step.

    The kernels compute in the arrays' dtype, so a value fine as a Python float can be inf
    or 0 there, and the step would return normally with inf/NaN weights: ``scalars``
    ({what: value}) must be finite in ``dtype``; ``eps``, if given, must not round to 0 (0/0 =
    NaN where g and v are 0); and the largest step for gradients of order 1, ``lr * gain``
    (Adam: lr / sqrt(eps); SGD-M: lr / (1 - momentum)), must be finite in ``dtype``.
    """
    largest, tiny = _limits(dtype)
    for name, value in scalars.items():
        if abs(value) > largest:
            raise ValueError(f"{name} = {value:.6g} overflows {dtype} (largest finite "
                             f"{largest:.6g}); use smaller values or float64 arrays")
    if eps is not None and eps <= tiny / 2:  # rounds to 0 in dtype
        raise ValueError(f"eps={eps:.6g} is 0 in {dtype} (smallest positive {tiny:.6g}), so "
                         f"w would become NaN where g and v are 0; use a larger eps or "
                         f"float64 arrays")
    if lr * gain > largest:
        raise ValueError(f"lr={lr:.6g} is too large for {dtype}: a step can move a weight by "
                         f"lr * {gain:.6g} = {lr * gain:.6g} for gradients of order 1, beyond "
                         f"{dtype}'s largest finite value {largest:.6g}; use a "
                         f"smaller lr or float64 arrays")


@functools.lru_cache(maxsize=4)
def _limits(dtype: np.dtype) -> tuple[float, float]:
    """(largest finite value, smallest positive subnormal) of a float dtype."""
    info = np.finfo(dtype)
    return float(info.max), float(info.smallest_subnormal)


def kernel_scalars(hyper: AdamHyper, dtype: np.dtype) -> tuple:
    """The kernel's scalars in the arrays' dtype (a Python float would turn a float32 loop
    into float64); made once per step and dtype, however many arrays the step updates.
    Hyper-parameters that overflow or underflow in ``dtype`` are refused (:func:`_check_fits`).

    The scalars that stay the same over a run (betas, eps) and their checks are made once
    (:func:`_fixed_scalars`); a step converts and checks only the four that move with the
    step and the lr (the full :func:`_check_fits` runs, and raises, only when one fails);
    the last answer is kept for the same hyper object (one per step, however many
    parameters or calls share it)."""
    global _last_scalars
    last = _last_scalars
    if last[0] is hyper and last[1] is dtype:
        return last[2]
    b1, c1, b2, c2, eps_in, eps_out, gain, fits = _fixed_scalars(
        dtype, hyper.beta1, hyper.beta2, hyper.eps_inside, hyper.eps_outside)
    largest = _limits(dtype)[0]
    if not (fits and abs(hyper.decay) <= largest and abs(hyper.inv_bc1) <= largest
            and abs(hyper.inv_bc2) <= largest and hyper.lr * gain <= largest):
        eps = hyper.eps_inside or hyper.eps_outside
        scalars = {"1 - lr * weight_decay": hyper.decay, "1 / (1 - beta1**step)": hyper.inv_bc1,
                   "1 / bias_correction2": hyper.inv_bc2}
        _check_fits(dtype, scalars, lr=hyper.lr, gain=gain, eps=eps)
    dt = dtype.type
    scalars = (b1, c1, b2, c2, dt(hyper.inv_bc1), dt(hyper.inv_bc2), eps_in, eps_out,
               dt(hyper.lr), dt(hyper.decay))
    _last_scalars = (hyper, dtype, scalars)  # one tuple: a reader sees all three or none
    return scalars


_last_scalars = (None, None, None)  # (hyper, dtype, its scalars) of the last call


@functools.lru_cache(maxsize=16)
def _fixed_scalars(dtype: np.dtype, beta1: float, beta2: float, eps_inside: float,
                   eps_outside: float) -> tuple:
    """:func:`kernel_scalars`' run-long part: (beta1, 1 - beta1, beta2, 1 - beta2,
    eps_inside, eps_outside) in ``dtype``, the gain 1 / (smallest denominator) of the lr
    check, and whether eps passes :func:`_check_fits`' eps check."""
    eps = eps_inside or eps_outside
    root = eps ** 0.5 if eps_inside else eps  # the smallest denominator
    dt = dtype.type
    return (dt(beta1), dt(1.0 - beta1), dt(beta2), dt(1.0 - beta2), dt(eps_inside),
            dt(eps_outside), 1.0 / root, not eps <= _limits(dtype)[1] / 2)


@functools.lru_cache(maxsize=8)
def sgdm_fits(dtype: np.dtype, lr: float, momentum: float, weight_decay: float) -> None:
    """:func:`_check_fits` for SGD-M: buf grows to g / (1 - momentum), the step to lr times it."""
    _check_fits(dtype, {"weight_decay": weight_decay}, lr=lr, gain=1.0 / (1.0 - momentum))
