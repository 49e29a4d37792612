"""Where runs execute: in this process, in a local process pool, or on a Dask cluster.

A task is a :class:`~stepsim.experiments.run.RunSpec` (one ``fit``) or a
:class:`~stepsim.experiments.tasks.Task` (a named function with JSON arguments, e.g. a
Theorem 1 simulation of a paper check). Every executor calls the same :func:`execute`
(one numba thread and one BLAS thread) and hands the output back to the caller, which
writes the files — so results are bit-identical whatever the executor and the number of
workers, and a cluster needs no shared filesystem.

* :func:`run` — the one door: the tasks not yet in a :class:`~stepsim.experiments.store.
  RunStore` (each claimed there before it is handed out, saved there as it finishes), on
  the executor ``jobs`` and ``scheduler`` choose, with a progress bar; what a sweep,
  ``stepsim check`` and the paper_checks scripts call. The three below are its executors:
* :func:`run_serial` — ``jobs=1``: in this process, one task after another.
* :func:`run_pool` — a ``concurrent.futures.ProcessPoolExecutor`` (:func:`pool`: spawned
  workers, each limited to one numba and one BLAS thread, so workers x threads <= cores;
  each worker exits when its parent dies, so a SIGKILLed sweep or check leaves no orphans).
  A worker starts once (spawn, import, numba's cached kernels: about a second, ``stepsim
  bench``'s workers section) and runs task after task until the pool closes; every
  process, worker or not, builds a problem once for equal name and options
  (:meth:`RunSpec.build_problem <stepsim.experiments.run.RunSpec.build_problem>`'s cache,
  :func:`worker_state`), since ``fit`` never changes a problem. Inside :func:`kept_pool`
  every local pool is one pool, kept open from the first batch to the last: a check's
  tuning rounds, stages and figures do not each spawn and warm new workers.
* :func:`run_dask` — ``dask.distributed``: ``Client(address)`` (or a Client/LocalCluster
  passed in), one task per run, collected as they complete.

Each takes the tasks to do and ``on_done(task, output)``, called in this process as each
task finishes (in completion order). Tasks are identified by their ``digest``. The tasks
may be a lazy iterator: each executor takes the next task only when a worker is free for it
(the pool keeps one task per worker in flight, Dask one per worker thread), because a sweep
claims a run as it hands it over and a second sweep process on the same directory must
find the rest unclaimed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
import warnings

from stepsim.experiments.store import RunOutput, TaskOutput


def execute(task):
    """Run one task here with one BLAS thread: a RunSpec gives a :class:`RunOutput`, a
    :class:`~stepsim.experiments.tasks.Task` a :class:`TaskOutput`."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from stepsim.experiments.run import RunSpec, final_sparsity

    with threadpool_limits(limits=1):
        start = time.perf_counter()
        if not isinstance(task, RunSpec):
            output = task()
            return TaskOutput(output, time.perf_counter() - start)
        # a run that overflows is reported once, by fit's "non-finite" status and message;
        # NumPy's warnings would repeat it for every layer of every step until it stops
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            result = task.run()
        runtime = time.perf_counter() - start
    return RunOutput(result, runtime, final_sparsity(task, result), time.time())


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
    from stepsim._ground.validate import check_int

    cores = usable_cores()
    if jobs is None:
        jobs = cores
    jobs = check_int("jobs", jobs, minimum=1)
    if jobs > cores:
        warnings.warn(f"jobs={jobs} exceeds the {cores} usable cores; using {cores} workers "
                      "(each runs one numba thread)", stacklevel=3)
        jobs = cores
    return max(1, min(jobs, pending))


def worker_state() -> dict:
    """This process's id and its problem cache (hits, misses, size): ``Task(
    "stepsim.experiments.executors:worker_state", {})`` asks a pool worker."""
    from stepsim.experiments.run import problem_cache_info

    return {"pid": os.getpid(), "problem_cache": problem_cache_info()}


def run(tasks, on_done=None, *, jobs: int | None = None, scheduler=None, store=None,
        progress: bool | None = False, label: str = "", wait_note: str = "") -> None:
    """Run every task of ``tasks`` (distinct by digest, in their order) not yet finished in
    ``store``, and return once each one is finished there.

    on_done(task, output): called in this process as each task finishes (after it is saved
    in ``store``). jobs: local workers (default every usable core, at most one per task;
    1 runs here); scheduler: a Dask address, Client or cluster (then ``jobs`` is unused).
    store: a :class:`~stepsim.experiments.store.RunStore` to resume from and save into;
    first healed (:meth:`~stepsim.experiments.store.RunStore.heal`: the tasks' damaged or
    half-present files and the folder's foreign files are set aside in ``damaged/``, said
    in one line on stderr, and those tasks run again); each task is claimed there (a lock)
    as it is handed to a worker, so several processes on one store split the tasks, and a
    task another live process holds is waited for (``wait_note``, the command's name
    such as "check", printed once: who is waiting). None: run every task, save nothing.
    progress: None (default of the CLI): a bar on a terminal, else a line at a steady
    interval (runs done / total, diverged, elapsed, ETA; :mod:`stepsim._ground.progress`);
    True: a bar; False: nothing. label: its text.
    """
    from stepsim._ground.progress import Progress

    tasks = list({task.digest: task for task in tasks}.values())
    if store is not None:
        healing = store.heal(tasks)
        if healing:
            print(f"stepsim{' ' + wait_note if wait_note else ''}: {healing.line()}",
                  file=sys.stderr)
    pending = tasks if store is None else [t for t in tasks if not store.is_finished(t)]
    if not pending:
        return
    workers = None if scheduler is not None else worker_count(jobs, len(pending))

    # kept_pool: one local pool for every batch below (a batch after a wait: runs that
    # another process released), unless the caller keeps one for longer (a whole check)
    with kept_pool(), Progress(len(tasks), label, force=progress,
                               initial=len(tasks) - len(pending), unit="run",
                               failures="diverged") as bar:
        def done(task, output):
            if store is not None:
                store.save(task, output)
                store.release(task, finished=True)
            if on_done is not None:
                on_done(task, output)
            bar.update(1, failed=_diverged(output))

        if store is None:
            return _dispatch(iter(pending), done, workers, len(pending), scheduler)
        waiting = False
        try:
            while pending:
                todo = (t for t in pending if store.claim(t))  # lazily: one per free worker
                first = next(todo, None)
                if first is not None:
                    waiting = False
                    _dispatch(itertools.chain([first], todo), done, workers, len(pending),
                              scheduler)
                else:  # every unfinished task is in flight in another process
                    if not waiting:
                        who = store.holder(pending[0])
                        print(f"{wait_note or 'stepsim'}: waiting for {len(pending)} run(s) "
                              f"that another {wait_note or 'stepsim'} process"
                              f"{' (' + who + ')' if who else ''} is running in {store.root}",
                              file=sys.stderr)
                        waiting = True
                    time.sleep(_POLL_S)
                pending = [t for t in pending if not store.is_finished(t)]
                bar.update(len(tasks) - len(pending) - bar.done)  # tasks others finished
        finally:
            store.release_all()


def _diverged(output) -> bool:
    """Whether a task's output is a run that diverged (``fit``'s non-finite status)."""
    result = getattr(output, "result", None)
    return result is not None and not getattr(result, "success", True)


_POLL_S = 0.25  # how often a process with nothing to claim looks for finished or freed tasks


def _dispatch(tasks, done, workers, pending: int, scheduler) -> None:
    """Hand ``tasks`` (an iterator) to Dask, this process or a local pool."""
    if scheduler is not None:
        run_dask(tasks, done, scheduler)
    elif min(workers, pending) == 1:
        run_serial(tasks, done)
    else:
        run_pool(tasks, done, min(workers, pending))


def run_serial(tasks, on_done) -> None:
    """Run every task in this process, in order."""
    for task in tasks:
        try:
            output = execute(task)
        except Exception as exc:
            raise _failed(task, exc) from exc
        on_done(task, output)


def _init_worker(parent_pid: int) -> None:
    # numba is not imported yet in a fresh spawned worker: give it a single-thread pool.
    # (NumPy's BLAS is already loaded here; execute() limits it with threadpoolctl.)
    os.environ["NUMBA_NUM_THREADS"] = "1"
    # Ctrl-C in a terminal reaches the whole process group: the parent stops the pool and
    # says what was kept; a worker must not print a KeyboardInterrupt traceback of its own
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a SIGKILLed sweep cannot stop its pool; without this its workers would live on as
    # orphans, blocked on the task queue (measured), so each one leaves with its parent
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


def _exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(1)  # reparented: the sweep process is gone; its files are all atomic


def pool(workers: int):
    """The local pool :func:`run_pool` runs on: ``workers`` spawned processes (one numba and
    one BLAS thread each, gone with this process) that live as long as the pool, each
    running as many tasks as it is given (``submit(execute, task)``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")  # no fork of a process with numba/BLAS threads
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=_init_worker, initargs=(os.getpid(),))


class _Kept:
    """The pool :func:`kept_pool` keeps: opened by the first batch that needs one, opened
    again larger when a batch needs more workers, closed when the ``with`` ends."""

    def __init__(self):
        self.executor, self.workers = None, 0

    def get(self, workers: int):
        # a pool stopped by Ctrl-C or broken by a lost worker is not used again
        if (self.executor is None or self.workers < workers
                or getattr(self.executor, "_broken", False)
                or getattr(self.executor, "_shutdown_thread", False)):
            self.close()
            self.executor, self.workers = pool(workers), workers
        return self.executor

    def close(self) -> None:  # waits for runs in flight, as leaving a `with pool()` does
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=True)


#: ``.pool``: this thread's :func:`kept_pool` (absent or None: each batch opens its own);
#: per thread, so that a thread never closes a pool another thread's batch is using
_kept = threading.local()


@contextlib.contextmanager
def kept_pool():
    """Inside ``with kept_pool():`` every local pool (:func:`run_pool`, :func:`pooled`) is
    one pool, kept open until the ``with`` ends; nested, the outermost one keeps it.

    Why: a check runs its tuning in rounds (each halving rung, each grid extension), then
    its evaluation and extension stages and its figures; a new pool for each batch
    spawned, imported and warmed its workers again (numba's cached kernels, the problems
    each one builds), 9 times in the full-mode test. Results do not change: each task
    runs alone in :func:`execute` with one numba and one BLAS thread, and a worker's
    problem cache holds problems ``fit`` never changes, so a run's bits are the same on
    any worker, old or new (tests/experiments/test_workers.py)."""
    if getattr(_kept, "pool", None) is not None:
        yield
        return
    _kept.pool = kept = _Kept()
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, Exception) and kept.executor is not None:
            stop_pool(kept.executor)  # Ctrl-C: end the workers now, do not wait for them
        raise
    finally:
        _kept.pool = None
        kept.close()


@contextlib.contextmanager
def pooled(workers: int):
    """A pool of at least ``workers`` processes for one batch: the kept one
    (:func:`kept_pool`), left open on the way out, or else a new :func:`pool` that is
    closed on the way out."""
    kept = getattr(_kept, "pool", None)
    if kept is not None:
        yield kept.get(workers)
        return
    with pool(workers) as executor:
        yield executor


def run_pool(tasks, on_done, workers: int) -> None:
    """Run ``tasks`` (an iterable, taken lazily) on a local pool of ``workers`` spawned
    processes (:func:`pool`; the kept one inside :func:`kept_pool`)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    tasks = iter(tasks)
    with pooled(workers) as executor:
        futures = {}

        def fill():  # one run per worker in flight; the next is taken when one finishes
            while len(futures) < workers:
                task = next(tasks, None)
                if task is None:
                    return
                futures[executor.submit(execute, task)] = task

        try:  # each result is saved as soon as it arrives: a kill loses only runs in flight
            fill()
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                finished = [(fut, futures.pop(fut)) for fut in done]
                # the free workers get their next run first: saving a result (and the
                # caller's on_done) takes tens of ms, which a worker would otherwise idle
                fill()
                for fut, run in finished:
                    on_done(run, _result(fut, run))
                del finished  # drop our references once they are saved
        except BaseException:
            for fut in futures:
                fut.cancel()
            if not isinstance(sys.exc_info()[1], Exception):  # Ctrl-C: do not wait for the
                stop_pool(executor)                               # runs in flight to finish
            raise


@contextlib.contextmanager
def connected(scheduler):
    """``scheduler`` as a Dask Client, connected here (an address: a Client made now and
    closed on exit; a Client or cluster, or None, is yielded as it is). Callers connect
    before they write anything, so an unreachable scheduler leaves no files behind."""
    if not isinstance(scheduler, str):
        yield scheduler
        return
    from distributed import Client

    try:
        client = Client(scheduler)
    except (OSError, TimeoutError) as exc:
        raise OSError(f"cannot connect to the Dask scheduler at {scheduler} ({exc}); "
                      "nothing was written") from None
    try:
        yield client
    finally:
        client.close()


def stop_pool(executor) -> None:
    """End a pool's workers now (their runs in flight are lost; files are atomic)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def run_dask(tasks, on_done, scheduler) -> None:
    """Run ``tasks`` (an iterable, taken lazily) on Dask; scheduler: an address
    ("tcp://host:8786"), a Client or a cluster."""
    from distributed import Client, as_completed

    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    tasks = iter(tasks)
    futures, pending = {}, as_completed()

    def fill():  # one run per worker thread in flight (re-counted: the cluster may scale)
        slots = max(1, sum(client.nthreads().values()))
        while len(futures) < slots:
            task = next(tasks, None)
            if task is None:
                return
            fut = client.submit(execute, task, pure=False, key=f"stepsim-run-{task.digest[:32]}")
            futures[fut] = task
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


def _failed(task, exc) -> RuntimeError:
    return RuntimeError(f"run {task.describe()} failed ({type(exc).__name__}: {exc}); "
                        f"digest {task.digest}")
