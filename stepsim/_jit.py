"""The one place that holds numba's jit flags.

Every kernel module decorates with :func:`njit` from here, never with ``numba.njit``
directly (``tests/test_jit_config.py`` checks this), so caching and fast-math are
decided once:

* ``cache=True``: compiled machine code is kept next to the source, so a warm process
  loads a kernel in milliseconds instead of compiling it again.
* ``fastmath=False``: kernels must agree bit for bit with their NumPy references;
  fast-math would let LLVM reassociate and fuse element-wise arithmetic.
* No explicit signatures: a signature makes numba compile at decoration time, i.e. at
  import. Kernels compile (or load from the cache) on first call instead.

Kernel modules import numba at module level; they are only ever imported lazily (by the
public wrappers at call time), so ``import stepsim`` and ``stepsim --help`` stay fast.
"""

from __future__ import annotations

JIT_FLAGS = {"cache": True, "fastmath": False, "nogil": True}


def njit(func=None, *, parallel: bool = False):
    """``numba.njit`` with stepsim's flags; use as ``@njit`` or ``@njit(parallel=True)``."""
    import numba

    def decorate(f):
        return numba.njit(parallel=parallel, **JIT_FLAGS)(f)

    return decorate if func is None else decorate(func)


def num_threads() -> int:
    """Threads numba's parallel kernels use (``NUMBA_NUM_THREADS``)."""
    import numba

    return numba.get_num_threads()
