"""C3 (Fig. 3): the variance change Z_k = ||v_k - v_{k-1}||_1 / d falls below eps.

Quantity. Per evaluation seed, the dense Adam runs at the tuned learning rate (those of
C1/C5; Adam's eps = 1e-8): the smallest mean of Z_k over a window of T_w steps
(``traces.z_window``). Also at the loss multiplied by 0.01 and 100 (Z scales with the
loss squared): reported, not a part.

Effect. E = log10(eps / smallest windowed mean of Z), in decades (> 0: Z fell below eps);
margin 0.1 decades. A trace quantity: no test-set error. A run whose Z is exactly 0 over a
window counts as 30 decades.

Rule (PROTOCOL §6-7, registered before this evidence): premise T >= 5 T_w (true by the
protocol's run lengths; stated in the report); one part, decided by the generic rule.
"""

from __future__ import annotations

import math

from stepsim.checks import outcome, plots
from stepsim.checks.registry import Claim, register
from stepsim.checks.verdict import Evidence, decide_parts, effect_from, rule_of

EPS = 1e-8
SCALES = (1.0, 0.01, 100.0)


def _runs(budget):
    return {scale: budget.runs("dense", loss_scale=scale) for scale in SCALES}


def jobs(budget):
    return [j for group in _runs(budget).values() for j in group]


def _label(scale: float) -> str:
    return f"x{scale:g}"


def part_names(budget) -> tuple:
    """One part, the variance change at loss x1; from draft 5 (PROTOCOL.md D5.5) one per
    loss scale ("x0.01", "x1", "x100")."""
    if budget.rules.version >= 5:
        return tuple(_label(scale) for scale in sorted(SCALES))
    return ("x1",)


def _decades(view) -> float:
    """log10(eps / min windowed Z); 30 for Z exactly 0; NaN for a run without a finite Z."""
    m = view["z_window"]["min_mean"]
    if not math.isfinite(m):
        return math.nan
    return math.log10(EPS / m) if m > 0 else 30.0


def decide_claim(budget, results):
    runs = _runs(budget)
    per = {scale: [_decades(results[j.digest]) for j in group] for scale, group in runs.items()}
    lost = outcome.diverged(results, runs[1.0])
    values = [v if math.isfinite(v) else 0.0 for v in per[1.0]]
    e = effect_from(values, name="log10(eps / min windowed Z)", units="decades", margin=0.1)
    premise_ok = budget.steps >= 5 * budget.window
    if lost:
        parts = {"x1": outcome.lost("x1", f"{lost} dense run(s): no variance change to read",
                                   units="decades", margin=0.1)}
    elif premise_ok:
        parts = decide_parts({"x1": Evidence(e)})
    else:
        parts = {"x1": outcome.absent("x1", e, f"T = {budget.steps} < 5 T_w = "
                                     f"{5 * budget.window}")}
    views = [results[j.digest] for j in runs[1.0]]
    numbers = {"eps": EPS, "decades": {str(k): v for k, v in per.items()},
               "min_windowed_z": [v["z_window"]["min_mean"] for v in views],
               "at_step": [v["z_window"]["at_step"] for v in views], "steps": budget.steps,
               "window": budget.window, "premise": f"T = {budget.steps} >= 5 T_w = "
               f"{5 * budget.window}: {premise_ok}",
               "z_curves": [{"step": v["v_curve"]["step"], "z": v["v_curve"]["z"]}
                            for v in views]}
    return outcome.result(CLAIM, budget, parts, numbers)


def gather(budget, results):
    """Draft 5: one part per loss scale (Z scales with the loss squared, so each scale is
    its own reading of the claim), each with the run-length premise as a gate."""
    runs = _runs(budget)
    per = {scale: [_decades(results[j.digest]) for j in group] for scale, group in runs.items()}
    parts = {}
    for scale in sorted(SCALES):
        label = _label(scale)
        lost = outcome.diverged(results, runs[scale])
        if lost:
            parts[label] = outcome.lost(label, f"{lost} dense run(s): no variance change to "
                                        f"read", units="decades",
                                        margin=budget.rules.c3_margin_decades)
            continue
        values = [v if math.isfinite(v) else 0.0 for v in per[scale]]  # as at draft 4
        e = effect_from(values, name=f"log10(eps / min windowed Z) at loss {label}",
                        units="decades", margin=budget.rules.c3_margin_decades)
        gate = ("" if budget.steps >= 5 * budget.window else
                f"T = {budget.steps} < 5 T_w = {5 * budget.window}")
        parts[label] = Evidence(e, gate=gate)
    views = [results[j.digest] for j in runs[1.0]]
    numbers = {"eps": EPS, "decades": {str(k): v for k, v in per.items()},
               "min_windowed_z": [v["z_window"]["min_mean"] for v in views],
               "at_step": [v["z_window"]["at_step"] for v in views], "steps": budget.steps,
               "window": budget.window,
               "z_curves": [{"step": v["v_curve"]["step"], "z": v["v_curve"]["z"]}
                            for v in views]}
    return outcome.Gathered(parts, numbers)


def figure(result, path):
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    for i, c in enumerate(result.numbers["z_curves"]):
        ax.loglog(c["step"], c["z"], color="C0", lw=0.8, alpha=0.7,
                  label="Z_k = ||v_k - v_{k-1}||_1 / d (one line per seed)" if i == 0 else None)
    for i, m in enumerate(result.numbers["min_windowed_z"]):
        ax.axhline(m, color="C1", lw=0.6, ls=":",
                   label=f"smallest {result.numbers['window']}-step mean" if i == 0 else None)
    ax.axhline(result.numbers["eps"], color="k", lw=1, ls="--", label="Adam's eps = 1e-8")
    ax.set_xlabel("step k")
    ax.set_ylabel("Z_k (squared-gradient units per step)")
    ax.set_title(f"C3 (Fig. 3): variance change vs eps, dense Adam — {result.verdict}",
                 fontsize=9)
    ax.legend(fontsize=7)
    return plots.finish(fig, path, f"{result.problem}; seeds {list(result.seeds)}; "
                                    f"effect {result.effect}")


CLAIM = register(Claim(
    id="C3",
    title="Adam's variance change Z_k falls below eps during training (Fig. 3)",
    rule=rule_of(__doc__), jobs=jobs, decide=decide_claim, parts=part_names,
    figure=figure, gather=gather))
