"""stepsim: verify by simulation the theory and claims of STEP and its baselines.

The public API is loaded lazily (PEP 562): ``import stepsim`` is cheap and imports
neither numba nor the kernels; ``stepsim.nm_mask`` imports its module on first use.

Layers (a module imports only its own layer and lower ones; ``tests/package/test_layers.py``):

====  =========================  ==========================================================
0     ``_ground/``               private utilities: argument checks, option declarations
      (but ``_ground/libm*``)    (``options``), numba flags (``jit``), threads, atomic
                                 writes, provenance, lazy exports, BLAS pin, switch steps
1     ``core/_*_kernels.py``,    numba kernels (masks, optimizers, lean step; NN layers,
      ``nn/_*kernels.py``,       convolution, N:M products), the NumPy references they
      ``core/reference.py``,     match, glibc exp/log
      ``_ground/libm*.py``
2     ``core/``, ``stats.py``    masks, optim (validating wrappers), sparsity (ParamSpec),
                                 the step's masked selects and finiteness check; CIs, paired
                                 comparisons, Clopper-Pearson
3     ``nn/``, ``theorem1/``,    forward/backward layers and models; Theorem 1's
      ``sparse24/``              processes and engine; 2:4 layout, storage and memory
4     ``problems/``              the Problem protocol and its problems
5     ``recipes/``               pieces, maskers, Recipe, the step's sequence (pure and
                                 in place), registry, switch criteria and schedules, trace
                                 analysis (Table 1)
6     ``training.py``            ``fit`` and its run a step at a time (``FitRun``)
7     ``experiments/``           RunSpec, sweeps, executors, stores, reports
8     ``checks/``, ``bench/``    one module per paper claim; benchmarks
9     ``cli/``                   the ``stepsim`` subcommands
====  =========================  ==========================================================
"""

from __future__ import annotations

# First, before anything can load NumPy: pin OpenBLAS's kernel family so that matrix
# products give the same bits on every AVX2/AVX-512 CPU (stepsim._ground.portability).
from stepsim._ground.portability import pin_blas_kernels as _pin_blas_kernels

_pin_blas_kernels()

from stepsim._ground.lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # N:M masks
    "nm_mask": "stepsim.core.masks",
    "apply_nm": "stepsim.core.masks",
    "nm_mask_conv": "stepsim.core.masks",
    "apply_nm_conv": "stepsim.core.masks",
    # optimizer kernels
    "adam_step": "stepsim.core.optim",
    "sgdm_step": "stepsim.core.optim",
    "AdamStats": "stepsim.core.optim",
    # switch criteria (when STEP freezes v) and the paper's Table 1 score
    "make_criterion": "stepsim.recipes.criteria",
    "CRITERIA": "stepsim.recipes.criteria",
    "AutoSwitch": "stepsim.recipes.criteria",
    "Agarwal": "stepsim.recipes.criteria",
    "Tang": "stepsim.recipes.criteria",
    "FixedStep": "stepsim.recipes.criteria",
    "FixedFraction": "stepsim.recipes.criteria",
    "window_length": "stepsim.recipes.criteria",
    "table1_score": "stepsim.recipes.analysis",
    "Table1Score": "stepsim.recipes.analysis",
    "run_criteria_on_v": "stepsim.recipes.analysis",
    # recipes, problems and the training loop
    "fit": "stepsim.training",
    "FitResult": "stepsim.training",
    "Trace": "stepsim.training",
    "make_recipe": "stepsim.recipes",
    "Recipe": "stepsim.recipes",
    "RECIPES": "stepsim.recipes",
    "ParamSpec": "stepsim.core.sparsity",
    "allocate_layerwise": "stepsim.recipes",
    "decay_sequence": "stepsim.recipes",
    "SwitchAt": "stepsim.recipes",
    "SwitchWhen": "stepsim.recipes",
    "SyntheticRegression": "stepsim.problems",
    "Problem": "stepsim.problems",
    "make_problem": "stepsim.problems",
    "Digits": "stepsim.problems.digits",
    "TeacherStudent": "stepsim.problems.teacher",
    "NoisyQuadratic": "stepsim.problems.nqm",
    "MLP": "stepsim.nn.mlp",
    # 2:4 hardware layout, sparse matmul, general N:M storage, memory
    "compress_2to4": "stepsim.sparse24.layout",
    "decompress_2to4": "stepsim.sparse24.layout",
    "Compressed24": "stepsim.sparse24.layout",
    "spmm_2to4": "stepsim.sparse24.spmm",
    "explain_tile": "stepsim.sparse24.spmm",
    "locate_element": "stepsim.sparse24.spmm",
    "compress_nm": "stepsim.sparse24.nm_storage",
    "decompress_nm": "stepsim.sparse24.nm_storage",
    "NMCompressed": "stepsim.sparse24.nm_storage",
    "memory_table": "stepsim.sparse24.memory",
    "model_layers": "stepsim.sparse24.memory",
    "save_compressed": "stepsim.sparse24.io",
    "load_compressed": "stepsim.sparse24.io",
    # sweeps (seeded grids of runs, resumable, local pool or Dask) and statistics over seeds
    "run_sweep": "stepsim.experiments",
    "load_table": "stepsim.experiments",
    "mean_ci": "stepsim.stats",
    "paired_difference": "stepsim.stats",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = list(_EXPORTS)
