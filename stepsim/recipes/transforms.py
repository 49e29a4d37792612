"""Small, pure pieces that recipes are composed of (SPEC sections 1 and 3).

Every piece is a function (or a frozen dataclass with ``init``/``update``, as optax's
``GradientTransformation``) of its inputs only: no hidden state, no global RNG, and the
arrays passed in are never modified — a piece returns new dicts of new arrays. Parameters,
gradients and optimizer moments are dicts ``name -> ndarray`` (float32 or float64, one dtype
per parameter); masks are dicts ``name -> bool ndarray`` with ``None`` for a parameter that
is not sparsified.

Pieces, in the order a step uses them:

* masks: :func:`_nm_masks` (Pi_k from |w_k|), :func:`count_flips`; :class:`DecaySchedule`
  (decaying mask: which N at which step); :func:`allocate_layerwise` (layer-wise N:M).
* forward: :func:`masked_forward` — Pi * w, or (Pi + alpha (1 - Pi)) * w for a decaying scale.
* gradient: :func:`srste_term` (g + lam (1 - Pi) w), :func:`mask_gradients` (ASP); as
  pieces a recipe attaches on the gradient: :class:`SrsteTerm`, :class:`MaskGradients`.
* optimizer: :class:`Adam` (moments; :func:`freeze_second_moment` for STEP's phase 2),
  :class:`SGDM` (momentum SGD); :func:`learning_rate` (constant / cosine, linear warm-up).
* after the step: :func:`srste_decoupled` (SR-STE term applied after Adam normalises),
  :func:`mask_weights` (ASP: pruned weights are zero after every step); as pieces:
  :class:`SrsteDecoupled`, :class:`MaskWeights`. Each piece reads a :class:`StepView`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from stepsim._ground.options import Bool, Choice, Int, Option, Options, Real, declared
from stepsim._ground.validate import (
    check_choice,
    check_fraction,
    check_int,
    check_nm,
    check_real,
)
from stepsim.core.sparsity import ParamSpec, check_divides

Params = dict  # name -> ndarray
Masks = dict  # name -> bool ndarray, or None for a dense parameter

SCHEDULES = ("constant", "cosine")


# --------------------------------------------------------------------------- learning rate
def learning_rate(base: float, step: int, total_steps: int, schedule: str = "constant",
                  warmup_steps: int = 0) -> float:
    """Learning rate at step k (1-based): linear warm-up over ``warmup_steps``, then the schedule.

    constant: base. cosine: base * (1 + cos(pi * (k - 1) / total_steps)) / 2 (from base at
    k = 1 towards 0). Warm-up multiplies by min(1, k / warmup_steps).

    Parameters
    ----------
    base : float
        The base learning rate.
    step, total_steps : int
        k (1-based) and T.
    schedule : {"constant", "cosine"}
    warmup_steps : int

    Returns
    -------
    float
    """
    lr = base
    if schedule == "cosine":
        lr = base * 0.5 * (1.0 + math.cos(math.pi * (step - 1) / max(total_steps, 1)))
    if warmup_steps > 0 and step < warmup_steps:
        lr *= step / warmup_steps
    return lr


# ------------------------------------------------------------ optimizer options, declared once
# the declaration is the dataclass's default and check (stepsim._ground.options.declared); the
# registry's OPTIMIZER_OPTIONS and the help text read the same tables
_SCHEDULE = {
    "schedule": Option(Choice(*SCHEDULES), "constant", "learning-rate schedule"),
    "warmup_steps": Option(Int(minimum=0), 0, "linear warm-up steps of the learning rate"),
}
ADAM_OPTIONS = Options({
    "lr": Option(Real(minimum=0.0), 1e-3, "learning rate"),
    "beta1": Option(Real(0.0, 1.0, max_open=True), 0.9, "decay of the first moment m"),
    "beta2": Option(Real(0.0, 1.0, max_open=True), 0.999, "decay of the second moment v"),
    "eps": Option(Real(minimum=0.0, min_open=True), 1e-8, "epsilon of the denominator"),
    "eps_mode": Option(Choice("inside", "outside"), "inside",
                       "eps inside the square root (paper) or outside (PyTorch)"),
    "weight_decay": Option(Real(minimum=0.0), 0.0, "decoupled weight decay (AdamW)"),
    **_SCHEDULE,
}, validated=False)
SGDM_OPTIONS = Options({
    "lr": Option(Real(minimum=0.0), 1e-2, "learning rate"),
    "momentum": Option(Real(0.0, 1.0, max_open=True), 0.9, "momentum"),
    "weight_decay": Option(Real(minimum=0.0), 0.0, "L2 weight decay (coupled)"),
    "nesterov": Option(Bool(), False, "Nesterov momentum"),
    **_SCHEDULE,
}, validated=False)


# --------------------------------------------------------------------------- Adam
class FrozenV(NamedTuple):
    """How one parameter's frozen v* is read in STEP's phase 2 (see :func:`freeze_second_moment`).

    bias_correction2: the divisor of v* (1.0: raw v*, Algorithm 1). eps, eps_mode: the
    denominator's eps and where it goes (the "public" variant changes both).
    """

    bias_correction2: float
    eps: float
    eps_mode: str


class AdamState(NamedTuple):
    """Adam's state (values only; the hyper-parameters live in :class:`Adam`).

    m, v: name -> array shaped and typed like the parameter; v is raw (not bias-corrected).
    frozen: name -> :class:`FrozenV` for every parameter whose v is frozen (STEP's phase 2:
    read, never written); a parameter not in it updates v normally. Per parameter, so each
    module can freeze at its own switch step.
    """

    m: dict
    v: dict
    frozen: dict = {}  # never mutated: every change makes a new dict


@dataclasses.dataclass(frozen=True)
@declared(ADAM_OPTIONS)
class Adam:
    """Adam(W) over a dict of parameters (SPEC section 1; :func:`stepsim.adam_step` per array).

    m_k = b1 m + (1-b1) g;  v_k = b2 v + (1-b2) g^2;
    w_k = w (1 - lr wd) - lr (m_k / (1-b1^k)) / sqrt(v_k / (1-b2^k) + eps)   (eps inside)
    with ``weight_decay`` decoupled (AdamW) and ``lr`` following ``schedule``.
    """

    # defaults and checks: ADAM_OPTIONS (lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8, ...)
    lr: float
    beta1: float
    beta2: float
    eps: float
    eps_mode: str
    weight_decay: float
    schedule: str
    warmup_steps: int

    def lr_at(self, step: int, total_steps: int) -> float:
        """The learning rate of step ``step`` (1-based) in a run of ``total_steps``."""
        return learning_rate(self.lr, step, total_steps, self.schedule, self.warmup_steps)

    def init(self, params: Mapping) -> AdamState:
        """Zero moments shaped like ``params``; nothing frozen."""
        zeros = {name: np.zeros_like(w) for name, w in params.items()}
        return AdamState(m=zeros, v={n: np.zeros_like(w) for n, w in params.items()}, frozen={})

    def update(self, state: AdamState, params: Mapping, grads: Mapping, step: int,
               total_steps: int, *, stats_on: str = "v", log_stats: bool = False,
               lr: float | None = None):
        """One step. Returns (new params, new state, name -> AdamStats of that parameter).

        The inputs are not modified: w and m are copied before the in-place kernel runs; a
        frozen v is shared between the old and the new state, since nothing writes it.
        ``AdamStats.combine`` of the values (in ``params`` order) is the step's total.
        lr: this step's ``lr_at(step, total_steps)`` when the caller has it (None: computed).
        """
        hypers = self.hypers(state, params, step, total_steps, stats_on=stats_on,
                             log_stats=log_stats, lr=lr)
        new_w, new_m, new_v, parts = adam_arrays(params, grads, state.m, state.v, hypers)
        return new_w, state._replace(m=new_m, v=new_v), parts

    def hypers(self, state: AdamState, params: Mapping, step: int, total_steps: int, *,
               stats_on: str = "v", log_stats: bool = False, checked: bool = True,
               lr: float | None = None) -> dict:
        """name -> the validated :class:`~stepsim.core.optim.AdamHyper` of each parameter at
        ``step`` (one object per distinct freezing, shared by its parameters).

        checked=False skips :func:`~stepsim.core.optim.adam_hyper`'s checks (same values): for
        fit's lean step, whose step numbers fit has checked and whose hyper-parameters
        this frozen object checked when it was made (and freeze_second_moment when a v
        froze)."""
        from stepsim.core.optim import adam_hyper, adam_hyper_checked

        lr = self.lr_at(step, total_steps) if lr is None else lr
        made = {}  # one validated hyper per distinct freezing (one for a global switch)

        def hyper(frozen: FrozenV | None):
            if frozen not in made:
                eps, mode = (self.eps, self.eps_mode) if frozen is None else frozen[1:]
                bc2 = None if frozen is None else frozen.bias_correction2
                if checked:
                    made[frozen] = adam_hyper(
                        step=step, lr=lr, beta1=self.beta1, beta2=self.beta2, eps=eps,
                        eps_mode=mode, weight_decay=self.weight_decay,
                        freeze_v=frozen is not None, bias_correction2=bc2,
                        log_stats=log_stats, stats_on=stats_on)
                else:
                    made[frozen] = adam_hyper_checked(
                        int(step), float(lr), float(self.beta1), float(self.beta2),
                        float(eps), mode, float(self.weight_decay), frozen is not None,
                        None if bc2 is None else float(bc2), True, log_stats, stats_on)
            return made[frozen]

        return {name: hyper(state.frozen.get(name)) for name in params}

    def update_into(self, state: AdamState, params: Mapping, grads: Mapping, step: int,
                    total_steps: int, ws, *, stats_on: str = "v",
                    log_stats: bool = False, lr: float | None = None) -> dict:
        """:meth:`update` without its copies (the in-place protocol, :mod:`stepsim.recipes.lean`):
        w (``params``, arrays the caller owns), m and v are updated in place. ``ws``: the
        step's Workspace, which keeps the validated :class:`~stepsim.core.optim.AdamArrays`
        (one per dtype) while ``params`` and the state's m and v dicts are the same
        objects. Returns name -> AdamStats (the same bits as :meth:`update`'s)."""
        groups = ws.bound("adam", (params, state.m, state.v),
                          lambda: _adam_arrays_by_dtype(params, state.m, state.v))
        hypers = self.hypers(state, params, step, total_steps, stats_on=stats_on,
                             log_stats=log_stats, checked=False, lr=lr)
        parts = {}
        for arrays, names in groups:
            by_hyper = {}  # one kernel call per distinct hyper, as adam_arrays groups them
            for row, name in enumerate(names):
                by_hyper.setdefault(id(hypers[name]), (hypers[name], []))[1].append(row)
            if len(by_hyper) == 1:
                hyper, _ = next(iter(by_hyper.values()))
                parts.update(zip(names, arrays.step([grads[k] for k in names], hyper)))
                continue
            for hyper, rows in by_hyper.values():
                stats = arrays.step([grads[names[r]] for r in rows], hyper, rows)
                parts.update(zip((names[r] for r in rows), stats))
        return {name: parts[name] for name in params}


def _adam_arrays_by_dtype(params: Mapping, m: Mapping, v: Mapping) -> list:
    """[(AdamArrays, names)] over ``params`` and their moments, one per dtype (in order)."""
    from stepsim.core.optim import AdamArrays

    out = []
    for names in _by_dtype(params).values():
        out.append((AdamArrays([params[k] for k in names], [m[k] for k in names],
                               [v[k] for k in names]), names))
    return out


def _by_dtype(params: Mapping) -> dict:
    """dtype -> the names of ``params`` of that dtype, in order."""
    out = {}
    for name, w in params.items():
        out.setdefault(w.dtype, []).append(name)
    return out


def adam_arrays(params: Mapping, grads: Mapping, m: Mapping, v: Mapping, hypers: Mapping):
    """Adam on every array, each with its validated ``hypers[name]`` (an AdamHyper).

    Returns (new w, new m, new v, name -> AdamStats); w and m are copied first, a frozen v
    is shared (nothing writes it). The only per-array loop of the Adam update: a
    multi-tensor kernel call per distinct hyper, with each array's own statistics (the same
    bits as one :func:`stepsim.core.optim.adam_apply` per array).
    """
    from stepsim.core.optim import adam_apply_many

    new_w, new_m, new_v = {}, {}, {}
    groups = {}  # one multi-tensor call per distinct (hyper, dtype): one for a global switch
    for name, w in params.items():
        hyper = hypers[name]
        new_w[name], new_m[name] = w.copy(), m[name].copy()
        new_v[name] = v[name] if hyper.freeze_v else v[name].copy()
        groups.setdefault((id(hyper), w.dtype), (hyper, []))[1].append(name)
    parts = {}
    for hyper, names in groups.values():
        stats = adam_apply_many([new_w[k] for k in names], [grads[k] for k in names],
                                [new_m[k] for k in names], [new_v[k] for k in names], hyper,
                                per_param=True)
        parts.update(zip(names, stats))
    return new_w, new_m, new_v, {name: parts[name] for name in params}


V_STAR = ("raw", "bias-corrected")
DENOMINATORS = ("paper", "public")


def freeze_second_moment(state: AdamState, k0: int, beta2: float, eps: float = 1e-8,
                         eps_mode: str = "inside", *, v_star: str = "raw",
                         denominator: str = "paper", names=None) -> AdamState:
    """STEP's switch after step k0: v* = v_{k0} of ``names`` (default: all) is frozen.

    v_star: "raw" divides by sqrt(v* + eps) (Algorithm 1, line 20; the default) or
    "bias-corrected" by sqrt(v* / (1 - beta2**k0) + eps).
    denominator: "paper" keeps Adam's eps and eps_mode (inside the root, Eq. 7); "public"
    uses sqrt(v*) + eps**0.75, as one public implementation does.
    Parameters already frozen keep their v* (a module freezes once).

    Returns
    -------
    AdamState
        A new state; ``state`` is unchanged.
    """
    check_choice("v_star", v_star, V_STAR)
    check_choice("denominator", denominator, DENOMINATORS)
    check_int("k0", k0, minimum=1)
    bc2 = 1.0 if v_star == "raw" else 1.0 - beta2**k0
    if denominator == "public":
        eps, eps_mode = eps**0.75, "outside"
    names = state.v.keys() if names is None else names
    frozen = dict(state.frozen)
    for name in names:
        frozen.setdefault(name, FrozenV(bc2, eps, eps_mode))
    return state._replace(frozen=frozen)


# --------------------------------------------------------------------------- momentum SGD
class SGDMState(NamedTuple):
    """Momentum buffers: name -> array like the parameter (zeros at init)."""

    buf: dict


@dataclasses.dataclass(frozen=True)
@declared(SGDM_OPTIONS)
class SGDM:
    """Momentum SGD (torch.optim.SGD rule, :func:`stepsim.sgdm_step`): coupled L2 decay."""

    # defaults and checks: SGDM_OPTIONS (lr 1e-2, momentum 0.9, no decay, no Nesterov, ...)
    lr: float
    momentum: float
    weight_decay: float
    nesterov: bool
    schedule: str
    warmup_steps: int

    def lr_at(self, step: int, total_steps: int) -> float:
        """The learning rate of step ``step`` (1-based) in a run of ``total_steps``."""
        return learning_rate(self.lr, step, total_steps, self.schedule, self.warmup_steps)

    def init(self, params: Mapping) -> SGDMState:
        return SGDMState(buf={name: np.zeros_like(w) for name, w in params.items()})

    def update(self, state: SGDMState, params: Mapping, grads: Mapping, step: int,
               total_steps: int, *, stats_on: str = "v", log_stats: bool = False,
               lr: float | None = None):
        """One step. Returns (new params, new state, name -> None): SGD-M has no v to report.
        lr: this step's ``lr_at(step, total_steps)`` when the caller has it (None: computed)."""
        from stepsim.core.optim import sgdm_apply_many

        new_w = {name: w.copy() for name, w in params.items()}
        new_buf = {name: state.buf[name].copy() for name in params}
        self.update_into(SGDMState(buf=new_buf), new_w, grads, step, total_steps, None, lr=lr)
        return new_w, SGDMState(buf=new_buf), dict.fromkeys(params)

    def update_into(self, state: SGDMState, params: Mapping, grads: Mapping, step: int,
                    total_steps: int, ws, *, stats_on: str = "v",
                    log_stats: bool = False, lr: float | None = None) -> dict:
        """:meth:`update` in place on w (``params``) and the state's buffers (the in-place
        protocol, :mod:`stepsim.recipes.lean`); one call per dtype (a model may mix float32
        and float64 parameters; each entry's arithmetic is its own). Returns name -> None."""
        from stepsim.core.optim import sgdm_apply_many

        lr = self.lr_at(step, total_steps) if lr is None else lr
        for names in _by_dtype(params).values():
            sgdm_apply_many([params[k] for k in names], [grads[k] for k in names],
                            [state.buf[k] for k in names], lr=lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, nesterov=self.nesterov)
        return dict.fromkeys(params)


# --------------------------------------------------------------------------- masks
def _nm_masks(params: Mapping, specs: Mapping[str, ParamSpec],
              nm: Mapping[str, tuple[int, int]], transposable: bool = False) -> Masks:
    """Pi: the N:M magnitude mask of every sparse parameter (``nm[name] = (n, m)``), else
    None: dict name -> bool ndarray (shaped like the parameter) or None. For the training
    loop: the arguments were checked once per run
    (``RunContext.make``: float weights, every N:M tiling its axis; the N:M values from
    validated specs, allocations and schedules), so each step's masks skip the checks.

    transposable: the mask of every sparse parameter whose shape allows it (2-D, both
    dimensions divisible by M: :func:`transposable_ok`) has rows and columns both N:M
    (:func:`stepsim.core.transposable.transposable_mask`); the others (e.g. a 10-class
    output layer at M = 4) keep the usual N:M mask along their axis, and ``stepsim
    compress`` says which weights' masks are transposable."""
    from stepsim.core.masks import _nm_mask

    out = {}
    for name, w in params.items():
        spec = specs[name]
        if not spec.sparse:
            out[name] = None
        elif transposable and transposable_ok(w.shape, nm[name][1]):
            from stepsim.core.transposable import _transposable_mask

            if np.isnan(w).any():
                raise ValueError(f"parameter {name!r} contains NaN; its transposable N:M "
                                 "mask is undefined")
            out[name] = _transposable_mask(w, *nm[name])
        else:
            out[name] = _nm_mask(w, *nm[name], spec.axis)
    return out


def transposable_ok(shape, m: int) -> bool:
    """A weight of ``shape`` can take a transposable N:M mask: 2-D, both dimensions
    divisible by M (M x M blocks)."""
    return len(shape) == 2 and shape[0] % m == 0 and shape[1] % m == 0


def count_flips(old: Masks | None, new: Masks) -> int:
    """Mask entries that changed from ``old`` to ``new``; ``old=None`` means all kept (dense).

    Parameters
    ----------
    old : dict name -> bool ndarray or None, or None
    new : dict name -> bool ndarray or None

    Returns
    -------
    int
    """
    flips = 0
    for name, mask in new.items():
        if mask is None:
            continue
        prev = None if old is None else old.get(name)
        flips += int(mask.size - np.count_nonzero(mask)) if prev is None else int(
            np.count_nonzero(prev != mask))
    return flips


def _on_pruned(arrays: Mapping, masks: Masks, pruned) -> Params:
    """``arrays`` with each masked entry replaced by ``pruned(name, x)`` where its mask is
    False; kept entries, and arrays without a mask, pass through unchanged."""
    out = {}
    for name, x in arrays.items():
        mask = masks.get(name)
        out[name] = x if mask is None else np.where(mask, x, pruned(name, x))
    return out


def masked_forward(params: Mapping, masks: Masks, alpha: float | Mapping = 0.0) -> Params:
    """The weights the forward pass uses: Pi * w, pruned entries scaled by ``alpha`` (default 0).

    alpha: one scale for every layer, or a dict name -> scale (missing names: 0).

    Parameters
    ----------
    params : dict name -> ndarray
    masks : dict name -> bool ndarray or None
    alpha : float or dict name -> float

    Returns
    -------
    dict name -> ndarray
        New arrays for masked parameters; the others are passed through.
    """
    def pruned(name, w):
        a = alpha.get(name, 0.0) if isinstance(alpha, Mapping) else alpha
        return w.dtype.type(0) if a == 0.0 else w * w.dtype.type(a)

    return _on_pruned(params, masks, pruned)


def srste_term(grads: Mapping, params: Mapping, masks: Masks, lam: float) -> Params:
    """SR-STE's gradient (Eq. 9): g + lam * (1 - Pi) * w; kept entries are g unchanged.

    Parameters
    ----------
    grads, params : dict name -> ndarray
    masks : dict name -> bool ndarray or None
    lam : float >= 0

    Returns
    -------
    dict name -> ndarray
    """
    return _on_pruned(grads, masks,
                      lambda name, g: g + params[name].dtype.type(lam) * params[name])


def srste_decoupled(new_params: Mapping, old_params: Mapping, masks: Masks, lam: float,
                    lr: float) -> Params:
    """SR-STE after the optimizer normalised the gradient: w -= lr * lam * (1 - Pi) * w_old.

    Parameters
    ----------
    new_params : dict name -> ndarray
        w after the optimizer step.
    old_params : dict name -> ndarray
        w_k, before it.
    masks : dict name -> bool ndarray or None
    lam, lr : float

    Returns
    -------
    dict name -> ndarray
    """
    return _on_pruned(new_params, masks,
                      lambda name, w: w - w.dtype.type(lr * lam) * old_params[name])


def mask_gradients(grads: Mapping, masks: Masks) -> Params:
    """ASP (apex): gradients of pruned weights are zeroed before the optimizer step.

    Parameters
    ----------
    grads : dict name -> ndarray
    masks : dict name -> bool ndarray or None

    Returns
    -------
    dict name -> ndarray
    """
    return masked_forward(grads, masks)


def mask_weights(params: Mapping, masks: Masks) -> Params:
    """ASP (apex): pruned weights are set to zero after the optimizer step.

    Parameters
    ----------
    params : dict name -> ndarray
    masks : dict name -> bool ndarray or None

    Returns
    -------
    dict name -> ndarray
    """
    return masked_forward(params, masks)


# --------------------------------------------------------------------------- decaying mask
def decay_sequence(n: int, m: int) -> tuple[int, ...]:
    """The N of each frame of the decaying mask, down to the target n (SPEC section 3).

    Frame 0 keeps M-1 of M; frame s >= 1 keeps max(n, M // 2**s) (the paper's N = M/2^s);
    repeated values are dropped and the sequence stops at n. 1:8 -> (7, 4, 2, 1);
    2:4 -> (3, 2); 1:4 -> (3, 2, 1); 3:8 -> (7, 4, 3); N = M -> (M,).

    Parameters
    ----------
    n, m : int
        The target N:M.

    Returns
    -------
    tuple of int
    """
    n, m = check_nm(n, m)
    seq = [max(n, m - 1)]
    s = 1
    while seq[-1] > n:
        nxt = max(n, m >> s)
        if nxt < seq[-1]:
            seq.append(nxt)
        s += 1
    return tuple(seq)


ALPHA_CLOCKS = ("phase", "frame")


@dataclasses.dataclass(frozen=True)
class DecaySchedule:
    """Structure decay over steps ``start..stop`` (inclusive), in equal frames.

    Frame f (0-based, F frames) starts at step ``start + floor(f * L / F)`` with
    L = stop - start + 1 and keeps ``ns[f]`` of every ``m``. The optional decaying scale
    alpha = max(0, 1 - decay_rate * t) multiplies the pruned weights in the forward pass;
    the last frame always uses a binary mask (alpha 0). ``alpha_clock`` says what t counts:
    "phase" (default): steps since the sparse phase began (t = step - start), once, as Kao
    et al.'s group's code does; "frame": steps since the current frame began, restarting
    at every frame (stepsim before issue 11), so that each frame's first step forwards the
    pruned weights at full scale — kept only as an option.
    """

    m: int
    ns: tuple[int, ...]
    start: int
    stop: int
    decay_rate: float | None = None
    alpha_clock: str = "phase"

    @classmethod
    def make(cls, n: int, m: int, start: int, stop: int, decay_rate: float | None = None,
             alpha_clock: str = "phase"):
        """The schedule from N:M ``n``:``m`` over steps start..stop (see the class)."""
        check_int("start", start, minimum=1)
        if decay_rate is not None:
            check_real("decay_rate", decay_rate, minimum=0.0)
        check_choice("alpha_clock", alpha_clock, ALPHA_CLOCKS)
        return cls(m=m, ns=decay_sequence(n, m), start=start, stop=max(stop, start),
                   decay_rate=decay_rate, alpha_clock=alpha_clock)

    @property
    def frame_starts(self) -> tuple[int, ...]:
        length, frames = self.stop - self.start + 1, len(self.ns)
        return tuple(self.start + (f * length) // frames for f in range(frames))

    def frame(self, step: int) -> int:
        """Index of the frame ``step`` is in (0 before ``start``)."""
        starts = self.frame_starts
        return max(0, int(np.searchsorted(starts, step, side="right")) - 1)

    def n_at(self, step: int) -> int:
        """The N in force at ``step``."""
        return self.ns[self.frame(step)]

    def alpha_at(self, step: int) -> float:
        """The scale of the pruned weights at ``step`` (0 without a decay rate)."""
        f = self.frame(step)
        if self.decay_rate is None or f == len(self.ns) - 1:
            return 0.0
        origin = self.start if self.alpha_clock == "phase" else self.frame_starts[f]
        return max(0.0, 1.0 - self.decay_rate * (step - origin))


# --------------------------------------------------------------------------- step pieces
class StepView(NamedTuple):
    """What a gradient or after-update piece may read about step k.

    params: w_k, the weights the masks were made from (before the update). masks: Pi_k
    (None for a parameter that is dense or whose module has not switched yet). step: k.
    lr: the optimizer's learning rate at step k.
    """

    params: dict
    masks: dict
    step: int
    lr: float


@dataclasses.dataclass(frozen=True)
class SrsteTerm:
    """On the gradient, before the optimizer (SR-STE's code): g + lam (1 - Pi) w.

    The same piece is Hu et al.'s masked decay (ICML 2024, arXiv 2404.01847): alpha (1 - Pi)
    w added to the gradient before Adam, so it enters both m and v (recipe masked-decay)."""

    lam: float

    def __post_init__(self):
        check_real("lam", self.lam, minimum=0.0)

    def apply(self, grads: Mapping, view: StepView) -> Params:
        return srste_term(grads, view.params, view.masks, self.lam)

    def apply_into(self, grads: Mapping, view: StepView, ws) -> Params:
        """:meth:`apply` into the step's gradient buffers (:mod:`stepsim.recipes.lean`)."""
        k = _step_kernels()
        out = dict(grads)
        for name, mask, w in _masked(view):
            buf = ws.like("grad", name, w)
            k.where_add_scaled(_flat(grads[name]), _flat(w), _flat(mask),
                               w.dtype.type(self.lam), _flat(buf))
            out[name] = buf
        return out


@dataclasses.dataclass(frozen=True)
class SrsteDecoupled:
    """After the optimizer normalised the gradient: w -= lr lam (1 - Pi) w_k."""

    lam: float

    def __post_init__(self):
        check_real("lam", self.lam, minimum=0.0)

    reads_w_k = True  # view.params after the optimizer: the lean step keeps copies

    def apply(self, params: Mapping, view: StepView) -> Params:
        return srste_decoupled(params, view.params, view.masks, self.lam, view.lr)

    def apply_into(self, params: Mapping, view: StepView, ws) -> None:
        """:meth:`apply` in place on ``params`` (:mod:`stepsim.recipes.lean`)."""
        k = _step_kernels()
        for name, mask, w_k in _masked(view):
            w = _flat(params[name])
            k.where_sub_scaled(w, _flat(w_k), _flat(mask),
                               params[name].dtype.type(view.lr * self.lam), w)


@dataclasses.dataclass(frozen=True)
class MaskGradients:
    """ASP (apex), on the gradient: pruned entries' gradients are zeroed."""

    def apply(self, grads: Mapping, view: StepView) -> Params:
        return mask_gradients(grads, view.masks)

    def apply_into(self, grads: Mapping, view: StepView, ws) -> Params:
        """:meth:`apply` into the step's gradient buffers (:mod:`stepsim.recipes.lean`)."""
        k = _step_kernels()
        out = dict(grads)
        for name, mask in view.masks.items():
            if mask is not None:
                buf = ws.like("grad", name, grads[name])
                k.where_zero(_flat(grads[name]), _flat(mask), _flat(buf))
                out[name] = buf
        return out


@dataclasses.dataclass(frozen=True)
class MaskWeights:
    """ASP (apex), after the optimizer: pruned weights are set back to zero."""

    def apply(self, params: Mapping, view: StepView) -> Params:
        return mask_weights(params, view.masks)

    def apply_into(self, params: Mapping, view: StepView, ws) -> None:
        """:meth:`apply` in place on ``params`` (:mod:`stepsim.recipes.lean`)."""
        k = _step_kernels()
        for name, mask in view.masks.items():
            if mask is not None:
                w = _flat(params[name])
                k.where_zero(w, _flat(mask), w)


def _step_kernels():
    """The select kernels of the in-place forms (numba: imported at the first step)."""
    from stepsim.core import _step_kernels as k

    return k


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1)


def _masked(view: StepView):
    """(name, mask, view.params[name]) of every masked parameter of the step."""
    return [(name, mask, view.params[name]) for name, mask in view.masks.items()
            if mask is not None]


# --------------------------------------------------------------------------- layer-wise N:M
def _candidates(m: int) -> list[int]:
    """N values a layer may take, largest first: M and the powers of two below it."""
    out = [m]
    p = 1 << (m.bit_length() - 1)
    if p == m:
        p >>= 1
    while p >= 1:
        out.append(p)
        p >>= 1
    return out


def allocate_layerwise(params: Mapping, specs: Mapping[str, ParamSpec], target_sparsity: float,
                       m: int | None = None) -> dict[str, tuple[int, int]]:
    """Per-layer N (a power of two, M fixed) meeting a global target sparsity; greedy rule.

    A simpler stand-in for DominoSearch (Sun et al. 2021), documented here: every sparse
    layer starts dense (N = M); while the kept fraction of all sparse entries exceeds
    1 - target_sparsity, the layer whose next halving of N (to the next smaller power of
    two) would prune the smallest *relative* magnitude is halved. The cost of a halving is
    the mean |w| of the entries it would prune (ranked within each group of M) divided by
    the layer's mean |w| — so a layer's overall scale does not matter, only how
    concentrated its magnitude is inside its groups. Ties go to the first layer in the
    dict's order. Dense parameters (biases) are not counted.

    m: the M of every sparse layer (default: each spec's own M). Returns name -> (n, m) for
    the sparse parameters. Raises ValueError if the target is outside [0, 1] or not
    reachable (every N = 1 still keeps too much), or M does not tile a layer.

    Parameters
    ----------
    params : dict name -> ndarray
    specs : dict name -> ParamSpec
    target_sparsity : float in [0, 1]
    m : int, optional

    Returns
    -------
    dict name -> (n, m)
    """
    target = check_fraction("target_sparsity", target_sparsity)
    if m is not None:
        m = check_int("m", m, minimum=1)
    layers = {}
    for name, w in params.items():
        spec = specs[name]
        if not spec.sparse:
            continue
        mm = spec.m if m is None else m
        check_divides(name, w.shape, spec.axis, mm)
        groups = np.abs(np.moveaxis(w, spec.axis, -1).astype(np.float64)).reshape(-1, mm)
        ranked = -np.sort(-groups, axis=1)  # each group's magnitudes, largest first
        mass = ranked.sum(axis=0)  # mass[r]: total magnitude at rank r over all groups
        mean = float(groups.mean()) if groups.size else 0.0
        layers[name] = {"m": mm, "groups": groups.shape[0], "mass": mass,
                        "scale": mean or 1.0, "cands": _candidates(mm), "n": mm}
    total = sum(lay["groups"] * lay["m"] for lay in layers.values())
    kept = total
    budget = (1.0 - target) * total
    floor = sum(lay["groups"] for lay in layers.values())
    if floor > budget * (1 + 1e-12) + 1e-9:
        raise ValueError(
            f"target_sparsity={target} is not reachable: with N = 1 in every layer the sparsity "
            f"is {1 - floor / total:.6g}")
    while kept > budget * (1 + 1e-12) + 1e-9:
        best = None
        for name, lay in layers.items():
            if lay["n"] == 1:
                continue
            nxt = lay["cands"][lay["cands"].index(lay["n"]) + 1]
            removed = lay["groups"] * (lay["n"] - nxt)
            cost = float(lay["mass"][nxt:lay["n"]].sum()) / removed / lay["scale"]
            if best is None or cost < best[0]:
                best = (cost, name, nxt, removed)
        _, name, nxt, removed = best
        layers[name]["n"] = nxt
        kept -= removed
    return {name: (lay["n"], lay["m"]) for name, lay in layers.items()}
