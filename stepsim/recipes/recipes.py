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
mask            ``masker``: :class:`EveryStepMask` (STE family), :class:`FixedMask` (ASP),
                :class:`DecayingMask`, :class:`~stepsim.recipes.domino.DominoSearch`
gradient        :class:`~transforms.SrsteTerm` (SR-STE), :class:`~transforms.MaskGradients`
                (ASP); DominoSearch's per-layer penalty (its masker's ``penalize``)
optimizer       :class:`~transforms.Adam` or :class:`~transforms.SGDM`
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
global switch every module switches together.

:func:`make_recipe` builds one by name (``RECIPES``), rejecting options the recipe does not
use.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import NamedTuple

from stepsim._validate import (
    UnknownOptionError,
    check_choice,
    check_fraction,
    check_int,
    check_real,
    check_step_or_fraction,
)
from stepsim.core.sparsity import ParamSpec, check_divides, check_specs, sparsity
from stepsim.recipes import transforms as T
from stepsim.recipes.domino import DominoSearch


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
        """Validated context for ``params`` (every parameter needs a spec)."""
        check_specs(params, specs)
        check_int("total_steps", total_steps, minimum=1)
        check_choice("stats_on", stats_on, ("v", "vhat"))
        return cls(dict(specs), int(total_steps), stats_on, bool(log_stats))

    @property
    def sparse_names(self) -> tuple[str, ...]:
        return tuple(name for name, spec in self.specs.items() if spec.sparse)


# --------------------------------------------------------------------------- maskers
class _Masker:
    """No-op defaults of the mask point (a masker overrides what it needs)."""

    def init(self, params, specs):
        return None

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        """(mstate, params) once the modules ``names`` switch after step k0."""
        return mstate, params

    def masks(self, mstate, params, names, specs, nm, step):
        """(masks of ``names``, their (n, m) now, alpha) for step ``step``."""
        now = {name: nm[name] for name in names}
        return T.nm_masks({k: params[k] for k in names}, specs, now), now, 0.0

    def penalize(self, mstate, grads, params, masks, step):
        return grads

    def observe(self, mstate, params, specs, step):
        return mstate

    def final_nm(self, mstate, nm):
        return nm

    def final_masks(self, mstate, params, specs, nm):
        return T.nm_masks(params, specs, nm)

    def report(self, mstate) -> str:
        """A note for the run's result ("" when there is nothing to say)."""
        return ""


@dataclasses.dataclass(frozen=True)
class EveryStepMask(_Masker):
    """STE family: Pi_k is recomputed from |w_k| at every step of the sparse phase."""

    kind = "every-step"


@dataclasses.dataclass(frozen=True)
class FixedMask(_Masker):
    """ASP: the mask is computed once from |w| when a module switches, and the pruned
    weights are zeroed then (the prune); afterwards the mask is fixed."""

    kind = "fixed"

    def init(self, params, specs):
        return {}

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        fixed = dict(mstate)
        fresh = T.nm_masks({k: params[k] for k in names}, specs, nm)
        fixed.update(fresh)
        return fixed, T.mask_weights(params, fresh)

    def masks(self, mstate, params, names, specs, nm, step):
        return {k: mstate[k] for k in names}, {k: nm[k] for k in names}, 0.0

    def final_masks(self, mstate, params, specs, nm):
        out = T.nm_masks(params, specs, nm)
        out.update(mstate)  # switched modules keep their fixed mask
        return out


@dataclasses.dataclass(frozen=True)
class DecayingMask(_Masker):
    """Decaying mask (Kao et al.): N decreases in equal frames over the sparse phase.

    Per sparse layer a :class:`~stepsim.recipes.transforms.DecaySchedule` from its target
    N:M over steps k0+1..T; ``decay_rate`` c (optional) scales pruned weights by
    alpha = max(0, 1 - c t) in the forward pass (plain STE backward), last frame binary;
    ``alpha_clock`` "phase" (default, t from the start of the sparse phase) or "frame".
    """

    decay_rate: float | None = None
    alpha_clock: str = "phase"
    kind = "decaying"

    def __post_init__(self):
        if self.decay_rate is not None:
            check_real("decay_rate", self.decay_rate, minimum=0.0)
        check_choice("alpha_clock", self.alpha_clock, T.ALPHA_CLOCKS)

    def init(self, params, specs):
        return {}

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        out = dict(mstate)
        for name in names:
            n, m = nm[name]
            out[name] = T.DecaySchedule.make(n, m, k0 + 1, total_steps, self.decay_rate,
                                             self.alpha_clock)
        return out, params

    def masks(self, mstate, params, names, specs, nm, step):
        now = {name: (mstate[name].n_at(step), mstate[name].m) for name in names}
        alpha = {name: mstate[name].alpha_at(step) for name in names}
        return T.nm_masks({k: params[k] for k in names}, specs, now), now, alpha


@dataclasses.dataclass(frozen=True)
class DynamicLayerwise(_Masker):
    """Every-step masks at the N that :class:`DominoSearch` assigns and changes per layer."""

    search: DominoSearch = DominoSearch()
    kind = "domino"

    def init(self, params, specs):
        return self.search.init(params, specs)

    def start(self, mstate, params, names, specs, nm, k0, total_steps):
        return self.search.start(mstate, params, names, specs, k0, total_steps), params

    def masks(self, mstate, params, names, specs, nm, step):
        now = {k: v for k, v in self.search.nm_now(mstate).items() if k in names}
        return T.nm_masks({k: params[k] for k in names}, specs, now), now, 0.0

    def penalize(self, mstate, grads, params, masks, step):
        return self.search.penalize(mstate, grads, params, masks, step)

    def observe(self, mstate, params, specs, step):
        return self.search.observe(mstate, params, specs, step)

    def final_nm(self, mstate, nm):
        return {**nm, **self.search.final_nm(mstate)}

    def report(self, mstate) -> str:
        if not mstate.layers or mstate.done:
            return ""
        found = ", ".join(f"{k} {n}:{m}" for k, (n, m) in self.search.final_nm(mstate).items())
        return (f"DominoSearch did not reach its target sparsity {mstate.target:.4g} before "
                f"the run ended; the result keeps the N found so far ({found})")


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


@dataclasses.dataclass(frozen=True)
class FreezeV:
    """STEP: v* = v_{k0} of the switching modules is frozen (``freeze_second_moment``)."""

    beta2: float
    eps: float
    eps_mode: str
    v_star: str = "raw"
    denominator: str = "paper"

    def __post_init__(self):
        check_choice("v_star", self.v_star, T.V_STAR)
        check_choice("denominator", self.denominator, T.DENOMINATORS)

    def apply(self, sw: SwitchView, specs) -> SwitchView:
        opt = T.freeze_second_moment(sw.opt, sw.k0, self.beta2, self.eps, self.eps_mode,
                                     v_star=self.v_star, denominator=self.denominator,
                                     names=sw.names)
        return sw._replace(opt=opt)


@dataclasses.dataclass(frozen=True)
class AllocateGreedy:
    """One-shot layer-wise N at the first switch: :func:`~transforms.allocate_layerwise`.

    target: global sparsity of the sparse layers (None: the one the specs' N:M give);
    m: the fixed M (None: each spec's M).
    """

    target: float | None = None
    m: int | None = None

    def __post_init__(self):
        if self.target is not None:
            check_fraction("layerwise_target", self.target)
        if self.m is not None:
            check_int("layerwise_m", self.m, minimum=1)

    def allocate(self, params, specs) -> dict:
        target = self.target
        if target is None:
            target = sparsity(specs, {k: w.shape for k, w in params.items()})
        return T.allocate_layerwise(params, specs, target, m=self.m)

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
    the mask point. dense_phase: a dense phase precedes the sparse one. switch_at: what
    ends it when ``fit`` gets no schedule — a step (int >= 0) or a fraction of the run
    (float in [0, 1], k0 = ceil(fraction * T)); None: a criterion is required.
    switch_explicit: the user chose ``switch_at`` (a schedule given to fit then conflicts).
    gradient, after, on_switch: the pieces at those points, in order. per_module: a
    criterion given to ``fit`` runs per module (each module switches on its own statistics;
    layerwise-step's default, as the paper's Table 4). options: what the user passed.
    """

    name: str
    optimizer: T.Adam | T.SGDM
    masker: _Masker | None = None
    dense_phase: bool = False
    switch_at: int | float | None = None
    switch_explicit: bool = False
    gradient: tuple = ()
    after: tuple = ()
    on_switch: tuple = ()
    per_module: bool = False
    options: tuple = ()

    def __post_init__(self):
        if self.switch_at is not None:  # normalised: int = a step, float = a fraction
            object.__setattr__(self, "switch_at",
                               check_step_or_fraction("switch_at", self.switch_at))
        freezes = any(isinstance(p, FreezeV) for p in self.on_switch)
        if freezes and self.switch_at is not None and self.switch_at == 0:
            raise ValueError(f"recipe {self.name!r} with switch_at={self.switch_at!r} would freeze "
                             "v_0 = 0 (no precondition phase); use a switch step >= 1")
        if freezes and not isinstance(self.optimizer, T.Adam):
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
        return self.sparse and self.dense_phase and self.switch_at is None

    def static_switch_step(self, total_steps: int) -> int | None:
        """k0 from ``switch_at`` for a run of ``total_steps`` (0: no dense phase at all)."""
        if not self.sparse:
            return None
        if not self.dense_phase:
            return 0
        if self.switch_at is None:
            return None
        from stepsim.recipes.switch import SwitchAt  # the one step-or-fraction -> k0

        return SwitchAt(self.switch_at).step_for(total_steps)

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

    def forward(self, state: RecipeState, params: Mapping, step: int, ctx: RunContext):
        """Weights the forward pass of step ``step`` uses; returns (weights, state)."""
        names = self._sparse_now(state, ctx) if self.sparse else ()
        if not names:
            return dict(params), state._replace(flips=0)
        made, now, alpha = self.masker.masks(state.masker_state, params, names, ctx.specs,
                                             state.nm, step)
        masks = dict.fromkeys(params)
        masks.update(made)
        nm_now = {**_dense_nm(state.nm), **now}
        flips = T.count_flips(state.masks, masks)
        fwd = T.masked_forward(params, masks, alpha)
        return fwd, state._replace(masks=masks, nm_now=nm_now, alpha=alpha, flips=flips)

    def update(self, state: RecipeState, params: Mapping, grads: Mapping, step: int,
               ctx: RunContext):
        """One optimizer step from the gradient at the forward weights.

        Returns (params, state, stats): stats maps every parameter to its AdamStats of
        this step (None under SGDM); ``AdamStats.combine`` of them is the step's total.
        """
        kw = {"stats_on": ctx.stats_on, "log_stats": ctx.log_stats}
        total = ctx.total_steps
        if state.masks is None:  # every module dense: the plain optimizer
            new, opt, stats = self.optimizer.update(state.opt, params, grads, step, total, **kw)
            return new, state._replace(opt=opt), stats
        view = T.StepView(params, state.masks, step, self.optimizer.lr_at(step, total))
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
        """Pi_T * w_T (dense recipes: w_T)."""
        return T.masked_forward(params, self.final_masks(state, params, ctx))


def _dense_nm(nm: Mapping) -> dict:
    return {name: (m, m) for name, (n, m) in nm.items()}


# --------------------------------------------------------------------------- registry
OPTIMIZERS = ("adam", "adamw", "sgdm")
_ADAM_KEYS = ("lr", "beta1", "beta2", "eps", "eps_mode", "weight_decay", "schedule",
              "warmup_steps")
_SGDM_KEYS = ("lr", "momentum", "weight_decay", "nesterov", "schedule", "warmup_steps")
LAYERWISE_RULES = ("domino", "greedy")
SRSTE_PLACEMENTS = ("before", "after")
_DOMINO_KEYS = {"domino_vote_ratio": "vote_ratio", "domino_check_every": "check_every",
                "domino_penalty_every": "penalty_every", "domino_decay": "decay",
                "domino_erk_weight": "erk_weight", "domino_deadline": "deadline"}


def make_optimizer(optimizer: str = "adam", **options):
    """Adam, AdamW (Adam with weight_decay default 0.01) or momentum SGD, by name.

    Parameters
    ----------
    optimizer : {"adam", "adamw", "sgdm"}
    **options
        lr, beta1, beta2, eps, eps_mode, weight_decay, schedule, warmup_steps (Adam) or
        lr, momentum, weight_decay, nesterov, schedule, warmup_steps (SGD-M).

    Returns
    -------
    Adam or SGDM
    """
    check_choice("optimizer", optimizer, OPTIMIZERS)
    keys = _SGDM_KEYS if optimizer == "sgdm" else _ADAM_KEYS
    bad = sorted(set(options) - set(keys))
    if bad:
        raise UnknownOptionError(f"unknown option(s) {bad} for optimizer {optimizer!r}; "
                                 f"choose from {sorted(keys)}")
    if optimizer == "sgdm":
        return T.SGDM(**options)
    if optimizer == "adamw":
        options.setdefault("weight_decay", 1e-2)
    return T.Adam(**options)


def _unused(recipe, given: dict, why: str):
    bad = sorted(k for k, v in given.items() if v is not None)
    if bad:
        raise ValueError(f"recipe {recipe!r} does not use option(s) {bad}: {why}")


def _layerwise(recipe, layerwise, lw):
    """(masker or None, switch pieces) for the layer-wise options ``lw`` (None = not given)."""
    domino = {k: lw.pop(k) for k in list(lw) if k.startswith("domino_")}
    if not layerwise:
        _unused(recipe, {**lw, **domino}, "they need layerwise=True (or a layerwise-* recipe)")
        return None, ()
    rule, target, m, allocation = (lw["layerwise_rule"], lw["layerwise_target"],
                                   lw["layerwise_m"], lw["layerwise_allocation"])
    if allocation is not None:
        _unused(recipe, {"layerwise_rule": rule, "layerwise_target": target, **domino},
                "layerwise_allocation fixes every layer's N")
        alloc = tuple(sorted(dict(allocation).items()))
        return None, (AllocateFixed(alloc, m),)
    rule = check_choice("layerwise_rule", "domino" if rule is None else rule, LAYERWISE_RULES)
    if rule == "greedy":
        _unused(recipe, domino, "the domino_* options belong to layerwise_rule='domino'")
        return None, (AllocateGreedy(target, m),)
    options = {_DOMINO_KEYS[k]: v for k, v in domino.items() if v is not None}
    return DynamicLayerwise(DominoSearch(target=target, m=m, **options)), ()


def _lw_keys():
    return {"layerwise_rule": None, "layerwise_target": None, "layerwise_m": None,
            "layerwise_allocation": None, **dict.fromkeys(_DOMINO_KEYS)}


def _srste_pieces(lam, placement, prefix="srste_"):
    """The SR-STE pieces; ``prefix``: the options' names as the user spelled them
    (sr-ste's ``lam``/``placement``, STEP's ``srste_lam``/``srste_placement``)."""
    if lam is None:
        return (), ()
    check_real(f"{prefix}lam", lam, minimum=0.0)
    placement = check_choice(f"{prefix}placement", placement, SRSTE_PLACEMENTS)
    return ((T.SrsteTerm(lam),), ()) if placement == "before" else ((), (T.SrsteDecoupled(lam),))


def _dense(name, opt):
    return {}


def _ste(name, opt, *, layerwise=False, **lw):
    masker, pieces = _layerwise(name, layerwise, {**_lw_keys(), **lw})
    return {"masker": masker or EveryStepMask(), "on_switch": pieces}


def _srste(name, opt, *, lam=2e-4, placement="before", layerwise=False, **lw):
    masker, pieces = _layerwise(name, layerwise, {**_lw_keys(), **lw})
    grad, after = _srste_pieces(lam, placement, prefix="")
    return {"masker": masker or EveryStepMask(), "on_switch": pieces, "gradient": grad,
            "after": after}


def _asp(name, opt, *, prune_at=None):
    explicit = prune_at is not None
    prune_at = check_step_or_fraction("prune_at", 0.5 if prune_at is None else prune_at)
    return {"masker": FixedMask(), "dense_phase": True, "switch_at": prune_at,
            "switch_explicit": explicit, "gradient": (T.MaskGradients(),),
            "after": (T.MaskWeights(),)}


def _step(name, opt, *, freeze_v=True, v_star=None, denominator=None, srste_lam=None,
          srste_placement=None, switch_at=None, per_module=None, layerwise=False, **lw):
    if not freeze_v:
        _unused(name, {"v_star": v_star, "denominator": denominator},
                "v keeps updating in phase 2 (freeze_v=False), so there is no frozen v* to read")
    if srste_lam is None:
        _unused(name, {"srste_placement": srste_placement}, "no SR-STE term (srste_lam=None)")
    masker, pieces = _layerwise(name, layerwise, {**_lw_keys(), **lw})
    if freeze_v:
        if not isinstance(opt, T.Adam):
            raise ValueError(f"recipe {name!r} freezes Adam's second moment; it needs "
                             f"optimizer='adam' or 'adamw', got {type(opt).__name__}")
        freeze = FreezeV(opt.beta2, opt.eps, opt.eps_mode, v_star or "raw",
                         denominator or "paper")
        pieces = (*pieces, freeze)  # allocate first, then freeze (either order: same result)
    grad, after = _srste_pieces(srste_lam, srste_placement or "before")
    if per_module is None:
        per_module = bool(layerwise) and switch_at is None
    if not isinstance(per_module, bool):
        raise TypeError(f"per_module must be True or False, got {per_module!r}")
    if per_module and switch_at is not None:
        raise ValueError(f"recipe {name!r}: per_module=True switches each module when its "
                         f"criterion fires; a fixed switch_at={switch_at!r} switches all at once "
                         "(give per_module=False with switch_at)")
    return {"masker": masker or EveryStepMask(), "dense_phase": True, "switch_at": switch_at,
            "switch_explicit": switch_at is not None, "on_switch": pieces, "gradient": grad,
            "after": after, "per_module": per_module}


def _decaying(name, opt, *, dense_fraction=None, decay_rate=None, alpha_clock=None,
              srste_lam=None, srste_placement=None):
    if decay_rate is None:
        _unused(name, {"alpha_clock": alpha_clock}, "no decaying scale (decay_rate=None)")
    if srste_lam is None:
        _unused(name, {"srste_placement": srste_placement}, "no SR-STE term (srste_lam=None)")
    explicit = dense_fraction is not None
    fraction = check_step_or_fraction("dense_fraction",
                                      0.1 if dense_fraction is None else dense_fraction)
    grad, after = _srste_pieces(srste_lam, srste_placement or "before")
    return {"masker": DecayingMask(decay_rate, alpha_clock or "phase"), "dense_phase": True,
            "switch_at": fraction, "switch_explicit": explicit, "gradient": grad,
            "after": after}


def _preset(builder, **fixed):
    def build(name, opt, **options):  # make_recipe refuses the fixed options as unknown
        return builder(name, opt, **fixed, **options)

    build.builder = builder
    build.fixed = fixed
    return build


# name -> builder(name, optimizer, **recipe options) -> Recipe fields
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
    """The recipe-specific option names of recipe ``name`` (optimizer options come on top).

    Parameters
    ----------
    name : str
        A key of ``RECIPES``.

    Returns
    -------
    list of str
    """
    check_choice("recipe", name, RECIPES)
    build = RECIPES[name]
    inner = getattr(build, "builder", build)
    fixed = getattr(build, "fixed", {})
    params = [p for p, spec in inspect.signature(inner).parameters.items()
              if spec.kind is not inspect.Parameter.VAR_KEYWORD][2:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD
           for p in inspect.signature(inner).parameters.values()):
        params += list(_lw_keys())
    return [p for p in params if p not in fixed]


def make_recipe(name: str, *, optimizer: str = "adam", **options) -> Recipe:
    """A recipe by name, with its options as keywords (SPEC section 3).

    Names (``RECIPES``): dense, ste, sr-ste (lam=2e-4, placement before|after), asp
    (prune_at: step or fraction, default 0.5), step (freeze_v, v_star raw|bias-corrected,
    denominator paper|public, srste_lam, srste_placement, switch_at, per_module), step-v-updated
    (Fig. 8), decaying-mask (dense_fraction default 0.1, decay_rate c, alpha_clock
    phase|frame), layerwise-sr-ste and layerwise-step (layerwise_rule domino|greedy,
    layerwise_target, layerwise_m, layerwise_allocation, domino_vote_ratio,
    domino_check_every, domino_penalty_every, domino_decay, domino_erk_weight,
    domino_deadline). ste,
    sr-ste and step also take layerwise=True.

    Parameters
    ----------
    name : str
        The recipe's name.
    optimizer : {"adam", "adamw", "sgdm"}
        Plus its options (lr, beta1, beta2, eps, eps_mode, weight_decay, schedule,
        warmup_steps | momentum, nesterov) among ``options``.
    **options
        Recipe and optimizer options.

    Returns
    -------
    Recipe

    Raises
    ------
    ValueError
        Unknown names, unknown options, and options the recipe would not use (e.g.
        ``v_star`` on step-v-updated), naming them.
    """
    check_choice("recipe", name, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    own = set(recipe_options(name))
    opt_keys = set(_SGDM_KEYS if optimizer == "sgdm" else _ADAM_KEYS)
    unknown = sorted(set(options) - own - opt_keys)
    if unknown:
        raise UnknownOptionError(f"unknown option(s) {unknown} for recipe {name!r} with "
                                 f"optimizer {optimizer!r}; recipe options: {sorted(own)}, "
                                 f"optimizer options: {sorted(opt_keys)}")
    opt = make_optimizer(optimizer, **{k: v for k, v in options.items() if k in opt_keys})
    fields = RECIPES[name](name, opt, **{k: v for k, v in options.items() if k in own})
    shown = (("optimizer", optimizer),) + tuple(sorted(options.items()))
    return Recipe(name=name, optimizer=opt, options=shown, **fields)


__all__ = ["RECIPES", "AllocateFixed", "AllocateGreedy", "DecayingMask", "DynamicLayerwise",
           "EveryStepMask", "FixedMask", "FreezeV", "ParamSpec", "Recipe", "RecipeState",
           "RunContext", "SwitchView", "make_optimizer", "make_recipe", "recipe_options"]
