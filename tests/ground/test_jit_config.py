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

import pytest

import stepsim

PACKAGE_DIR = Path(stepsim.__file__).parent
DIRECT_JIT = re.compile(
    r"numba\.(n?jit|vectorize|guvectorize|stencil)\b"
    r"|from numba import .*\b(n?jit|vectorize|guvectorize)\b"
)


def _kernel_modules():
    """Names of stepsim modules that define kernels with stepsim._ground.jit.njit."""
    names = []
    for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="stepsim."):
        path = PACKAGE_DIR.joinpath(*info.name.split(".")[1:])
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if source.exists() and "from stepsim._ground.jit import njit" in source.read_text():
            names.append(info.name)
    return names


def test_no_module_calls_numba_jit_directly():
    offenders = []
    for path in PACKAGE_DIR.rglob("*.py"):
        if path == PACKAGE_DIR / "_ground" / "jit.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if DIRECT_JIT.search(line):
                offenders.append(f"{path.relative_to(PACKAGE_DIR)}:{number}: {line.strip()}")
    assert not offenders, "use stepsim._ground.jit.njit instead:\n" + "\n".join(offenders)


def test_kernels_are_cached_numba_dispatchers_compiled_lazily():
    # In a fresh interpreter: importing a kernel module must compile nothing.
    modules = _kernel_modules()
    assert "stepsim.core._mask_kernels" in modules and "stepsim.core._optim_kernels" in modules
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
    assert "stepsim.core._mask_kernels.mask_m4" in kernels
    for name, (n_signatures, cache_kind, error_model) in kernels.items():
        assert n_signatures == 0, f"{name} was compiled at import time"
        assert cache_kind != "NullCache", f"{name} is not cached to disk"
        assert error_model == "numpy", f"{name} does not use stepsim._ground.jit's flags"


def test_public_wrappers_run_compiled_code():
    import numpy as np

    from stepsim.core import _mask_kernels, _optim_kernels

    stepsim.nm_mask(np.ones((2, 8), np.float32), 2, 4)
    w, g, m, v = (np.ones(8, np.float32) for _ in range(4))
    stepsim.adam_step(w, g, m, v, step=1, lr=0.1)
    assert _mask_kernels.mask_m4.signatures
    assert _optim_kernels.adam.signatures


def test_every_kernel_module_imports_and_defines_its_kernels_with_stepsims_njit():
    from numba.core.registry import CPUDispatcher

    modules = _kernel_modules()
    assert len(modules) >= 5, modules  # core masks, optim, step; nn; libm at least
    empty = []
    for name in modules:
        mod = importlib.import_module(name)
        kernels = [attr for attr, obj in vars(mod).items()
                   if isinstance(obj, CPUDispatcher) and obj.__module__ == name]
        if not kernels:
            empty.append(name)
    assert not empty, f"import stepsim._ground.jit.njit but define no kernel with it: {empty}"


# --------------------------------------------------------------------------- no writable cache
def _read_only_install(root: Path) -> Path:
    """Copy the package to ``root``/site/stepsim (no caches), made read-only for everyone."""
    import shutil

    site = root / "site"
    shutil.copytree(PACKAGE_DIR, site / "stepsim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return site


def _chmod_tree(path: Path, dirs: int, files: int) -> None:
    import os

    for dirpath, dirnames, filenames in os.walk(path):
        os.chmod(dirpath, dirs)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), files)


def _obey_permission_bits():
    """preexec_fn: drop root's power to ignore permission bits (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH) from the bounding set, so the exec'd command cannot write a
    directory chmod'ed read-only — as for an ordinary user on a system install."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.mark.slow
def test_kernels_run_without_any_writable_cache_location():
    """A read-only install used by someone whose HOME is not writable (issue 10, item 2).

    Root ignores permission bits, so under root the command runs with the capabilities
    that allow it dropped (:func:`_obey_permission_bits`); chmod then binds. The warm
    cache from a first, writable run is present but unusable (numba's in-tree locator
    needs a writable __pycache__). The command must run and say once where it caches.
    """
    import os
    import tempfile

    import numpy as np

    as_root = os.geteuid() == 0
    # not tmp_path: pytest's base directory is private to the user running the tests
    root = Path(tempfile.mkdtemp(prefix="stepsim-ro-"))
    try:
        os.chmod(root, 0o755)
        site = _read_only_install(root)
        dense = np.zeros((32, 32), np.float16)
        dense[:, ::2] = 1.5  # already 2:4: only the compress kernel runs
        np.save(root / "w.npy", dense)
        scratch = root / "scratch"  # TMPDIR of the run: the fallback goes here
        scratch.mkdir(mode=0o777)
        os.chmod(scratch, 0o1777)
        out = root / "out"
        out.mkdir()
        os.chmod(out, 0o777)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(site),
               "HOME": str(root / "no-home"), "TMPDIR": str(scratch),
               "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-m", "stepsim", "compress", str(root / "w.npy"),
                   "-o", str(out / "w24.npz")]
        # warm the in-tree cache while the install is still writable (as the installer)
        subprocess.run(command, env=env, cwd=root, check=True, capture_output=True)
        assert list((site / "stepsim" / "sparse24" / "__pycache__").glob("*.nbi"))
        _chmod_tree(site, 0o555, 0o444)
        (root / "no-home").mkdir(mode=0o555)
        (out / "w24.npz").unlink()
        try:
            run = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True,
                                 preexec_fn=_obey_permission_bits if as_root else None,
                                 timeout=300)
        except subprocess.SubprocessError as exc:  # root without CAP_SETPCAP: cannot simulate
            pytest.skip(f"cannot make a directory read-only for root here: {exc}")
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
        lines = [line for line in run.stderr.splitlines() if "numba" in line]
        assert len(lines) == 1 and "caching compiled kernels in" in lines[0], run.stderr
        assert (out / "w24.npz").exists()
        cache = Path(lines[0].rsplit(" in ", 1)[1].split()[0])
        assert cache.parent == scratch and list(cache.rglob("*.nbi"))
        assert (cache.stat().st_mode & 0o777) == 0o700
    finally:
        import shutil

        _chmod_tree(root, 0o755, 0o644)
        shutil.rmtree(root, ignore_errors=True)


def test_no_usable_cache_anywhere_compiles_uncached_and_says_so(monkeypatch, capsys):
    """numba finds no locator and the fallback directory is unusable: run uncached."""
    from numba.core import caching

    from stepsim._ground import jit as _jit

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])  # numba: no locator
    monkeypatch.setattr(_jit, "_private_dir", lambda path: False)
    monkeypatch.setattr(_jit, "_announced", set())

    def double(x):
        return 2 * x

    kernel = _jit.njit(double)
    assert kernel(21) == 42
    assert type(kernel._cache).__name__ == "NullCache"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "compiling without caching" in err[0]
    _jit.njit(double)  # said once per process
    assert capsys.readouterr().err == ""


def test_someone_elses_fallback_directory_is_not_used(tmp_path):
    import os

    from stepsim._ground import jit as _jit

    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chmod(theirs, 0o777)  # writable by others: cached code there could be anyone's
    assert not _jit._private_dir(str(theirs))
    mine = tmp_path / "mine"
    assert _jit._private_dir(str(mine)) and (mine.stat().st_mode & 0o777) == 0o700


def test_num_threads_follows_numba_in_every_thread():
    """num_threads reads the threading layer directly once numba's threads run: it still
    says what numba.get_num_threads says, after set_num_threads and in another thread
    (the setting is per thread)."""
    import threading

    import numba

    from stepsim._ground.jit import num_threads

    before = numba.get_num_threads()
    try:
        for n in (1, numba.config.NUMBA_NUM_THREADS, 1):
            numba.set_num_threads(n)
            assert num_threads() == numba.get_num_threads() == n
        seen = []
        worker = threading.Thread(target=lambda: seen.append((num_threads(),
                                                              numba.get_num_threads())))
        worker.start()
        worker.join()
        assert seen[0][0] == seen[0][1]
    finally:
        numba.set_num_threads(before)
