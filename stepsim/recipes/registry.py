"""The registry of recipes: build a :class:`~stepsim.recipes.recipe.Recipe` or an optimizer
by name.

* ``RECIPES``: name -> builder of the recipe's pieces; :func:`make_recipe` builds one,
  rejecting options the recipe does not use; :func:`recipe_options` lists its options.
* :func:`make_optimizer`: Adam, AdamW or momentum SGD by name (``OPTIMIZERS``).
"""

from __future__ import annotations

import inspect

from stepsim._validate import (
    UnknownOptionError,
    check_choice,
    check_real,
    check_step_or_fraction,
)
from stepsim.recipes import transforms as T
from stepsim.recipes.domino import DominoSearch
from stepsim.recipes.maskers import DecayingMask, DynamicLayerwise, EveryStepMask, FixedMask
from stepsim.recipes.recipe import AllocateFixed, AllocateGreedy, FreezeV, Recipe

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


__all__ = ["OPTIMIZERS", "RECIPES", "make_optimizer", "make_recipe", "recipe_options"]
