"""Training steps per second of stepsim's transformer beside the same model in PyTorch.

One step is what :func:`stepsim.training.fit` does for the dense recipe -- the problem's
forward and backward on a minibatch plus an Adam update of every parameter -- against
torch.nn on the CPU with the same weights, the same minibatch and ``torch.optim.Adam(...,
fused=True)`` (torch's fastest CPU Adam; attention through
``F.scaled_dot_product_attention(is_causal=True)``). Both are timed interleaved in one
run (:meth:`Bench.compare`), at the same number of BLAS/torch threads.

The two steps are :mod:`stepsim.bench._lm_steps`'s. torch is optional: it is imported only
in the peer process.
"""

from __future__ import annotations

TITLE = "lm: transformer training step vs PyTorch"

# the bench's transformer: 2 blocks, width 128, context 64
BENCH_MODEL = {"vocab": 64, "order": 2, "context": 64, "width": 128, "blocks": 2, "heads": 4,
               "batch_size": 32}
QUICK_MODEL = {"vocab": 16, "order": 2, "context": 16, "width": 32, "blocks": 1, "heads": 2,
               "batch_size": 8}


def run(bench) -> None:
    """Steps/s of the bench transformer (quick: a tiny one) in stepsim, and in PyTorch beside
    it when the bench runs with torch peers (in a separate process, so that numba keeps
    its own threading layer here: :mod:`stepsim.bench._torch_peer`), with BLAS and torch
    at 1 and at 2 threads (quick: 1) and numba's kernels inline, as fit runs them. Rounds
    of steps alternate between the two, each timed in its own process."""
    import time

    import numba
    from threadpoolctl import threadpool_limits

    from stepsim.bench import Timing
    from stepsim.bench._lm_steps import step_functions
    from stepsim.bench._torch_peer import start_or_none

    options = QUICK_MODEL if bench.quick else BENCH_MODEL
    case = (f"{options['blocks']}x{options['width']} ctx{options['context']} "
            f"b{options['batch_size']}")
    tokens = options["batch_size"] * options["context"]
    ours, _ = step_functions(options, torch_peer=False)
    peer = start_or_none(bench)
    before = numba.get_num_threads()
    calls = 2 if bench.quick else 5
    rounds = 5 if bench.quick else 20
    try:
        if peer is not None:
            peer.build("lm", "lm", problem=options)
        # the same thread count for torch and OpenBLAS; numba's kernels on one thread, as
        # fit runs them (stepsim._ground.threads: under numba's OpenMP layer its spinning workers
        # take the cores from OpenBLAS's, many times slower steps on a small host);
        # quick: one thread only
        for threads in (1,) if bench.quick else (1, 2):
            numba.set_num_threads(1)
            if peer is not None:
                peer.threads(threads)
            samples = {"stepsim": [], "torch": []}
            with threadpool_limits(limits=threads, user_api="blas"):
                ours()
                ours()
                for r in range(rounds):
                    if peer is not None and r % 2:
                        samples["torch"].append(peer.time("lm", calls) / calls)
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        ours()
                    samples["stepsim"].append((time.perf_counter() - t0) / calls)
                    if peer is not None and not r % 2:
                        samples["torch"].append(peer.time("lm", calls) / calls)
            t = {k: Timing.of(v) for k, v in samples.items() if v}
            label = f"{case} {threads}thr"
            extra = {}
            if "torch" in t:
                bench.emit("lm", label, "torch fused Adam (peer)", t["torch"], units=tokens,
                           unit="token", steps_per_s=1 / t["torch"])
                extra["ratio"] = f"{t['torch'] / t['stepsim']:.2f}x torch"
                extra["partner"] = t["torch"]
            bench.emit("lm", label, "stepsim", t["stepsim"], units=tokens, unit="token",
                       steps_per_s=1 / t["stepsim"], **extra)
    finally:
        numba.set_num_threads(before)
        if peer is not None:
            peer.close()
