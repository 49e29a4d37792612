"""Fused optimizer steps: Adam(W) (with STEP's frozen v) and momentum SGD (SPEC section 1).

Both update their arrays in place in one pass over memory. Arrays: float32 or float64,
one dtype, one shape, C-contiguous and writeable (any shape; they are treated as flat).
Non-contiguous arrays are rejected rather than copied, because a copy would silently
lose the in-place update.

Steps are numbered k = 1, 2, ... (Kingma & Ba; the paper's Algorithm 1 starts at 0 and
would divide by 1 - beta1^0 = 0):

    m_k = b1 m_{k-1} + (1 - b1) g_k          v_k = b2 v_{k-1} + (1 - b2) g_k^2
    w_k = w_{k-1} (1 - lr wd) - lr * (m_k / (1 - b1^k)) / denom
    denom = sqrt(v_k / c2 + eps)   (eps_mode="inside", the paper's Eq. 7)
          = sqrt(v_k / c2) + eps   (eps_mode="outside", Kingma-Ba and PyTorch)

with c2 = 1 - b2^k unless ``bias_correction2`` says otherwise. STEP's phase 2 passes
``freeze_v=True, bias_correction2=1.0`` (Algorithm 1 divides by sqrt(v* + eps), raw v*)
or ``bias_correction2=1 - b2**k0`` for the bias-corrected variant.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim._validate import (
    check_beta,
    check_c_contiguous,
    check_choice,
    check_float_array,
    check_int,
    check_real,
    check_same_layout,
)

_OPT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_UNSIGNED_VIEW = {4: np.uint32, 8: np.uint64}


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
        parts = list(parts)
        return cls(
            dv_l1=sum(p.dv_l1 for p in parts),
            dv_log_sum=sum(p.dv_log_sum for p in parts),
            dv_zeros=sum(p.dv_zeros for p in parts),
            v_l1=sum(p.v_l1 for p in parts),
            v_l2sq=sum(p.v_l2sq for p in parts),
            size=sum(p.size for p in parts),
        )


def _check_state(names_arrays):
    (w_name, w), *rest = names_arrays
    check_float_array(w_name, w, dtypes=_OPT_DTYPES)
    check_same_layout(w_name, w, **dict(rest))
    for name, array in names_arrays:
        check_c_contiguous(name, array)
    for name, array in rest:
        if array is w or np.shares_memory(array, w):
            raise ValueError(f"{name} shares memory with {w_name}; each state array must be its own")


def adam_step(w, g, m, v, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, eps_mode="inside",
              weight_decay=0.0, freeze_v=False, bias_correction2=None, stats=True,
              log_stats=False, stats_on="v") -> AdamStats | None:
    """One Adam(W) step, in place on w, m and v (v untouched when ``freeze_v``).

    w, g, m, v: arrays of one shape and dtype (float32/float64), C-contiguous.
    step: the step number k >= 1 (bias corrections use it). lr >= 0: learning rate.
    beta1, beta2 in [0, 1); eps >= 0; eps_mode "inside" (paper) or "outside" (PyTorch).
    weight_decay >= 0: decoupled (AdamW): w is first scaled by (1 - lr * weight_decay).
    freeze_v: v is read, never written (STEP phase 2).
    bias_correction2: divisor of v in the denominator, in (0, 1]; default 1 - beta2**step.
    stats: reduce the statistics of v in the same pass (what the switch criteria read; about
    20% of the step's time at 2^24 float32). With ``stats=False`` the step returns None.
    log_stats: also reduce sum log|dv| (costs a log per element; AutoSwitch Option II).
    stats_on: "v" (raw) or "vhat" (bias-corrected) for the returned statistics.
    Returns :class:`AdamStats` (None if ``stats=False``). Raises ValueError if g holds a non-finite value (after
    the update, which then carries it into w, m and v).
    """
    _check_state([("w", w), ("g", g), ("m", m), ("v", v)])
    step = check_int("step", step, minimum=1)
    lr = check_real("lr", lr, minimum=0.0)
    beta1 = check_beta("beta1", beta1)
    beta2 = check_beta("beta2", beta2)
    eps = check_real("eps", eps, minimum=0.0)
    check_choice("eps_mode", eps_mode, ("inside", "outside"))
    weight_decay = check_real("weight_decay", weight_decay, minimum=0.0)
    check_choice("stats_on", stats_on, ("v", "vhat"))
    bc1 = 1.0 - beta1**step
    if bias_correction2 is None:
        bc2 = 1.0 - beta2**step
    else:
        bc2 = check_real("bias_correction2", bias_correction2, minimum=0.0, maximum=1.0,
                         min_open=True)
    if bc2 == 0.0:  # beta2 == 0 ... never 0 for step >= 1 unless beta2 = 1 (refused); kept safe
        raise ValueError(f"bias correction 1 - beta2**step is 0 (beta2={beta2}, step={step})")
    if stats_on == "vhat":
        scale_new = 1.0 / (1.0 - beta2**step)
        scale_prev = 0.0 if step == 1 else 1.0 / (1.0 - beta2 ** (step - 1))
        if freeze_v:
            scale_prev = scale_new  # a frozen v does not change, whatever its correction
    else:
        scale_new = scale_prev = 1.0
    from stepsim import _optim_kernels as k
    from stepsim._jit import num_threads
    from stepsim._mask_kernels import MAGNITUDE_BITS

    dt = w.dtype.type
    blocks = -(-w.size // k.BLOCK)
    g_bits = g.reshape(-1).view(_UNSIGNED_VIEW[w.dtype.itemsize])
    abs_mask, inf_bits = MAGNITUDE_BITS[g_bits.dtype]
    g_largest = np.empty(blocks, dtype=g_bits.dtype)
    partial = np.zeros((blocks if stats else 0, k.N_STATS))
    tasks = max(1, min(num_threads(), blocks))
    scratch = np.empty((tasks, k.BLOCK if stats and not freeze_v else 1), dtype=w.dtype)
    k.adam(
        w.reshape(-1), g.reshape(-1), g_bits, abs_mask, m.reshape(-1), v.reshape(-1),
        dt(beta1), dt(1.0 - beta1), dt(beta2), dt(1.0 - beta2),
        dt(1.0 / bc1), dt(1.0 / bc2),
        dt(eps if eps_mode == "inside" else 0.0), dt(eps if eps_mode == "outside" else 0.0),
        dt(lr), dt(1.0 - lr * weight_decay),
        bool(freeze_v), bool(stats), bool(log_stats), float(scale_prev), float(scale_new),
        g_largest, partial, scratch,
    )
    if w.size and g_largest.max() >= inf_bits:  # inf or NaN somewhere; g is never written
        bad_g = int(np.count_nonzero(~np.isfinite(g)))
        raise ValueError(f"g contains {bad_g} non-finite value(s) at step {step}; "
                         "w, m and v now hold them too")
    if not stats:
        return None
    # blocks are added in order, so the statistics do not depend on the thread count
    dv_l1, dv_log, zeros, v_l1, v_l2sq = partial.sum(axis=0)
    return AdamStats(float(dv_l1), float(dv_log) if log_stats else float("nan"), int(zeros),
                     float(v_l1), float(v_l2sq), int(w.size))


def sgdm_step(w, g, buf, *, lr, momentum=0.9, weight_decay=0.0, nesterov=False) -> None:
    """One momentum-SGD step, in place on w and buf (PyTorch's torch.optim.SGD rule).

    w, g, buf: arrays of one shape and dtype (float32/float64), C-contiguous; buf starts
    at zeros. d = g + weight_decay * w (coupled L2); buf = momentum * buf + d;
    w -= lr * (d + momentum * buf if nesterov else buf). lr >= 0, momentum in [0, 1).
    """
    _check_state([("w", w), ("g", g), ("buf", buf)])
    lr = check_real("lr", lr, minimum=0.0)
    momentum = check_beta("momentum", momentum)
    weight_decay = check_real("weight_decay", weight_decay, minimum=0.0)
    if nesterov and momentum == 0.0:
        raise ValueError("nesterov=True needs momentum > 0, got momentum=0.0")
    from stepsim import _optim_kernels as k

    dt = w.dtype.type
    bad_g = k.sgdm(w.reshape(-1), g.reshape(-1), buf.reshape(-1), dt(lr), dt(momentum),
                   dt(weight_decay), bool(nesterov))
    if bad_g:
        raise ValueError(f"g contains {bad_g} non-finite value(s); w and buf now hold them too")
