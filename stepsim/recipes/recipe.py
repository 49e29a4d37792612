"""Recipes: how an N:M mask is learned during training (SPEC section 3).

A :class:`Recipe` is a frozen composition of small pieces attached at named points of a
step; it holds configuration only, and its methods are pure (they return new parameters
and a new :class:`RecipeState`, whose fields are values only). One step k (1-based), as
:func:`stepsim.training.fit` drives it:

    fwd, state = recipe.forward(state, params, k, ctx)   # mask: Pi_k from w_k
    loss, grads = problem.loss_and_grad(fwd, batch)       # gradient at the forward weights
    params, state, stats = recipe.update(state, params, grads, k, ctx)
        # gradient pieces -> optimizer -> after-update pieces
    # when the switch schedule fires for some modules after step k0:
    params, state = recipe.switch(state, params, k0, ctx, names)   # switch pieces, mask start

The points and the pieces that plug in:

==============  ===========================================================================
mask            ``masker`` (:mod:`~stepsim.recipes.maskers`): :class:`EveryStepMask` (STE
                family), :class:`FixedMask` (ASP), :class:`DecayingMask`,
                :class:`~stepsim.recipes.domino.DominoSearch`
gradient        :class:`~transforms.SrsteTerm` (SR-STE), :class:`~transforms.MaskGradients`
                (ASP); DominoSearch's per-layer penalty (its masker's ``penalize``)
optimizer       :class:`~optimizers.Adam` or :class:`~optimizers.SGDM`
after update    :class:`~transforms.SrsteDecoupled` (SR-STE after Adam),
                :class:`~transforms.MaskWeights` (ASP)
switch          :class:`FreezeV` (STEP), :class:`AllocateGreedy` / :class:`AllocateFixed`
                (one-shot layer-wise N), then the masker's ``start`` (ASP prunes there)
==============  ===========================================================================

So ASP = FixedMask + MaskGradients + MaskWeights after a dense phase; SR-STE = EveryStepMask
+ SrsteTerm (before) or SrsteDecoupled (after); STEP = a dense phase + FreezeV +
EveryStepMask. A *module* is one parameter array: each has its own phase (0 dense, 1
sparse) and switch step, so STEP can freeze each module's v* at its own k0 (per-module
switching, :class:`~stepsim.recipes.switch.SwitchWhen` with ``per_module=True``); with one
global switch every module switches together. When a recipe switches is its
``schedule`` (:class:`~stepsim.recipes.switch.Schedule`).

The mask pieces live in :mod:`stepsim.recipes.maskers`; :func:`make_recipe` (in
:mod:`stepsim.recipes.registry`) builds a recipe by name (``RECIPES``), rejecting options the
recipe does not use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

from stepsim._ground.options import Choice, Fraction, Int, Option, Options
from stepsim._ground.validate import (
    check_choice,
    check_float_array,
    check_int,
)
from stepsim.core.sparsity import check_divides, check_specs, sparsity
from stepsim.recipes import transforms as T
from stepsim.recipes.allocation import allocate_layerwise
from stepsim.recipes.maskers import MaskView, _Masker
from stepsim.recipes.optimizers import DENOMINATORS, SGDM, V_STAR, Adam, freeze_second_moment
from stepsim.recipes.switch import Schedule


# --------------------------------------------------------------------------- context
class RunContext(NamedTuple):
    """The configuration of one run that every step needs (never changes during it).

    specs: name -> ParamSpec (after fit's ``nm`` override). total_steps: T. stats_on: "v" or
    "vhat" (what the Adam statistics are of). log_stats: reduce sum log|dv| too.
    """

    specs: dict
    total_steps: int
    stats_on: str = "v"
    log_stats: bool = False

    @classmethod
    def make(cls, params, specs, total_steps, *, stats_on="v", log_stats=False) -> RunContext:
        """Validated context for ``params`` (every parameter needs a spec; a sparse one is a
        float array whose N:M groups tile its axis): checked once here, so the steps' masks
        trust it (``transforms._nm_masks``)."""
        check_specs(params, specs)
        for name, spec in specs.items():
            if spec.sparse:
                check_float_array(f"parameter {name!r}", params[name])
        check_int("total_steps", total_steps, minimum=1)
        check_choice("stats_on", stats_on, ("v", "vhat"))
        return cls(dict(specs), int(total_steps), stats_on, bool(log_stats))

    @property
    def sparse_names(self) -> tuple[str, ...]:
        return tuple(name for name, spec in self.specs.items() if spec.sparse)


# --------------------------------------------------------------------------- switch pieces
class SwitchView(NamedTuple):
    """What a switch piece may change when modules ``names`` switch after step k0.

    params, opt (the optimizer state), nm (name -> target (n, m) of every sparse layer);
    first: no module had switched before (one-shot allocations happen then).
    """

    params: dict
    opt: object
    nm: dict
    names: tuple
    k0: int
    first: bool


# STEP's precondition settings as a recipe takes them (-o KEY=VALUE), declared once: the
# registry's STEP recipes include this table, FreezeV reads its defaults and checks
FREEZE_V_OPTIONS = Options({
    "v_star": Option(Choice(*V_STAR), "raw", "the frozen v*: raw v or bias-corrected"),
    "denominator": Option(Choice(*DENOMINATORS), "paper",
                          "phase-2 denominator: the paper's or the public code's"),
})


@dataclasses.dataclass(frozen=True)
class FreezeV:
    """STEP: v* = v_{k0} of the switching modules is frozen (``freeze_second_moment``).
    v_star, denominator: FREEZE_V_OPTIONS (their defaults and checks)."""

    beta2: float
    eps: float
    eps_mode: str
    v_star: str = FREEZE_V_OPTIONS["v_star"].default
    denominator: str = FREEZE_V_OPTIONS["denominator"].default

    def __post_init__(self):
        FREEZE_V_OPTIONS.check_values(v_star=self.v_star, denominator=self.denominator)

    def apply(self, sw: SwitchView, specs) -> SwitchView:
        opt = freeze_second_moment(sw.opt, sw.k0, self.beta2, self.eps, self.eps_mode,
                                     v_star=self.v_star, denominator=self.denominator,
                                     names=sw.names)
        return sw._replace(opt=opt)


# a layer-wise allocation's target and M as a recipe takes them, declared once: the
# registry's layer-wise options include this table, AllocateGreedy reads it
ALLOCATION_OPTIONS = Options({
    "layerwise_target": Option(Fraction(), None,
                               "global sparsity of the sparse layers (none: the N:M's)"),
    "layerwise_m": Option(Int(minimum=1), None, "the M of every layer (none: each spec's)"),
})


@dataclasses.dataclass(frozen=True)
class AllocateGreedy:
    """One-shot layer-wise N at the first switch: :func:`~allocation.allocate_layerwise`.

    target: global sparsity of the sparse layers (None: the one the specs' N:M give);
    m: the fixed M (None: each spec's M). Defaults and checks: ALLOCATION_OPTIONS.
    """

    target: float | None = ALLOCATION_OPTIONS["layerwise_target"].default
    m: int | None = ALLOCATION_OPTIONS["layerwise_m"].default

    def __post_init__(self):  # the declared checks, under the recipe options' names
        ALLOCATION_OPTIONS.check_values(layerwise_target=self.target, layerwise_m=self.m)

    def allocate(self, params, specs) -> dict:
        target = self.target
        if target is None:
            target = sparsity(specs, {k: w.shape for k, w in params.items()})
        return allocate_layerwise(params, specs, target, m=self.m)

    def apply(self, sw: SwitchView, specs) -> SwitchView:
        return sw._replace(nm=self.allocate(sw.params, specs)) if sw.first else sw


@dataclasses.dataclass(frozen=True)
class AllocateFixed:
    """Layer-wise N given explicitly: ``allocation`` = ((name, n), ...), M = ``m`` or the spec's."""

    allocation: tuple
    m: int | None = None

    def allocate(self, params, specs) -> dict:
        out, given = {}, dict(self.allocation)
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

    def apply(self, sw: SwitchView, specs) -> SwitchView:
        return sw._replace(nm=self.allocate(sw.params, specs)) if sw.first else sw


# --------------------------------------------------------------------------- state
class RecipeState(NamedTuple):
    """Everything a recipe carries from step to step — values only.

    opt: the optimizer's state. phases: name -> 0 (dense) or 1 (sparse), every parameter.
    switched: name -> the step after which that module went sparse (0: from the start;
    None: not yet). nm: name -> target (n, m) of every sparse parameter (after a one-shot
    layer-wise allocation, its result). nm_now: the (n, m) the last forward used (M:M for
    a module still dense). masks: the last Pi (None: every module dense). alpha: the
    pruned-weight scale(s) of the last forward. flips: mask entries changed by the last
    forward. masker_state: the masker's own values (fixed masks, decay schedules, the
    DominoSearch state).
    """

    opt: object
    phases: dict
    switched: dict
    nm: dict
    nm_now: dict
    masks: dict | None
    alpha: float | dict
    flips: int
    masker_state: object

    @property
    def phase(self) -> int:
        """1 once any module is sparse (the global phase of a global switch), else 0."""
        return int(any(self.phases.values()))

    @property
    def switched_at(self) -> int | None:
        """The first switch step of any module (None: none switched yet)."""
        steps = [k for k in self.switched.values() if k is not None]
        return min(steps) if steps else None


# --------------------------------------------------------------------------- recipe
@dataclasses.dataclass(frozen=True)
class Recipe:
    """A training recipe: a composition of pieces (module docstring); :func:`make_recipe`.

    name: registry name. optimizer: Adam or SGDM. masker: None for dense training, else
    the mask point. schedule: when the modules switch
    (:class:`~stepsim.recipes.switch.Schedule`: a dense phase or none, the static switch
    point or None for a criterion, the user's choice or the default, per-module
    criteria). gradient, after, on_switch: the pieces at those points, in order.
    options: what the user passed.
    """

    name: str
    optimizer: Adam | SGDM
    masker: _Masker | None = None
    schedule: Schedule = dataclasses.field(default_factory=Schedule)
    gradient: tuple = ()
    after: tuple = ()
    on_switch: tuple = ()
    options: tuple = ()

    def __post_init__(self):
        if not isinstance(self.schedule, Schedule):
            raise TypeError(f"recipe {self.name!r}: schedule must be a "
                            f"stepsim.recipes.switch.Schedule, got {self.schedule!r}")
        switch_at = self.schedule.switch_at
        freezes = any(isinstance(p, FreezeV) for p in self.on_switch)
        if freezes and switch_at is not None and switch_at == 0:
            raise ValueError(f"recipe {self.name!r} with switch_at={switch_at!r} would freeze "
                             "v_0 = 0 (no precondition phase); use a switch step >= 1")
        if freezes and not isinstance(self.optimizer, Adam):
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
        return self.sparse and self.schedule.needs_criterion

    # ---------------------------------------------------------------- pure steps
    def init(self, params: Mapping, ctx: RunContext) -> RecipeState:
        """A fresh state: every module dense (phase 0), optimizer moments at zero."""
        nm = {name: ctx.specs[name].nm for name in ctx.sparse_names}
        for piece in self.on_switch:
            m = getattr(piece, "m", None)
            if m is not None:
                for name in ctx.sparse_names:
                    check_divides(name, params[name].shape, ctx.specs[name].axis, m)
        mstate = self.masker.init(params, ctx.specs) if self.sparse else None
        return RecipeState(opt=self.optimizer.init(params), phases=dict.fromkeys(params, 0),
                           switched=dict.fromkeys(params), nm=nm, nm_now=_dense_nm(nm),
                           masks=None, alpha=0.0, flips=0, masker_state=mstate)

    def switch(self, state: RecipeState, params: Mapping, k0: int, ctx: RunContext,
               names=None):
        """The modules ``names`` (default: all) enter their sparse phase after step ``k0``.

        The switch pieces run in order (STEP freezes their v* = v_{k0}; a one-shot
        layer-wise allocation picks every layer's N at the first switch), then the
        masker starts them (ASP computes its fixed mask and zeroes the pruned weights).
        Returns (params, state); modules already sparse, and dense recipes, are unchanged.
        """
        params = dict(params)
        if not self.sparse:
            return params, state
        names = tuple(k for k in (params if names is None else names) if state.phases[k] == 0)
        if not names:
            return params, state
        first = state.switched_at is None
        sw = SwitchView(params, state.opt, state.nm, names, k0, first)
        for piece in self.on_switch:
            sw = piece.apply(sw, ctx.specs)
        sparse = tuple(k for k in names if ctx.specs[k].sparse)
        mstate, params = self.masker.start(state.masker_state, sw.params, sparse, ctx.specs,
                                           sw.nm, k0, ctx.total_steps)
        phases = {**state.phases, **dict.fromkeys(names, 1)}
        switched = {**state.switched, **dict.fromkeys(names, k0)}
        return dict(params), state._replace(opt=sw.opt, nm=sw.nm, phases=phases,
                                            switched=switched, masker_state=mstate)

    def _sparse_now(self, state: RecipeState, ctx: RunContext) -> tuple[str, ...]:
        return tuple(k for k in ctx.sparse_names if state.phases[k] == 1)

    def masks_now(self, state: RecipeState, params: Mapping, step: int, ctx: RunContext):
        """The masks of step ``step``: (masks: name -> bool array or None for a dense
        parameter, nm_now: name -> its (n, m), alpha), or None when every module is dense
        now. Shared by :meth:`forward` and the lean stepper (``recipes.lean``)."""
        names = self._sparse_now(state, ctx) if self.sparse else ()
        if not names:
            return None
        view = MaskView(params, names, ctx.specs, state.nm, step, state.masks)
        made, now, alpha = self.masker.masks(state.masker_state, view)
        masks = dict.fromkeys(params)
        masks.update(made)
        return masks, {**_dense_nm(state.nm), **now}, alpha

    def forward(self, state: RecipeState, params: Mapping, step: int, ctx: RunContext):
        """Weights the forward pass of step ``step`` uses; returns (weights, state). For a
        masker whose forward weights are Pi * w they carry the masks too
        (:func:`~stepsim.recipes.transforms.with_masks`: the models' sparse products)."""
        now = self.masks_now(state, params, step, ctx)
        if now is None:
            return dict(params), state._replace(flips=0)
        masks, nm_now, alpha = now
        flips = T.count_flips(state.masks, masks)
        fwd = self.masker.forward_weights(state.masker_state, params, masks, alpha, ctx.specs,
                                          nm_now)
        if type(self.masker).forward_weights is _Masker.forward_weights:  # Pi * w: the
            fwd = T.with_masks(fwd, masks, nm_now, alpha, ctx.specs)  # models' sparse hook
        return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)

    def update(self, state: RecipeState, params: Mapping, grads: Mapping, step: int,
               ctx: RunContext, *, lr: float | None = None):
        """One optimizer step from the gradient at the forward weights.

        Returns (params, state, stats): stats maps every parameter to its AdamStats of
        this step (None under SGDM); ``AdamStats.combine`` of them is the step's total.
        lr: the step's ``optimizer.lr_at(step, T)`` if the caller has it (computed once a
        step, by ``fit``); None: computed here.
        """
        total = ctx.total_steps
        if lr is None:
            lr = self.optimizer.lr_at(step, total)
        kw = {"stats_on": ctx.stats_on, "log_stats": ctx.log_stats, "lr": lr}
        if state.masks is None:  # every module dense: the plain optimizer
            new, opt, stats = self.optimizer.update(state.opt, params, grads, step, total, **kw)
            return new, state._replace(opt=opt), stats
        view = T.StepView(params, state.masks, step, lr)
        mstate = state.masker_state
        grads = self.masker.penalize(mstate, grads, params, state.masks, step)
        mstate = self.masker.observe(mstate, params, ctx.specs, step)
        for piece in self.gradient:
            grads = piece.apply(grads, view)
        new, opt, stats = self.optimizer.update(state.opt, params, grads, step, total, **kw)
        for piece in self.after:
            new = piece.apply(new, view)
        return new, state._replace(opt=opt, masker_state=mstate), stats

    def final_nm(self, state: RecipeState, params: Mapping, ctx: RunContext) -> dict:
        """The N:M of each sparse parameter in Pi_T (dense recipes: M:M).

        A layer-wise recipe whose run never switched allocates at this one-shot prune.
        """
        if not self.sparse:
            return _dense_nm(state.nm)
        nm = state.nm
        if state.switched_at is None:
            for piece in self.on_switch:
                if hasattr(piece, "allocate"):
                    nm = piece.allocate(params, ctx.specs)
        return self.masker.final_nm(state.masker_state, nm)

    def final_masks(self, state: RecipeState, params: Mapping, ctx: RunContext) -> dict:
        """Pi_T: the mask inference uses (None for dense parameters; all None if dense).

        ASP's switched modules: their fixed mask. Otherwise the N:M mask of w_T at
        :meth:`final_nm` (Algorithm 1, line 23) — also for a module still dense (a
        one-shot prune).
        """
        if not self.sparse:
            return dict.fromkeys(params)
        nm = self.final_nm(state, params, ctx)
        return self.masker.final_masks(state.masker_state, params, ctx.specs, nm)

    def inference_weights(self, state: RecipeState, params: Mapping, ctx: RunContext):
        """Pi_T * w_T (dense recipes: w_T; S-STE: beta * S(w_T), its masker's forward)."""
        masks = self.final_masks(state, params, ctx)
        if not self.sparse:
            return T.masked_forward(params, masks)
        nm = {**_dense_nm(state.nm), **self.final_nm(state, params, ctx)}
        return self.masker.forward_weights(state.masker_state, params, masks, 0.0, ctx.specs, nm)


def _dense_nm(nm: Mapping) -> dict:
    return {name: (m, m) for name, (n, m) in nm.items()}


__all__ = ["AllocateFixed", "AllocateGreedy", "FreezeV", "Recipe", "RecipeState", "RunContext",
           "SwitchView"]
