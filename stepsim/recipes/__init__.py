"""Recipes for learning N:M masks, built from small pure pieces (SPEC section 3).

* :class:`~stepsim.sparsity.ParamSpec` (in :mod:`stepsim.sparsity`): which parameter is sparsified.
* :mod:`~stepsim.recipes.transforms`: the pieces (Adam/SGDM, masks, SR-STE term, ASP
  masking, frozen v, decaying schedule, layer-wise allocation).
* :mod:`~stepsim.recipes.recipes`: :class:`Recipe`, :func:`make_recipe`, ``RECIPES``.
"""

from stepsim.recipes.recipes import (
    RECIPES,
    DecayingMask,
    EveryStepMask,
    FixedMask,
    Layerwise,
    Recipe,
    RecipeState,
    make_optimizer,
    make_recipe,
    recipe_options,
)
from stepsim.sparsity import ParamSpec, check_specs, sparsity, with_nm
from stepsim.recipes.transforms import (
    SGDM,
    Adam,
    AdamState,
    DecaySchedule,
    SGDMState,
    allocate_layerwise,
    decay_sequence,
    freeze_second_moment,
)

__all__ = [
    "RECIPES",
    "SGDM",
    "Adam",
    "AdamState",
    "DecaySchedule",
    "DecayingMask",
    "EveryStepMask",
    "FixedMask",
    "Layerwise",
    "ParamSpec",
    "Recipe",
    "RecipeState",
    "SGDMState",
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
