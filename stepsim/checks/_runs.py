"""Training runs of the paper checks as plain, picklable jobs, and the executors that run them.

A :class:`Job` names a function by ``"module:function"`` and its keyword arguments (JSON
values only), so a job runs the same in this process, in a process pool (``--jobs N``) or
on a Dask cluster (``--scheduler ADDRESS``), and two claims asking for the same run share
it (jobs are deduplicated by their :attr:`Job.key`). Every job is seeded; its result is a
JSON-ready dict, identical whichever executor ran it.

:func:`fit_job` is the job of the fit-based claims (C1-C10): build the problem, the recipe
and the criterion by name, run :func:`stepsim.training.fit`, and return the metrics, the
switch step and the reductions of the trace the claims read (``extras``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
import time

import numpy as np

from stepsim import _libm


@dataclasses.dataclass(frozen=True)
class Job:
    """fn: "module:function"; kwargs: JSON-ready keyword arguments (a dict)."""

    fn: str
    kwargs: dict

    @property
    def key(self) -> str:
        """A stable id of the job: same function and arguments, same key."""
        text = json.dumps([self.fn, self.kwargs], sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:16]


def execute(job: Job) -> dict:
    """Run one job here; returns its dict with ``seconds`` (wall time) added.

    BLAS runs on one thread: jobs run side by side (one per worker), and a multi-threaded
    BLAS under them oversubscribes the cores (measured 5-8x slower on the MLP problems).
    """
    from threadpoolctl import threadpool_limits

    module, name = job.fn.split(":")
    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        out = getattr(importlib.import_module(module), name)(**job.kwargs)
    out["seconds"] = time.perf_counter() - start
    return out


def run_jobs(jobs, *, n_jobs: int = 1, scheduler: str | None = None, progress=None) -> dict:
    """Run every distinct job once; returns key -> result dict.

    n_jobs: worker processes (1: run here, in order). scheduler: a Dask scheduler address
    (``tcp://host:port``); then the cluster runs them and n_jobs is ignored. progress: an
    object with ``update(units)`` (a :class:`stepsim._progress.Progress`), called per job.
    """
    unique = {}
    for job in jobs:
        unique.setdefault(job.key, job)
    results = {}
    tick = progress.update if progress is not None else (lambda units: None)
    if scheduler:
        from dask.distributed import Client, as_completed

        with Client(scheduler) as client:
            futures = {client.submit(execute, job, pure=False): key
                       for key, job in unique.items()}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                tick(1)
        return results
    if n_jobs <= 1:
        for key, job in unique.items():
            results[key] = execute(job)
            tick(1)
        return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: a forked child of a process that already ran numba's threading
    # layer can deadlock; each worker loads the cached kernels once
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=context) as pool:
        futures = {pool.submit(execute, job): key for key, job in unique.items()}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            tick(1)
    return results


class ScaledLoss:
    """A problem whose training loss (and so every gradient) is multiplied by ``factor``.

    The held-out metrics (``evaluate``) are the wrapped problem's, unscaled: only the units
    of the loss Adam sees change. Used to ask whether a switch criterion depends on them
    (Adam's update is scale-free up to eps; v scales by factor^2).
    """

    def __init__(self, problem, factor: float):
        self.problem = problem
        self.factor = float(factor)
        self.specs = problem.specs

    def __repr__(self):
        return f"ScaledLoss({self.problem!r}, factor={self.factor:g})"

    def init_params(self, rng):
        return self.problem.init_params(rng)

    def sample_batch(self, rng):
        return self.problem.sample_batch(rng)

    def loss_and_grad(self, params, batch):
        loss, grads = self.problem.loss_and_grad(params, batch)
        return self.factor * loss, {k: g * g.dtype.type(self.factor) for k, g in grads.items()}

    def evaluate(self, params):
        return self.problem.evaluate(params)

    def config(self):
        return dict(self.problem.config(), loss_factor=self.factor)


def fit_job(*, problem: str, problem_options: dict, recipe: str, recipe_options: dict,
            steps: int, seed: int, criterion: str | None = None,
            criterion_options: dict | None = None, nm=None, loss_factor: float = 1.0,
            extras: tuple = ()) -> dict:
    """One seeded training run; the summary the claims read (JSON-ready).

    extras: names of trace reductions to add — "v_curve" (||v||_1 at ~200 log-spaced
    steps), "z_window" (the smallest mean of Z_k = ||v_k - v_{k-1}||_1 / d over a window
    of T_w = floor(1/(1 - beta2)) steps, and where), "table1" (the Table 1 score at the
    switch step).
    """
    from stepsim.criteria import make_criterion, table1_score, window_length
    from stepsim.problems.registry import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    prob = make_problem(problem, **problem_options)
    if loss_factor != 1.0:
        prob = ScaledLoss(prob, loss_factor)
    rec = make_recipe(recipe, **recipe_options)
    crit = None
    if criterion is not None:
        crit = make_criterion(criterion, adam=rec.optimizer, **(criterion_options or {}))
    result = fit(prob, rec, steps, rng=seed, criterion=crit, nm=None if nm is None else tuple(nm),
                 progress=False)
    trace = result.trace
    out = {"metrics": {k: float(v) for k, v in result.metrics.items()},
           "switch_step": result.switch_step, "final_loss": float(trace.loss[-1]),
           "nm": {k: list(v) for k, v in result.nm.items()}}
    beta2 = getattr(rec.optimizer, "beta2", None)
    if "v_curve" in extras:
        at = np.unique(_libm.geomspace(1, steps, 200).astype(int))
        out["v_curve"] = {"step": at.tolist(), "v_l1": trace.v_l1[at - 1].tolist(),
                          "v_l2": trace.v_l2[at - 1].tolist(), "z": trace.z[at - 1].tolist(),
                          "phase": trace.phase[at - 1].tolist()}
    if "z_window" in extras:
        window = window_length(beta2)
        z = trace.z
        if z.size >= window:
            means = np.convolve(z, np.ones(window) / window, mode="valid")
            i = int(np.argmin(means))
            out["z_window"] = {"window": window, "min_mean": float(means[i]),
                               "at_step": i + window, "first_z": float(z[0])}
        else:
            out["z_window"] = {"window": window, "min_mean": math.nan, "at_step": None,
                               "first_z": float(z[0])}
    if "score_curve" in extras:  # the Table 1 score of every possible k0 (log-spaced)
        at = np.unique(_libm.geomspace(1, max(steps - 1000, 1), 60).astype(int))
        csum = np.concatenate([[0.0], np.cumsum(trace.dv_l1)])
        ends = np.minimum(at + 1000, steps)
        out["score_curve"] = {"k0": at.tolist(),
                              "score": ((csum[ends] - csum[at]) / (ends - at)).tolist()}
    if "table1" in extras:
        k0 = result.switch_step
        if k0 is not None and 1 <= k0 < steps:
            s = table1_score(trace.dv_l1, k0)
            out["table1"] = {"k0": k0, "score": s.score, "steps_available": s.steps_available}
        else:
            out["table1"] = {"k0": k0, "score": None, "steps_available": 0}
    return out
