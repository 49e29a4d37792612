"""The jit flags live in one place, and kernels really are numba-compiled and cached.

(jaxpruner once had a ``functools.partial(jax.jit, ...)`` line without ``@``, so a kernel
was silently never compiled; these tests would catch the numba equivalent.)
"""

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import stepsim

PACKAGE_DIR = Path(stepsim.__file__).parent
DIRECT_JIT = re.compile(
    r"numba\.(n?jit|vectorize|guvectorize|stencil)\b"
    r"|from numba import .*\b(n?jit|vectorize|guvectorize)\b"
)


def _kernel_modules():
    """Names of stepsim modules that define kernels with stepsim._jit.njit."""
    names = []
    for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="stepsim."):
        path = PACKAGE_DIR.joinpath(*info.name.split(".")[1:])
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if source.exists() and "from stepsim._jit import njit" in source.read_text():
            names.append(info.name)
    return names


def test_no_module_calls_numba_jit_directly():
    offenders = []
    for path in PACKAGE_DIR.rglob("*.py"):
        if path.name == "_jit.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if DIRECT_JIT.search(line):
                offenders.append(f"{path.relative_to(PACKAGE_DIR)}:{number}: {line.strip()}")
    assert not offenders, "use stepsim._jit.njit instead:\n" + "\n".join(offenders)


def test_kernels_are_cached_numba_dispatchers_compiled_lazily():
    # In a fresh interpreter: importing a kernel module must compile nothing.
    modules = _kernel_modules()
    assert "stepsim._mask_kernels" in modules and "stepsim._optim_kernels" in modules
    code = (
        "import importlib, json, numba\n"
        "from numba.core.registry import CPUDispatcher\n"
        f"mods = {modules!r}\n"
        "out = {}\n"
        "for name in mods:\n"
        "    mod = importlib.import_module(name)\n"
        "    for attr, obj in vars(mod).items():\n"
        "        if isinstance(obj, CPUDispatcher) and obj.__module__ == name:\n"
        "            out[name + '.' + attr] = [len(obj.signatures), type(obj._cache).__name__,\n"
        "                                      obj.targetoptions.get('error_model')]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    import json

    kernels = json.loads(result.stdout)
    assert "stepsim._mask_kernels.mask_m4" in kernels
    for name, (n_signatures, cache_kind, error_model) in kernels.items():
        assert n_signatures == 0, f"{name} was compiled at import time"
        assert cache_kind != "NullCache", f"{name} is not cached to disk"
        assert error_model == "numpy", f"{name} does not use stepsim._jit's flags"


def test_public_wrappers_run_compiled_code():
    import numpy as np

    from stepsim import _mask_kernels, _optim_kernels

    stepsim.nm_mask(np.ones((2, 8), np.float32), 2, 4)
    w, g, m, v = (np.ones(8, np.float32) for _ in range(4))
    stepsim.adam_step(w, g, m, v, step=1, lr=0.1)
    assert _mask_kernels.mask_m4.signatures
    assert _optim_kernels.adam.signatures


def test_every_kernel_module_imports():
    for name in _kernel_modules():
        importlib.import_module(name)
