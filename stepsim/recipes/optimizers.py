"""The optimizers recipes step with (SPEC sections 1 and 3): Adam and momentum SGD.

Pure pieces, as in :mod:`stepsim.recipes.transforms`: a frozen dataclass with
``init``/``update`` (as optax's ``GradientTransformation``) of its inputs only, arrays
passed in never modified. Moments are dicts ``name -> ndarray`` (float32 or float64).

* :class:`Adam` (moments; :func:`freeze_second_moment` for STEP's phase 2), :class:`SGDM`
  (momentum SGD); :func:`learning_rate` (constant / cosine, linear warm-up).
* Their options declared once (``ADAM_OPTIONS``, ``SGDM_OPTIONS``): the dataclass's default
  and check, the registry's option tables and the help text.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from stepsim._ground.options import Bool, Choice, Int, Option, Options, Real, declared
from stepsim._ground.validate import check_choice, check_int

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
})
SGDM_OPTIONS = Options({
    "lr": Option(Real(minimum=0.0), 1e-2, "learning rate"),
    "momentum": Option(Real(0.0, 1.0, max_open=True), 0.9, "momentum"),
    "weight_decay": Option(Real(minimum=0.0), 0.0, "L2 weight decay (coupled)"),
    "nesterov": Option(Bool(), False, "Nesterov momentum"),
    **_SCHEDULE,
})


# --------------------------------------------------------------------------- Adam
class FrozenV(NamedTuple):
    """How one parameter's frozen v* is read in STEP's phase 2 (see :func:`freeze_second_moment`).

    bias_correction2: the divisor of v* (1.0: raw v*, Algorithm 1). eps, eps_mode: the
    denominator's eps and where it goes (the "public" variant changes both).
    """

    bias_correction2: float
    eps: float
    eps_mode: str

    def denominator2(self, v: np.ndarray) -> np.ndarray:
        """Phase 2's denominator squared over the raw frozen v* (float64 array): v*/c + eps
        inside the root, (sqrt(v*/c) + eps)^2 outside (c: ``bias_correction2``)."""
        v = np.asarray(v, dtype=np.float64) / self.bias_correction2
        return v + self.eps if self.eps_mode == "inside" else (np.sqrt(v) + self.eps) ** 2


class AdamState(NamedTuple):
    """Adam's state (values only; the hyper-parameters live in :class:`Adam`).

    m, v: name -> array shaped and typed like the parameter; v is raw (not bias-corrected).
    frozen: name -> :class:`FrozenV` for every parameter whose v is frozen (STEP's phase 2:
    read, never written); a parameter not in it updates v normally. Per parameter, so each
    module can freeze at its own switch step.
    """

    m: dict
    v: dict
    frozen: Mapping = {}  # read-only (never mutated): every change makes a new dict


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

        checked=False skips :func:`~stepsim.core.optim_hyper.adam_hyper`'s checks (same values): for
        fit's lean step, whose step numbers fit has checked and whose hyper-parameters
        this frozen object checked when it was made (and freeze_second_moment when a v
        froze)."""
        from stepsim.core.optim_hyper import adam_hyper

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
                    made[frozen] = self._hyper_checked(step, lr, frozen, stats_on, log_stats)
            return made[frozen]

        return {name: hyper(state.frozen.get(name)) for name in params}

    def _hyper_checked(self, step, lr, frozen: FrozenV | None, stats_on, log_stats):
        """The AdamHyper of a step for parameters frozen as ``frozen`` (None: v updated),
        without :func:`~stepsim.core.optim_hyper.adam_hyper`'s checks
        (``hypers(checked=False)``)."""
        from stepsim.core.optim_hyper import adam_hyper_checked

        eps, mode = (self.eps, self.eps_mode) if frozen is None else frozen[1:]
        bc2 = None if frozen is None else frozen.bias_correction2
        return adam_hyper_checked(
            int(step), float(lr), float(self.beta1), float(self.beta2), float(eps), mode,
            float(self.weight_decay), frozen is not None, None if bc2 is None else float(bc2),
            True, log_stats, stats_on)

    def update_into(self, state: AdamState, params: Mapping, grads: Mapping, step: int,
                    total_steps: int, ws, *, stats_on: str = "v",
                    log_stats: bool = False, lr: float | None = None) -> dict:
        """:meth:`update` without its copies (the in-place protocol, :mod:`stepsim.recipes.lean`):
        w (``params``, arrays the caller owns), m and v are updated in place. ``ws``: the
        step's Workspace, which keeps the validated :class:`~stepsim.core.optim_many.AdamArrays`
        (one per dtype) while ``params`` and the state's m and v dicts are the same
        objects, and which parameters share a hyper (one kernel call each, as
        :func:`adam_arrays` groups them) while ``state.frozen`` is the same dict. Returns
        name -> AdamStats (the same bits as :meth:`update`'s)."""
        groups = ws.bound("adam", (params, state.m, state.v),
                          lambda: _adam_arrays_by_dtype(params, state.m, state.v))
        calls = ws.bound("adam-calls", (groups, state.frozen),
                         lambda: _adam_calls(groups, state.frozen))
        lr = self.lr_at(step, total_steps) if lr is None else lr
        made = {}  # frozen -> its hyper this step
        parts = {}
        for arrays, frozen, rows, names in calls:
            hyper = made.get(frozen)
            if hyper is None:
                hyper = made[frozen] = self._hyper_checked(step, lr, frozen, stats_on, log_stats)
            parts.update(zip(names, arrays.step([grads[k] for k in names], hyper, rows)))
        return {name: parts[name] for name in params}


def _adam_calls(groups, frozen: Mapping) -> list:
    """The kernel calls of :meth:`Adam.update_into`: [(AdamArrays, FrozenV or None, rows or
    None for all, names)], one per distinct freezing within each dtype's arrays, in the
    order of the parameters' first appearance (as :func:`adam_arrays` groups them)."""
    calls = []
    for arrays, names in groups:
        by_frozen = {}
        for row, name in enumerate(names):
            by_frozen.setdefault(frozen.get(name), []).append(row)
        if len(by_frozen) == 1:
            calls.append((arrays, next(iter(by_frozen)), None, list(names)))
            continue
        for key, rows in by_frozen.items():
            calls.append((arrays, key, rows, [names[r] for r in rows]))
    return calls


def _adam_arrays_by_dtype(params: Mapping, m: Mapping, v: Mapping) -> list:
    """[(AdamArrays, names)] over ``params`` and their moments, one per dtype (in order)."""
    from stepsim.core.optim_many import AdamArrays

    out = []
    for names in _by_dtype(params).values():
        out.append((AdamArrays([params[k] for k in names], [m[k] for k in names],
                               [v[k] for k in names]), names))
    return out


def _sgdm_arrays_by_dtype(params: Mapping, buf: Mapping) -> list:
    """[(SGDMArrays, names)] over ``params`` and their momentum buffers, one per dtype."""
    from stepsim.core.optim_many import SGDMArrays

    return [(SGDMArrays([params[k] for k in names], [buf[k] for k in names]), names)
            for names in _by_dtype(params).values()]


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
    from stepsim.core.optim_many import adam_apply_many

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
        from stepsim.core.optim_many import sgdm_apply_many

        lr = self.lr_at(step, total_steps) if lr is None else lr
        hyper = {"lr": lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                 "nesterov": self.nesterov}
        if ws is None:  # the pure update's fresh copies: checked at this one call
            for names in _by_dtype(params).values():
                sgdm_apply_many([params[k] for k in names], [grads[k] for k in names],
                                [state.buf[k] for k in names], **hyper)
            return dict.fromkeys(params)
        # the lean step's own arrays: checked once (SGDMArrays) while the dicts are the same
        for arrays, names in ws.bound("sgdm", (params, state.buf),
                                      lambda: _sgdm_arrays_by_dtype(params, state.buf)):
            arrays.step([grads[k] for k in names], **hyper)
        return dict.fromkeys(params)
