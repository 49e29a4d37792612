"""The bottom layer: N:M masks, the optimizer steps, parameter specs, and their references.

* :mod:`~stepsim.core.masks` — N:M masks (``nm_mask``, ``apply_nm``, conv layouts).
* :mod:`~stepsim.core.optim` — Adam(W) and momentum SGD steps, with the statistics of v
  (``adam_step``, ``sgdm_step``, ``AdamStats``).
* :mod:`~stepsim.core.optim_many` — the same steps on every parameter of a model in one call
  (``adam_apply_many``, ``AdamArrays``, ``sgdm_apply_many``): the engine of both.
* :mod:`~stepsim.core.optim_hyper` — what a step takes and returns: ``AdamHyper``,
  ``AdamStats``, the checks of its arrays and scalars.
* :mod:`~stepsim.core.select` — masked selects in place (the training step's in-place
  pieces); :mod:`~stepsim.core.finite` — which array holds a NaN or an infinity.
* :mod:`~stepsim.core.sparsity` — ``ParamSpec``: which parameter is sparsified, and how.
* :mod:`~stepsim.core.reference` — plain NumPy definitions the kernels must match bit for bit.
* ``_mask_kernels``, ``_optim_kernels``, ``_step_kernels`` — the numba kernels (private:
  loaded lazily by the public wrappers at call time, never at import).

It imports only the package's private utilities (``stepsim._ground.validate``,
``stepsim._ground.jit``, ``stepsim._ground.libm``, ...), never a higher layer. This
``__init__`` imports nothing, so ``import stepsim`` stays cheap.
"""
