"""``stepsim._ground.threads.training_threads``: BLAS's thread limit is the process's, so
threads that train at once (a Dask worker's, in-process) must leave it as they found it:
only the main thread sets it."""

from __future__ import annotations

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
