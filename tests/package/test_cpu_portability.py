"""Same seed, same bits on every CPU — checked on one machine by emulating the others.

``tests/cpu_digests.py`` runs a fixed set of short runs (dense, SR-STE and STEP with
AutoSwitch on the regression, the digits MLP, the transformer LM, the MNIST-1D CNN, a
Theorem 1 run) and prints their digests. Here it runs in subprocesses under every CPU configuration this host
can emulate, and every configuration must give the digests recorded in
``tests/data/cpu_digests.json``:

* ``avx2-machine`` (on an AVX-512 host): numba compiles for an AVX2 CPU
  (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` without AVX-512), NumPy's AVX-512 dispatch is
  off (``NPY_DISABLE_CPU_FEATURES``), and glibc picks its functions as on an AVX2 CPU
  (``GLIBC_TUNABLES``) — what a machine without AVX-512 runs;
* ``baseline``: numba for the x86-64 baseline (SSE2, no FMA) and NumPy with every
  dispatched SIMD path off — covers older kernels on an AVX2 host;
* ``openblas=X``: the environment asks OpenBLAS for kernel family X; stepsim must still
  pin its Haswell kernels (stepsim._ground.portability), for every family the host can execute.

A negative control shows the harness can see a difference: with the pin released
(``STEPSIM_FAST=1``) and OpenBLAS's Sandybridge kernels, the matmul-heavy runs change.
Re-record after a deliberate change of numerics: ``python tests/cpu_digests.py --record``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/: cpu_digests.py and data/
SCRIPT = HERE / "cpu_digests.py"
RECORDED = json.loads((HERE / "data" / "cpu_digests.json").read_text())
MATMUL_RUNS = ("digits/dense", "lm/sr-ste")


def _host():
    """(LLVM's host CPU features, NumPy's available dispatch targets, x86 CPU flags)."""
    import llvmlite.binding as ll
    from numpy._core import _multiarray_umath as npy

    features = ll.get_host_cpu_features()
    dispatch = [f for f in npy.__cpu_dispatch__ if npy.__cpu_features__.get(f)]
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split(":", 1)[1].split()
    except (OSError, StopIteration):
        flags = []
    return features, dispatch, set(flags)


def _numba_features(features, drop) -> str:
    return ",".join(("-" if (not on or drop(name)) else "+") + name
                    for name, on in sorted(features.items()))


def configurations() -> dict:
    """name -> extra environment, for every configuration this host can emulate."""
    features, dispatch, flags = _host()
    cache = Path(tempfile.gettempdir()) / "stepsim-cpu-emulation"
    configs = {"host": {}}
    avx512 = any(name.startswith("avx512") for name, on in features.items() if on)
    if avx512:
        def is_avx512(name):
            return name.startswith(("avx512", "avx10", "evex512", "amx"))
        configs["avx2-machine"] = {
            "NUMBA_CPU_NAME": "haswell",
            "NUMBA_CPU_FEATURES": _numba_features(features, is_avx512),
            "NUMBA_CACHE_DIR": str(cache / "avx2"),
            "NPY_DISABLE_CPU_FEATURES": " ".join(
                f for f in dispatch if "AVX512" in f or f == "X86_V4"),
            "GLIBC_TUNABLES": "glibc.cpu.hwcaps=" + ",".join(
                f"-{f}" for f in ("AVX512F", "AVX512VL", "AVX512BW", "AVX512DQ", "AVX512CD")),
        }
    configs["baseline"] = {
        "NUMBA_CPU_NAME": "x86-64",
        "NUMBA_CPU_FEATURES": "",
        "NUMBA_CACHE_DIR": str(cache / "baseline"),
        "NPY_DISABLE_CPU_FEATURES": " ".join(dispatch),
    }
    for family, needs in (("SkylakeX", "avx512f"), ("Zen", "avx2"), ("Sandybridge", "avx")):
        if needs in flags:
            configs[f"openblas={family}"] = {"OPENBLAS_CORETYPE": family}
    return configs


def _digests(extra_env: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "STEPSIM_FAST"}
    # each configuration makes its MNIST-1D signals itself, on its emulated CPU: none reads
    # the arrays another process left in the data cache (stepsim._ground.data_cache)
    env["STEPSIM_DATA_CACHE"] = "off"
    env.update(extra_env)
    done = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results() -> dict:
    configs = configurations()
    configs["control"] = {"STEPSIM_FAST": "1", "OPENBLAS_CORETYPE": "Sandybridge"}
    with ThreadPoolExecutor(max_workers=2) as pool:  # subprocesses: 2 cores busy
        futures = {name: pool.submit(_digests, env) for name, env in configs.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("config", list(configurations()))
def test_every_emulated_cpu_gives_the_recorded_bits(results, config):
    got = results[config]
    assert got["_blas_kernel"] == "Haswell", f"{config}: OpenBLAS not pinned"
    differ = {k: (got.get(k), v) for k, v in RECORDED.items() if got.get(k) != v}
    assert not differ, f"{config}: digests differ from the recording (got, recorded): {differ}"


def test_the_harness_sees_a_change_of_matmul_kernels(results):
    """Negative control: unpinned Sandybridge kernels must change the matmul-heavy runs,
    otherwise the comparisons above could not catch a BLAS difference."""
    control = results["control"]
    assert control["_blas_kernel"] == "Sandybridge"
    assert all(control[k] != RECORDED[k] for k in MATMUL_RUNS), control
