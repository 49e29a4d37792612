"""A small autograd-free neural-network engine: forward/backward pairs and an MLP builder.

``stepsim.nn.layers`` holds the layers and losses (pure functions, NamedTuple caches).
Problems build their models from these; nothing here imports recipes or training.

* :mod:`~stepsim.nn.layers` — hand-written forward/backward pairs: Linear (stored (out, in),
  so N:M groups run along the input axis), ReLU, exact GELU, tanh, LayerNorm, softmax
  cross-entropy and MSE. Each is checked against central finite
  differences in float64 and against torch (when the optional torch peer is installed).
* :mod:`~stepsim.nn.mlp` — :class:`~stepsim.nn.mlp.MLP` builds a model from them and says
  which Linear weights are N:M (``sparsify="all"`` as the paper, ``"all-but-last"`` as
  SR-STE's code, ``"none"``).
* :mod:`~stepsim.nn.attention`, :mod:`~stepsim.nn.embedding`,
  :mod:`~stepsim.nn.transformer` — a GPT-style transformer (token + position embeddings,
  pre-LayerNorm blocks of causal multi-head attention and a GELU MLP, tied or untied
  head), every forward and backward by hand, with numba kernels for the softmax,
  LayerNorm and GELU (:mod:`stepsim.nn._kernels`; ``kernels=False`` runs the NumPy layers
  they are tested against). The ``lm`` problem (:mod:`stepsim.problems.lm`) trains it.
* :mod:`~stepsim.nn.conv`, :mod:`~stepsim.nn.cnn` — 1-D convolution (stride, padding,
  bias; channels-last activations, weights (C_out, K, C_in) so N:M groups are input
  channels at one kernel tap) by im2col, its forward and input-gradient products one GEMM
  each, the gather/scatter on numba kernels (:mod:`stepsim.nn._conv_kernels`); a CNN of
  conv + ReLU blocks and a linear head. The ``mnist1d`` problem
  (:mod:`stepsim.problems.mnist1d`) trains it.
* :mod:`~stepsim.nn.nm_linear` — the forward product and input gradient of an N:M Linear
  weight from its kept entries (values + column indices, numba kernels in a fixed order,
  :mod:`stepsim.nn._nm_kernels`), which the MLP and the transformer take where
  :func:`~stepsim.nn.nm_linear.sparse_pays` when a step hands them its masks, and the
  CNN's convolutions on their column matrices where :func:`~stepsim.nn.conv.sparse_pays`.
"""
