"""Many seeds on every core: `stepsim check` and `stepsim sweep` use every core unless --jobs
says otherwise; a pool worker starts once and runs many RunSpecs; a process builds a problem
once (RunSpec.build_problem's cache), which is safe because fit never changes a problem: a
run on a cached problem has the bits of a run on a fresh one."""

from __future__ import annotations

import hashlib
import os
import pickle

import numpy as np
import pytest

from stepsim.experiments import executors
from stepsim.experiments.run import RunSpec, problem_cache_info
from stepsim.problems import make_problem
from stepsim.training import fit
from tests.problems.test_problems import SMALL


def _bits(result) -> str:
    """sha256 of everything a run produced: weights, trace, curves, switch, metrics."""
    h = hashlib.sha256()
    for k in sorted(result.weights):
        h.update(k.encode() + np.ascontiguousarray(result.weights[k]).tobytes())
        h.update(np.ascontiguousarray(result.dense_weights[k]).tobytes())
    for k, v in sorted(result.trace.arrays().items()):
        h.update(k.encode() + np.ascontiguousarray(v).tobytes())
    for k, v in sorted((result.curves or {}).items()):
        h.update(k.encode() + np.ascontiguousarray(v).tobytes())
    h.update(repr((result.switch_step, sorted(result.metrics.items()),
                   sorted(result.initial_metrics.items()), result.status)).encode())
    return h.hexdigest()


# ------------------------------------------------------------------ every core by default

@pytest.mark.parametrize("command", ["check", "sweep"])
def test_check_and_sweep_use_every_core_unless_jobs_says_otherwise(command, tmp_path,
                                                                   monkeypatch, capsys):
    from stepsim.cli import main

    pools = []

    def fake_pool(tasks, on_done, workers):  # record the pool's size, run here
        pools.append(workers)
        executors.run_serial(tasks, on_done)

    monkeypatch.setattr(executors, "usable_cores", lambda: 3)
    monkeypatch.setattr(executors, "run_pool", fake_pool)
    if command == "check":  # C3 --quick: 9 digits runs (3 seeds x 3 loss scales), shortened
        from stepsim.checks import protocol, tuning

        committed = tmp_path / "tuned_lrs.json"  # quick mode's lrs: this test's own
        tuning.write_committed({"digits/fast": {"adam|dense|-": 0.01}}, committed,
                               source="a test")
        monkeypatch.setattr(tuning, "COMMITTED", committed)
        # quick mode's steps are quick.steps' (draft 5), not the timescale's
        monkeypatch.setattr(protocol, "RULES",
                            protocol.RULES.with_value("quick.steps.digits", 200))
        argv = ["check", "C3", "--quick"]
    else:
        argv = ["sweep", "--recipes", "dense", "--nm", "2:4", "--steps", "5", "--seeds", "3"]
    assert main(argv + ["--out", str(tmp_path / "all")]) == 0
    assert pools == [3]
    assert main(argv + ["--out", str(tmp_path / "one"), "--jobs", "1"]) == 0
    assert pools == [3]  # --jobs 1: in this process, no pool
    capsys.readouterr()
    assert main([command, "--help"]) == 0
    assert "default: every core" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------ one problem per process

@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_run_on_a_cached_problem_has_the_bits_of_a_run_on_a_fresh_one(name):
    spec = RunSpec(problem=name, problem_options=SMALL[name], recipe="step", steps=40, seed=3,
                   eval_every=10)
    before = problem_cache_info()
    problem = spec.build_problem()
    assert spec.build_problem() is problem  # the second build is a cache hit
    assert spec.replace(seed=4, recipe="sr-ste").build_problem() is problem  # any run of it
    after = problem_cache_info()
    assert after["hits"] >= before["hits"] + 2
    assert after["misses"] <= before["misses"] + 1
    state = pickle.dumps(problem)  # everything the problem holds, arrays included

    cached = [_bits(spec.run()) for _ in range(2)]  # the second after a whole run used it
    built = spec.build()
    fresh = fit(make_problem(name, **SMALL[name]), built.recipe, spec.steps, rng=spec.seed,
                criterion=built.criterion, threads=1, eval_every=spec.eval_every,
                progress=False)
    assert cached == [_bits(fresh)] * 2
    assert pickle.dumps(problem) == state  # fit changed nothing in the problem
    assert spec.build_problem() is problem


@pytest.mark.parametrize("recipe", ["dense", "sr-ste", "step"])
def test_fit_never_changes_a_problem(recipe):
    # the larger problems and every recipe family: the state before and after a run
    for name, options in (("digits", {"hidden": (32, 32)}), ("lm", SMALL["lm"]),
                          ("regression", {"grad_noise": 0.1})):
        problem = make_problem(name, **options)
        state = pickle.dumps(problem)
        spec = RunSpec(problem=name, problem_options=options, recipe=recipe, steps=30)
        built = spec.build()
        fit(problem, built.recipe, spec.steps, rng=1, criterion=built.criterion, threads=1,
            eval_every=10, progress=False)
        assert pickle.dumps(problem) == state, name


@pytest.mark.slow
def test_a_pool_worker_runs_many_runspecs_and_builds_their_problem_once():
    from stepsim.experiments.tasks import Task

    state = Task("stepsim.experiments.executors:worker_state", {})
    spec = RunSpec(problem="digits", problem_options={"hidden": (16,), "seed": 5},
                   recipe="sr-ste", steps=30, seed=2)
    with executors.pool(1) as pool:
        def ask(task):
            return pool.submit(executors.execute, task).result()

        first = ask(state).output
        outputs = [ask(spec), ask(spec.replace(seed=3)), ask(spec)]
        last = ask(state).output
    assert first["pid"] == last["pid"] != os.getpid()  # one worker ran them all
    assert last["problem_cache"]["misses"] - first["problem_cache"]["misses"] == 1
    assert last["problem_cache"]["hits"] > first["problem_cache"]["hits"]
    here = _bits(spec.run())
    assert _bits(outputs[0].result) == _bits(outputs[2].result) == here
    assert _bits(outputs[1].result) == _bits(spec.replace(seed=3).run())


@pytest.mark.slow
def test_a_kept_pool_runs_every_batch_inside_it_on_the_same_workers_and_closes_after():
    """`stepsim check` keeps one pool for all its batches (tuning rounds, stages, figures):
    inside executors.kept_pool every run_pool uses the same workers, and a run there has
    the bits it has in this process; on the way out the pool is closed."""
    from stepsim.experiments.tasks import Task

    state = Task("stepsim.experiments.executors:worker_state", {})
    specs = [RunSpec(problem="regression", recipe="sr-ste", steps=30, seed=s) for s in (1, 2)]
    pids, bits = [], {}

    def done(task, output):
        if task is state:
            pids.append(output.output["pid"])
        else:
            bits[task.digest] = _bits(output.result)

    with executors.kept_pool():
        for batch in ([state, specs[0]], [specs[1], state]):
            executors.run_pool(batch, done, 2)
        kept = executors._kept.pool.executor
        workers = set(kept._processes)
        with executors.kept_pool():  # nested: the outer one keeps its pool
            executors.run_pool([state, state], done, 2)
        assert executors._kept.pool.executor is kept
    assert len(pids) == 4 and set(pids) <= workers and os.getpid() not in pids
    assert executors._kept.pool is None and kept._shutdown_thread  # closed on the way out
    assert bits == {s.digest: _bits(s.run()) for s in specs}
