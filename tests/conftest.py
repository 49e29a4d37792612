"""Test configuration: stepsim's BLAS pin first, then hypothesis profiles (``dev``
default, ``ci`` when CI=true)."""

import os
import sys

# Before any test module imports NumPy: importing stepsim pins OpenBLAS's kernel family
# (stepsim._ground.portability), which only works if OpenBLAS has not been loaded yet. If a
# plugin loaded NumPy first, the replay fixtures would be compared against CPU-specific
# matmul bits: say so loudly instead of failing obscurely.
_numpy_first = "numpy" in sys.modules
import stepsim

if _numpy_first:
    from stepsim._ground import portability as _portability

    if not _portability.portable():
        sys.stderr.write("conftest: NumPy was loaded before stepsim (by a pytest plugin?): "
                         "OpenBLAS is not pinned, and bit-for-bit replays may fail\n")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=60, deadline=None)
# CI: more examples, still bounded; numba compiles on first call, so no per-example deadline.
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# --- the slow marker: a fast default selection ---------------------------------------------
# `pytest` runs the fast selection (every module still covered: checked at the end of a
# default run); `pytest --runslow` (or STEPSIM_SLOW=1) runs everything, as CI does.


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (kill/resume, pools, Dask, benches)")


def _runs_slow(config) -> bool:
    return (config.getoption("--runslow") or os.environ.get("STEPSIM_SLOW") == "1"
            or "slow" in (config.getoption("-m") or ""))


#: the test files whose whole run is longest (one long end-to-end test, a module set-up
#: that runs the CLI or emulates other CPUs): run first, longest first. pytest-xdist's
#: --dist loadfile gives a whole file to one worker, and by default hands out files with
#: many tests first (few-test files last); a long file handed out last leaves one worker
#: busy alone at the end. Longest first, the many short files fill in around them.
LONG_FILES = (
    "tests/checks/test_check_faults.py",
    "tests/package/test_cpu_portability.py",
    "tests/checks/test_operating.py",
    "tests/bench/test_bench.py",
    "tests/checks/test_no_overwrite.py",
    "tests/experiments/test_store_heal.py",
)


def pytest_configure(config):
    # under pytest-xdist: hand files out in collection order (LONG_FILES first), not
    # sorted by how many tests they hold
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _long_first(items) -> None:
    """Items of LONG_FILES first, in that order; every other file after them, in
    collection order (a stable sort: a file's tests keep their order)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_modifyitems(config, items):
    import pytest

    _long_first(items)
    if _runs_slow(config):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow (or STEPSIM_SLOW=1)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


#: modules no in-process test imports (they run in subprocesses the tests start)
NOT_IMPORTED_IN_PROCESS = {"stepsim.__main__", "stepsim.cli.__main__"}


def _imported_stepsim_modules() -> set:
    return {name for name in sys.modules if name == "stepsim" or name.startswith("stepsim.")}


#: under pytest-xdist (README's test command), the modules each worker imported, gathered by
#: the controller as workers finish (the controller itself runs no test)
_WORKER_MODULES: set = set()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_MODULES.update(getattr(node, "workeroutput", {}).get("stepsim_modules", ()))


def pytest_sessionfinish(session, exitstatus):
    """After a whole default run (no paths, -k or -m): every stepsim module was imported
    (in this process, or, under pytest-xdist, in one of the workers)."""
    import pkgutil

    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: report to the controller, which checks
        workeroutput["stepsim_modules"] = sorted(_imported_stepsim_modules())
        return
    whole = not config.args or [str(a) for a in config.args] == ["tests"]
    if exitstatus != 0 or not whole or config.getoption("-k") or config.getoption("-m"):
        return
    modules = {m.name for m in pkgutil.walk_packages(stepsim.__path__, "stepsim.")}
    imported = _imported_stepsim_modules() | _WORKER_MODULES
    missing = sorted(modules - imported - NOT_IMPORTED_IN_PROCESS)
    if missing:
        print(f"\nthe test selection never imports {missing}: give each a fast test",
              file=sys.stderr)
        session.exitstatus = 1


@pytest.fixture(autouse=True, scope="module")
def _blas_threads_as_found():
    """Each test file leaves BLAS's thread counts as it found them. They are process-wide,
    and an in-process Dask cluster (tests/experiments/test_sweep.py) leaves them at one
    thread; float32 products of the transformer differ in their last bits between one and
    two BLAS threads, so a later file's recorded digests would depend on the file order."""
    try:
        import threadpoolctl
    except ImportError:  # pragma: no cover - scikit-learn brings it
        yield
        return
    before = {p["filepath"]: p["num_threads"] for p in threadpoolctl.threadpool_info()
              if p["user_api"] == "blas"}
    yield
    for lib in threadpoolctl.ThreadpoolController().lib_controllers:
        if lib.filepath in before and lib.num_threads != before[lib.filepath]:
            lib.set_num_threads(before[lib.filepath])


# --- process state a test must leave as it found it ----------------------------------------
@pytest.fixture(autouse=True)
def _sigint_left_as_found():
    """A test that leaves Ctrl-C's handler changed (SIGINT ignored, say) changes the tests
    after it on the same worker: a command they start inherits an ignored SIGINT (Python
    keeps it), and a Ctrl-C test then fails far from the cause. Restore it, and fail the
    test that changed it."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left SIGINT's handler {after!r} (it found {before!r})")
