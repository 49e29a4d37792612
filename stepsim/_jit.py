"""The one place that holds numba's jit flags.

Every kernel module decorates with :func:`njit` from here, never with ``numba.njit``
directly (``tests/test_jit_config.py`` checks this), so caching and fast-math are
decided once:

* ``cache=True``: compiled machine code is kept next to the source, so a warm process
  loads a kernel in milliseconds instead of compiling it again.
* ``fastmath=False``: kernels must agree bit for bit with their NumPy references;
  fast-math would let LLVM reassociate and fuse element-wise arithmetic.
* ``error_model="numpy"``: division by zero gives inf/NaN as in NumPy (the references'
  semantics). numba's default "python" model checks every division so it can raise
  ZeroDivisionError, and that check stops LLVM from vectorising any loop that divides
  (measured here: Adam ran 10x slower).
* No explicit signatures: a signature makes numba compile at decoration time, i.e. at
  import. Kernels compile (or load from the cache) on first call instead.

Kernel modules import numba at module level; they are only ever imported lazily (by the
public wrappers at call time), so ``import stepsim`` and ``stepsim --help`` stay fast.
"""

from __future__ import annotations

JIT_FLAGS = {"cache": True, "fastmath": False, "nogil": True, "error_model": "numpy"}


# Reductions may be reassociated: without it LLVM must add floats in source order and
# cannot vectorise a sum. Only pure reduction helpers use this; element-wise updates keep
# strict IEEE order so they match their references bit for bit.
REDUCTION_FASTMATH = {"reassoc"}


def njit(func=None, *, parallel: bool = False, reduction: bool = False):
    """``numba.njit`` with stepsim's flags; ``@njit``, ``@njit(parallel=True)``, or
    ``@njit(reduction=True)`` for a helper whose only job is to sum (see above)."""
    import numba

    flags = dict(JIT_FLAGS)
    if reduction:
        flags["fastmath"] = REDUCTION_FASTMATH

    def decorate(f):
        return numba.njit(parallel=parallel, **flags)(f)

    return decorate if func is None else decorate(func)


def num_threads() -> int:
    """Threads numba's parallel kernels use (``NUMBA_NUM_THREADS``)."""
    import numba

    return numba.get_num_threads()
