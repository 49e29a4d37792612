"""The registry of recipes: build a :class:`~stepsim.recipes.recipe.Recipe` or an optimizer
by name.

* ``RECIPES``: name -> builder of the recipe's pieces; :func:`make_recipe` builds one,
  rejecting options the recipe does not use; :func:`recipe_options` lists its options.
* ``RECIPE_OPTIONS``: name -> the recipe's options, declared once (:mod:`stepsim._ground.options`:
  name -> (constraint, default, help)); names, the unknown-option error, validation at
  the boundary and ``stepsim train --recipe-options`` all come from it.
* :func:`make_optimizer`: Adam, AdamW or momentum SGD by name (``OPTIMIZERS``; their options:
  ``OPTIMIZER_OPTIONS``).
"""

from __future__ import annotations

from stepsim._ground.options import (
    Bool,
    Choice,
    Described,
    Option,
    Options,
    Real,
    StepOrFraction,
)
from stepsim._ground.validate import check_choice
from stepsim.recipes import transforms as T
from stepsim.recipes.domino import DOMINO_FIELDS, DOMINO_OPTIONS, DominoSearch
from stepsim.recipes.maskers import (
    DECAYING_OPTIONS,
    MASKING_OPTIONS,
    TRANSPOSABLE_OPTIONS,
    DecayingMask,
    DynamicLayerwise,
    EveryStepMask,
    FixedMask,
    SoftThresholdMask,
)
from stepsim.recipes.optimizers import ADAM_OPTIONS, SGDM, SGDM_OPTIONS, Adam
from stepsim.recipes.recipe import (
    ALLOCATION_OPTIONS,
    FREEZE_V_OPTIONS,
    AllocateFixed,
    AllocateGreedy,
    FreezeV,
    Recipe,
)
from stepsim.recipes.switch import Schedule

# --------------------------------------------------------------------------- registry
OPTIMIZERS = ("adam", "adamw", "sgdm")
LAYERWISE_RULES = ("domino", "greedy")
SRSTE_PLACEMENTS = ("before", "after")

# ------------------------------------------------------------ options, declared once
# An optimizer's options: declared beside its dataclass, which reads them (transforms).
OPTIMIZER_OPTIONS = {
    "adam": ADAM_OPTIONS,
    "adamw": Options({**ADAM_OPTIONS.options, "weight_decay": Option(
        Real(minimum=0.0), 1e-2, "decoupled weight decay (AdamW's default 0.01)")}),
    "sgdm": SGDM_OPTIONS,
}

# A recipe's options: resolved and checked by make_recipe (None = not given: the default).
# Tables of a piece's options are declared beside the piece, which reads them (maskers,
# FreezeV, AllocateGreedy, DominoSearch); the registry composes the recipes' tables.
_SRSTE_PLACEMENT = Choice(*SRSTE_PLACEMENTS)
_LAYERWISE = Options({
    "layerwise": Option(Bool(), False, "layer-wise N (each sparse layer its own N:M)"),
    "layerwise_rule": Option(Choice(*LAYERWISE_RULES), "domino",
                             "how layer-wise N is chosen: DominoSearch or one-shot greedy"),
}) | ALLOCATION_OPTIONS | Options({
    "layerwise_allocation": Option(Described("table {parameter: N}"), None,
                                   "every sparse layer's N, fixed (no search)"),
}) | DOMINO_OPTIONS
_SRSTE = Options({
    "lam": Option(Real(minimum=0.0), 2e-4, "SR-STE decay lambda on the pruned weights"),
    "placement": Option(_SRSTE_PLACEMENT, "before",
                        "SR-STE term on the gradient (before Adam) or after the update"),
})
_STEP_SRSTE = Options({
    "srste_lam": Option(Real(minimum=0.0), None, "SR-STE decay in phase 2 (none: no term)"),
    "srste_placement": Option(_SRSTE_PLACEMENT, "before",
                              "SR-STE term on the gradient (before Adam) or after the update"),
})
_STEP = Options({
    "freeze_v": Option(Bool(), True, "freeze Adam's v at the switch (false: Fig. 8's "
                                     "v-updated)"),
}) | FREEZE_V_OPTIONS | _STEP_SRSTE | Options({
    "switch_at": Option(StepOrFraction(), None, "a fixed switch (none: a criterion decides)"),
    "per_module": Option(Bool(), None, "each module switches on its own criterion (default: "
                                       "true for layer-wise N without switch_at)"),
}) | _LAYERWISE

# the successors' mask pieces (maskers.EveryStepMask): each a separate option
MASKED_DECAY = 6e-5  # Hu et al. 2024's alpha for GPT-2 124M (their repo's nanoGPT runs)
_TRANSPOSABLE = TRANSPOSABLE_OPTIONS  # declared beside the maskers, which read them
_MASKING = _TRANSPOSABLE | MASKING_OPTIONS
_MASKED_DECAY = Options({
    "decay": Option(Real(minimum=0.0), MASKED_DECAY,
                    "alpha of the masked decay alpha (1 - Pi) w on the gradient, before Adam"),
    # the masking pieces' constraints, with Hu et al.'s defaults
    "mask_every": MASKING_OPTIONS["mask_every"]._replace(
        default=40, help="recompute the mask every K steps (Hu et al.: 40)"),
    "dense_tail": MASKING_OPTIONS["dense_tail"]._replace(
        default=1 / 6, help="last fraction of the run trained dense (Hu et al.: 1/6; the "
                            "result is dense)"),
}) | _TRANSPOSABLE
_SSTE_STEP = _STEP.without("freeze_v", "srste_lam", "srste_placement", "layerwise",
                           *_LAYERWISE.names()) | _TRANSPOSABLE

RECIPE_OPTIONS = {
    "dense": Options({}),
    "ste": _LAYERWISE | _MASKING,
    "sr-ste": _SRSTE | _LAYERWISE | _MASKING,
    "asp": Options({"prune_at": Option(StepOrFraction(), 0.5,
                                       "when the dense phase ends and ASP prunes")})
    | _TRANSPOSABLE,
    "step": _STEP | _TRANSPOSABLE,
    "step-v-updated": _STEP.without("freeze_v") | _TRANSPOSABLE,
    "s-ste": _MASKING,
    "masked-decay": _MASKED_DECAY,
    "s-ste-step": _SSTE_STEP,
    "decaying-mask": Options({
        "dense_fraction": Option(StepOrFraction(), 0.1, "length of the dense phase"),
    }) | DECAYING_OPTIONS | _STEP_SRSTE | _TRANSPOSABLE,
    "layerwise-sr-ste": (_SRSTE | _LAYERWISE).without("layerwise") | _TRANSPOSABLE,
    "layerwise-step": _STEP.without("layerwise") | _TRANSPOSABLE,
}
_DOMINO_KEYS = {option: field for field, option in DOMINO_FIELDS.items()}


def _unknown_message(what):
    return lambda bad, valid: f"unknown option(s) {bad} for {what}; choose from {valid}"


def make_optimizer(optimizer: str = "adam", **options):
    """Adam, AdamW (Adam with weight_decay default 0.01) or momentum SGD, by name.

    Parameters
    ----------
    optimizer : {"adam", "adamw", "sgdm"}
    **options
        Declared in ``OPTIMIZER_OPTIONS[optimizer]``: lr, beta1, beta2, eps, eps_mode,
        weight_decay, schedule, warmup_steps (Adam) or lr, momentum, weight_decay, nesterov,
        schedule, warmup_steps (SGD-M).

    Returns
    -------
    Adam or SGDM
    """
    check_choice("optimizer", optimizer, OPTIMIZERS)
    declared = OPTIMIZER_OPTIONS[optimizer]
    declared.check_known(options, _unknown_message(f"optimizer {optimizer!r}"))
    if optimizer == "sgdm":
        return SGDM(**options)
    if optimizer == "adamw":
        options.setdefault("weight_decay", declared["weight_decay"].default)
    return Adam(**options)


def _unused(recipe, given: set, names, why: str):
    """Refuse the options of ``names`` that were given (``given``: the recipe options given
    as other than None) when the recipe would not use them."""
    bad = sorted(given.intersection(names))
    if bad:
        raise ValueError(f"recipe {recipe!r} does not use option(s) {bad}: {why}")


def _layerwise(recipe, given, layerwise, lw, transposable=False):
    """(masker or None, switch pieces) for the layer-wise options ``lw`` (their declared
    values: given or default)."""
    domino = {k: v for k, v in lw.items() if k.startswith("domino_")}
    if not layerwise:
        _unused(recipe, given, lw, "they need layerwise=True (or a layerwise-* recipe)")
        return None, ()
    rule, target, m, allocation = (lw["layerwise_rule"], lw["layerwise_target"],
                                   lw["layerwise_m"], lw["layerwise_allocation"])
    if allocation is not None:
        _unused(recipe, given, ["layerwise_rule", "layerwise_target", *domino],
                "layerwise_allocation fixes every layer's N")
        alloc = tuple(sorted(dict(allocation).items()))
        return None, (AllocateFixed(alloc, m),)
    if rule == "greedy":
        _unused(recipe, given, domino, "the domino_* options belong to layerwise_rule='domino'")
        return None, (AllocateGreedy(target, m),)
    options = {_DOMINO_KEYS[k]: v for k, v in domino.items()}
    return DynamicLayerwise(DominoSearch(target=target, m=m, **options), transposable), ()


def _srste_pieces(lam, placement):
    """The SR-STE pieces (lam and placement checked by make_recipe under the user's names:
    sr-ste's ``lam``/``placement``, STEP's ``srste_lam``/``srste_placement``)."""
    if lam is None:
        return (), ()
    return ((T.SrsteTerm(lam),), ()) if placement == "before" else ((), (T.SrsteDecoupled(lam),))


# A builder: (recipe name, optimizer, names given, **every declared option's value, given or
# its default: RECIPE_OPTIONS[name].resolve) -> the Recipe's fields. A default lives only in
# the declaration; "given" serves the refusals of options a recipe would not use.
def _dense(name, opt, given):
    return {}


def _every_step(name, masker, given, transposable, mask_every, dense_tail, cls=EveryStepMask):
    """The layer-wise masker if any (which takes neither mask_every nor dense_tail), else
    an every-step masker with the successors' pieces (mask_every, dense_tail)."""
    if masker is not None:
        _unused(name, given, ("mask_every", "dense_tail"),
                "layer-wise N changes the mask its own way")
        return masker
    return cls(every=mask_every, dense_tail=dense_tail, transposable=transposable)


def _ste(name, opt, given, *, layerwise, transposable, mask_every, dense_tail, **lw):
    masker, pieces = _layerwise(name, given, layerwise, lw, transposable)
    return {"masker": _every_step(name, masker, given, transposable, mask_every, dense_tail),
            "on_switch": pieces}


def _srste(name, opt, given, *, lam, placement, layerwise, transposable, mask_every,
           dense_tail, **lw):
    masker, pieces = _layerwise(name, given, layerwise, lw, transposable)
    grad, after = _srste_pieces(lam, placement)
    return {"masker": _every_step(name, masker, given, transposable, mask_every, dense_tail),
            "on_switch": pieces, "gradient": grad, "after": after}


def _sste(name, opt, given, *, transposable, mask_every, dense_tail):
    """S-STE (Hu, Zhu & Chen, NeurIPS 2024, arXiv 2409.09099; its soft-thresholding
    function and fixed weight rescaling): forward beta * S(w) with, per group of M,
    S(w)_i = sign(w_i) (|w_i| - t) on the N kept entries (t: the (N+1)-th largest |w|),
    0 elsewhere, and beta = <w, S(w)> / <S(w), S(w)> per tensor, frozen at initialisation;
    plain STE backward, no decay (:class:`~stepsim.recipes.maskers.SoftThresholdMask`)."""
    return {"masker": _every_step(name, None, given, transposable, mask_every, dense_tail,
                                  SoftThresholdMask)}


def _masked_decay(name, opt, given, *, decay, mask_every, dense_tail, transposable):
    """Masked decay with dense fine-tuning (Hu et al., "Accelerating Transformer Pre-training
    with 2:4 Sparsity", ICML 2024, arXiv 2404.01847): the gradient fed to Adam is
    g_k = grad f(Pi_k * w_k) + alpha (1 - Pi_k) * w_k (their masked decay on gradients, so it
    enters both m and v; the SR-STE term's piece, ``SrsteTerm``), alpha = 6e-5; the mask
    Pi is refreshed every K = 40 steps; the last 1/6 of the steps train dense (their dense
    fine-tuning: the result is a dense model). The defaults: ``_MASKED_DECAY``."""
    return {"masker": _every_step(name, None, given, transposable, mask_every, dense_tail),
            "gradient": (T.SrsteTerm(decay),)}


def _sste_step(name, opt, given, *, v_star, denominator, freeze_scope, switch_at, per_module,
               transposable):
    """S-STE's forward beta * S(w) (Hu, Zhu & Chen, NeurIPS 2024, arXiv 2409.09099) with
    STEP's precondition phase and frozen v (Lu et al., ICML 2023, Algorithm 1: dense Adam
    until the switch k0, then the sparse phase with Adam's v frozen at v*; the protocol's
    S1, the successors comparison): does STEP's gain come from its variance estimate or
    from hard masking's discontinuity? STEP's other options keep their declared defaults
    (v frozen, no SR-STE term, no layer-wise N)."""
    fields = _step(name, opt, given, **{
        **_STEP.defaults(), "v_star": v_star, "denominator": denominator,
        "freeze_scope": freeze_scope, "switch_at": switch_at, "per_module": per_module,
        "transposable": transposable})
    fields["masker"] = SoftThresholdMask(transposable=transposable)
    return fields


def _asp(name, opt, given, *, prune_at, transposable):
    return {"masker": FixedMask(transposable),
            "schedule": Schedule(dense_phase=True, switch_at=prune_at,
                                 explicit="prune_at" in given),
            "gradient": (T.MaskGradients(),), "after": (T.MaskWeights(),)}


def _step(name, opt, given, *, freeze_v, v_star, denominator, freeze_scope, srste_lam,
          srste_placement, switch_at, per_module, layerwise, transposable, **lw):
    if not freeze_v:
        _unused(name, given, ("v_star", "denominator", "freeze_scope"),
                "v keeps updating in phase 2 (freeze_v=False), so there is no frozen v* to read")
    if srste_lam is None:
        _unused(name, given, ("srste_placement",), "no SR-STE term (srste_lam=None)")
    masker, pieces = _layerwise(name, given, layerwise, lw, transposable)
    if freeze_v:
        if not isinstance(opt, Adam):
            raise ValueError(f"recipe {name!r} freezes Adam's second moment; it needs "
                             f"optimizer='adam' or 'adamw', got {type(opt).__name__}")
        freeze = FreezeV(opt.beta2, opt.eps, opt.eps_mode, v_star, denominator, freeze_scope)
        pieces = (*pieces, freeze)  # allocate first, then freeze (either order: same result)
    grad, after = _srste_pieces(srste_lam, srste_placement)
    if per_module is None:
        per_module = layerwise and switch_at is None
    if per_module and switch_at is not None:
        raise ValueError(f"recipe {name!r}: per_module=True switches each module when its "
                         f"criterion fires; a fixed switch_at={switch_at!r} switches all at once "
                         "(give per_module=False with switch_at)")
    schedule = Schedule(dense_phase=True, switch_at=switch_at,
                        explicit=switch_at is not None, per_module=per_module)
    return {"masker": masker or EveryStepMask(transposable=transposable),
            "schedule": schedule, "on_switch": pieces, "gradient": grad, "after": after}


def _decaying(name, opt, given, *, dense_fraction, decay_rate, alpha_clock, srste_lam,
              srste_placement, transposable):
    if decay_rate is None:
        _unused(name, given, ("alpha_clock",), "no decaying scale (decay_rate=None)")
    if srste_lam is None:
        _unused(name, given, ("srste_placement",), "no SR-STE term (srste_lam=None)")
    grad, after = _srste_pieces(srste_lam, srste_placement)
    return {"masker": DecayingMask(decay_rate, alpha_clock, transposable),
            "schedule": Schedule(dense_phase=True, switch_at=dense_fraction,
                                 explicit="dense_fraction" in given),
            "gradient": grad, "after": after}


def _preset(builder, **fixed):
    def build(name, opt, given, **options):  # make_recipe refuses the fixed options as unknown
        return builder(name, opt, given, **fixed, **options)

    build.builder = builder
    build.fixed = fixed
    return build


# name -> builder(name, optimizer, names given, **recipe options) -> Recipe fields
RECIPES = {
    "dense": _dense,
    "ste": _ste,
    "sr-ste": _srste,
    "asp": _asp,
    "step": _step,
    "step-v-updated": _preset(_step, freeze_v=False),
    "decaying-mask": _decaying,
    # layer-wise N changes the mask its own way: the STE masking pieces at their defaults
    "layerwise-sr-ste": _preset(_srste, layerwise=True,
                                **_MASKING.without("transposable").defaults()),
    "layerwise-step": _preset(_step, layerwise=True),
    "s-ste": _sste,
    "masked-decay": _masked_decay,
    "s-ste-step": _sste_step,
}


def recipe_options(name: str) -> list[str]:
    """The recipe-specific option names of recipe ``name`` (optimizer options come on top),
    in declaration order (``RECIPE_OPTIONS[name]``).

    Parameters
    ----------
    name : str
        A key of ``RECIPES``.

    Returns
    -------
    list of str
    """
    check_choice("recipe", name, RECIPES)
    return RECIPE_OPTIONS[name].names()


def make_recipe(name: str, *, optimizer: str = "adam", **options) -> Recipe:
    """A recipe by name, with its options as keywords (SPEC section 3).

    Names (``RECIPES``): dense, ste, sr-ste, asp, step, step-v-updated (Fig. 8),
    decaying-mask, layerwise-sr-ste, layerwise-step, and the successors (the protocol's
    S1): s-ste
    (Hu, Zhu & Chen, NeurIPS 2024: beta S(w)), masked-decay (Hu et al., ICML 2024: masked
    decay before Adam, the mask every K = 40 steps, the last 1/6 dense) and s-ste-step
    (S-STE's forward with STEP's precondition phase and frozen v). Every recipe takes
    ``transposable``; ste, sr-ste and s-ste also ``mask_every`` and ``dense_tail``.
    Each recipe's options, with their
    defaults and one line of help, are declared once in ``RECIPE_OPTIONS[name]`` (listed by
    :func:`recipe_options` and ``stepsim train --recipe NAME --recipe-options``); e.g.
    sr-ste's ``lam``/``placement``, asp's ``prune_at``, step's ``freeze_v``, ``v_star``,
    ``srste_lam``, ``switch_at``, the ``layerwise_*``/``domino_*`` options. They are checked
    here, each under the name it was given.

    Parameters
    ----------
    name : str
        The recipe's name.
    optimizer : {"adam", "adamw", "sgdm"}
        Plus its options (``OPTIMIZER_OPTIONS[optimizer]``) among ``options``.
    **options
        Recipe and optimizer options.

    Returns
    -------
    Recipe

    Raises
    ------
    ValueError
        Unknown names, unknown options (``UnknownOptionError``, listing the valid ones),
        bad values (or TypeError), and options the recipe would not use (e.g.
        ``v_star`` with ``freeze_v=False``), naming each as given.
    """
    check_choice("recipe", name, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    own, opt_keys = RECIPE_OPTIONS[name], OPTIMIZER_OPTIONS[optimizer]
    (own | opt_keys).check_known(options, lambda unknown, _: (
        f"unknown option(s) {unknown} for recipe {name!r} with optimizer {optimizer!r}; "
        f"recipe options: {sorted(own)}, optimizer options: {sorted(opt_keys)}"))
    # every recipe option's value (given, else its declared default), checked under its name
    recipe_given = {k: v for k, v in options.items() if k in own}
    values = own.resolve(recipe_given)
    opt = make_optimizer(optimizer, **{k: v for k, v in options.items() if k in opt_keys})
    given = {k for k, v in recipe_given.items() if v is not None}
    fields = RECIPES[name](name, opt, given, **values)
    shown = (("optimizer", optimizer),) + tuple(sorted(options.items()))
    return Recipe(name=name, optimizer=opt, options=shown, **fields)


__all__ = ["OPTIMIZERS", "OPTIMIZER_OPTIONS", "RECIPES", "RECIPE_OPTIONS", "make_optimizer",
           "make_recipe", "recipe_options"]
