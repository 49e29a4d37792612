"""``stepsim bench``: speeds measured in one run, each beside its peer, and printed.

A section is a module in this package with ``TITLE`` and ``run(bench)``; it times its
kernels with :meth:`Bench.compare`, which interleaves the implementations being compared
(this host's memory bandwidth drifts by +-30% over tens of seconds, so only ratios taken
back to back are trustworthy) and records rows with :meth:`Bench.emit`. Sections are
imported one by one, so the first figure prints before later sections load.

The sections (``stepsim bench --only SECTION``, repeatable; ``--quick`` for small sizes,
``--json PATH`` to keep every figure with versions, ``--torch`` to time the PyTorch CPU
peers when torch is installed):

* ``kernels`` — N:M masks, Adam and momentum SGD beside NumPy and a bandwidth probe. ``nm_mask``
  with M = 4 or 8 runs an unrolled kernel vectorised across groups; other M (16, 32, ...)
  transpose each block so every loop runs across groups (ranks, or rounds of selection when
  N or M - N is small). :func:`stepsim.core.optim_many.adam_apply_many` updates every parameter of a
  model in one validated call (one kernel over a table of the arrays' addresses, compiled
  once per dtype whatever the number of layers), with the same bits as ``adam_apply`` per
  array followed by ``AdamStats.combine``.
* ``theorem1`` — the Theorem 1 engine in coordinate-steps per second.
* ``layout`` — 2:4 compression and the reference mma.sp matmul.
* ``train`` — digits MLP steps per second beside PyTorch (wall and single-thread CPU time),
  where a step's time goes, and ``fit`` with and without the thread policy
  (:func:`stepsim._ground.threads.training_threads`: numba kernels on one thread, BLAS on every
  core, or on one when the machine is busy).
* ``lm`` — the transformer's training steps beside the same model in PyTorch.
* ``portability`` — what "same bits on every CPU" costs (:mod:`stepsim._ground.portability`).
* ``workers`` — a pool worker's start-up and seeds per second of a check's job mix.

Rows whose samples spread too widely (interquartile range above ``SPREAD_LIMIT`` of the
median), that were timed while other processes kept more than ``LOAD_LIMIT`` of the cores
busy (:mod:`stepsim.bench._machine_load`), or that claim more than 100% of their probe's
bandwidth, print ``UNRELIABLE`` and why instead of a result; every row prints its spread
and the other processes' load.
"""

from __future__ import annotations

import importlib
import sys
import time

SECTIONS = ("kernels", "theorem1", "layout", "train", "lm", "portability", "workers")


class Bench:
    """Collects rows; ``quick`` selects small sizes and few repeats. load: what measures
    other processes' load per row (default a :class:`~stepsim.bench._machine_load.LoadMeter`;
    any object with ``mark()`` and ``other() -> float | None``)."""

    def __init__(self, quick: bool, stream=None, torch_peers: bool = False, load=None):
        self.quick = quick
        self.torch_peers = torch_peers  # sections may also time PyTorch (optional peer)
        self.rows: list[dict] = []
        self.stream = stream or sys.stdout
        self.started = time.perf_counter()
        self.first_figure_s: float | None = None
        if load is None:
            from stepsim.bench._machine_load import LoadMeter

            load = LoadMeter()
        self.load = load  # other processes' share of the cores, row by row (mark, other)

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

    def compare_until_stable(self, impls: dict, watch: str, *, tries: int = 4,
                             **kwargs) -> dict:
        """:meth:`compare`, repeated (up to ``tries`` times, more repeats each time) until
        the spread of ``impls[watch]`` is within ``SPREAD_LIMIT``; returns the last
        timings. If it never settles, the row :meth:`emit` makes of it says so."""
        repeats = kwargs.pop("repeats", None) or (5 if self.quick else 15)
        for attempt in range(tries):
            times = self.compare(impls, repeats=repeats * (attempt + 1), **kwargs)
            if times[watch].spread <= SPREAD_LIMIT:
                break
        return times

    def emit(self, section: str, case: str, impl: str, seconds: float, *, units: float,
             unit: str = "element", bytes_moved: float | None = None, show: bool = True,
             suffix: str = "", partner=None, **extra) -> dict:
        """Record one measurement: ``seconds`` per call handling ``units`` units.

        extra: more fields of the row (e.g. ``ratio="12.3x numpy"``, printed after the
        figures). partner: the :class:`Timing` the row's ratio divides by, if any: the row
        is unreliable if either timing is. show: print the row (:func:`format_row`, then
        ``suffix``) right away.
        Returns the row (a dict, as saved in the JSON).
        """
        if self.first_figure_s is None:
            self.first_figure_s = time.perf_counter() - self.started
        row = {
            "section": section, "case": case, "impl": impl, "seconds": float(seconds),
            "units": units, "unit": unit, "ns_per_unit": 1e9 * seconds / units,
        }
        if bytes_moved is not None:
            row["gb_per_s"] = bytes_moved / seconds / 1e9
        row.update(extra)
        other_load = self.load.other()  # since the previous row (at least a second back)
        self.load.mark()
        if other_load is not None:
            row["other_load"] = other_load
        problems = unreliable_because(seconds, extra.get("fraction_of_probe_bw"), other_load)
        partner_problems = unreliable_because(partner) if partner is not None else ""
        if partner_problems:  # a ratio is only as good as both of its timings
            problems = "; ".join(filter(None, [problems, f"its peer's {partner_problems}"]))
        if isinstance(seconds, Timing):
            row["spread"] = seconds.spread
        row["reliable"] = not problems
        if problems:
            row["unreliable_because"] = problems
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


SPREAD_LIMIT = 0.25  # interquartile range / median above which a timing cannot rank
# share of the usable cores other processes kept busy while a row was timed, above which
# the row measures the competition for the cores rather than the code
LOAD_LIMIT = 0.25


def unreliable_because(seconds, fraction_of_probe=None, other_load=None) -> str:
    """Why a timing is not a result ("" if it is one): samples spread too widely to rank,
    other processes kept too many cores busy while it was timed, or a kernel faster than
    the memory-traffic probe of its own pattern allows."""
    problems = []
    if other_load is not None and other_load > LOAD_LIMIT:
        problems.append(f"other processes kept {100 * other_load:.0f}% of the cores busy "
                        f"(limit {100 * LOAD_LIMIT:.0f}%)")
    spread = getattr(seconds, "spread", None)
    if spread is not None and spread > SPREAD_LIMIT:
        problems.append(f"interquartile range {100 * spread:.0f}% of the median (limit "
                        f"{100 * SPREAD_LIMIT:.0f}%): too wide to rank")
    if fraction_of_probe is not None and fraction_of_probe > 1.0:
        problems.append(f"{100 * fraction_of_probe:.0f}% of its probe's bandwidth is "
                        "impossible (the probe was disturbed)")
    return "; ".join(problems)


def format_row(row: dict) -> str:
    """One aligned line: case, implementation, ns per unit, spread (interquartile range
    relative to the median), other processes' load on the cores, GB/s and any ratio; a
    row that is not a result says UNRELIABLE and why instead of its ratio."""
    gb = f"{row['gb_per_s']:7.1f} GB/s" if "gb_per_s" in row else " " * 12
    spread = f"iqr {min(100 * row['spread'], 999):3.0f}%" if "spread" in row else " " * 8
    if "other_load" in row:
        spread += f" load {100 * row['other_load']:3.0f}%"
    ratio = f"  {row['ratio']}" if "ratio" in row else ""
    if row.get("unreliable_because"):
        ratio = f"  UNRELIABLE: {row['unreliable_because']}"
    return (f"  {row['case']:<26} {row['impl']:<22} {row['ns_per_unit']:9.3f} "
            f"ns/{row['unit']:<8} {spread} {gb}{ratio}")


def choose_threading_layer(torch_peers: bool) -> str:
    """numba's threading layer for this run: always the one a user's run gets.

    numba's OpenMP layer and torch's OpenMP runtime contend in one process (rows many
    times the probe's time), and switching numba to ``workqueue`` to avoid it made
    stepsim's kernels several times slower than users see them. So PyTorch peers run in a child
    process (:mod:`stepsim.bench._torch_peer`) and torch never loads here; numba keeps its
    default (or NUMBA_THREADING_LAYER). Returns a description for the header.
    """
    import os

    import numba

    if os.environ.get("NUMBA_THREADING_LAYER"):
        return f"{numba.config.THREADING_LAYER} (NUMBA_THREADING_LAYER)"
    peers = "; torch peers in a separate process" if torch_peers else ""
    return f"{numba.config.THREADING_LAYER} (numba's default{peers})"


def run_bench(quick: bool = False, json_path=None, only=None, stream=None,
              torch_peers: bool = False) -> Bench:
    """Run every section (or those in ``only``), print the table, optionally save JSON."""
    from stepsim._ground.provenance import save_json, versions

    if json_path is not None and not str(json_path).strip():  # never read as "do not save"
        raise ValueError("json_path: empty path; give a file name (None: do not save)")
    unknown = set(only or ()) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown bench section(s) {sorted(unknown)}; "
                         f"choose from {list(SECTIONS)}")
    bench = Bench(quick, stream, torch_peers)
    from stepsim._ground.jit import num_threads

    layer = choose_threading_layer(torch_peers)
    v = versions()
    bench.print(
        f"stepsim bench{' --quick' if quick else ''}: numba {v['numba']} "
        f"({num_threads()} threads, threading layer {layer}), numpy {v['numpy']}, "
        f"python {v['python']}"
    )
    from stepsim.bench._machine_load import load_average

    average = load_average()
    bench.print(f"{len(bench.load.cores)} usable cores; 1-minute load average "
                f"{'unknown' if average is None else f'{average:.2f}'} at the start; per row: "
                "iqr = the timings' interquartile range / median, load = the share of the "
                "cores other processes kept busy while it was timed")
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
        started = time.perf_counter()
        module.run(bench)
        bench.print(f"  ({name}: {time.perf_counter() - started:.1f} s)")
    bench.print(f"\nfirst figure after {bench.first_figure_s or 0:.2f} s; total "
                f"{time.perf_counter() - bench.started:.1f} s")
    bad = [r for r in bench.rows if not r.get("reliable", True)]  # info rows carry no timing
    if bad:
        bench.print(f"{len(bad)} of {len(bench.rows)} rows UNRELIABLE (spread above "
                    f"{100 * SPREAD_LIMIT:.0f}%, other processes' load above "
                    f"{100 * LOAD_LIMIT:.0f}% of the cores, or an impossible bandwidth): "
                    "rerun on an idle machine before comparing their figures")
    if json_path is not None:
        save_json(json_path, {"rows": bench.rows, "first_figure_s": bench.first_figure_s},
                  params={"quick": quick, "only": only, "torch": torch_peers})
        bench.print(f"saved {json_path}")
    return bench
