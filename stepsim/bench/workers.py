"""Bench section: what many seeds cost on a local pool (``stepsim check``, ``stepsim sweep``).

* **A worker's start-up.** A pool of one worker (:func:`stepsim.experiments.executors.pool`,
  as ``check`` and ``sweep`` start theirs) is created and given a tiny RunSpec (20 SR-STE
  steps on the regression problem): the time until its result is back is the spawn, the
  imports, numba's cached kernels and the problem's first build, plus the run. The same
  worker then runs the same RunSpec again, warm; the difference is the start-up, paid once
  per worker per pool (the worker runs every later task it is given).
* **The problem cache.** ``make_problem`` against :meth:`RunSpec.build_problem
  <stepsim.experiments.run.RunSpec.build_problem>`, which builds a problem once per process
  for equal names and options (a worker's later runs of the same problem are cache hits).
* **Seeds per second of a check job mix**: the RunSpecs of ``stepsim check C1 --quick`` on
  its first seed (``--quick``: its first few) or of every claim of ``stepsim check
  --quick``, on a pool of every core (``check``'s default: the time includes the pool's
  start-up) beside ``--jobs 1``
  (one after another in this process, already warm: a user's ``--jobs 1`` also pays one
  start-up, in its own process). The load average is printed: other processes on these
  cores slow the pool first. A short mix is mostly start-up; the full one is the target's.
"""

from __future__ import annotations

import functools
import os
import time

TITLE = "workers: a pool worker's start-up, the problem cache, seeds/s of a check job mix"

#: the tiny run a worker's start-up is measured with
TINY = {"problem": "regression", "recipe": "sr-ste", "steps": 20, "seed": 0}
#: problems whose build the cache saves: (label, name, options)
CACHED = (("digits 64-256-256-10", "digits", {}), ("lm (defaults)", "lm", {}))
#: runs of C1 --quick's mix that ``bench --quick`` times (2 per worker on 2 cores)
QUICK_MIX_RUNS = 4


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):  # pragma: no cover - no load average here
        return "?"


def run(bench) -> None:
    from stepsim.experiments.executors import usable_cores

    bench.print(f"  {usable_cores()} usable cores, load average {_load()} (1 min)")
    _startup_rows(bench)
    _cache_rows(bench)
    _mix_rows(bench)


def _startup_rows(bench) -> None:
    from stepsim.bench import Timing
    from stepsim.experiments import executors
    from stepsim.experiments.run import RunSpec

    spec = RunSpec(**TINY)
    cold, first_fit, warm = [], [], []
    for _ in range(2 if bench.quick else 4):
        start = time.perf_counter()
        with executors.pool(1) as pool:
            output = pool.submit(executors.execute, spec).result()
            cold.append(time.perf_counter() - start)
            first_fit.append(output.runtime_s)
            for _ in range(5):
                t0 = time.perf_counter()
                pool.submit(executors.execute, spec).result()
                warm.append(time.perf_counter() - t0)
    cold, warm = Timing.of(cold), Timing.of(warm)
    first_fit = sorted(first_fit)[len(first_fit) // 2]
    case = "tiny RunSpec in a worker"
    bench.emit("workers", case, "warm worker", warm, units=1, unit="run",
               ratio="the same run again, same worker")
    bench.emit("workers", case, "new worker", cold, units=1, unit="run",
               startup_s=float(cold - warm), first_fit_s=first_fit,
               ratio=f"start-up {cold - warm:.2f} s (spawn+import {cold - first_fit:.2f} s, "
                     f"first fit {first_fit:.2f} s)")


def _cache_rows(bench) -> None:
    from stepsim.experiments.run import RunSpec
    from stepsim.problems.registry import make_problem

    for label, name, options in CACHED:
        spec = RunSpec(problem=name, problem_options=options)
        spec.build_problem()  # imports and data loads outside the timing
        times = bench.compare({"fresh": functools.partial(make_problem, name, **options),
                               "cached": spec.build_problem},
                              repeats=3 if bench.quick else 7)
        bench.emit("workers", f"build {label}", "make_problem", times["fresh"], units=1,
                   unit="build")
        bench.emit("workers", f"build {label}", "cache hit", times["cached"], units=1,
                   unit="build", partner=times["fresh"],
                   ratio=f"saves {1e3 * (times['fresh'] - times['cached']):.1f} ms a run")


def _mix(quick: bool) -> tuple[str, list]:
    """(label, the distinct RunSpecs) of ``stepsim check C1 --quick``, its first
    ``QUICK_MIX_RUNS`` runs on its first seed (``quick``: so that ``bench --quick``, a
    smoke run of the section, stays quick), or of ``stepsim check --quick``: every quick
    setting of the protocol with the committed learning rates, as
    :func:`stepsim.checks.pipeline.run_checks` builds them."""
    from stepsim.checks import CLAIMS, get_claim, protocol, tuning
    from stepsim.checks.budget import Budget
    from stepsim.experiments.run import RunSpec

    claims = ("C1",) if quick else CLAIMS
    seeds, lrs = protocol.RULES.seeds.quick, tuning.quick_choices(protocol.RULES)[0]
    if quick:
        seeds = seeds[:1]
    specs = {}
    for problem, timescale, only in protocol.RULES.settings("quick"):
        b = Budget("quick", problem, timescale, seeds, only=only)
        b = Budget("quick", problem, timescale, seeds, lrs=lrs.get(b.key, {}), only=only)
        for claim in claims:
            if b.applies(claim):
                specs.update((job.digest, job) for job in get_claim(claim).jobs(b)
                             if isinstance(job, RunSpec))
    if quick:
        label = f"check C1 --quick, seed {seeds[0]}, first {QUICK_MIX_RUNS} runs"
        return label, list(specs.values())[:QUICK_MIX_RUNS]
    return "check --quick", list(specs.values())


def _mix_rows(bench) -> None:
    from stepsim.experiments import executors

    label, specs = _mix(bench.quick)
    workers = executors.worker_count(None, len(specs))
    steps = sum(s.steps for s in specs)

    def done(task, output):
        pass

    times = {}
    start = time.perf_counter()
    executors.run_serial(specs, done)
    times["serial"] = time.perf_counter() - start
    start = time.perf_counter()
    if workers > 1:
        executors.run_pool(specs, done, workers)
    else:  # pragma: no cover - one core: the pool is this process
        executors.run_serial(specs, done)
    times["pool"] = time.perf_counter() - start
    case = f"{label}: {len(specs)} runs"
    bench.print(f"  {case}, {steps} steps in all; load average {_load()} after")
    bench.emit("workers", case, "--jobs 1", times["serial"], units=len(specs), unit="run",
               seeds_per_s=len(specs) / times["serial"],
               ratio=f"{len(specs) / times['serial']:.2f} seeds/s")
    bench.emit("workers", case, f"pool of {workers} (default)", times["pool"],
               units=len(specs), unit="run", seeds_per_s=len(specs) / times["pool"],
               ratio=f"{len(specs) / times['pool']:.2f} seeds/s, "
                     f"{times['serial'] / times['pool']:.2f}x --jobs 1 (start-up included)")
