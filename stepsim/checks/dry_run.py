"""``stepsim check --dry-run``: a plan in words, before any work.

:func:`describe` prints what a :class:`~stepsim.checks.planning.Plan` will do: per setting
and claim its runs and tasks, split into tuning and evaluation, how many are already in the
report directory's store (a resumed check does not run them again), and the worker time
the rest should take. The store is only read (nothing is created, run or written).

The worker time is a cost model: seconds of one worker per training step of each problem
and seconds per task function, taken from the runtimes recorded in the store (the median
over its runs of that problem or task) where it holds any, else from :data:`DEFAULT_RATES`
(per problem, and for digits per dense or N:M recipe); a transformer LM step counts
``execution.LM_STEP_WEIGHT`` digits steps when the store has digits runs but no LM run.
Each row says which source it used. A run already in the store counts its own recorded time.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from stepsim.checks.execution import LM_STEP_WEIGHT
from stepsim.checks.planning import Plan

#: the cost model without a store: seconds of one worker per training step of each
#: problem ("digits sparse": a digits run of an N:M recipe, whose masks and sparse
#: products cost more than a dense step), and per task function (module:function) at quick
#: mode's size, whatever the mode: estimates, from one run of each config at the full
#: run's settings (CPU seconds on 1 thread; PROTOCOL.md "Budget, quick mode, the extended
#: set", the amendment that moved parts to --extended)
DEFAULT_RATES = {"digits": 5.1e-4, "digits sparse": 9.2e-4, "mnist1d": 1.25e-3, "lm": 1.4e-2,
                 "stepsim.checks.c11_theorem1:process_job": 2.0,
                 "stepsim.checks.c12_memory:memory_job": 0.1}


class CostModel:
    """Seconds of worker time of a job: its own recorded time when the store holds it,
    else per problem (seconds per step) or per task function, from the store's recorded
    runtimes where it has some, else :data:`DEFAULT_RATES`."""

    def __init__(self, root: Path | None):
        self.recorded: dict[str, float] = {}  # digest -> seconds
        per: dict[str, list[float]] = {}
        for path in ([] if root is None or not Path(root).is_dir()
                     else sorted(Path(root).glob("[!.]*.json"))):
            try:
                params = json.loads(path.read_text())["provenance"]["params"]
                seconds = float(params["runtime_s"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            self.recorded[params.get("digest", path.stem)] = seconds
            run = params.get("run")
            if run is not None and run.get("steps"):
                per.setdefault(run["problem"]["name"], []).append(seconds / run["steps"])
            elif params.get("task"):
                per.setdefault(params["task"], []).append(seconds)
        self.measured = {k: statistics.median(v) for k, v in per.items()}

    def rate(self, key: str) -> tuple[float, str]:
        """(seconds per step of problem ``key`` or per run of task function ``key``, its
        source: "store" or "model")."""
        problem = key.removesuffix(" sparse")
        if problem in self.measured:
            return self.measured[problem], "store"
        if problem == "lm" and "digits" in self.measured:
            return LM_STEP_WEIGHT * self.measured["digits"], "store"
        return DEFAULT_RATES.get(key, DEFAULT_RATES.get(problem, DEFAULT_RATES["digits"])), \
            "model"

    def seconds(self, job) -> tuple[float, str]:
        """(worker seconds of ``job``, source: "recorded", "store" or "model")."""
        if job.digest in self.recorded:
            return self.recorded[job.digest], "recorded"
        if hasattr(job, "steps"):
            rate, source = self.rate(job.problem + ("" if job.recipe == "dense" else " sparse"))
            return rate * job.steps, source
        return self.rate(job.fn)


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def _row(label: str, jobs, stored: set, model: CostModel, final: bool,
         waiting: str = "after tuning") -> tuple[str, float]:
    """One line of the table and the worker seconds of its jobs not yet stored (jobs not
    ``final``: stand-ins whose number and steps are final, not their digests; ``waiting``
    says what they wait for)."""
    runs = sum(hasattr(j, "steps") for j in jobs)
    tasks = len(jobs) - runs
    what = ", ".join(x for x in (f"{runs} runs" if runs else "",
                                 f"{tasks} tasks" if tasks else "") if x) or "nothing"
    if not final:  # lrs not chosen yet: the digests are not the final ones
        todo = [model.seconds(j) for j in jobs]
        seconds = sum(s for s, _ in todo)
        return (f"  {label:<42} {what:<20} {waiting:<14} "
                f"{_hours(seconds):>10} ({_sources(todo)})"), seconds
    todo = [model.seconds(j) for j in jobs if j.digest not in stored]
    seconds = sum(s for s, _ in todo)
    have = sum(j.digest in stored for j in jobs)
    return (f"  {label:<42} {what:<20} {f'{have} stored':<14} "
            f"{_hours(seconds):>10} ({_sources(todo) if todo else 'all stored'})"), seconds


def _sources(pairs) -> str:
    found = sorted({s for _, s in pairs})
    return "/".join({"store": "store's rates", "model": "built-in model",
                     "recorded": "recorded"}[s] for s in found)


def describe(made: Plan, out: Path | None, workers: int) -> str:
    """The plan ``made`` in words (see the module docstring); ``out``: the report directory
    whose runs/ a check would resume from (None: none); workers: how many share the work."""
    from stepsim.checks import tuning
    from stepsim.checks.outputs import RUNS_DIR

    model = CostModel(None if out is None else Path(out) / RUNS_DIR)
    stored = set(model.recorded)
    rules = made.rules
    lines = [f"stepsim check ({made.mode}) — the plan; nothing is run",
             (f"protocol draft {rules.version} (rules SHA-256 {rules.digest[:16]}…); claims "
              f"{', '.join(made.claims)}" + (" (altered for testing)" if made.altered else "")),
             (f"report directory: {out if out is not None else 'none'}; its store holds "
              f"{len(model.recorded)} finished run(s) and task(s)")]
    if made.evaluation is not None and made.lrs is None and made.choices:
        lines.append(f"learning rates and regularisers: {made.choices}")
    elif made.evaluation is not None and made.lrs is None and made.mode == "quick":
        lines.append(f"learning rates: the committed full run's ({tuning.COMMITTED.name})")
    elif made.lrs is not None:
        lines.append("learning rates: given (a test's)")
    else:
        halving = getattr(rules.tuning, "halving", None)
        lines.append("learning rates: tuned first (each config at every grid value on the "
                     f"tuning seeds {list(rules.seeds.tuning)}"
                     + ("" if halving is None else
                        f"; {', '.join(halving.recipes)} at a constant lr by successive "
                        f"halving {halving.rule}: every lr to the first rung, the later "
                        "rungs and T for the best only") + ")")
    lines += ["", (f"  {'stage / setting / claim':<42} {'jobs':<20} {'in the store':<14} "
                   f"{'worker time':>10} (rates from)")]
    total = 0.0
    if made.tuning:
        per_setting = {}
        for where, group in made.tuning.items():
            per_setting.setdefault(where[0], {})[where] = group
        for setting, groups in per_setting.items():
            first = tuning.pending(groups, {})
            line, s = _row(f"tuning {setting} ({len(groups)} configs)", first, stored,
                           model, True)
            lines.append(line)
            total += s
            known = {t.digest for t in first}
            later = [t for t in tuning.planned(groups) if t.digest not in known]
            if later:  # successive halving's later rungs: which lrs go on is not known
                line, s = _row(f"tuning {setting}, later rungs", later, stored, model,
                               False, "after a rung")
                lines.append(line)
                total += s
    if made.stability:
        line, s = _row("tuning, --extended's extra seeds", made.stability_tasks, stored,
                       model, True)
        lines.append(line)
        total += s
    ev = made.evaluation
    jobs_of = ev.jobs if ev is not None else _per_claim(made)
    distinct, final = {}, set()
    for (claim, key), jobs in jobs_of.items():
        known = ev is not None or key == made.plain.key  # no learning rate to wait for
        lines.append(_row(f"evaluation {key} {claim}", jobs, stored, model, known)[0])
        distinct.update((j.digest, j) for j in jobs)
        final.update(j.digest for j in jobs if known)
    total += sum(model.seconds(j)[0] for d, j in distinct.items()
                 if d not in final or d not in stored)
    lines.append("")
    if ev is None and rules.readings is not None:
        aside = () if made.extended else rules.extended.secondary_problems or ()
        ties = [p for p in (made.problems or rules.problems) if p not in aside]
        lines.append("not counted above, their number depends on the runs: a choice at a "
                     "grid's edge runs that grid one value further (every pair of the new "
                     "value); " + (f"on {', '.join(ties)} SR-STE's tie set's readings (C5, "
                                   "C6 at every SR-STE candidate tied with the choice, per "
                                   "N:M) join the evaluation; " if ties else "")
                     + "a claim whose divergence alone differs, or whose seeds are bimodal "
                     f"(a run {rules.bimodal.far_margins:g} margins from its group's median), "
                     "runs again on the extension seeds "
                     f"{list(rules.divergence.extension_seeds)}")
    elif ev is None:
        lines.append("after tuning: the tie set's operating points (C5, C6 at every SR-STE lr "
                     "tied with the choice, per N:M) join the evaluation; their number "
                     "depends on the tuning and is not counted above")
    else:
        lines += [f"not run: {s}" for s in ev.skipped]
    lines.append(f"{len(distinct)} distinct evaluation job(s) (a run shared by claims runs "
                 f"once; each row counts it for its claim); worker time to go "
                 f"{_hours(total)}, about {_hours(total / max(workers, 1))} on {workers} "
                 f"worker(s)")
    return "\n".join(lines)


def _per_claim(made: Plan) -> dict:
    """(claim, setting key) -> its jobs once the choices are known, made with a stand-in
    choice per tuned config (a distinct learning rate each, so that runs at different
    configs' choices — STEP's own and SR-STE's — are counted apart, as they will run):
    their number is final, their digests are not."""
    from stepsim.checks.planning import evaluation

    chosen = {}
    for i, (setting, key) in enumerate(sorted(made.tuning)):
        first = made.tuning[(setting, key)]["grid"][0]
        chosen.setdefault(setting, {})[key] = float(f"{first * (1 + 1e-3 * (i + 1)):.12g}")
    return dict(evaluation(made, chosen, {}).jobs)


__all__ = ["DEFAULT_RATES", "CostModel", "describe"]
