"""Learning rates chosen as the paper does (PROTOCOL §3): per config, on the tuning seeds.

A config (``protocol.config_key``: optimizer, tuned recipe, N:M or layer-wise M) is run at
every value of its problem's grid for its optimizer, once per tuning seed, at the
setting's timescale, without learning curves. The choice is the grid value with the
lowest mean final error over the tuning seeds; a run that went non-finite counts as
+infinity; ties go to the smaller lr. A choice at either end of the grid is flagged
(``edge``: "low" | "high" | None). STEP's readings reuse SR-STE's choice
(``protocol.TUNED_AS``). Tuning seeds are never reported as evidence.

:func:`committed` reads the choices of the committed full run (``tuned_lrs.json`` beside
this module), which quick mode reuses; a full run writes its own into its report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from stepsim.checks import protocol

COMMITTED = Path(__file__).with_name("tuned_lrs.json")


def jobs(needs: dict) -> dict:
    """``needs``: setting key -> (a Budget of that setting, set of config keys). Returns
    (setting, config) -> {"grid": [lr...], "tasks": [RunSpec...] (grid-major, seeds
    inner)}."""
    from stepsim.checks import _setup

    out = {}
    for setting, (budget, keys) in sorted(needs.items()):
        tuner = _setup.Budget(budget.mode, budget.problem, budget.timescale,
                              tuple(protocol.RULES["seeds"]["tuning"]), steps=budget.steps)
        for key in sorted(keys):
            optimizer, recipe, nm, m = protocol.parse_key(key)
            lrs = protocol.grid(budget.problem, optimizer)
            tasks = [tuner.run(recipe, seed, nm=nm, m=m, optimizer=optimizer, lr=lr,
                               evaluate=False)
                     for lr in lrs for seed in tuner.seeds]
            out[(setting, key)] = {"grid": lrs, "tasks": tasks, "seeds": len(tuner.seeds)}
    return out


def choose(tune_jobs: dict, results: dict) -> tuple[dict, dict]:
    """(chosen, table): chosen = setting -> config -> lr; table = setting -> config ->
    {"grid", "means" (mean final error per grid value, inf when a run diverged),
    "choice", "edge"}."""
    from stepsim.checks._setup import error

    chosen, table = {}, {}
    for (setting, key), group in tune_jobs.items():
        grid, per = group["grid"], group["seeds"]
        means = []
        for i, _ in enumerate(grid):
            views = [results[t.digest] for t in group["tasks"][i * per:(i + 1) * per]]
            means.append(math.inf if any(v["diverged"] for v in views)
                         else sum(error(v) for v in views) / len(views))
        best = min(range(len(grid)), key=lambda i: (means[i], grid[i]))
        edge = "low" if best == 0 else ("high" if best == len(grid) - 1 else None)
        chosen.setdefault(setting, {})[key] = grid[best]
        table.setdefault(setting, {})[key] = {"grid": grid, "means": means,
                                              "choice": grid[best], "edge": edge}
    return chosen, table


def committed() -> dict:
    """setting -> config -> lr of the committed full run (quick mode's learning rates)."""
    if not COMMITTED.exists():
        raise FileNotFoundError(f"{COMMITTED} is missing: quick mode reuses the learning "
                                "rates of the committed full run (stepsim check, full mode)")
    return json.loads(COMMITTED.read_text())["lrs"]


def write_committed(chosen: dict, path=None, *, source: str) -> Path:
    """Write ``chosen`` (setting -> config -> lr) as the committed choices, with the
    report they came from (``source``) and the rules digest they were tuned under."""
    from stepsim._atomic import write_text

    doc = {"source": source, "rules_sha256": protocol.rules_digest(), "lrs": chosen}
    return write_text(Path(path or COMMITTED), json.dumps(doc, indent=1, sort_keys=True) + "\n")
