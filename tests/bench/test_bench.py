"""stepsim bench's machinery: timings with their spread, rows flagged unreliable instead of
printed as results, warm-up outside the timings, the threading layer beside torch peers,
the train section, and the training thread policy."""

import io
import itertools
import json
import subprocess
import sys
import time

import numpy as np
import pytest

from stepsim.bench import LOAD_LIMIT, SPREAD_LIMIT, Bench, Timing, unreliable_because


class _Idle:
    """A machine whose other processes use no core: rows judged by their spread alone
    (the load's own tests measure real processes)."""

    cores = frozenset({0})

    def mark(self):
        pass

    def other(self):
        return 0.0


def _bench():
    return Bench(quick=True, stream=io.StringIO(), load=_Idle())


def test_timing_is_the_median_with_its_interquartile_spread():
    t = Timing.of([4.0, 1.0, 2.0, 3.0, 100.0])
    assert float(t) == 3.0 and t.samples == 5
    assert t.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert Timing.of([2.0]).spread == 0.0


def test_wide_spread_or_impossible_bandwidth_is_flagged_not_printed_as_a_result():
    bench = _bench()
    steady = Timing.of([1.0, 1.0, 1.01, 1.0])
    noisy = Timing.of([1.0, 3.0, 0.5, 2.0])
    assert noisy.spread > SPREAD_LIMIT and unreliable_because(steady) == ""
    ok = bench.emit("s", "case a", "numba", steady, units=10, ratio="2.0x numpy")
    bad = bench.emit("s", "case b", "numba", noisy, units=10, ratio="2.0x numpy")
    fast = bench.emit("s", "case c", "numba", steady, units=10, ratio="9.0x numpy",
                      fraction_of_probe_bw=10.43)
    assert ok["reliable"] and not bad["reliable"] and not fast["reliable"]
    assert "interquartile range" in bad["unreliable_because"]
    assert "1043% of its probe's bandwidth is impossible" in fast["unreliable_because"]
    printed = bench.stream.getvalue().splitlines()
    assert "2.0x numpy" in printed[0] and "UNRELIABLE" not in printed[0]
    for line in printed[1:]:
        assert "UNRELIABLE" in line and "x numpy" not in line


def _spin(cpu_seconds: float, *, detached: bool):
    """A process that burns ``cpu_seconds`` of CPU, prints "spun", then sleeps: this
    process's child, or (detached) a grandchild left to init, as another user's work is."""
    code = ("import time\n"
            f"while time.process_time() < {cpu_seconds}: pass\n"
            "print('spun', flush=True)\n"
            "time.sleep(60)\n")
    if not detached:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "{code}" & echo $!'],
                            stdout=subprocess.PIPE, text=True)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/stat"), reason="Linux /proc")
def test_load_counts_this_process_children_as_its_own():
    """A pool worker or a torch peer is this bench's own work: its CPU, live or finished,
    is in own_seconds (so it never reads as other processes' load)."""
    from stepsim.bench._machine_load import own_seconds

    before = own_seconds()
    child = _spin(0.5, detached=False)
    assert child.stdout.readline().strip() == "spun"
    assert own_seconds() - before >= 0.45  # live: read from /proc
    child.kill()
    child.wait()
    assert own_seconds() - before >= 0.45  # finished and reaped: RUSAGE_CHILDREN


@pytest.mark.skipif(not __import__("os").path.exists("/proc/stat"), reason="Linux /proc")
def test_a_row_timed_while_other_processes_spin_is_unreliable_and_says_why():
    """Two processes that are not the bench's (left to init) burn a core each while a
    steady row is timed: its spread is narrow, but the row is UNRELIABLE for the load."""
    import os
    import signal

    bench = Bench(quick=True, stream=io.StringIO())
    pids = []
    try:
        for _ in bench.load.cores:
            shell = _spin(3.0, detached=True)
            pids.append(int(shell.stdout.readline()))
            shell.wait()
        time.sleep(0.2)
        bench.load.mark()
        times = bench.compare({"sleep": lambda: time.sleep(0.01)}, repeats=100)
        row = bench.emit("s", "steady", "sleep", times["sleep"], units=1)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    assert row["other_load"] > LOAD_LIMIT, row
    assert not row["reliable"]
    assert f"of the cores busy (limit {100 * LOAD_LIMIT:.0f}%)" in row["unreliable_because"]
    line = bench.stream.getvalue().splitlines()[-1]
    assert "UNRELIABLE: other processes kept" in line and " load " in line


def test_load_above_the_limit_is_a_reason_on_its_own():
    steady = Timing.of([1.0, 1.0, 1.0])
    assert unreliable_because(steady, None, LOAD_LIMIT) == ""
    assert unreliable_because(steady, None, None) == ""  # unknown (no /proc): spread judges
    assert unreliable_because(steady, None, 0.9) == (
        f"other processes kept 90% of the cores busy (limit {100 * LOAD_LIMIT:.0f}%)")


def test_compare_keeps_warm_up_out_of_the_timings():
    calls = itertools.count()

    def slow_first_two():  # e.g. a JIT compile, then a thread pool starting
        if next(calls) < 2:
            import time

            time.sleep(0.05)

    t = _bench().compare({"f": slow_first_two}, repeats=3)
    assert t["f"] < 0.01 and next(calls) == 5


def test_compare_until_stable_repeats_until_the_spread_settles():
    # a fake clock: every call of the watched function takes 1 s except in the first
    # attempt, whose samples are 1, 5, 1, 5, ... seconds
    durations = iter([1.0, 5.0, 1.0, 5.0, 1.0] + [1.0] * 100)
    now = [0.0]
    ticking = [False]

    def clock():
        if ticking[0]:
            now[0] += next(durations)
        ticking[0] = not ticking[0]
        return now[0]

    bench = _bench()
    attempts = []
    original = bench.compare

    def counting(impls, **kw):
        attempts.append(kw["repeats"])
        return original(impls, **kw)

    bench.compare = counting
    t = bench.compare_until_stable({"dense": lambda: None}, "dense", repeats=5, clock=clock)
    assert attempts == [5, 10] and t["dense"].spread == 0.0


def test_torch_peers_leave_numba_its_default_threading_layer():
    # torch peers run in a child process (stepsim.bench._torch_peer), so the bench measures
    # stepsim under the layer a user's run gets, never workqueue-because-of-torch
    code = ("import numba, numpy as np\n"
            "from stepsim.bench import choose_threading_layer\n"
            "print(choose_threading_layer(True))\n"
            "import stepsim\n"
            "stepsim.nm_mask(np.ones(64, np.float32), 2, 4)\n"
            "import sys\n"
            "print('torch' in sys.modules)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_THREADING_LAYER"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.splitlines()
    assert "separate process" in out[0] and "workqueue" not in out[0]
    assert out[1] == "False"


def test_torch_peer_process_times_steps_out_of_process():
    pytest.importorskip("torch")
    from stepsim.bench._torch_peer import TorchPeer

    with TorchPeer(threads=1) as peer:
        peer.build("r", "regression", problem={"d_in": 8, "d_hidden": 4, "d_out": 2})
        assert peer.time("r", 3) > 0
        small = {"channels": (8, 8), "n_train": 200, "n_validation": 40, "n_test": 50}
        for kind in ("mnist1d", "mnist1d-srste"):
            peer.build(kind, kind, problem=small)
            assert peer.time(kind, 2) > 0
        with pytest.raises(RuntimeError, match="torch peer failed on 'time'"):
            peer.time("missing", 1)


def test_train_section_runs_and_says_where_the_time_goes(monkeypatch):
    from stepsim.bench import train

    monkeypatch.setattr(train, "PROBLEM_OPTIONS", {"hidden": (16,), "batch_size": 8})
    monkeypatch.setattr(train, "SWITCH_AFTER", 2)
    bench = _bench()
    bench.compare = _fast_compare(bench.compare)
    train.run(bench)
    rows = {(r["case"], r["impl"]): r for r in bench.rows if "impl" in r}
    assert ("dense step", "stepsim (wall)") in rows
    for case in ("digits dense", "digits SR-STE 2:4", "digits SR-STE 1:8",
                 "lm (lm.md) 2x32 ctx32 b32", "lm (lm.md) SR-STE 1:8",
                 "lm defaults 2x64 ctx32 b32", "lm 2x128 ctx64 b32",
                 "regression", "mnist1d CNN 3x16 b64 dense", "mnist1d CNN 3x16 b64 SR-STE 2:4",
                 "mnist1d CNN 3x32 b128 dense"):  # fit's steps, the targets' rows
        assert rows[(f"fit step {case}", "stepsim fit")]["seconds"] > 0
    assert ("STEP sparse-phase step", "stepsim (wall)") in rows
    parts = {r["case"]: r for r in bench.rows if r["case"].endswith(" parts")}
    common = {"batch", "element-wise", "masks", "optimizer", "python", "products dense"}
    for case in ("digits SR-STE 2:4", "mnist1d CNN 3x16 b64 SR-STE 2:4",
                 "mnist1d CNN 3x16 b64 SR-STE 1:8"):  # the conv rule: dense at 16 channels
        assert set(parts[f"fit step {case} parts"]["parts_seconds"]) == common, case
    for case in ("digits SR-STE 1:8", "lm (lm.md) SR-STE 1:8"):  # the kept weights' products
        assert set(parts[f"fit step {case} parts"]["parts_seconds"]) == common | {
            "products sparse", "pack"}
    for label in ("dense", "sparse"):  # the policy's clock: cpu, or wall if BLAS threads
        found = [p for case, p in parts.items() if case.startswith(f"fit step {label} (")]
        assert found and set(found[0]["parts_seconds"]) == common, label
    crossover = [r for r in bench.rows if "rule_takes_sparse" in r]
    assert {r["rule_takes_sparse"] for r in crossover} == {True, False}
    assert all(r["dense_seconds"] > 0 and r["seconds"] > 0 for r in crossover)
    fits = [r for r in bench.rows if r["case"].startswith("fit dense")]
    assert [r["impl"] for r in fits] == ["thread policy", "all cores for numba and BLAS"]
    assert fits[0]["test_accuracy"] > 0.5  # 300 steps of a real run, not a stub


def test_the_cnns_replayed_products_are_sparse_where_its_convs_take_them():
    from stepsim.bench._products import replay
    from stepsim.core.masks import nm_mask
    from stepsim.nn import nm_linear
    from stepsim.problems.registry import make_problem

    for channels, batch, sparse in (((32, 32), 128, True), ((16, 16), 64, False)):
        problem = make_problem("mnist1d", channels=channels, batch_size=batch, nm=(1, 8),
                               n_train=200, n_validation=40, n_test=50)
        params = problem.init_params(np.random.default_rng(0))
        masks = {k: nm_mask(w, 1, 8, axis=-1) for k, w in params.items()
                 if problem.specs[k].sparse}
        fwd = nm_linear.ForwardWeights(
            {k: np.where(masks[k], w, 0).astype(w.dtype) if k in masks else w
             for k, w in params.items()}, masks, dict.fromkeys(masks, (1, 8)))
        dense, sparse_products = replay(problem, fwd, problem.sample_batch(
            np.random.default_rng(1)))
        dense()
        assert (sparse_products is not None) == sparse, channels
        if sparse:
            sparse_products()


def _fast_compare(compare):
    def fast(impls, **kw):
        kw["repeats"], kw["number"] = 2, 1
        return compare(impls, **kw)
    return fast


def test_sparse_fit_steps_train_on_exactly_nm_weights():
    from stepsim.bench.train import FitSteps
    from stepsim.problems.registry import make_problem
    from stepsim.recipes import make_recipe

    steps = FitSteps(make_problem("digits", hidden=(16,), batch_size=8),
                     make_recipe("step", switch_at=2), 100)
    steps.run(3)  # fit's own run: it switches after step 2
    assert steps.state.phase == 1 and steps.fit_run.result().switch_step == 2
    fwd, _ = steps.stepper.forward(steps.state, steps.params, steps.k + 1, steps.ctx)
    for name in ("w1", "w2"):
        groups = fwd[name].reshape(-1, 4)
        assert (np.count_nonzero(groups, axis=1) <= 2).all()


# --- the training thread policy -----------------------------------------------------------

def test_training_threads_sets_and_restores_numba_and_blas():
    import numba
    from threadpoolctl import threadpool_info

    from stepsim._ground.threads import training_threads

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    numba_before, blas_before = numba.get_num_threads(), blas_threads()
    with training_threads(kernels=1, blas=1) as got:
        assert numba.get_num_threads() == 1 and got["numba"] == 1 and got["blas"] == 1
        assert set(blas_threads()) <= {1}
    assert numba.get_num_threads() == numba_before and blas_threads() == blas_before
    with (pytest.raises(ValueError, match="kernels must be >= 1, got 0"),
          training_threads(kernels=0)):
        pass
    with (pytest.raises(ValueError, match="blas must be an int >= 1, None or 'auto'"),
          training_threads(blas="many")):
        pass


@pytest.mark.parametrize("load, cores, expected", [(9.0, 2, 1), (1.2, 2, None), (3.0, 8, None),
                                                    (50.0, 1, None)])
def test_auto_blas_uses_one_thread_only_on_a_busy_machine(monkeypatch, load, cores, expected):
    from stepsim._ground import threads as _threads

    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: cores)
    threads, why = _threads.auto_blas_threads()
    assert threads == expected and f"load {load:.1f}" in why


def test_a_ratio_is_unreliable_when_its_peer_timing_is():
    bench = _bench()
    steady = Timing.of([1.0, 1.0, 1.0])
    noisy = Timing.of([1.0, 3.0, 0.5, 2.0])
    row = bench.emit("s", "case", "torch", steady, units=1, ratio="stepsim is 9x torch",
                     partner=noisy)
    assert not row["reliable"] and "its peer's interquartile range" in row["unreliable_because"]
    assert bench.emit("s", "case", "torch", steady, units=1, partner=steady)["reliable"]


def test_portability_workers_run_pinned_and_unpinned_kernels(monkeypatch):
    """The portability section's two workers: the portable one runs the pinned Haswell
    kernels, the --fast one whatever OpenBLAS picks itself (here asked for Sandybridge),
    and each answers a case with seconds per step."""
    from stepsim._ground import portability as _portability
    from stepsim.bench import portability

    monkeypatch.setitem(_portability._ORIGINAL, "OPENBLAS_CORETYPE", "Sandybridge")
    workers = {fast: portability._start(fast, quick=True) for fast in (False, True)}
    try:
        kernels = {fast: w.stdout.readline().strip() for fast, w in workers.items()}
        assert kernels == {False: "Haswell", True: "Sandybridge"}
        case = "digits 64-256-256-10 SR-STE"
        # a difference of two timings: finite, but on a loaded machine not always > 0
        assert all(np.isfinite(portability._ask(w, case)) for w in workers.values())
    finally:
        for w in workers.values():
            w.stdin.close()
            w.wait(timeout=60)


def test_every_bench_section_is_registered_and_has_a_title_and_a_runner():
    """SECTIONS lists exactly the section modules of stepsim.bench, each with TITLE and run
    (the slow tests run them: test_cli's bench smoke tests)."""
    import importlib
    import pkgutil

    import stepsim.bench as bench_pkg
    from stepsim.bench import SECTIONS

    modules = {m.name for m in pkgutil.iter_modules(bench_pkg.__path__)
               if not m.name.startswith("_")}
    assert set(SECTIONS) == modules
    for name in SECTIONS:
        module = importlib.import_module(f"stepsim.bench.{name}")
        assert isinstance(module.TITLE, str) and module.TITLE and callable(module.run)


def test_the_workers_sections_job_mixes_are_the_checks_real_runspecs():
    """The mix the workers section times, built by the real code (no monkeypatch): an
    import or a Budget it can no longer make fails here, not after 44 s of `stepsim bench`
    (issue 28). C1 --quick's mix is part of the whole quick check's."""
    from stepsim.bench import workers
    from stepsim.experiments.run import RunSpec

    label, c1 = workers._mix(True)
    whole_label, whole = workers._mix(False)
    assert (label, whole_label) == (
        f"check C1 --quick, seed 0, first {workers.QUICK_MIX_RUNS} runs", "check --quick")
    assert len(c1) == workers.QUICK_MIX_RUNS
    assert c1 and all(isinstance(s, RunSpec) for s in c1)
    assert {s.digest for s in c1} < {s.digest for s in whole}
    for spec in c1[:2]:
        spec.check()


#: sections whose `stepsim bench --quick --only ...` run is a test of its own (with more
#: checks), so it is not run a second time by the every-section test
_ONCE = "test_cli.py::test_bench_quick_other_sections_print_each_row_once"
CLI_TESTED_ELSEWHERE = {"kernels": "test_cli.py::test_bench_quick_kernels_smoke",
                        "theorem1": _ONCE, "layout": _ONCE,
                        "workers": "test_workers_section_from_the_cli_times_a_new_worker_"
                                   "the_cache_and_the_check_mix"}


def _bench_cli(section: str, tmp_path, capsys) -> list[dict]:
    """`stepsim bench --quick --only SECTION --json PATH` as a user runs it: its rows."""
    from stepsim.bench import SECTIONS
    from stepsim.cli import main

    assert section in SECTIONS
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", section, "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["result"]["rows"]
    assert rows and {r["section"] for r in rows} == {section}
    assert all(r.get("seconds", r.get("step_seconds", 0)) > 0 for r in rows)
    assert "Traceback" not in capsys.readouterr().err
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("section", ["train", "lm", "portability"])
def test_every_bench_section_runs_from_the_cli_in_quick_mode(section, tmp_path, capsys):
    """`stepsim bench --quick --only SECTION` for every section, as a user runs it (issue
    28: an import error made every bench crash while the suite stayed green). Together with
    the tests of ``CLI_TESTED_ELSEWHERE``, every section of SECTIONS."""
    from stepsim.bench import SECTIONS

    assert set(SECTIONS) == {"train", "lm", "portability"} | set(CLI_TESTED_ELSEWHERE)
    _bench_cli(section, tmp_path, capsys)


@pytest.mark.slow
def test_workers_section_from_the_cli_times_a_new_worker_the_cache_and_the_check_mix(
        tmp_path, capsys):
    """`stepsim bench --quick --only workers` from the CLI, with the real job mix (check C1
    --quick's RunSpecs) and the real cached problems: a new worker's start-up, the build
    cache, and the mix with --jobs 1 and on the default pool. (One run of the section
    serves both checks; before, a second in-process run on a tiny monkeypatched mix made
    the row checks.)"""
    from stepsim.bench import workers

    rows = _bench_cli("workers", tmp_path, capsys)
    by = {(r["case"], r["impl"]): r for r in rows}
    new = by[("tiny RunSpec in a worker", "new worker")]
    assert new["startup_s"] > 0 and new["seconds"] > by[("tiny RunSpec in a worker",
                                                          "warm worker")]["seconds"]
    for label, _, _ in workers.CACHED:
        assert by[(f"build {label}", "cache hit")]["seconds"] > 0
    label, specs = workers._mix(True)
    mixed = [r for r in rows if r["case"] == f"{label}: {len(specs)} runs"]
    assert len(mixed) == 2 and mixed[0]["impl"] == "--jobs 1"
    assert mixed[1]["impl"].startswith("pool of") and all(r["seeds_per_s"] > 0 for r in mixed)


def test_an_sr_ste_case_is_timed_beside_torch_dense_and_judged_against_its_target(monkeypatch):
    """With the torch peer, an SR-STE case gets a row beside torch's *dense* step of the
    same model (interleaved in its rounds) and a line of the targets table."""
    pytest.importorskip("torch")
    from stepsim.bench import train

    case = ("digits SR-STE 1:8", "digits", {"nm": (1, 8), "hidden": (16,), "batch_size": 8},
            "sr-ste", {}, "digits-srste")
    monkeypatch.setattr(train, "RATIO_CASES", (case,))
    bench = Bench(quick=True, stream=io.StringIO(), torch_peers=True, load=_Idle())
    train._ratio_rows(bench)
    rows = {(r["case"], r.get("impl")): r for r in bench.rows}
    dense = rows[("fit step digits SR-STE 1:8", "torch dense 1 thread (peer)")]
    assert dense["seconds"] > 0 and len(dense["vs_torch_dense_rounds"]) == 5
    ours = rows[("fit step digits SR-STE 1:8", "stepsim fit")]["seconds"]
    assert dense["vs_torch_dense"] == pytest.approx(
        float(np.median(dense["vs_torch_dense_rounds"])))
    assert 0.02 < dense["seconds"] / ours / dense["vs_torch_dense"] < 50  # one clock
    target = rows[("target digits SR-STE 1:8", None)]
    assert target["target"] == 1.3 and target["verdict"] in ("MET", "MISSED", "UNRELIABLE")
    assert "targets (SR-STE step against torch's dense step" in bench.stream.getvalue()


def test_the_targets_table_says_met_missed_or_unreliable():
    from stepsim.bench import train

    assert train._target_for("lm", {"nm": (1, 8)}) == 2.0
    assert train._target_for("lm", {"nm": (2, 4)}) == 1.3
    assert train._target_for("lm", {}) == 1.3  # the problem's default N:M is 2:4
    assert train._target_for("digits", {"nm": (1, 16)}) == 1.3
    assert train._target_for("regression", {}) is None
    bench = _bench()
    train._report_targets(bench, [
        {"case": "a", "target": 1.3, "ratio": 1.31, "low": 1.2, "high": 1.4, "reliable": True},
        {"case": "b", "target": 2.0, "ratio": 1.99, "low": 1.9, "high": 2.1, "reliable": True},
        {"case": "c", "target": 1.3, "ratio": 3.0, "low": 1.0, "high": 5.0, "reliable": False}])
    verdicts = {r["case"]: r["verdict"] for r in bench.rows}
    assert verdicts == {"target a": "MET", "target b": "MISSED", "target c": "UNRELIABLE"}
