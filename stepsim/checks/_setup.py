"""What every fit-based claim shares: the budget (quick/full), the problem, the error metric.

* :class:`Budget`: mode, seeds, steps and the problem the claims run on. Quick mode is for
  the machinery (3 seeds, short runs: seconds); full mode is the evidence (>= 5 seeds).
* :func:`error_of`: one number per run, lower is better, in stated units — the test
  error in percent when the problem reports ``accuracy``, else ln(test loss). A *gap*
  is a difference of errors between two recipes on the same seed (paired).
* :data:`MARGIN`: the smallest gap that counts as an effect, per unit, fixed before any
  result was seen: 0.5 accuracy points; 0.02 in ln test loss (a 2% relative change).
"""

from __future__ import annotations

import dataclasses
import math

ACCURACY_UNITS = "error points (%)"
LOSS_UNITS = "ln test loss"
MARGIN = {ACCURACY_UNITS: 0.5, LOSS_UNITS: 0.02}

#: The default problem of the fit-based claims: the synthetic regression with shapes that
#: take M up to 16 and a dense teacher (so sparse students can fall short); claims that
#: name no N:M run at 1:4 (the paper's second main ratio; ``nm`` here is the runs' default
#: N:M, given to each RunSpec as its ``nm``).
DEFAULT_PROBLEM = ("regression", {"d_in": 32, "d_hidden": 16, "d_out": 4, "scale": 0.1,
                                  "batch_size": 16, "noise": 0.1, "nm": (1, 4)})


@dataclasses.dataclass(frozen=True)
class Budget:
    """mode: "quick" | "full"; seeds: the seeds of every comparison (paired);
    steps: training steps of a run; problem, problem_options: the registry name and
    options (``stepsim.problems.registry``)."""

    mode: str
    seeds: tuple
    steps: int
    problem: str = DEFAULT_PROBLEM[0]
    problem_options: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_PROBLEM[1]))

    @property
    def label(self) -> str:
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.problem_options.items()))
        return f"{self.problem}({options}), {self.steps} steps"

    def fit(self, recipe: str, seed: int, *, steps: int | None = None, criterion=None,
            criterion_options=None, nm=None, loss_factor: float = 1.0, optimizer="adam",
            **recipe_options):
        """The :class:`~stepsim.experiments.run.RunSpec` of one training run on this
        budget's problem (N:M: ``nm``, else the budget's ``nm`` option, else the
        problem's; criterion None: none)."""
        from stepsim.experiments.run import RunSpec

        options = dict(self.problem_options)
        default_nm = options.pop("nm", None)
        nm = nm if nm is not None else default_nm
        return RunSpec(problem=self.problem, problem_options=options, recipe=recipe,
                       optimizer=optimizer, recipe_options=recipe_options,
                       criterion=criterion, criterion_options=criterion_options or {},
                       nm=None if nm is None else tuple(nm), steps=int(steps or self.steps),
                       seed=int(seed), loss_scale=float(loss_factor))


def budget(mode: str, *, problem: str | None = None, problem_options: dict | None = None,
           steps: int | None = None) -> Budget:
    """The budget of ``mode``: quick = 3 seeds x 1500 steps; full = 5 seeds x 4000 steps.

    problem, problem_options: a registry problem instead of ``DEFAULT_PROBLEM``; steps: a
    run length instead of the mode's (>= 1500, so that AutoSwitch's 1000-step window and a
    switch before and after it fit in a run).
    """
    if mode not in ("quick", "full"):
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    seeds, default_steps = ((0, 1, 2), 1500) if mode == "quick" else ((0, 1, 2, 3, 4), 4000)
    if steps is not None and (not isinstance(steps, int) or steps < 1500):
        raise ValueError(f"steps must be an integer >= 1500, got {steps!r}")
    steps = steps or default_steps
    kw = {}
    if problem is not None:
        kw = {"problem": problem, "problem_options": dict(problem_options or {})}
    return Budget(mode, seeds, steps, **kw)


def error_of(metrics: dict) -> tuple[float, str]:
    """(error, units) of a run's held-out metrics: 100 (1 - accuracy) or ln(test_loss)."""
    if "accuracy" in metrics:
        return 100.0 * (1.0 - float(metrics["accuracy"])), ACCURACY_UNITS
    if "test_accuracy" in metrics:
        return 100.0 * (1.0 - float(metrics["test_accuracy"])), ACCURACY_UNITS
    loss = float(metrics.get("test_loss", metrics.get("loss", math.nan)))
    return (math.log(loss) if loss > 0 else math.nan), LOSS_UNITS


def errors(results: dict, jobs) -> tuple[list[float], str]:
    """The error of each job's run (in the order of ``jobs``) and their common units."""
    values, units = [], set()
    for job in jobs:
        e, u = error_of(results[job.digest]["metrics"])
        values.append(e)
        units.add(u)
    if len(units) != 1:
        raise ValueError(f"runs report different metrics: {sorted(units)}")
    return values, units.pop()


def gaps(results: dict, jobs, reference_jobs) -> tuple[list[float], str]:
    """Per seed: error of ``jobs`` minus error of ``reference_jobs`` (paired by position)."""
    a, units = errors(results, jobs)
    b, _ = errors(results, reference_jobs)
    return [x - y for x, y in zip(a, b)], units


def within(values, low: float, high: float, ci_level: float = 0.95) -> tuple[str, str, object]:
    """(verdict, reason, Effect) of the claim "the mean of values lies in [low, high]".

    REPRODUCED if the t-CI of the mean lies inside [low, high]; NOT REPRODUCED if it lies
    entirely outside; INCONCLUSIVE otherwise (fewer than 2 values included).
    """
    from stepsim.checks.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, effect_of

    e = effect_of(values, name="mean", units="", margin=1.0, ci_level=ci_level)
    if e.n < 2:
        return INCONCLUSIVE, "fewer than 2 values: no interval", e
    if low <= e.ci_low and e.ci_high <= high:
        return REPRODUCED, f"CI [{e.ci_low:.3g}, {e.ci_high:.3g}] inside [{low:g}, {high:g}]", e
    if e.ci_high < low or e.ci_low > high:
        return NOT_REPRODUCED, (f"CI [{e.ci_low:.3g}, {e.ci_high:.3g}] outside "
                                f"[{low:g}, {high:g}]"), e
    return INCONCLUSIVE, f"CI [{e.ci_low:.3g}, {e.ci_high:.3g}] straddles [{low:g}, {high:g}]", e
