"""What "same bits on every CPU" costs (stepsim._ground.portability, stepsim._ground.libm).

Two prices are measured:

* **Pinned OpenBLAS kernels.** Two worker processes run the same training steps, one
  portable (OpenBLAS pinned to its Haswell kernels, the default) and one as
  ``stepsim --fast`` runs (OpenBLAS picks this CPU's own kernels, e.g. SkylakeX on
  AVX-512). The parent asks them for timings in turn, round after round, so both see the
  same drift of the shared machine; the row is the portable step's time and how many times
  longer a --fast step takes (above 1: the pin costs nothing; below 1: its price). The
  kernel family can only be chosen when a process loads OpenBLAS, hence two processes. On
  an AVX2 machine both run Haswell/Zen kernels.
* **glibc's scalar exp** (:mod:`stepsim._ground.libm`) against NumPy's SIMD ``np.exp``, on a
  float32 array the size of the LM's logits: the softmax cross-entropy pays it each step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

TITLE = "portability: the cost of same bits on every CPU"

# case -> (problem, options, recipe, steps per timing)
CASES = {
    "digits 64-256-256-10 SR-STE": ("digits", {"hidden": (256, 256)}, "sr-ste", 100),
    "lm (bench model) SR-STE": ("lm", {"vocab": 64, "order": 2, "context": 64, "width": 128,
                                       "blocks": 2, "heads": 4, "batch_size": 32,
                                       "n_test": 64},  # each fit's final evaluation: small
                                "sr-ste", 8),
}
#: --quick (a smoke run of the section): steps per timing (the bench LM's steps are its slowest)
QUICK_STEPS = {"digits 64-256-256-10 SR-STE": 30, "lm (bench model) SR-STE": 1}


def _worker_env(fast: bool) -> dict:
    from stepsim._ground import portability as _portability

    env = dict(os.environ)
    env.pop(_portability.FAST_ENV, None)
    if fast:
        env[_portability.FAST_ENV] = "1"
        _portability.restore_coretype(env)
    return env


def _start(fast: bool, quick: bool):
    return subprocess.Popen([sys.executable, "-m", "stepsim.bench.portability", "--worker",
                             "--quick" if quick else "--full"],
                            env=_worker_env(fast), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1,
                            # the fast worker's "not portable" warning is the point here
                            stderr=subprocess.DEVNULL if fast else None)


def _ask(worker, case: str) -> float:
    worker.stdin.write(case + "\n")
    return float(worker.stdout.readline())


def run(bench) -> None:
    import numpy as np

    from stepsim._ground import libm as _libm
    from stepsim.bench import Timing

    workers = {"portable": _start(False, bench.quick), "fast": _start(True, bench.quick)}
    try:
        kernels = {name: worker.stdout.readline().strip() for name, worker in workers.items()}
        bench.print(f"  OpenBLAS kernels: portable {kernels['portable']}, --fast "
                    f"{kernels['fast']}")
        rounds = 3 if bench.quick else 9
        for case in CASES:
            samples = {name: [] for name in workers}
            for _ in range(rounds):
                for name, worker in workers.items():
                    samples[name].append(_ask(worker, case))
            t = {name: Timing.of(s) for name, s in samples.items()}
            bench.emit("portability", case, f"step, pinned {kernels['portable']}",
                       t["portable"], units=1, unit="step", partner=t["fast"],
                       ratio=f"--fast ({kernels['fast']}) takes "
                             f"{t['fast'] / t['portable']:.2f}x this time")
    finally:
        for worker in workers.values():
            worker.stdin.close()
            worker.wait(timeout=60)

    x = -np.random.default_rng(0).random(32 * 64 * 64).astype(np.float32) * 10
    t = bench.compare({"libm": lambda: _libm.exp(x), "numpy": lambda: np.exp(x)})
    bench.emit("portability", f"exp float32, {x.size} entries", "stepsim._ground.libm",
               t["libm"], units=x.size, partner=t["numpy"],
               ratio=f"{t['numpy'] / t['libm']:.2f}x np.exp")


def _worker(quick: bool) -> None:
    """Child: print the OpenBLAS kernel family, then for every case name read from stdin
    the seconds per training step: (time of a 2n-step fit - time of an n-step fit) / n,
    so set-up and the final evaluation cancel."""
    import time

    from stepsim._ground import portability as _portability
    from stepsim.problems import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    print(_portability.blas_kernel(), flush=True)
    built = {}
    for line in sys.stdin:
        case = line.strip()
        name, options, recipe, steps = CASES[case]
        if quick:
            steps = QUICK_STEPS[case]
        if case not in built:
            built[case] = (make_problem(name, **options), make_recipe(recipe))
            fit(*built[case], 2, rng=0, progress=False)  # compile and warm up
        problem, rec = built[case]
        seconds = []
        for n in (steps, 2 * steps):
            t0 = time.perf_counter()
            fit(problem, rec, n, rng=0, progress=False)
            seconds.append(time.perf_counter() - t0)
        print(json.dumps((seconds[1] - seconds[0]) / steps), flush=True)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker("--quick" in sys.argv)
