"""``stepsim bench``: speeds measured in one run, each beside its peer, and printed.

A section is a module in this package with ``TITLE`` and ``run(bench)``; it times its
kernels with :meth:`Bench.compare`, which interleaves the implementations being compared
(this host's memory bandwidth drifts by +-30% over tens of seconds, so only ratios taken
back to back are trustworthy) and records rows with :meth:`Bench.emit`. Sections are
imported one by one, so the first figure prints before later sections load.
"""

from __future__ import annotations

import importlib
import sys
import time

SECTIONS = ("kernels", "theorem1", "layout", "train")


class Bench:
    """Collects rows; ``quick`` selects small sizes and few repeats."""

    def __init__(self, quick: bool, stream=None, torch_peers: bool = False):
        self.quick = quick
        self.torch_peers = torch_peers  # sections may also time PyTorch (optional peer)
        self.rows: list[dict] = []
        self.stream = stream or sys.stdout
        self.started = time.perf_counter()
        self.first_figure_s: float | None = None

    def compare(self, impls: dict, *, repeats: int | None = None, number: int = 1,
                clock=None) -> dict:
        """Median seconds per call of each callable in ``impls``, timed interleaved.

        Each implementation runs twice untimed first (compilation, cache loads and thread
        start-up never fall inside a timing), then ``repeats`` rounds each call every
        implementation ``number`` times in turn. clock: ``time.perf_counter`` (default,
        wall time) or e.g. ``time.thread_time`` (CPU time of this thread; only meaningful
        when all the work runs on it). Returns name -> :class:`Timing` (a float, the
        median, carrying the samples' spread).
        """
        clock = clock or time.perf_counter
        repeats = repeats or (5 if self.quick else 15)
        for fn in impls.values():
            fn()
            fn()
        samples = {name: [] for name in impls}
        for _ in range(repeats):
            for name, fn in impls.items():
                t0 = clock()
                for _ in range(number):
                    fn()
                samples[name].append((clock() - t0) / number)
        return {name: Timing.of(s) for name, s in samples.items()}

    def emit(self, section: str, case: str, impl: str, seconds: float, *, units: float,
             unit: str = "element", bytes_moved: float | None = None, show: bool = True,
             suffix: str = "", **extra) -> dict:
        """Record one measurement: ``seconds`` per call handling ``units`` units.

        extra: more fields of the row (e.g. ``ratio="12.3x numpy"``, printed after the
        figures). show: print the row (:func:`format_row`, then ``suffix``) right away.
        Returns the row (a dict, as saved in the JSON).
        """
        if self.first_figure_s is None:
            self.first_figure_s = time.perf_counter() - self.started
        row = {
            "section": section, "case": case, "impl": impl, "seconds": seconds,
            "units": units, "unit": unit, "ns_per_unit": 1e9 * seconds / units,
        }
        if bytes_moved is not None:
            row["gb_per_s"] = bytes_moved / seconds / 1e9
        row.update(extra)
        self.rows.append(row)
        if show:
            self.print(format_row(row) + suffix)
        return row

    def print(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)


class Timing(float):
    """A median time in seconds (a float) that also carries its samples' ``spread``:
    (75th - 25th percentile) / median, the interquartile range relative to the median."""

    spread: float = 0.0
    samples: int = 1

    @classmethod
    def of(cls, samples) -> Timing:
        s = sorted(samples)
        median = s[len(s) // 2]
        timing = cls(median)
        q1, q3 = s[len(s) // 4], s[(3 * len(s)) // 4]
        timing.spread = (q3 - q1) / median if median > 0 else float("inf")
        timing.samples = len(s)
        return timing


def format_row(row: dict) -> str:
    """One aligned line: case, implementation, ns per unit, GB/s and any ratio."""
    gb = f"{row['gb_per_s']:7.1f} GB/s" if "gb_per_s" in row else " " * 12
    ratio = f"  {row['ratio']}" if "ratio" in row else ""
    return (f"  {row['case']:<26} {row['impl']:<22} {row['ns_per_unit']:9.3f} "
            f"ns/{row['unit']:<8} {gb}{ratio}")


def run_bench(quick: bool = False, json_path=None, only=None, stream=None,
              torch_peers: bool = False) -> Bench:
    """Run every section (or those in ``only``), print the table, optionally save JSON."""
    from stepsim._provenance import save_json, versions

    unknown = set(only or ()) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown bench section(s) {sorted(unknown)}; "
                         f"choose from {list(SECTIONS)}")
    bench = Bench(quick, stream, torch_peers)
    from stepsim._jit import num_threads

    v = versions()
    bench.print(
        f"stepsim bench{' --quick' if quick else ''}: numba {v['numba']} "
        f"({num_threads()} threads), numpy {v['numpy']}, python {v['python']}"
    )
    for name in SECTIONS:
        if only and name not in only:
            continue
        try:
            module = importlib.import_module(f"stepsim.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"stepsim.bench.{name}":
                continue  # section not built yet
            raise
        bench.print(f"\n== {module.TITLE} ==")
        module.run(bench)
    bench.print(f"\nfirst figure after {bench.first_figure_s or 0:.2f} s; total "
                f"{time.perf_counter() - bench.started:.1f} s")
    if json_path:
        save_json(json_path, {"rows": bench.rows, "first_figure_s": bench.first_figure_s},
                  params={"quick": quick, "only": only, "torch": torch_peers})
        bench.print(f"saved {json_path}")
    return bench
