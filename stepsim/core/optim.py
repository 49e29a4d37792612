"""Fused optimizer steps: Adam(W) (with STEP's frozen v) and momentum SGD (SPEC section 1).

Both update their arrays in place in one pass over memory. Arrays: float32 or float64,
one dtype, one shape (any shape; they are treated as flat); w, m, v (buf) C-contiguous
and writeable — a non-contiguous one is rejected rather than copied, because a copy would
silently lose the in-place update. g is only read: any layout, read-only is fine.
:mod:`stepsim.core.optim_many` updates every parameter of a model in one validated call;
the hyper-parameters, statistics and checks both use are :mod:`stepsim.core.optim_hyper`'s
(re-exported here).

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

from stepsim.core.optim_hyper import (  # noqa: F401 (re-exported: the one-array API's types)
    AdamHyper,
    AdamStats,
    adam_hyper,
    adam_hyper_checked,
    vhat_scales,
)
from stepsim.core.optim_many import adam_apply_rows, sgdm_apply_rows


def adam_step(w, g, m, v, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, eps_mode="inside",
              weight_decay=0.0, freeze_v=False, bias_correction2=None, stats=True,
              log_stats=False, stats_on="v") -> AdamStats | None:
    """One Adam(W) step, in place on w, m and v (v untouched when ``freeze_v``).

    w, g, m, v: arrays of one shape and dtype (float32/float64), no two overlapping; w, m,
    v C-contiguous and writeable; g is only read (read-only or non-contiguous is fine).
    v >= 0. step: the step number k >= 1 (bias corrections use it). lr >= 0.
    beta1, beta2 in [0, 1); eps > 0; eps_mode "inside" (paper) or "outside" (PyTorch).
    weight_decay >= 0: decoupled (AdamW): w is first scaled by (1 - lr * weight_decay).
    freeze_v: v is read, never written (STEP phase 2).
    bias_correction2: divisor of v in the denominator, in (0, 1]; default 1 - beta2**step.
    stats: reduce the statistics of v in the same pass (what the switch criteria read; about
    20% of the step's time at 2^24 float32). With ``stats=False`` the step returns None.
    log_stats: also reduce sum log|dv| (costs a log per element; AutoSwitch Option II).
    stats_on: "v" (raw) or "vhat" (bias-corrected) for the returned statistics.
    Returns :class:`AdamStats` (None if ``stats=False``). Raises ValueError if g holds a
    non-finite value or v a negative or NaN one (checked in the same pass, so after the
    update, which then carries them into w, m and v).
    Equivalent to ``adam_apply(w, g, m, v, adam_hyper(...))``; loops over many arrays
    with one set of hyper-parameters should make the hyper once.
    """
    hyper = adam_hyper(step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, eps_mode=eps_mode,
                       weight_decay=weight_decay, freeze_v=freeze_v,
                       bias_correction2=bias_correction2, stats=stats, log_stats=log_stats,
                       stats_on=stats_on)
    return adam_apply(w, g, m, v, hyper)


def adam_apply(w, g, m, v, hyper: AdamHyper) -> AdamStats | None:
    """Apply one validated Adam step (:func:`adam_hyper`) to one set of arrays, in place."""
    return adam_apply_rows(((w, g, m, v),), hyper)[0]


def sgdm_step(w, g, buf, *, lr, momentum=0.9, weight_decay=0.0, nesterov=False) -> None:
    """One momentum-SGD step, in place on w and buf (PyTorch's torch.optim.SGD rule).

    w, g, buf: arrays of one shape and dtype (float32/float64); w and buf C-contiguous and
    writeable, g only read; buf starts at zeros. d = g + weight_decay * w (coupled L2);
    buf = momentum * buf + d; w -= lr * (d + momentum * buf if nesterov else buf).
    lr >= 0, momentum in [0, 1).
    """
    sgdm_apply_rows(((w, g, buf),), lr, momentum, weight_decay, nesterov)
