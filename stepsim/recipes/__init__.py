"""Recipes for learning N:M masks, composed of small pure pieces (SPEC section 3).

* :class:`~stepsim.core.sparsity.ParamSpec` (in :mod:`stepsim.core.sparsity`): which
  parameter is sparsified.
* :mod:`~stepsim.recipes.transforms`: the pieces (masks, SR-STE term, ASP masking,
  decaying schedule).
* :mod:`~stepsim.recipes.optimizers`: Adam (frozen v) and momentum SGD, the learning rate.
* :mod:`~stepsim.recipes.allocation`: greedy layer-wise N:M allocation.
* :mod:`~stepsim.recipes.maskers`: the mask point (:class:`EveryStepMask`,
  :class:`FixedMask`, :class:`DecayingMask`, :class:`DynamicLayerwise`) and the
  :class:`MaskView` they read.
* :mod:`~stepsim.recipes.domino`: DominoSearch's dynamic layer-wise N:M.
* :mod:`~stepsim.recipes.recipe`: :class:`Recipe` (the composition), its state and run
  context, and the switch pieces (:class:`FreezeV`, :class:`AllocateGreedy`, ...).
* :mod:`~stepsim.recipes.sequence`: the order of a training step's stages, said once, and
  their pure form; :mod:`~stepsim.recipes.lean`: their in-place form (fit's step).
* :mod:`~stepsim.recipes.registry`: :func:`make_recipe`, ``RECIPES``, :func:`make_optimizer`.
* :mod:`~stepsim.recipes.criteria`: switch criteria (when STEP leaves its precondition
  phase; :func:`~stepsim.recipes.criteria.make_criterion`).
* :mod:`~stepsim.recipes.switch`: switch schedules (a recipe's :class:`Schedule`; the
  run-time :class:`SwitchAt` and :class:`SwitchWhen`, global or per module).
* :mod:`~stepsim.recipes.analysis`: trace analysis (the paper's Table 1 score).
"""

from stepsim.core.sparsity import ParamSpec, check_specs, sparsity, with_nm
from stepsim.recipes.allocation import allocate_layerwise
from stepsim.recipes.domino import DominoSearch
from stepsim.recipes.maskers import (
    DecayingMask,
    DynamicLayerwise,
    EveryStepMask,
    FixedMask,
    MaskView,
)
from stepsim.recipes.optimizers import SGDM, Adam, AdamState, SGDMState, freeze_second_moment
from stepsim.recipes.recipe import (
    AllocateFixed,
    AllocateGreedy,
    FreezeV,
    Recipe,
    RecipeState,
    RunContext,
)
from stepsim.recipes.registry import RECIPES, make_optimizer, make_recipe, recipe_options
from stepsim.recipes.switch import Schedule, StepStats, SwitchAt, SwitchWhen
from stepsim.recipes.transforms import (
    DecaySchedule,
    MaskGradients,
    MaskWeights,
    SrsteDecoupled,
    SrsteTerm,
    decay_sequence,
)

__all__ = [
    "RECIPES",
    "SGDM",
    "Adam",
    "AdamState",
    "AllocateFixed",
    "AllocateGreedy",
    "DecaySchedule",
    "DecayingMask",
    "DominoSearch",
    "DynamicLayerwise",
    "EveryStepMask",
    "FixedMask",
    "FreezeV",
    "MaskGradients",
    "MaskView",
    "MaskWeights",
    "ParamSpec",
    "Recipe",
    "RecipeState",
    "RunContext",
    "SGDMState",
    "Schedule",
    "SrsteDecoupled",
    "SrsteTerm",
    "StepStats",
    "SwitchAt",
    "SwitchWhen",
    "allocate_layerwise",
    "check_specs",
    "decay_sequence",
    "freeze_second_moment",
    "make_optimizer",
    "make_recipe",
    "recipe_options",
    "sparsity",
    "with_nm",
]
