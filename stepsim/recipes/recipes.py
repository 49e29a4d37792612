"""Recipes: how an N:M mask is learned during training (SPEC section 3).

A :class:`Recipe` is a frozen composition of the pieces in :mod:`stepsim.recipes.transforms`:
an optimizer (:class:`Adam` or :class:`SGDM`), a masker for its sparse phase (every step,
fixed once, or decaying), whether a dense phase comes first (and what ends it), the SR-STE
term, STEP's frozen v and an optional layer-wise N:M allocation. Its methods are pure:
they return new parameters and a new :class:`RecipeState` and never modify their inputs.
:func:`stepsim.training.fit` drives them; one step k (1-based) is

    fwd, state = recipe.forward(state, params, k)      # Pi_k from w_k; forward weights
    loss, grads = problem.loss_and_grad(fwd, batch)     # gradient at the forward weights
    params, state, stats = recipe.update(state, params, grads, k)
    # and, when the switch criterion fires after step k0: recipe.switch(state, params, k0)

Phase 0 is dense (forward uses w, plain optimizer); phase 1 is the sparse (mask-learning)
phase. Recipes without a dense phase start in phase 1. Build one by name with
:func:`make_recipe`; ``RECIPES`` lists the names.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import NamedTuple

from stepsim._validate import (
    check_choice,
    check_fraction,
    check_int,
    check_real,
    check_step_or_fraction,
)
from stepsim.recipes import transforms as T
from stepsim.sparsity import ParamSpec, check_divides, check_specs, sparsity


# --------------------------------------------------------------------------- maskers
@dataclasses.dataclass(frozen=True)
class EveryStepMask:
    """STE family: Pi_k is recomputed from |w_k| at every step of the sparse phase."""

    kind = "every-step"

    def start(self, params, specs, nm, k0, total_steps):
        return None

    def masks(self, mstate, params, specs, nm, step):
        """(masks, N:M in force, alpha) for step ``step``."""
        return T.nm_masks(params, specs, nm), nm, 0.0


@dataclasses.dataclass(frozen=True)
class FixedMask:
    """ASP: the mask is computed once from |w| when the sparse phase starts, then fixed."""

    kind = "fixed"

    def start(self, params, specs, nm, k0, total_steps):
        return T.nm_masks(params, specs, nm)

    def masks(self, mstate, params, specs, nm, step):
        return mstate, nm, 0.0


@dataclasses.dataclass(frozen=True)
class DecayingMask:
    """Decaying mask (Kao et al.): N decreases in equal frames over the sparse phase.

    Per sparse layer a :class:`~stepsim.recipes.transforms.DecaySchedule` from its target
    N:M over steps k0+1..T; ``decay_rate`` c (optional) scales pruned weights by
    alpha = max(0, 1 - c t) in the forward pass (plain STE backward), last frame binary.
    """

    decay_rate: float | None = None
    kind = "decaying"

    def __post_init__(self):
        if self.decay_rate is not None:
            check_real("decay_rate", self.decay_rate, minimum=0.0)

    def start(self, params, specs, nm, k0, total_steps):
        return {name: T.DecaySchedule.make(n, m, k0 + 1, total_steps, self.decay_rate)
                for name, (n, m) in nm.items()}

    def masks(self, mstate, params, specs, nm, step):
        now = {name: (sched.n_at(step), sched.m) for name, sched in mstate.items()}
        alpha = {name: sched.alpha_at(step) for name, sched in mstate.items()}
        return T.nm_masks(params, specs, now), now, alpha


@dataclasses.dataclass(frozen=True)
class Layerwise:
    """Layer-wise N:M: each layer's N chosen by :func:`~transforms.allocate_layerwise`.

    target: global sparsity of the sparse layers (None: the one the specs' N:M give);
    m: the fixed M (None: each spec's M); allocation: name -> N given explicitly (skips
    the greedy rule). The allocation is made from the weights when the sparse phase starts.
    Combined with STEP, every layer switches at one k0 chosen by one criterion over all of
    v; the paper (Ablation I) runs STEP and AutoSwitch per module, which stepsim does not.
    """

    target: float | None = None
    m: int | None = None
    allocation: tuple[tuple[str, int], ...] | None = None

    def __post_init__(self):
        if self.target is not None:
            check_fraction("layerwise_target", self.target)
        if self.m is not None:
            check_int("layerwise_m", self.m, minimum=1)

    def allocate(self, params, specs) -> dict[str, tuple[int, int]]:
        if self.allocation is not None:
            out = {}
            given = dict(self.allocation)
            for name, spec in specs.items():
                if not spec.sparse:
                    continue
                if name not in given:
                    raise ValueError(f"layerwise_allocation has no N for sparse parameter {name!r}")
                m = spec.m if self.m is None else self.m
                n = check_int(f"layerwise_allocation[{name!r}]", given[name], minimum=1, maximum=m)
                check_divides(name, params[name].shape, spec.axis, m)
                out[name] = (n, m)
            return out
        target = self.target
        if target is None:
            target = sparsity(specs, {k: w.shape for k, w in params.items()})
        return T.allocate_layerwise(params, specs, target, m=self.m)


# --------------------------------------------------------------------------- state
class RecipeState(NamedTuple):
    """Everything a recipe carries from step to step.

    opt: the optimizer's state. phase: 0 dense, 1 sparse. switched_at: the step after which
    the sparse phase began (0: from the start; None: not yet). nm: name -> target (n, m) of
    every sparse parameter (after a layer-wise allocation, its result). nm_now: the (n, m)
    the last forward used (decaying masks change it). masks: the last Pi (None in phase 0).
    alpha: the pruned-weight scale(s) the last forward used (a float, or name -> float).
    flips: mask entries changed by the last forward. masker_state: the fixed mask (ASP) or
    the decay schedules.
    """

    opt: object
    phase: int
    switched_at: int | None
    nm: dict
    nm_now: dict
    masks: dict | None
    alpha: float
    flips: int
    masker_state: object
    specs: dict
    total_steps: int
    stats_on: str
    log_stats: bool


SRSTE_PLACEMENTS = ("before", "after")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A training recipe; see the module docstring and :func:`make_recipe`.

    name: registry name. optimizer: Adam or SGDM. masker: None for dense training, else how
    the sparse phase masks. dense_phase: a dense phase precedes the sparse one.
    switch_at: what ends the dense phase when no criterion is given to ``fit``: a step
    (int >= 0) or a fraction of the run (float in [0, 1], k0 = ceil(fraction * T)); None
    means a criterion is required. srste_lam: None (no SR-STE term) or lam >= 0;
    srste_placement: "before" the optimizer (SR-STE's code) or "after" it normalises.
    freeze_v / v_star / denominator: STEP's phase 2 (see ``freeze_second_moment``).
    layerwise: None or a :class:`Layerwise` allocation. options: what the user passed.
    """

    name: str
    optimizer: T.Adam | T.SGDM
    masker: EveryStepMask | FixedMask | DecayingMask | None
    dense_phase: bool = False
    switch_at: int | float | None = None
    srste_lam: float | None = None
    srste_placement: str = "before"
    freeze_v: bool = False
    v_star: str = "raw"
    denominator: str = "paper"
    layerwise: Layerwise | None = None
    options: tuple = ()

    def __post_init__(self):
        if self.srste_lam is not None:
            check_real("srste_lam", self.srste_lam, minimum=0.0)
        check_choice("srste_placement", self.srste_placement, SRSTE_PLACEMENTS)
        check_choice("v_star", self.v_star, T.V_STAR)
        check_choice("denominator", self.denominator, T.DENOMINATORS)
        if self.switch_at is not None:  # normalised: int = a step, float = a fraction
            object.__setattr__(self, "switch_at",
                               check_step_or_fraction("switch_at", self.switch_at))
        if self.freeze_v and self.switch_at is not None and self.switch_at == 0:
            raise ValueError(f"recipe {self.name!r} with switch_at={self.switch_at!r} would freeze "
                             "v_0 = 0 (no precondition phase); use a switch step >= 1")
        if self.freeze_v and not isinstance(self.optimizer, T.Adam):
            raise ValueError(f"recipe {self.name!r} freezes Adam's second moment; it needs "
                             f"optimizer='adam' or 'adamw', got {type(self.optimizer).__name__}")

    def __repr__(self):
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options)
        return f"Recipe({self.name!r}{', ' if opts else ''}{opts})"

    # ---------------------------------------------------------------- queries
    @property
    def sparse(self) -> bool:
        """False for dense training (no mask at all)."""
        return self.masker is not None

    @property
    def needs_criterion(self) -> bool:
        """A dense phase whose end no static ``switch_at`` fixes: ``fit`` needs a criterion."""
        return self.dense_phase and self.switch_at is None

    def static_switch_step(self, total_steps: int) -> int | None:
        """k0 from ``switch_at`` for a run of ``total_steps`` (0: no dense phase at all)."""
        if not self.sparse:
            return None
        if not self.dense_phase:
            return 0
        if self.switch_at is None:
            return None
        if isinstance(self.switch_at, float):
            from stepsim.criteria import fraction_to_step

            return fraction_to_step(self.switch_at, total_steps) if self.switch_at else 0
        return int(self.switch_at)

    # ---------------------------------------------------------------- pure steps
    def init(self, params: Mapping, specs: Mapping[str, ParamSpec], total_steps: int, *,
             stats_on: str = "v", log_stats: bool = False) -> RecipeState:
        """A fresh state (phase 0) for ``params`` under ``specs`` for a run of ``total_steps``."""
        check_specs(params, specs)
        check_int("total_steps", total_steps, minimum=1)
        check_choice("stats_on", stats_on, ("v", "vhat"))
        nm = {name: spec.nm for name, spec in specs.items() if spec.sparse}
        if self.layerwise is not None and self.layerwise.m is not None:
            for name, spec in specs.items():
                if spec.sparse:
                    check_divides(name, params[name].shape, spec.axis, self.layerwise.m)
        dense_nm = {name: (m, m) for name, (n, m) in nm.items()}
        return RecipeState(opt=self.optimizer.init(params), phase=0, switched_at=None, nm=nm,
                           nm_now=dense_nm, masks=None, alpha=0.0, flips=0, masker_state=None,
                           specs=dict(specs), total_steps=total_steps, stats_on=stats_on,
                           log_stats=bool(log_stats))

    def switch(self, state: RecipeState, params: Mapping, k0: int):
        """Enter the sparse phase after step ``k0`` (0: before the first step).

        STEP freezes v* = v_{k0}; a layer-wise recipe allocates its N per layer from the
        current weights; ASP computes its fixed mask and zeroes the pruned weights.
        Returns (params, state). Dense recipes and recipes already sparse are unchanged.
        """
        if not self.sparse or state.phase == 1:
            return dict(params), state
        nm = state.nm
        if self.layerwise is not None:
            nm = self.layerwise.allocate(params, state.specs)
        opt = state.opt
        if self.freeze_v:
            opt = T.freeze_second_moment(opt, k0, self.optimizer.beta2, v_star=self.v_star,
                                         denominator=self.denominator)
        mstate = self.masker.start(params, state.specs, nm, k0, state.total_steps)
        params = dict(params)
        if isinstance(self.masker, FixedMask):
            params = T.mask_weights(params, mstate)
        return params, state._replace(opt=opt, phase=1, switched_at=k0, nm=nm,
                                      masker_state=mstate)

    def forward(self, state: RecipeState, params: Mapping, step: int):
        """Weights the forward pass of step ``step`` uses; returns (weights, state)."""
        if state.phase == 0:
            return dict(params), state._replace(flips=0)
        masks, nm_now, alpha = self.masker.masks(state.masker_state, params, state.specs,
                                                 state.nm, step)
        flips = T.count_flips(state.masks, masks)
        fwd = T.masked_forward(params, masks, alpha)
        return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)

    def update(self, state: RecipeState, params: Mapping, grads: Mapping, step: int):
        """One optimizer step from the gradient at the forward weights.

        Returns (params, state, stats): stats is the AdamStats of this step (None under SGDM).
        """
        kw = {"stats_on": state.stats_on, "log_stats": state.log_stats}
        if state.phase == 0:
            new, opt, stats = self.optimizer.update(state.opt, params, grads, step,
                                                    state.total_steps, **kw)
            return new, state._replace(opt=opt), stats
        masks = state.masks
        if self.srste_lam is not None and self.srste_placement == "before":
            grads = T.srste_term(grads, params, masks, self.srste_lam)
        fixed = isinstance(self.masker, FixedMask)
        if fixed:
            grads = T.mask_gradients(grads, masks)
        new, opt, stats = self.optimizer.update(state.opt, params, grads, step,
                                                state.total_steps, **kw)
        if self.srste_lam is not None and self.srste_placement == "after":
            lr = self.optimizer.lr_at(step, state.total_steps)
            new = T.srste_decoupled(new, params, masks, self.srste_lam, lr)
        if fixed:
            new = T.mask_weights(new, masks)
        return new, state._replace(opt=opt), stats

    def final_masks(self, state: RecipeState, params: Mapping):
        """Pi_T: the mask inference uses (None entries for dense params; all None if dense).

        Fixed (ASP): its fixed mask. Otherwise the target N:M mask of w_T (Algorithm 1,
        line 23) — also when the run ended still in its dense phase (a one-shot prune).
        """
        if not self.sparse:
            return {name: None for name in params}
        if isinstance(self.masker, FixedMask) and state.phase == 1:
            return state.masker_state
        return T.nm_masks(params, state.specs, self.final_nm(state, params))

    def final_nm(self, state: RecipeState, params: Mapping) -> dict:
        """The N:M of each parameter in Pi_T (dense recipes: the dense M:M)."""
        if not self.sparse:
            return state.nm_now
        if self.layerwise is not None and state.phase == 0:  # allocated at the one-shot prune
            return self.layerwise.allocate(params, state.specs)
        return state.nm  # the target (ASP's fixed mask was made at it too)

    def inference_weights(self, state: RecipeState, params: Mapping):
        """Pi_T * w_T (dense recipes: w_T)."""
        return T.masked_forward(params, self.final_masks(state, params))


# --------------------------------------------------------------------------- registry
OPTIMIZERS = ("adam", "adamw", "sgdm")
_ADAM_KEYS = ("lr", "beta1", "beta2", "eps", "eps_mode", "weight_decay", "schedule",
              "warmup_steps")
_SGDM_KEYS = ("lr", "momentum", "weight_decay", "nesterov", "schedule", "warmup_steps")


def make_optimizer(optimizer: str = "adam", **options):
    """Adam, AdamW (Adam with weight_decay default 0.01) or momentum SGD, by name."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    keys = _SGDM_KEYS if optimizer == "sgdm" else _ADAM_KEYS
    bad = sorted(set(options) - set(keys))
    if bad:
        raise ValueError(f"unknown option(s) {bad} for optimizer {optimizer!r}; "
                         f"choose from {sorted(keys)}")
    if optimizer == "sgdm":
        return T.SGDM(**options)
    if optimizer == "adamw":
        options.setdefault("weight_decay", 1e-2)
    return T.Adam(**options)


def _layerwise(layerwise, layerwise_target, layerwise_m, layerwise_allocation):
    if not layerwise:
        if layerwise_target is not None or layerwise_m is not None or layerwise_allocation:
            raise ValueError("layerwise_target/layerwise_m/layerwise_allocation need "
                             "layerwise=True (or a layerwise-* recipe)")
        return None
    alloc = None if layerwise_allocation is None else tuple(sorted(layerwise_allocation.items()))
    return Layerwise(target=layerwise_target, m=layerwise_m, allocation=alloc)


def _dense(opt):
    return {"optimizer": opt, "masker": None}


def _ste(opt, *, layerwise=False, layerwise_target=None, layerwise_m=None,
         layerwise_allocation=None):
    lw = _layerwise(layerwise, layerwise_target, layerwise_m, layerwise_allocation)
    return {"optimizer": opt, "masker": EveryStepMask(), "layerwise": lw}


def _srste(opt, *, lam=2e-4, placement="before", layerwise=False, layerwise_target=None,
           layerwise_m=None, layerwise_allocation=None):
    lw = _layerwise(layerwise, layerwise_target, layerwise_m, layerwise_allocation)
    return {"optimizer": opt, "masker": EveryStepMask(), "srste_lam": lam,
            "srste_placement": placement, "layerwise": lw}


def _asp(opt, *, prune_at=0.5):
    check_step_or_fraction("prune_at", prune_at)
    return {"optimizer": opt, "masker": FixedMask(), "dense_phase": True, "switch_at": prune_at}


def _step(opt, *, freeze_v=True, v_star="raw", denominator="paper", srste_lam=None,
          srste_placement="before", switch_at=None, layerwise=False, layerwise_target=None,
          layerwise_m=None, layerwise_allocation=None):
    lw = _layerwise(layerwise, layerwise_target, layerwise_m, layerwise_allocation)
    return {"optimizer": opt, "masker": EveryStepMask(), "dense_phase": True,
            "switch_at": switch_at, "freeze_v": freeze_v, "v_star": v_star,
            "denominator": denominator, "srste_lam": srste_lam,
            "srste_placement": srste_placement, "layerwise": lw}


def _decaying(opt, *, dense_fraction=0.1, decay_rate=None, srste_lam=None,
              srste_placement="before"):
    check_step_or_fraction("dense_fraction", dense_fraction)
    return {"optimizer": opt, "masker": DecayingMask(decay_rate), "dense_phase": True,
            "switch_at": dense_fraction, "srste_lam": srste_lam,
            "srste_placement": srste_placement}


def _preset(builder, **fixed):
    def build(opt, **options):  # make_recipe refuses the fixed options as unknown
        return builder(opt, **fixed, **options)

    build.builder = builder
    build.fixed = fixed
    return build


# name -> builder(optimizer, **recipe options) -> Recipe fields
RECIPES = {
    "dense": _dense,
    "ste": _ste,
    "sr-ste": _srste,
    "asp": _asp,
    "step": _step,
    "step-v-updated": _preset(_step, freeze_v=False),
    "decaying-mask": _decaying,
    "layerwise-sr-ste": _preset(_srste, layerwise=True),
    "layerwise-step": _preset(_step, layerwise=True),
}


def recipe_options(name: str) -> list[str]:
    """The recipe-specific option names of recipe ``name`` (optimizer options come on top)."""
    check_choice("recipe", name, RECIPES)
    build = RECIPES[name]
    inner = getattr(build, "builder", build)
    fixed = getattr(build, "fixed", {})
    params = list(inspect.signature(inner).parameters)[1:]
    return [p for p in params if p not in fixed]


def make_recipe(name: str, *, optimizer: str = "adam", **options) -> Recipe:
    """A recipe by name, with its options as keywords (SPEC section 3).

    Names (``RECIPES``): dense, ste, sr-ste (lam=2e-4, placement before|after), asp
    (prune_at: step or fraction, default 0.5), step (freeze_v, v_star raw|bias-corrected,
    denominator paper|public, srste_lam, switch_at), step-v-updated (Fig. 8), decaying-mask
    (dense_fraction default 0.1, decay_rate c), layerwise-sr-ste and layerwise-step
    (layerwise_target, layerwise_m, layerwise_allocation). ste, sr-ste and step also take
    layerwise=True. Optimizer: optimizer="adam" | "adamw" | "sgdm" plus its options (lr,
    beta1, beta2, eps, eps_mode, weight_decay, schedule, warmup_steps | momentum, nesterov).
    Unknown names and options raise ValueError naming them.
    """
    check_choice("recipe", name, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    own = set(recipe_options(name))
    opt_keys = set(_SGDM_KEYS if optimizer == "sgdm" else _ADAM_KEYS)
    unknown = sorted(set(options) - own - opt_keys)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for recipe {name!r} with optimizer "
                         f"{optimizer!r}; recipe options: {sorted(own)}, optimizer options: "
                         f"{sorted(opt_keys)}")
    opt = make_optimizer(optimizer, **{k: v for k, v in options.items() if k in opt_keys})
    fields = RECIPES[name](opt, **{k: v for k, v in options.items() if k in own})
    shown = (("optimizer", optimizer),) + tuple(sorted(options.items()))
    return Recipe(name=name, options=shown, **fields)
