"""Who gets the cores during training: BLAS matmuls, not numba's kernels.

A training step alternates NumPy matmuls (OpenBLAS, one thread per core) with numba kernels
(Adam, masks). Both keep their idle worker threads spinning for a while after each call,
and on a small machine the spinning workers of one library take the cores the other one
needs next, and both slow down severalfold (``stepsim bench --only train`` times whole
``fit`` runs with and without the policy).

The policy, :func:`training_threads`:

* numba kernels run on **one thread**, the calling one. numba's parallel kernels then
  wake no worker, so none spins while BLAS works; and the worker BLAS leaves spinning
  sits on the other core, not on the kernel's. A step's element-wise work is small next to
  its matmuls (Adam streams its arrays once, at memory speed, on one thread), so little
  is lost.
* BLAS keeps every core (or ``blas`` threads if given): matmuls are most of a step.

Results do not depend on it: every stepsim kernel gives the same bits for any thread count.
``OMP_WAIT_POLICY=PASSIVE`` would also stop the spinning, but only if set before the
OpenMP runtime starts, which a library cannot promise; this policy works at any time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import types


@contextlib.contextmanager
def training_threads(kernels: int = 1, blas: int | str | None = "auto"):
    """Run the block with numba on ``kernels`` threads and BLAS on ``blas`` threads.

    blas: an int; None to leave BLAS as it is; or "auto" (default): every core, unless the
    machine is busy (1-minute load average, less this process, leaves under 1.5 cores
    free), then one thread. A multi-threaded matmul waits for its slowest thread, and on
    an oversubscribed machine that thread is often descheduled, so a step runs faster with
    BLAS on one thread than on two.
    Both settings are restored on exit. BLAS limits go through threadpoolctl (installed
    with scikit-learn); without it only numba's setting changes. Yields what was set:
    ``{"numba": 1, "blas": 2 or None, "why": "..."}``.
    """
    import numba

    from stepsim._ground.validate import check_int

    kernels = check_int("kernels", kernels, minimum=1)
    why = "as asked"
    if isinstance(blas, str):
        if blas != "auto":
            raise ValueError(f"blas must be an int >= 1, None or 'auto', got {blas!r}")
        blas, why = auto_blas_threads()
    elif blas is not None:
        blas = check_int("blas", blas, minimum=1)
    before = numba.get_num_threads()
    numba.set_num_threads(min(kernels, numba.config.NUMBA_NUM_THREADS))
    try:
        with _blas_limit(blas):
            yield {"numba": numba.get_num_threads(), "blas": blas, "why": why}
    finally:
        numba.set_num_threads(before)


def auto_blas_threads() -> tuple[int | None, str]:
    """(BLAS threads, reason) for "auto": None (all cores) on a quiet machine, 1 on a busy one."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None, "load average unknown: BLAS left as is"
    free = cores - max(load - 1.0, 0.0)  # this process counts in the load: discount it
    if cores > 1 and free < 1.5:
        return 1, f"busy machine: load {load:.1f} on {cores} cores"
    return None, f"load {load:.1f} on {cores} cores: BLAS on every core"


@contextlib.contextmanager
def _blas_limit(blas: int | None):
    # BLAS's thread limit is one setting for the whole process: threads of one process that
    # train at once (a Dask worker's, in-process) would save and restore it interleaved and
    # leave the process on one BLAS thread; only the main thread sets it
    if blas is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn (a dependency) brings it
        yield
        return
    with threadpool_limits(limits=blas, user_api="blas"):
        yield


def serial_twin(parallel_kernel, name: str):
    """The Python function of a ``parallel=True`` kernel, as a new function called ``name``,
    for compiling without ``parallel`` (its ``prange`` then runs as ``range``).

    With one thread, a serial kernel runs inline: no parallel launch, which costs a few
    microseconds with OpenMP and, with numba's workqueue layer (chosen beside PyTorch), a
    hand-over to a worker thread that can outlast the work on a busy machine. The new name
    gives the twin its own on-disk cache entry (numba names cache files after the function).
    """
    func = parallel_kernel.py_func
    twin = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__,
                              func.__closure__)
    twin.__qualname__ = name
    twin.__doc__ = f"{func.__name__}, compiled without parallel=True (one thread, inline)."
    return twin


def runs_of_blocks(size: int, step: int, threads: int) -> list:
    """[(lo, hi), ...]: 0 .. size cut into at most ``threads`` runs of whole blocks of
    ``step`` entries (the last block maybe shorter), as even as whole blocks allow; one
    run when threads is 1 or there is one block."""
    if threads <= 1 or size <= step:
        return [(0, size)]
    blocks = -(-size // step)
    per_run = -(-blocks // min(threads, blocks)) * step
    return [(lo, min(lo + per_run, size)) for lo in range(0, size, per_run)]


_POOL: list = [0, None]  # [workers, ThreadPoolExecutor]: made on first use, grown on demand


def on_threads(calls: list, threads: int) -> list:
    """The results of the zero-argument callables ``calls``, in order, computed on up to
    ``threads`` threads: the calling thread runs the first, a shared pool the rest. For
    numba kernels compiled with ``nogil`` (stepsim's all are) working on disjoint parts of
    an array: what ``prange`` would do, without a ``parallel=True`` compile."""
    if threads <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    from concurrent.futures import ThreadPoolExecutor

    if _POOL[0] < len(calls) - 1:
        if _POOL[1] is not None:
            _POOL[1].shutdown(wait=False)
        _POOL[:] = [len(calls) - 1, ThreadPoolExecutor(len(calls) - 1,
                                                       thread_name_prefix="stepsim")]
    rest = [_POOL[1].submit(call) for call in calls[1:]]
    first = calls[0]()
    return [first] + [future.result() for future in rest]
