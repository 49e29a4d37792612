"""The second stage of a check: run what the plan says, and read every job back.

:func:`execute` runs a :class:`~stepsim.checks.planning.Plan`'s tuning stage (if it has
one), chooses the learning rates (``tuning.choose``), fills in the evaluation stage
(``planning.evaluation``) and runs it, through an :class:`Executor` (in this process, a
local process pool or a Dask cluster: ``stepsim.experiments.executors``) and one
:class:`~stepsim.experiments.store.RunStore`: a job already in the store is not run again
(a killed check resumes; a run shared by claims runs once), and every job is read back from
the store (:func:`view`), so a resumed check and a straight one decide on the same numbers.
"""

from __future__ import annotations

import dataclasses
import math

from stepsim.checks import extension, planning, tuning


@dataclasses.dataclass(frozen=True)
class Executor:
    """Where the runs go: jobs (local worker processes; None every usable core, 1 this
    process), scheduler (a Dask address or client; None: local), progress (a progress
    line on stderr), label (the progress line's prefix)."""

    jobs: int | None = None
    scheduler: object = None
    progress: bool = True
    label: str = "stepsim check"
    #: digest -> seconds of every run this executor ran itself (not found in the store)
    made: dict = dataclasses.field(default_factory=dict, compare=False)

    def run(self, tasks, store, stage: str) -> dict:
        """Run the distinct ``tasks`` not yet in ``store`` (longest first), then read every
        one back: digest -> its view (:func:`view`). A run this call makes is read back as
        soon as it is saved, so the reading overlaps the runs still training."""
        from threadpoolctl import threadpool_limits

        from stepsim.experiments import executors

        distinct = {t.digest: t for t in tasks}
        for task in distinct.values():  # a STEP run stored without its diagnostics runs
            if lacks_diagnostics(store, task):  # again (same RunSpec, same bits)
                store.forget(task)
        views = {}

        def read_back(task, output):  # each run as it is saved, while the workers train on
            views[task.digest] = found = view(store, task)
            self.made[task.digest] = found["seconds"]

        # one BLAS thread here: after each small product of a read-back OpenBLAS's idle
        # threads spin, taking a core from the workers; the item errors are the same bits
        # with one thread or more
        with threadpool_limits(limits=1):
            executors.run(sorted(distinct.values(), key=cost, reverse=True), read_back,
                          jobs=self.jobs, scheduler=self.scheduler or None, store=store,
                          label=f"{self.label}: {stage}",
                          progress=None if self.progress else False, wait_note="check")
            # the runs finished before (a resumed check) or by another process
            return {d: views[d] if d in views else view(store, t) for d, t in distinct.items()}


@dataclasses.dataclass(frozen=True)
class Executed:
    """What :func:`execute` did: the evaluation stage it ran, its jobs' views (digest ->
    view), the tuning runs' views (empty when nothing was tuned) and the stability map's
    input (the tuning table with ``--extended``'s extra seeds; None without them)."""

    evaluation: planning.Evaluation
    results: dict
    tuned: dict
    stability_table: dict | None = None

    def compute(self) -> dict:
        """{"runs", "tuning_runs", "worker_s", "step_runs_without_diagnostics"}: every
        distinct run and task the check rests on and the sum of their own run times (also
        for runs a resumed check found finished)."""
        every = {**self.tuned, **self.results}
        return {"runs": len(every), "tuning_runs": len(set(self.tuned) - set(self.results)),
                "worker_s": sum(v["seconds"] for v in every.values()),
                "step_runs_without_diagnostics": undiagnosed(self.evaluation.jobs,
                                                             self.results)}


def execute(made: planning.Plan, store, executor: Executor) -> Executed:
    """Run ``made``: its tuning stage first when the learning rates come from it, in rounds
    (successive halving's rungs, each once the one below is known, ``tuning.pending``; a
    choice at a grid's edge extends that grid, ``tuning.extensions``; ``--extended``'s
    extra seeds for the stability map), then the evaluation stage, then (full mode) the
    extension stage's seeds for the claims whose divergence alone differs
    (``extension.extend``)."""
    tuned, stability, ev = {}, None, made.evaluation
    if ev is None:
        groups, stage, rounds = dict(made.tuning), "tuning", 0
        while True:  # rounds: each rung's runs once the one below is known; then a choice
            todo = tuning.pending(groups, tuned)  # at a grid's edge extends that grid
            if todo:
                rounds += 1
                tuned.update(executor.run(todo, store, stage if rounds == 1
                                          else f"{stage} (round {rounds})"))
                continue
            more = tuning.extensions(groups, tuned)
            if not more:
                break
            groups.update(more)
            stage = "tuning (grid edges)"
        chosen, table = tuning.choose(groups, tuned)
        if made.stability:
            seen = executor.run(made.stability_tasks, store, "stability")
            tuned = {**tuned, **seen}
            stability = tuning.extend_errors(table, tuning.choose(made.stability, seen)[1])
        ev = planning.evaluation(made, chosen, table)
    results = executor.run(ev.tasks, store, "evaluation")
    more = extension.extend(ev, results) if made.mode == "full" else None
    if more is not None:  # divergence alone differs somewhere: those claims on more seeds
        ev = more
        results.update(executor.run([t for t in ev.tasks if t.digest not in results], store,
                                    "extension seeds"))
    return Executed(ev, results, tuned, stability)


STEP_RECIPES = ("step", "layerwise-step")


def lacks_diagnostics(store, task) -> bool:
    """A STEP run stored before fit recorded its g^2/v* diagnostics (PROTOCOL.md
    "Diagnostics in every STEP run"): it is run again (same RunSpec, same bits) so that
    every STEP run carries them."""
    return getattr(task, "recipe", None) in STEP_RECIPES and store.lacks(task, "diagnostics")


def undiagnosed(jobs: dict, results: dict) -> int:
    """How many STEP runs (runs that froze v and switched) carry no g^2/v* record: runs a
    store kept from before the diagnostics were recorded."""
    seen, count = set(), 0
    for group in jobs.values():
        for t in group:
            if t.digest in seen or getattr(t, "recipe", None) not in STEP_RECIPES:
                continue
            seen.add(t.digest)
            v = results[t.digest]
            if v.get("switch_step") is not None and v.get("stopped_at") is None:
                count += not (v.get("switch") or {}).get("g2_over_vstar")
    return count


#: a transformer LM step costs this many MLP (digits) steps, for ordering only
LM_STEP_WEIGHT = 20.0
#: a training step of each problem in MLP (digits) steps, for ordering only (MNIST-1D's
#: CNN: its pilot's CPU time per step over digits')
STEP_WEIGHTS = {"lm": LM_STEP_WEIGHT, "mnist1d": 2.2}


def cost(task) -> float:
    """A rough relative cost for ordering the jobs, longest first. A Task (a Theorem 1
    simulation, a memory count) has no steps and goes first: C11's simulations are longer
    than a quick digits run, and a check that ends on them leaves workers idle."""
    if not hasattr(task, "steps"):
        return math.inf
    return task.steps * STEP_WEIGHTS.get(getattr(task, "problem", ""), 1.0)


def has_validation(task) -> bool:
    """Whether run ``task``'s problem holds a validation split (PROTOCOL.md "Splits":
    digits' ``validation_fraction``, the LM's and MNIST-1D's ``n_validation``)."""
    options = dict(task.problem_options)
    return bool(options.get("validation_fraction") or options.get("n_validation"))


def split_errors(problem, weights, stopped_at, split: str):
    """(per-item errors of ``split``, diverged): a run stopped as diverged (non-finite or
    blown up: ``stopped_at`` set), or whose finite weights still overflow the outputs,
    predicts nothing: its items are the problem's ``diverged_item_errors`` (every image
    wrong / the uniform prediction's loss)."""
    import numpy as np

    items = None
    if stopped_at is None:  # finite weights can still overflow the logits
        with np.errstate(over="ignore", invalid="ignore"):
            items = np.asarray(problem.item_errors(weights, split), dtype=np.float64)
    diverged = items is None or not bool(np.all(np.isfinite(items)))
    if diverged:
        items = np.asarray(problem.diverged_item_errors(split), dtype=np.float64)
    return items, diverged


def view(store, task) -> dict:
    """What a claim reads of a finished job: a run's ``traces.summary`` with its per-item
    test errors (``items``), their mean (``error``), ``diverged`` (the run went non-finite
    or blew up, ``stopped_at`` its step; its items are the problem's
    ``diverged_item_errors``), ``status`` (fit's: "completed", "non-finite", "blow-up"),
    and, when the problem has a validation split, ``validation_items`` and
    ``validation_error`` (the same on that split: what tuning reads); or a task's output;
    with ``seconds`` (its wall time when it ran)."""
    from stepsim.experiments import traces
    from stepsim.experiments.run import RunSpec

    loaded = store.load(task)
    if not isinstance(task, RunSpec):
        out = dict(loaded)
    else:
        out = dict(traces.summary(loaded))
        out["stopped_at"] = loaded.stopped_at
        out["status"] = loaded.status
        problem = task.build_problem()
        if hasattr(problem, "item_errors"):
            items, out["diverged"] = split_errors(problem, loaded.weights, loaded.stopped_at,
                                                  "test")
            out["items"], out["error"] = items, float(items.mean())
            if has_validation(task):
                held, lost = split_errors(problem, loaded.weights, loaded.stopped_at,
                                          "validation")
                out["diverged"] = out["diverged"] or lost
                out["validation_items"] = held
                out["validation_error"] = float(held.mean())
    out["seconds"] = store.runtime_s(task)
    return out


__all__ = ["Executed", "Executor", "cost", "execute", "has_validation", "lacks_diagnostics",
           "split_errors", "undiagnosed", "view"]
