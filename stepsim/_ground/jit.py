"""The one place that holds numba's jit flags.

Every kernel module decorates with :func:`njit` from here, never with ``numba.njit``
directly (``tests/ground/test_jit_config.py`` checks this), so caching and fast-math are
decided once:

* ``cache=True``: compiled machine code is kept next to the source, so a warm process
  loads a kernel in milliseconds instead of compiling it again.
* ``fastmath=False``, everywhere, sums included: kernels must agree bit for bit with their
  NumPy references and give the same bits on every CPU. Fast-math would let LLVM fuse
  multiply-adds and reassociate sums, and a reassociated sum follows the machine's vector
  width (AVX2 and AVX-512 gave other last bits). Sums that must vectorise keep several
  running lanes in a fixed order instead (``core._optim_kernels._block_stats``).
* ``error_model="numpy"``: division by zero gives inf/NaN as in NumPy (the references'
  semantics). numba's default "python" model checks every division so it can raise
  ZeroDivisionError, and that check stops LLVM from vectorising any loop that divides
  (Adam's among them).
* No explicit signatures: a signature makes numba compile at decoration time, i.e. at
  import. Kernels compile (or load from the cache) on first call instead.

Kernel modules import numba at module level; they are only ever imported lazily (by the
public wrappers at call time), so ``import stepsim`` and ``stepsim --help`` stay fast.

**No writable cache.** numba raises ``RuntimeError: cannot cache function ...: no locator
available`` at decoration when it can write neither the package's ``__pycache__`` nor
``NUMBA_CACHE_DIR`` nor the user-wide cache (~/.cache) — a read-only system install run
by a user whose HOME is not writable. :func:`njit` then points numba at a private
per-user directory under the temp dir (created 0700 and checked to be ours, since a cache
holds code numba will load) or, failing that, compiles without caching, and says so in one
line on stderr (once per process).
"""

from __future__ import annotations

import os
import sys
import tempfile

JIT_FLAGS = {"cache": True, "fastmath": False, "nogil": True, "error_model": "numpy"}


def njit(func=None, *, parallel: bool = False, inline: str = "never"):
    """``numba.njit`` with stepsim's flags; ``@njit``, ``@njit(parallel=True)`` or
    ``@njit(inline="always")``: a small helper numba inlines into its callers in its own
    IR (LLVM does not inline across numba's separately compiled functions, and a call per
    row of a row-wise kernel costs more than the row: measured on LayerNorm)."""
    import numba

    if inline not in ("never", "always"):
        raise ValueError(f"inline must be 'never' or 'always', got {inline!r}")
    flags = dict(JIT_FLAGS, inline=inline)

    def decorate(f):
        try:
            return numba.njit(parallel=parallel, **flags)(f)
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
        # numba found no writable cache location; try ours, then none (module docstring)
        if _use_fallback_cache_dir():
            try:
                return numba.njit(parallel=parallel, **flags)(f)
            except RuntimeError as exc:
                if "no locator available" not in str(exc):
                    raise
        say_once("stepsim: numba cannot write a kernel cache anywhere (package directory, "
                 "NUMBA_CACHE_DIR, ~/.cache, temp dir); compiling without caching, so every "
                 "run compiles its kernels again")
        return numba.njit(parallel=parallel, **dict(flags, cache=False))(f)

    return decorate if func is None else decorate(func)


_announced: set = set()


def say_once(line: str) -> None:
    """Print ``line`` on stderr the first time this process asks (a fallback announced once,
    not at every kernel or file)."""
    if line not in _announced:
        _announced.add(line)
        print(line, file=sys.stderr)


def fallback_cache_dir() -> str:
    """The per-user cache directory used when numba finds no writable location."""
    import getpass

    uid = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    return os.path.join(tempfile.gettempdir(), f"stepsim-numba-cache-{uid}")


def _private_dir(path: str) -> bool:
    """Create ``path`` (0700) if needed; True if it is a directory only we can write."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        import stat

        if not stat.S_ISDIR(info.st_mode):
            return False
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
            return False  # someone else's directory: never load cached code from it
        tempfile.TemporaryFile(dir=path).close()  # numba's own writability test
    except OSError:
        return False
    return True


def _use_fallback_cache_dir() -> bool:
    """Point numba (and child processes) at :func:`fallback_cache_dir`; False if unusable."""
    from numba.core import config

    path = fallback_cache_dir()
    if config.CACHE_DIR == path:
        return True  # already in use; this kernel failed for another reason
    if not _private_dir(path):
        return False
    # numba re-reads NUMBA_* variables when they change, so set both: the environment
    # keeps the choice across numba's reloads and for worker processes
    os.environ["NUMBA_CACHE_DIR"] = path
    config.CACHE_DIR = path
    say_once(f"stepsim: numba cannot write its cache beside the package, in NUMBA_CACHE_DIR "
             f"or in ~/.cache; caching compiled kernels in {path} instead")
    return True


def num_threads() -> int:
    """Threads numba's parallel kernels use now (``numba.get_num_threads()``).

    Once numba's threads run, the count is read straight from the threading layer:
    ``get_num_threads`` takes two locks around that read (far slower than the read), and the
    kernels' wrappers ask before every call (the optimizer and each mask, every step)."""
    global _parallel
    if _parallel is None:
        import numba

        count = numba.get_num_threads()  # starts the threads; raises on a bad count
        from numba.np.ufunc import parallel

        _parallel = parallel
        return count
    read = getattr(_parallel, "_get_num_threads", None) if _parallel._is_initialized else None
    count = read() if read is not None else 0
    if count > 0:
        return count
    import numba

    return numba.get_num_threads()


_parallel = None  # numba.np.ufunc.parallel, once num_threads has started numba's threads
