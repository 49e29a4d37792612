"""Bench section: N:M masks, Adam and momentum SGD beside NumPy and bandwidth probes.

Sizes are float32 element counts 2^16 (L2), 2^20 (L3) and 2^24 (DRAM); ``--quick``
skips 2^24. Each row says how long one call takes per element, the GB/s that implies
for the bytes the operation must move, and the ratio to its NumPy version; for the numba
kernels also the fraction of the bandwidth that a probe with the same memory traffic
(stepsim.bench._probe: in place for the optimizers, read-4-write-1 for masks) reached in
the same run.
"""

from __future__ import annotations

from functools import partial

import numpy as np

TITLE = "kernels: N:M masks, Adam, momentum SGD (float32)"

MASK_RATIOS = ((2, 4), (1, 4), (1, 8), (2, 8), (4, 16), (1, 16), (1, 32), (8, 32), (16, 32))
ADAM_BYTES = 28  # reads w, g, m, v; writes w, m, v (4 bytes each)
ADAM_FROZEN_BYTES = 20  # reads w, g, m, v; writes w, m
SGDM_BYTES = 20  # reads w, g, buf; writes w, buf
MASK_BYTES = 5  # reads a float32, writes a bool


def numpy_adam(w, g, m, v, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, freeze_v=False):
    """A plain vectorised NumPy Adam step (temporaries allowed), the baseline."""
    dt = w.dtype.type
    m *= dt(beta1)
    m += dt(1 - beta1) * g
    if not freeze_v:
        v *= dt(beta2)
        v += dt(1 - beta2) * g * g
    denom = np.sqrt(v / dt(1 - beta2**step) + dt(eps))
    w -= dt(lr / (1 - beta1**step)) * m / denom


def numpy_sgdm(w, g, buf, *, lr, momentum=0.9):
    dt = w.dtype.type
    buf *= dt(momentum)
    buf += g
    w -= dt(lr) * buf


def _sizes(quick: bool):
    return (1 << 16, 1 << 20) if quick else (1 << 16, 1 << 20, 1 << 24)


def _cases(bench):
    """(size, label, repeats, w0, g) for each benchmark size: float32 N(0, 1) weights and
    gradients, the same bits in every section that asks (seed 0)."""
    rng = np.random.default_rng(0)
    for size in _sizes(bench.quick):
        w0 = rng.standard_normal(size).astype(np.float32)
        g = rng.standard_normal(size).astype(np.float32)
        yield size, f"n=2^{size.bit_length() - 1}", _repeats(size, bench.quick), w0, g


def _repeats(size: int, quick: bool) -> int:
    if quick:
        return 3
    return 15 if size <= 1 << 20 else 5


def _probe_gbps(bench, size: int, label: str, reps: int, w0, g) -> dict:
    """GB/s of the two probes (see stepsim.bench._probe) at this size, as {pattern: GB/s}."""
    from stepsim.bench._probe import stream_4r1w, stream_4r3w

    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    out = np.empty(size, np.uint8)
    times = bench.compare({"inplace": partial(stream_4r3w, w, g, m, v),
                           "mask": partial(stream_4r1w, w0.view(np.uint32), out)}, repeats=reps)
    rows = {
        "inplace": bench.emit("kernels", f"probe 4r3w in place {label}", "numba stream",
                              times["inplace"], units=size, bytes_moved=ADAM_BYTES * size),
        "mask": bench.emit("kernels", f"probe 4r1w {label}", "numba stream", times["mask"],
                           units=size, bytes_moved=MASK_BYTES * size),
    }
    return {pattern: row["gb_per_s"] for pattern, row in rows.items()}


def run(bench) -> None:
    import stepsim
    from stepsim.core import reference

    for size, label, reps, w0, g in _cases(bench):
        m = np.zeros(size, np.float32)
        v = np.zeros(size, np.float32)
        probe = _probe_gbps(bench, size, label, reps, w0, g)

        for n, mm in MASK_RATIOS:
            times = bench.compare({
                "numba": partial(stepsim.nm_mask, w0, n, mm),
                "numpy": partial(reference.nm_mask, w0, n, mm),
            }, repeats=reps)
            _emit_pair(bench, f"nm_mask {n}:{mm} {label}", times, size, MASK_BYTES,
                       probe["mask"])

        for name, frozen, stats in (("adam_step", False, True),
                                    ("adam_step no stats", False, False),
                                    ("adam_step frozen v", True, True)):
            w = w0.copy()
            wn, mn, vn = w0.copy(), m.copy(), v.copy()
            v[:] = 1e-3  # a warm v, as mid-training
            vn[:] = 1e-3
            times = bench.compare({
                "numba": partial(stepsim.adam_step, w, g, m, v, step=10, lr=1e-9,
                                 freeze_v=frozen, stats=stats),
                "numpy": partial(numpy_adam, wn, g, mn, vn, step=10, lr=1e-9, freeze_v=frozen),
            }, repeats=reps)
            _emit_pair(bench, f"{name} {label}", times, size,
                       ADAM_FROZEN_BYTES if frozen else ADAM_BYTES, probe["inplace"])

        w, buf = w0.copy(), np.zeros(size, np.float32)
        wn, bufn = w0.copy(), np.zeros(size, np.float32)
        times = bench.compare({
            "numba": partial(stepsim.sgdm_step, w, g, buf, lr=1e-9),
            "numpy": partial(numpy_sgdm, wn, g, bufn, lr=1e-9),
        }, repeats=reps)
        _emit_pair(bench, f"sgdm_step {label}", times, size, SGDM_BYTES, probe["inplace"])

    from stepsim.bench._torch_peer import start_or_none

    peer = start_or_none(bench, threads=2)
    if peer is not None:
        bench.print("  -- PyTorch CPU peers (optional; in a separate process, 2 threads) --")
        try:
            run_torch_peers(bench, peer)
            bench.print("  -- Adam with statistics against torch's fused Adam, 1 thread each "
                        "(CPU time) --")
            adam_one_thread(bench, peer)
        finally:
            peer.close()


def _emit_pair(bench, case, times, size, bytes_per_el, probe_gbps):
    moved = bytes_per_el * size
    speedup = times["numpy"] / times["numba"]
    fraction = moved / times["numba"] / 1e9 / probe_gbps  # the row's gb_per_s / the probe's
    bench.emit("kernels", case, "numba", times["numba"], units=size, bytes_moved=moved,
               partner=times["numpy"],
               ratio=f"{speedup:6.1f}x numpy, {100 * fraction:4.0f}% of probe BW",
               speedup_vs_numpy=speedup, fraction_of_probe_bw=fraction)
    bench.emit("kernels", case, "numpy", times["numpy"], units=size, bytes_moved=moved)


def run_torch_peers(bench, peer) -> None:
    """torch's fused Adam and topk+scatter N:M masks (in the peer process,
    :mod:`stepsim.bench._torch_peer`) beside stepsim's adam_step (with and without
    statistics) and nm_mask, here under numba's own threading layer: rounds of calls,
    interleaved, each timed in its own process."""
    import time

    import stepsim
    from stepsim.bench import Timing

    for size, label, reps, w0, g in _cases(bench):
        w, m, v = w0.copy(), np.zeros(size, np.float32), np.full(size, 1e-3, np.float32)
        key = f"adam {size}"
        peer.build(key, "adam", size=size)
        calls = 3 if size >= 1 << 24 else (20 if size >= 1 << 20 else 200)
        stats = partial(stepsim.adam_step, w, g, m, v, step=10, lr=1e-9)
        plain = partial(stepsim.adam_step, w, g, m, v, step=10, lr=1e-9, stats=False)
        for fn in (stats, plain):
            fn()
            fn()
        samples = {"stats": [], "no stats": [], "torch": []}
        for r in range(max(reps, 5)):
            if r % 2:
                samples["torch"].append(peer.time(key, calls) / calls)
            for name, fn in (("stats", stats), ("no stats", plain)):
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples[name].append((time.perf_counter() - t0) / calls)
            if not r % 2:
                samples["torch"].append(peer.time(key, calls) / calls)
        times = {name: Timing.of(s) for name, s in samples.items()}
        bench.emit("kernels", f"adam_step {label}", "torch Adam(fused=True)", times["torch"],
                   units=size, bytes_moved=ADAM_BYTES * size, partner=times["stats"],
                   ratio=f"stepsim is {times['torch'] / times['stats']:.2f}x torch "
                         f"({times['torch'] / times['no stats']:.2f}x without stats)",
                   stepsim_vs_torch=times["torch"] / times["stats"])
        for n, mm in MASK_RATIOS:
            key = f"mask {size} {n}:{mm}"
            peer.build(key, "mask", size=size, n=n, m=mm)
            ours = partial(stepsim.nm_mask, w0, n, mm)
            ours()
            samples = {"numba": [], "torch": []}
            for r in range(max(reps, 5)):
                if r % 2:
                    samples["torch"].append(peer.time(key, calls) / calls)
                t0 = time.perf_counter()
                for _ in range(calls):
                    ours()
                samples["numba"].append((time.perf_counter() - t0) / calls)
                if not r % 2:
                    samples["torch"].append(peer.time(key, calls) / calls)
            t = {name: Timing.of(s) for name, s in samples.items()}
            bench.emit("kernels", f"nm_mask {n}:{mm} {label}", "torch topk+scatter",
                       t["torch"], units=size, bytes_moved=MASK_BYTES * size,
                       partner=t["numba"],
                       ratio=f"stepsim is {t['torch'] / t['numba']:.1f}x torch",
                       stepsim_vs_torch=t["torch"] / t["numba"])


def adam_one_thread(bench, peer) -> None:
    """stepsim's adam_step with the statistics AutoSwitch reads (and without) against
    torch's fused Adam, both on one thread, timed by their thread's CPU time in interleaved
    rounds (the peer asked for 1 thread for the rounds, then 2 again)."""
    import time

    import stepsim
    from stepsim._ground.threads import training_threads
    from stepsim.bench import Timing

    peer.threads(1)
    try:
        with training_threads(kernels=1, blas=1):
            for size, label, reps, w0, g in _cases(bench):
                w, m = w0.copy(), np.zeros(size, np.float32)
                v = np.full(size, 1e-3, np.float32)
                key = f"adam {size}"
                peer.build(key, "adam", size=size)
                calls = 3 if size >= 1 << 24 else (20 if size >= 1 << 20 else 200)
                ours = {"stats": partial(stepsim.adam_step, w, g, m, v, step=10, lr=1e-9),
                        "no stats": partial(stepsim.adam_step, w, g, m, v, step=10, lr=1e-9,
                                            stats=False)}
                for fn in ours.values():
                    fn()
                samples = {"stats": [], "no stats": [], "torch": []}
                for r in range(max(reps, 7)):
                    if r % 2:
                        samples["torch"].append(peer.time(key, calls, "cpu") / calls)
                    for name, fn in ours.items():
                        t0 = time.thread_time()
                        for _ in range(calls):
                            fn()
                        samples[name].append((time.thread_time() - t0) / calls)
                    if not r % 2:
                        samples["torch"].append(peer.time(key, calls, "cpu") / calls)
                t = {name: Timing.of(x) for name, x in samples.items()}
                bench.emit("kernels", f"adam_step {label} 1 thread", "torch Adam(fused=True)",
                           t["torch"], units=size, bytes_moved=ADAM_BYTES * size,
                           partner=t["stats"],
                           ratio=f"stepsim is {t['torch'] / t['stats']:.2f}x torch "
                                 f"({t['torch'] / t['no stats']:.2f}x without stats)",
                           stepsim_vs_torch=t["torch"] / t["stats"], threads=1)
    finally:
        peer.threads(2)
