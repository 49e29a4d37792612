"""The ground floor of stepsim: private utilities every layer above may import.

Layer 0 (imports nothing of stepsim outside this folder), except ``libm`` and
``libm_kernels``, which sit in layer 1 beside the other numba kernels:

=================  ================================================================
``validate``       argument checks shared by every public function; ``NMRatio``
``options``        options declared once: constraint, default, one-line help
``switch_steps``   a fraction of a run as a step; AutoSwitch's clip bounds
``jit``            numba's jit flags (cache, error model), the one ``njit``
``threads``        who gets the cores: BLAS vs numba threads during training
``portability``    the OpenBLAS kernel pin (same bits on any AVX2/AVX-512 CPU)
``malloc``         keep freed memory inside the process while it trains
``atomic``         atomic writes (temporary file, then rename) and paired commits
``provenance``     seed, parameters and versions saved beside every result
``progress``       progress on stderr: a bar on a terminal, else a line at intervals
``plot_style``     colours, markers and line styles that keep many series apart
``lazy``           lazy public names (PEP 562) for packages that export them
``bits``           IEEE float bit patterns as unsigned integers
``libm``           exp/log/tanh/... with the same bits on every CPU (glibc's scalar libm)
``libm_kernels``   the numba loops behind ``libm``
=================  ================================================================

This ``__init__`` imports nothing, so that ``import stepsim`` stays cheap.
"""
