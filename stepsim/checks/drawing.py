"""The figures of a check: each claim result's, drawn by its claim (``registry.Claim.draw``)
into a staging folder, in this process or on a pool of spawned processes.

Each figure is the same file whichever process draws it (one figure per file; nothing is
shared between figures), so the pool changes only how long the drawing takes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from stepsim.checks.registry import get_claim

FIGURES_DIR = "figures"  # a report's figures folder, beside report.json
#: fewer results than this draw their figures in this process: starting a process that
#: imports matplotlib costs more than it saves on a few figures
POOL_MIN = 8


def figure_workers(jobs, scheduler) -> int:
    """Local processes that draw the figures: ``jobs`` (every core when not given or when
    the runs went to a Dask scheduler), at most the usable cores."""
    from stepsim.experiments.executors import usable_cores

    cores = usable_cores()
    return min(cores if jobs is None or scheduler is not None else jobs, cores)


def draw_all(results, staging, workers: int) -> list:
    """Draw each claim result's figures into ``staging`` (None: none drawn): [(figure
    paths as report.json names them, seconds)], in the order of ``results``; on
    ``workers`` spawned processes (``executors.pool``) when there are at least
    :data:`POOL_MIN` results (the runs' workers are idle by then)."""
    if staging is None:
        return [((), 0.0)] * len(results)
    if workers <= 1 or len(results) < POOL_MIN:
        return [draw_one(r, staging) for r in results]
    from stepsim.experiments import executors

    # a claim that draws several figures (C11) goes first, so that the workers finish
    # together
    first = sorted(results, key=lambda r: not get_claim(r.claim).draws_several)
    # the check's kept pool when there is one (its workers are idle by now), else a new one
    with executors.pooled(min(workers, len(results))) as figure_pool:
        futures = {id(r): figure_pool.submit(draw_one, r, str(staging)) for r in first}
        try:
            return [futures[id(r)].result() for r in results]
        except BaseException:
            for f in futures.values():
                f.cancel()
            if not isinstance(sys.exc_info()[1], Exception):  # Ctrl-C: do not wait
                executors.stop_pool(figure_pool)
            raise


def draw_one(result, staging) -> tuple:
    """(figure paths under ``FIGURES_DIR``, seconds): ``result``'s figures drawn into
    ``staging`` by its claim (in this process or a figure worker)."""
    from stepsim.checks.claim_decisions import is_claim_line

    t0 = time.perf_counter()
    staging = Path(staging)
    if is_claim_line(result):  # a claim's line of readings: its readings draw the figures
        return (), time.perf_counter() - t0
    paths = get_claim(result.claim).draw(result, staging)
    return (tuple(str(Path(FIGURES_DIR) / Path(p).relative_to(staging)) for p in paths),
            time.perf_counter() - t0)


def stability_name(setting: str) -> str:
    """The file name of ``setting``'s stability figure."""
    return f"stability-{setting.replace('/', '-')}.png"


def draw_stability(stability: dict, staging) -> list:
    """The stability map's figures (``operating.stability_figure``), one per setting of
    ``stability``, into ``staging`` (None: none drawn); their report.json names."""
    from stepsim.checks import operating

    if staging is None:
        return []
    names = []
    for setting, rows in stability.items():
        path = Path(staging) / stability_name(setting)
        operating.stability_figure(setting, rows, path)
        names.append(str(Path(FIGURES_DIR) / path.name))
    return names


__all__ = ["FIGURES_DIR", "POOL_MIN", "draw_all", "draw_one", "draw_stability",
           "figure_workers", "stability_name"]
