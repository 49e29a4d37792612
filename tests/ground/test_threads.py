"""``stepsim._ground.threads.training_threads``: BLAS's thread limit is the process's, so
threads that train at once (a Dask worker's, in-process) must leave it as they found it:
only the main thread sets it."""

from __future__ import annotations

import itertools
import threading

import numpy  # noqa: F401  (loads the BLAS library threadpoolctl inspects)
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from stepsim._ground.threads import training_threads


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info()
            if p["user_api"] == "blas"]


def test_overlapping_training_threads_restore_blas_when_the_last_one_leaves():
    """A enters, B enters, A leaves, B leaves (the order that left the process on one BLAS
    thread when each saved and restored its own limit): the original stays; the main
    thread's own limit still applies and is restored."""
    original = _blas_threads()
    if not original:
        pytest.skip("no BLAS library threadpoolctl can see")
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with training_threads(blas=1):
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with training_threads(blas=1):
            b_in.set()
            a_out.wait(10)
            seen["after A left"] = _blas_threads()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["after A left"] == original
    assert _blas_threads() == original
    with training_threads(blas=1):
        assert _blas_threads() == [1] * len(original)
    assert _blas_threads() == original


@pytest.mark.parametrize("size,step,threads", [(10, 4, 2), (0, 4, 2), (4, 4, 2), (5, 4, 2),
                                               (100, 4, 3), (100, 4, 1), (12, 4, 8),
                                               (4097 * 5, 4095, 2)])
def test_runs_of_blocks_cover_the_array_once_in_whole_blocks(size, step, threads):
    from stepsim._ground.threads import runs_of_blocks

    runs = runs_of_blocks(size, step, threads)
    assert 1 <= len(runs) <= max(1, threads)
    assert runs[0][0] == 0 and runs[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))  # no gap, no overlap
    assert all(lo % step == 0 for lo, _ in runs)  # whole blocks


def test_on_threads_returns_results_in_order_and_uses_other_threads():
    from stepsim._ground.threads import on_threads

    names = on_threads([lambda i=i: (i, threading.current_thread().name) for i in range(3)], 3)
    assert [i for i, _ in names] == [0, 1, 2]
    assert names[0][1] == threading.current_thread().name  # the caller runs the first
    assert all(name.startswith("stepsim") for _, name in names[1:])
    assert [i for i, _ in on_threads([lambda i=i: (i, 0) for i in range(3)], 1)] == [0, 1, 2]
    with pytest.raises(ZeroDivisionError):  # a call's error reaches the caller
        on_threads([lambda: 1, lambda: 1 / 0], 2)
