"""Where runs execute: in this process, in a local process pool, or on a Dask cluster.

Every executor calls the same :func:`execute` (one ``fit`` with one numba thread and one
BLAS thread) and hands the finished :class:`~stepsim.training.FitResult` back to the
caller, which writes the files — so results are bit-identical whatever the executor and
the number of workers, and a cluster needs no shared filesystem.

* :func:`run_serial` — ``jobs=1``: in this process, one run after another.
* :func:`run_pool` — a ``concurrent.futures.ProcessPoolExecutor`` (spawned workers, each
  limited to one numba and one BLAS thread, so workers x threads <= cores).
* :func:`run_dask` — ``dask.distributed``: ``Client(address)`` (or a Client/LocalCluster
  passed in), one task per run, collected as they complete.

Each takes the runs to do and ``on_done(run, output)``, called in this process as each
run finishes (in completion order). The runs may be a lazy iterator: each executor takes
the next run only when a worker is free for it (the pool keeps one run per worker in
flight, Dask one per worker thread), because the runner claims a run as it hands it over
and a second sweep process on the same directory must find the rest unclaimed.
"""

from __future__ import annotations

import os
import time
import warnings

from stepsim.experiments.store import RunOutput


def execute(params: dict, rng_seed: int) -> RunOutput:
    """Train one run (see :func:`stepsim.experiments.adapter.fit_run`) with one BLAS thread."""
    from threadpoolctl import threadpool_limits

    from stepsim.experiments import adapter

    with threadpool_limits(limits=1):
        result, runtime = adapter.fit_run(params, rng_seed)
    return RunOutput(result, runtime, adapter.final_sparsity(params, result), time.time())


def usable_cores() -> int:
    """CPU cores this process may use (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def worker_count(jobs: int | None, pending: int) -> int:
    """Workers for a local pool: ``jobs`` (default: every core), at most the cores and runs.

    Each worker runs one numba and one BLAS thread, so workers <= cores keeps
    workers x threads <= cores; a larger ``jobs`` is lowered with a warning.
    """
    from stepsim._validate import check_int

    cores = usable_cores()
    if jobs is None:
        jobs = cores
    jobs = check_int("jobs", jobs, minimum=1)
    if jobs > cores:
        warnings.warn(f"jobs={jobs} exceeds the {cores} usable cores; using {cores} workers "
                      "(each runs one numba thread)", stacklevel=3)
        jobs = cores
    return max(1, min(jobs, pending))


def run_serial(runs, on_done) -> None:
    """Run every run in this process, in order."""
    for run in runs:
        try:
            output = execute(run.params, run.rng_seed)
        except Exception as exc:
            raise _failed(run, exc) from exc
        on_done(run, output)


def _init_worker(parent_pid: int) -> None:
    # numba is not imported yet in a fresh spawned worker: give it a single-thread pool.
    # (NumPy's BLAS is already loaded here; execute() limits it with threadpoolctl.)
    os.environ["NUMBA_NUM_THREADS"] = "1"
    # a SIGKILLed sweep cannot stop its pool; without this its workers would live on as
    # orphans, blocked on the task queue (measured), so each one leaves with its parent
    import threading

    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


def _exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(1)  # reparented: the sweep process is gone; its files are all atomic


def run_pool(runs, on_done, workers: int) -> None:
    """Run ``runs`` (an iterable, taken lazily) on a local pool of ``workers`` spawned processes."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = multiprocessing.get_context("spawn")  # no fork of a process with numba/BLAS threads
    runs = iter(runs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                             initializer=_init_worker, initargs=(os.getpid(),)) as pool:
        futures = {}

        def fill():  # one run per worker in flight; the next is taken when one finishes
            while len(futures) < workers:
                run = next(runs, None)
                if run is None:
                    return
                futures[pool.submit(execute, run.params, run.rng_seed)] = run

        try:  # each result is saved as soon as it arrives: a kill loses only runs in flight
            fill()
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for fut in done:
                    run = futures.pop(fut)  # drop our reference once it is saved
                    on_done(run, _result(fut, run))
                fill()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def run_dask(runs, on_done, scheduler) -> None:
    """Run ``runs`` (an iterable, taken lazily) on Dask; scheduler: an address
    ("tcp://host:8786"), a Client or a cluster."""
    from distributed import Client, as_completed

    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    runs = iter(runs)
    futures, pending = {}, as_completed()

    def fill():  # one run per worker thread in flight (re-counted: the cluster may scale)
        slots = max(1, sum(client.nthreads().values()))
        while len(futures) < slots:
            run = next(runs, None)
            if run is None:
                return
            fut = client.submit(execute, run.params, run.rng_seed, pure=False,
                                key=f"stepsim-run-{run.run_id}")
            futures[fut] = run
            pending.add(fut)

    try:
        try:
            fill()
            for fut in pending:
                run = futures.pop(fut)
                on_done(run, _result(fut, run))
                fut.release()  # the worker may drop the result once it is saved
                fill()
        except BaseException:
            client.cancel(list(futures))
            raise
    finally:
        if own:
            client.close()


def _result(future, run):
    try:
        return future.result()
    except Exception as exc:
        raise _failed(run, exc) from exc


def _failed(run, exc) -> RuntimeError:
    return RuntimeError(f"run {run.name} failed ({type(exc).__name__}: {exc}); "
                        f"parameters: {run.params}")
