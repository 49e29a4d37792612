"""Same seed, same bits on any x86-64 CPU with AVX2 or better: the one outside library.

stepsim's own arithmetic is portable by construction: numba kernels add in a fixed order
(no reassociation, so LLVM cannot choose an order by vector width; no fast-math, so no
FMA contraction), and transcendental functions go through :mod:`stepsim._ground.libm` (glibc's
scalar functions, the same code on every AVX2 and AVX-512 machine) instead of NumPy's
SIMD loops, which take other paths on AVX-512. What stepsim does not compute itself is
the matrix product: NumPy hands it to OpenBLAS, which picks a GEMM kernel family per CPU
when the library loads (SkylakeX on AVX-512, Haswell or Zen on AVX2), and the families
give different bits for the same product.

The policy: **OpenBLAS is pinned to its Haswell kernels** (AVX2 + FMA, which every
supported CPU runs) by setting ``OPENBLAS_CORETYPE=Haswell`` before NumPy loads. Importing
:mod:`stepsim` does it (this module runs first in ``stepsim/__init__``), so the command
line, sweep and check workers (which inherit the environment) and any script that imports
stepsim before NumPy are portable. A script that imported NumPy first gets a one-line
warning from :func:`warn_if_not_portable` at its first training run, saying what to do.

``STEPSIM_FAST=1`` in the environment (or ``stepsim --fast``) leaves OpenBLAS to choose:
faster matrix products on AVX-512 machines, bits specific to the CPU. Results record
which kernel ran (:func:`blas_kernel`), so a reader can tell.

The promise and its scope
-------------------------
Every result — weights, traces, switch steps, metrics, reports — is the same bits on any
x86-64 CPU with AVX2 or better (AVX2 and AVX-512 machines alike), for any number of
threads or workers. Three things would otherwise change the last bits from one machine to
the next (measured by emulating an AVX2 machine on an AVX-512 one), and each is fixed once:

=====================================================  ===================================
source of different bits                               what stepsim does
=====================================================  ===================================
numba sums that LLVM may reorder follow the vector      no fast-math anywhere
width (AVX2 vs AVX-512)                                 (:mod:`stepsim._ground.jit`); sums that
                                                        must vectorise keep 8 running
                                                        lanes in a fixed order
NumPy's ``exp``/``log``/``power``/``tanh`` take other   :mod:`stepsim._ground.libm`: glibc's scalar
SIMD paths on AVX-512                                   functions, one variant on every
                                                        AVX2+FMA CPU (a test forbids
                                                        ``np.exp`` & co. in the package)
OpenBLAS picks a matrix-product kernel per CPU          ``import stepsim`` sets
(SkylakeX, Haswell, Zen, ...)                           ``OPENBLAS_CORETYPE=Haswell`` before
                                                        NumPy loads; workers inherit it
=====================================================  ===================================

What a user does:

* the command line, local sweep and check workers and the tests are portable as they are;
* **a script that uses the Python API imports stepsim before NumPy** (or sets
  ``OPENBLAS_CORETYPE=Haswell`` in its environment); otherwise ``fit`` warns once on stderr
  that the run's bits are specific to this CPU;
* remote Dask workers are started with ``OPENBLAS_CORETYPE=Haswell`` in their environment;
  each run's result records whether it was portable;
* every result file records the kernel family that ran (``provenance.portability``,
  :func:`summary`).

What it costs: ``stepsim bench --only portability`` measures it on your machine (portable
vs ``--fast`` training steps, interleaved in two processes; glibc's exp vs NumPy's; see
:mod:`stepsim.bench.portability`). On the AVX-512 machine this was written on, the pinned
Haswell kernels were no slower than OpenBLAS's own SkylakeX choice, so the pin cost nothing
there, and glibc's scalar exp, slower than NumPy's per entry, was a small part of a
transformer step (the bench prints the numbers). On AVX2 machines OpenBLAS picks
Haswell/Zen kernels anyway. The committed evidence (``figures/``) is produced without ``--fast``.

How it is guarded: ``tests/package/test_cpu_portability.py`` runs short recorded runs (dense,
SR-STE and STEP with AutoSwitch on the regression, the digits MLP, the transformer, the
MNIST-1D CNN and its signals, a Theorem 1 run) in subprocesses under every CPU the host
can emulate — numba compiled for an AVX2 CPU and for the x86-64 baseline
(``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``), NumPy's dispatch limited
(``NPY_DISABLE_CPU_FEATURES``), glibc's choice limited (``GLIBC_TUNABLES``), each OpenBLAS
kernel family the CPU executes — and each must give the recorded digests; a negative
control (unpinned Sandybridge kernels) shows it can fail.
"""

from __future__ import annotations

import os
import sys

PINNED_CORETYPE = "Haswell"
FAST_ENV = "STEPSIM_FAST"


def fast_mode() -> bool:
    """True when the user asked for CPU-specific (faster, non-portable) BLAS kernels."""
    return os.environ.get(FAST_ENV, "").strip() not in ("", "0")


def _cpu_runs_haswell_kernels() -> bool:
    """Does this CPU have AVX2 and FMA (what OpenBLAS's Haswell kernels execute)?

    Read from /proc/cpuinfo without importing anything heavy; elsewhere (no such file,
    or not x86-64) we do not pin, and :func:`warn_if_not_portable` says so.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return False


def pin_blas_kernels() -> None:
    """Set ``OPENBLAS_CORETYPE=Haswell`` if NumPy has not loaded OpenBLAS yet.

    Runs at ``import stepsim``. Setting the variable after NumPy loaded changes nothing
    in this process, but still reaches child processes (sweep and check workers), which
    start fresh. In fast mode, or on a CPU without AVX2/FMA, the environment is left as it is.
    """
    if fast_mode():
        return
    # numba would vectorise math.exp & co. with Intel's SVML (CPU-dispatched) if icc_rt is
    # installed; stepsim's libm loops must call glibc's scalar functions (stepsim._ground.libm)
    os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")
    if _cpu_runs_haswell_kernels():
        _ORIGINAL["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
        os.environ["OPENBLAS_CORETYPE"] = PINNED_CORETYPE


_ORIGINAL: dict = {}


def restore_coretype(env) -> None:
    """Put the environment's own ``OPENBLAS_CORETYPE`` (or its absence) back into ``env``
    (``os.environ`` or a child process's environment dict), if the import pinned it."""
    if "OPENBLAS_CORETYPE" in _ORIGINAL:
        original = _ORIGINAL["OPENBLAS_CORETYPE"]
        if original is None:
            env.pop("OPENBLAS_CORETYPE", None)
        else:
            env["OPENBLAS_CORETYPE"] = original


def release_blas_pin() -> None:
    """Fast mode from here on (``stepsim --fast``): restore the environment's own
    ``OPENBLAS_CORETYPE`` and set ``STEPSIM_FAST=1`` (inherited by worker processes).
    Effective only before NumPy loads OpenBLAS in this process."""
    os.environ[FAST_ENV] = "1"
    restore_coretype(os.environ)
    _ORIGINAL.pop("OPENBLAS_CORETYPE", None)


def blas_kernel() -> str | None:
    """The kernel family NumPy's OpenBLAS runs (e.g. "Haswell", "SkylakeX"), or None if
    NumPy's BLAS is not OpenBLAS or threadpoolctl cannot tell."""
    global _KERNEL
    if _KERNEL is _UNKNOWN:
        _KERNEL = None
        try:
            import numpy as np  # noqa: F401  (loads OpenBLAS, so threadpoolctl sees it)
            from threadpoolctl import threadpool_info

            for lib in threadpool_info():
                if lib.get("internal_api") == "openblas" and "numpy" in lib.get("filepath", ""):
                    _KERNEL = lib.get("architecture")
                    break
            else:
                for lib in threadpool_info():
                    if lib.get("internal_api") == "openblas":
                        _KERNEL = lib.get("architecture")
                        break
        except Exception:  # noqa: BLE001  (threadpoolctl missing, or cannot read the library)
            _KERNEL = None
    return _KERNEL


_UNKNOWN = object()
_KERNEL: object = _UNKNOWN


def portable() -> bool:
    """True when matrix products run on the pinned kernels (results reproduce on any
    AVX2/AVX-512 machine); False in fast mode or when NumPy loaded before stepsim."""
    kernel = blas_kernel()
    return kernel is not None and kernel.lower() == PINNED_CORETYPE.lower()


_warned = False


def warn_if_not_portable() -> None:
    """One stderr line per process when this run's matmul bits are specific to the CPU."""
    global _warned
    if _warned or portable():
        return
    _warned = True
    kernel = blas_kernel()
    if fast_mode():
        why = f"{FAST_ENV} is set"
    elif kernel is None:
        why = "NumPy's BLAS is not OpenBLAS (or threadpoolctl cannot read it)"
    elif not _cpu_runs_haswell_kernels():
        why = "this CPU lacks AVX2/FMA"
    else:
        why = "NumPy was imported before stepsim"
    print(f"stepsim: matrix products run OpenBLAS's {kernel or 'unknown'} kernels ({why}), "
          f"so this run's bits are specific to this CPU; for results that reproduce on any "
          f"AVX2/AVX-512 machine, import stepsim before NumPy or set "
          f"OPENBLAS_CORETYPE={PINNED_CORETYPE} (and unset {FAST_ENV})", file=sys.stderr)


def summary() -> dict:
    """What a result file records about portability."""
    return {"blas_kernel": blas_kernel(), "portable": portable(), "fast_mode": fast_mode()}
