r"""The noisy quadratic model (NQM): stationary gradient noise, exactly solvable dynamics.

Loss, per coordinate i = 1..d (Zhang et al. 2019's NQM, diagonal):

    L(w) = 1/2 sum_i h_i (w_i - w*_i)^2,    h_i = h_max * i^(-alpha)

and a stochastic gradient ``g = h * (w - w*) + xi`` with independent noise
xi_i ~ N(0, c_i / B), c_i = c_scale * h_i^c_power (c = h: the noise covariance equals the
Hessian, as for a well-specified likelihood). The noise is stationary by construction —
exactly the assumption of STEP's Theorem 1. w* ~ N(0, w_star_scale^2) is drawn from
``seed``; initial weights w_0 ~ N(0, init_scale^2) from the caller's generator.

Exact expected loss under a frozen diagonal preconditioner and a fixed mask
---------------------------------------------------------------------------
Adam with v frozen (STEP's phase 2) divides every coordinate by a constant,
P_i = 1 / denom_i (e.g. 1 / sqrt(v*_i + eps)). With a fixed mask p_i in {0, 1} the forward
weights are p * w and the (straight-through) gradient at step k is

    g_k = h (p w_{k-1} - w*) + sigma xi_k,      sigma^2 = c / B

so one step of Adam (momentum beta, bias correction a_k = 1 / (1 - beta^k), learning rate
eta_k, decoupled weight decay lambda) is linear in x = (w, m) with additive noise:

    m_k = beta m_{k-1} + (1 - beta) g_k
    w_k = (1 - eta_k lambda) w_{k-1} - eta_k a_k P m_k

    x_k = A_k x_{k-1} + b_k + e_k xi_k,   with q_k = eta_k a_k P,
    A_k = [[1 - eta_k lambda - q_k (1-beta) h p,  -q_k beta],
           [(1-beta) h p,                          beta     ]]
    b_k = [q_k (1-beta) h w*,  -(1-beta) h w*],   e_k = [-q_k (1-beta) sigma, (1-beta) sigma]

Hence the mean mu and covariance S of (w, m) per coordinate follow

    mu_k = A_k mu_{k-1} + b_k,      S_k = A_k S_{k-1} A_k^T + e_k e_k^T

and E[L(p w_k)] = 1/2 sum_i h_i (p_i (S_ww + mu_w^2) - 2 p_i w*_i mu_w + w*_i^2): a 2x2
recursion per coordinate, exact for any noise distribution with this variance.
:func:`expected_loss` evaluates it; ``tests/problems/test_nqm.py`` checks it against seed-averaged
simulations run through ``adam_step(freeze_v=True)`` and through STEP's recipe.
"""

from __future__ import annotations

import math

import numpy as np

from stepsim._ground import libm as _libm
from stepsim._ground.options import (
    NM,
    Bool,
    Described,
    Int,
    Option,
    Options,
    OrNone,
    Real,
    declared_keywords,
)
from stepsim._ground.validate import check_beta, check_int, check_problem_memory, check_real
from stepsim.core.sparsity import ParamSpec


def frozen_adam_precond(v_star, *, eps: float = 1e-8, eps_mode: str = "inside",
                        bias_correction2: float = 1.0) -> np.ndarray:
    """P = 1 / denom of Adam with v frozen at ``v_star`` (what ``adam_step(freeze_v=True)`` uses).

    inside: 1 / sqrt(v*/bc2 + eps) (the paper, STEP's default with bc2 = 1, raw v*);
    outside: 1 / (sqrt(v*/bc2) + eps). Returns a float64 array of v_star's shape.
    """
    v = np.asarray(v_star, dtype=np.float64)
    if np.any(~np.isfinite(v)) or np.any(v < 0):
        raise ValueError("v_star must be finite and >= 0")
    eps = check_real("eps", eps, minimum=0.0)
    bc2 = check_real("bias_correction2", bias_correction2, minimum=0.0, maximum=1.0,
                     min_open=True)
    if eps_mode == "inside":
        denom = np.sqrt(v / bc2 + eps)
    elif eps_mode == "outside":
        denom = np.sqrt(v / bc2) + eps
    else:
        raise ValueError(f"eps_mode must be 'inside' or 'outside', got {eps_mode!r}")
    if np.any(denom == 0):
        raise ValueError("the preconditioner divides by zero (v_star = 0 with eps = 0)")
    return 1.0 / denom


def expected_loss(h, w_star, noise_var, *, steps: int, lr, beta1: float, precond,
                  mask=None, weight_decay: float = 0.0, first_step: int = 1,
                  bias_correction: bool = True, w0_mean=0.0, w0_var=0.0, m0_mean=0.0,
                  m0_var=0.0, wm0_cov=0.0, keep_rows: bool = False) -> np.ndarray:
    """Exact E[L(p * w_j)] for j = 0..steps of momentum with a frozen preconditioner.

    See the module docstring for the recursion. All per-coordinate arguments broadcast
    against each other (any common shape; the loss sums over all coordinates).

    Parameters
    ----------
    h : array, curvatures h_i > 0
    w_star : array, the optimum w*
    noise_var : array, variance sigma_i^2 >= 0 of the gradient noise (c_i / B)
    steps : number of optimizer steps simulated
    lr : float or array (steps,), eta of each step
    beta1 : momentum decay beta in [0, 1)
    precond : array, the frozen multiplier P_i >= 0 (see :func:`frozen_adam_precond`)
    mask : array of {0, 1} (the fixed N:M mask p), or None (dense, p = 1)
    weight_decay : decoupled weight decay lambda >= 0 (AdamW)
    first_step : Adam's step number of the first simulated step (bias correction uses
        1 - beta^k with the global k: first_step = k0 + 1 after STEP's switch at k0)
    bias_correction : divide m by 1 - beta^k (Adam) or not
    w0_mean, w0_var, m0_mean, m0_var, wm0_cov : moments of the starting (w, m) per
        coordinate (deterministic start: variances 0)
    keep_rows : sum over the last axis only (one expected loss per row, e.g. per replica)

    Returns
    -------
    ndarray (steps + 1,) float64 — or (steps + 1, *leading) with ``keep_rows`` — entry j
    is E[L(p * w_j)], the loss a trainer records at step j + 1 (its forward weights are
    those before the update).
    """
    steps = check_int("steps", steps, minimum=0)
    beta = check_beta("beta1", beta1)
    first_step = check_int("first_step", first_step, minimum=1)
    wd = check_real("weight_decay", weight_decay, minimum=0.0)
    lrs = np.broadcast_to(np.asarray(lr, dtype=np.float64), (steps,))
    if np.any(~np.isfinite(lrs)) or np.any(lrs < 0):
        raise ValueError("lr must be finite and >= 0")
    p = 1.0 if mask is None else np.asarray(mask, dtype=np.float64)
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (
        h, w_star, noise_var, precond, p, w0_mean, w0_var, m0_mean, m0_var, wm0_cov)))
    h, w_star, noise_var, precond, p, mw, sww, mm, smm, swm = (a.copy() for a in arrays)
    for name, a in (("h", h), ("noise_var", noise_var), ("precond", precond),
                    ("w0_var", sww), ("m0_var", smm)):
        if np.any(~np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"{name} must be finite and >= 0")
    if np.any((p != 0) & (p != 1)):
        raise ValueError("mask must hold only 0 and 1")
    sigma = np.sqrt(noise_var)
    hp = h * p
    drift = h * w_star  # the constant part of the gradient, -h w*
    axis = -1 if keep_rows else None
    const = 0.5 * np.sum(h * w_star * w_star, axis=axis)

    def loss():
        return 0.5 * np.sum(hp * (sww + mw * mw) - 2.0 * hp * w_star * mw, axis=axis) + const

    out = np.empty((steps + 1,) + (h.shape[:-1] if keep_rows else ()))
    out[0] = loss()
    for j in range(steps):
        k = first_step + j
        a = 1.0 / (1.0 - beta**k) if bias_correction else 1.0
        q = lrs[j] * a * precond
        a11 = 1.0 - lrs[j] * wd - q * (1.0 - beta) * hp
        a12 = -q * beta
        a21 = (1.0 - beta) * hp
        a22 = beta
        e1 = -q * (1.0 - beta) * sigma
        e2 = (1.0 - beta) * sigma
        mw, mm = (a11 * mw + a12 * mm + q * (1.0 - beta) * drift,
                  a21 * mw + a22 * mm - (1.0 - beta) * drift)
        sww, swm, smm = (a11 * a11 * sww + 2.0 * a11 * a12 * swm + a12 * a12 * smm + e1 * e1,
                         a11 * a21 * sww + (a11 * a22 + a12 * a21) * swm + a12 * a22 * smm
                         + e1 * e2,
                         a21 * a21 * sww + 2.0 * a21 * a22 * swm + a22 * a22 * smm + e2 * e2)
        out[j + 1] = loss()
    return out


class NoisyQuadratic:
    """The NQM as a :class:`~stepsim.problems.base.Problem` (see the module docstring).

    One parameter ``w`` of shape (replicas, dim), N:M-sparsified along its last axis
    (``nm``; ``sparse=False`` for a dense spec). ``replicas`` independent copies of the
    d-dimensional problem side by side (same h, c, w*; their own noise): coordinates never
    interact, so one run with R replicas is R independent runs (seed averaging in one call).
    The loss and its gradient are the sum over replicas.

    dim: d. alpha: spectrum exponent (h_i = h_max i^-alpha). c_scale, c_power: noise
    variance c_i = c_scale h_i^c_power per example. batch_size: B (variance c_i / B).
    w_star_scale, init_scale: std of w* and of w_0. w_star_nm: make w* itself N:M sparse
    (by magnitude; its pruned coordinates then feel pure noise under STE). dtype: float64
    (default) or float32. seed: w* (``init_params`` and ``sample_batch`` take the caller's
    generator).
    """

    #: the options, declared once (stepsim._ground.options); the defaults and checks
    #: of __init__'s keywords
    OPTIONS = Options({
        "dim": Option(Int(minimum=1), 256, "dimensions d"),
        "alpha": Option(Real(minimum=0.0), 1.0, "curvature decay: h_i ~ i^-alpha"),
        "h_max": Option(Real(minimum=0.0, min_open=True), 1.0, "largest curvature h_1"),
        "c_scale": Option(Real(minimum=0.0), 1.0, "gradient noise scale"),
        "c_power": Option(Real(), 1.0, "gradient noise c_i ~ h_i^c_power"),
        "batch_size": Option(Int(minimum=1), 1, "minibatch size B (noise variance c_i / B)"),
        "w_star_scale": Option(Real(minimum=0.0), 1.0, "scale of the optimum w*"),
        "init_scale": Option(Real(minimum=0.0), 1.0, "scale of the initial w"),
        "nm": Option(NM(), (2, 4), "N:M of w"),
        "sparse": Option(Bool(), True, "w is N:M sparsified"),
        "replicas": Option(Int(minimum=1), 1, "independent copies of the quadratic"),
        "w_star_nm": Option(OrNone(NM()), None, "make w* N:M sparse"),
        "dtype": Option(Described("float32|float64"), np.float64, "parameter dtype"),
        "seed": Option(Int(minimum=0), 0, "seed of w*"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, dim: int, alpha: float, h_max: float, c_scale: float,
                 c_power: float, batch_size: int, w_star_scale: float, init_scale: float,
                 nm: tuple[int, int], sparse: bool, replicas: int,
                 w_star_nm: tuple[int, int] | None, dtype, seed: int):
        self.dim, self.alpha, self.h_max = dim, alpha, h_max
        self.c_scale, self.c_power, self.batch_size = c_scale, c_power, batch_size
        self.w_star_scale, self.init_scale = w_star_scale, init_scale
        self.nm, self.sparse, self.replicas, self.w_star_nm = nm, sparse, replicas, w_star_nm
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"dtype must be float32 or float64, got {self.dtype}")
        self.seed = seed
        self.shape = (self.replicas, self.dim)
        if self.sparse and self.dim % self.nm[1]:
            raise ValueError(f"dim = {self.dim} must be divisible by M = {self.nm[1]} "
                             "(N:M groups run along w's last axis; stepsim never pads)")
        # w, grad, noise, Adam's m and v and copies: ~8 arrays of the parameter's size
        check_problem_memory("nqm", {"dim": self.dim, "replicas": self.replicas},
                             8 * self.dtype.itemsize * math.prod(self.shape),
                             "w, its gradient, noise, Adam's state")
        self.specs = {"w": ParamSpec(*self.nm, axis=-1) if self.sparse else ParamSpec()}

        i = np.arange(1, self.dim + 1, dtype=np.float64)
        self.h = self.h_max * _libm.power(i, -self.alpha)  # not **: np.power's bits vary by CPU
        self.c = self.c_scale * _libm.power(self.h, self.c_power)
        self.noise_var = self.c / self.batch_size
        star_rng = np.random.default_rng(self.seed)
        self.w_star = self.w_star_scale * star_rng.standard_normal(self.dim)
        if self.w_star_nm is not None:
            from stepsim.core.masks import nm_mask

            if self.dim % self.w_star_nm[1]:
                raise ValueError(f"dim = {self.dim} must be divisible by w_star_nm's M = "
                                 f"{self.w_star_nm[1]}")
            self.w_star = np.where(nm_mask(self.w_star, *self.w_star_nm), self.w_star, 0.0)
        self._h = self.h.astype(self.dtype)
        self._w_star = self.w_star.astype(self.dtype)
        self._noise_std = np.sqrt(self.noise_var).astype(self.dtype)

    def __repr__(self):
        return (f"NoisyQuadratic(dim={self.dim}, alpha={self.alpha}, h_max={self.h_max}, "
                f"c_scale={self.c_scale}, c_power={self.c_power}, "
                f"batch_size={self.batch_size}, nm={self.nm}, sparse={self.sparse}, "
                f"replicas={self.replicas}, dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        """The constructor arguments (for provenance)."""
        return {"dim": self.dim, "alpha": self.alpha, "h_max": self.h_max,
                "c_scale": self.c_scale, "c_power": self.c_power, "batch_size": self.batch_size,
                "w_star_scale": self.w_star_scale, "init_scale": self.init_scale,
                "nm": list(self.nm), "sparse": self.sparse, "replicas": self.replicas,
                "w_star_nm": None if self.w_star_nm is None else list(self.w_star_nm),
                "dtype": self.dtype.name, "seed": self.seed}

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        """w_0 ~ N(0, init_scale^2), shape (replicas, dim)."""
        rng = np.random.default_rng(rng)
        w = self.init_scale * rng.standard_normal(self.shape)
        return {"w": np.ascontiguousarray(w, dtype=self.dtype)}

    def sample_batch(self, rng) -> np.ndarray:
        """The gradient noise of one step: (replicas, dim), coordinate i ~ N(0, c_i / B)."""
        xi = rng.standard_normal(self.shape, dtype=self.dtype)
        xi *= self._noise_std
        return xi

    def loss(self, w: np.ndarray) -> float:
        """L(w) summed over replicas (float64 accumulation)."""
        diff = w.astype(np.float64) - self.w_star
        return 0.5 * float(np.sum(self.h * diff * diff))

    def loss_and_grad(self, params, batch: np.ndarray):
        w = params["w"]
        diff = w - self._w_star
        grad = self._h * diff
        loss = 0.5 * float(np.sum(grad * diff, dtype=np.float64))
        grad += batch
        return loss, {"w": grad}

    def best_mask(self) -> np.ndarray:
        """The N:M mask (dim,) with the least loss: keep the N largest h_i w*_i^2 per group."""
        from stepsim.core.masks import nm_mask

        return nm_mask(self.h * self.w_star**2, *self.nm, axis=-1)

    def evaluate(self, params) -> dict:
        """loss (summed over replicas, noise-free), best_nm_loss (the best N:M mask's optimum,
        same units) and, for a sparse spec, mask_optimality: the fraction of the best mask's
        kept positions that the N:M mask of |w| keeps."""
        w = params["w"]
        out = {"loss": self.loss(w)}
        if self.sparse:
            from stepsim.core.masks import nm_mask

            best = self.best_mask()
            pruned = 0.5 * float(np.sum(self.h * self.w_star**2 * ~best))
            out["best_nm_loss"] = self.replicas * pruned
            kept = nm_mask(np.ascontiguousarray(w), *self.nm, axis=-1)
            out["mask_optimality"] = float(np.mean(kept[:, best]))
        return out

    def expected_loss(self, steps: int, *, lr, beta1: float = 0.9, precond, mask=None,
                      weight_decay: float = 0.0, first_step: int = 1, w0=None,
                      m0=None, keep_rows: bool = False) -> np.ndarray:
        """:func:`expected_loss` with this problem's h, w*, c / B (summed over replicas, or
        one column per replica with ``keep_rows``).

        w0: None for the random start of ``init_params`` (mean 0, variance init_scale^2),
        else the starting weights (deterministic). m0: None (zeros) or the starting m.
        precond, mask: broadcast against (replicas, dim).
        """
        if w0 is None:
            w0_mean, w0_var = 0.0, self.init_scale**2
        else:
            w0_mean, w0_var = np.asarray(w0, dtype=np.float64), 0.0
        m0_mean = 0.0 if m0 is None else np.asarray(m0, dtype=np.float64)
        h = np.broadcast_to(self.h, self.shape)
        return expected_loss(h, self.w_star, self.noise_var, steps=steps, lr=lr, beta1=beta1,
                             precond=precond, mask=mask, weight_decay=weight_decay,
                             first_step=first_step, w0_mean=w0_mean, w0_var=w0_var,
                             m0_mean=m0_mean, keep_rows=keep_rows)
