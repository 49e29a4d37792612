"""Exploratory, OUTSIDE the registered protocol: STEP among its successors (issue 24).

Every recipe on the same problem, N:M, paired seeds (each recipe sees the same
initialisation and batches at a seed) and one common learning rate: dense, SR-STE, STEP
(both readings: A1 = Algorithm 1, SR = with SR-STE's term in phase 2), S-STE (Hu, Zhu &
Chen, NeurIPS 2024), masked decay with dense fine-tuning (Hu et al., ICML 2024; its result
is a DENSE model, so also its N:M variant without the dense tail), transposable SR-STE, and
S-STE with STEP's precondition phase and frozen v. Each run's test error, whether it went
non-finite, and its mask flip rate per step (``Trace.flip_rate``) go to a JSON with
provenance, a Markdown table beside it and a figure of the flip rate vs step per recipe.

Not a verdict: one learning rate for all (SR-STE's tuned rate on the problem), few seeds,
no Holm correction. The registered comparison (issue 24, item 6) is ``stepsim check S1``
(PROTOCOL.md section S1: each recipe at its own tuned lr, 8 paired seeds, Holm).

    python paper_checks/successors.py [--quick] [--seeds 2] [--lr 3e-3] [--nm 1:8]
        [--steps 2000] [--jobs 2] [--out paper_checks/successors.json]

``--quick`` (tests): 60 steps, one seed, output under the given --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

LAM = 2e-4  # SR-STE's lambda, the protocol's (checks.protocol.RULES.srste_lam)

#: label -> (registry recipe, recipe options)
RECIPES = {
    "dense": ("dense", {}),
    "sr-ste": ("sr-ste", {"lam": LAM}),
    "step-a1": ("step", {}),
    "step-sr": ("step", {"srste_lam": LAM}),
    "s-ste": ("s-ste", {}),
    "masked-decay (dense result)": ("masked-decay", {}),
    "masked-decay, no dense tail": ("masked-decay", {"dense_tail": 0.0}),
    "transposable sr-ste": ("sr-ste", {"lam": LAM, "transposable": True}),
    "s-ste-step": ("s-ste-step", {}),
}
BETA2 = 0.99  # the protocol's fast timescale (T = 2000)


def spec_of(label, seed, *, nm, lr, steps):
    """The RunSpec of one run: digits with the protocol's options, Adam (beta2 of the fast
    timescale), STEP-type recipes switching by the default criterion (clipped AutoSwitch)."""
    from stepsim.checks.protocol import RULES
    from stepsim.experiments.run import RunSpec

    rules = RULES.problem("digits").to_dict()
    name, options = RECIPES[label]
    options = dict(options, lr=float(lr), beta2=BETA2)
    return RunSpec(problem=rules["registry"], problem_options=rules["options"], recipe=name,
                   recipe_options=options, nm=None if name == "dense" else tuple(nm),
                   steps=int(steps), seed=int(seed))


def one(job) -> dict:
    """Train one run: its error (test error, points), divergence, flip rate per step."""
    label, seed, nm, lr, steps = job
    spec = spec_of(label, seed, nm=nm, lr=lr, steps=steps)
    result = spec.run()
    m = result.metrics
    rate = result.trace.flip_rate
    return {"recipe": label, "seed": seed, "nm": list(nm), "lr": lr, "steps": steps,
            "error": 100.0 * (1.0 - m["test_accuracy"]),
            "diverged": result.stopped_at is not None, "switch_step": result.switch_step,
            "final_nm": {k: list(v) for k, v in result.nm.items()},
            "flip_rate": [None if x != x else float(x) for x in rate], "digest": spec.digest}


def compact(row, points: int = 100) -> dict:
    """``row`` with its per-step flip rate replaced by means over consecutive blocks of
    ceil(T / points) steps (``flip_rate_blocks``; block b covers steps b*B+1..(b+1)*B), so
    the JSON stays small; the figure and the table use every step."""
    import math

    rate = row["flip_rate"]
    size = max(1, math.ceil(len(rate) / points))
    blocks = []
    for lo in range(0, len(rate), size):
        vals = [x for x in rate[lo:lo + size] if x is not None]
        blocks.append(sum(vals) / len(vals) if vals else None)
    out = {k: v for k, v in row.items() if k != "flip_rate"}
    return dict(out, flip_rate_block=size, flip_rate_blocks=blocks)


def table(rows) -> str:
    groups = {}
    for r in rows:
        groups.setdefault(r["recipe"], []).append(r)
    lines = ["| recipe | error per seed (points) | mean | diverged | result N:M | "
             "mean flip rate, last 10% of steps |", "|---|---|---|---|---|---|"]
    for label, rs in groups.items():
        finite = [r["error"] for r in rs if not r["diverged"]]
        mean = sum(finite) / len(finite) if finite else float("nan")
        tails = []
        for r in rs:
            rate = [x for x in r["flip_rate"] if x is not None]
            tail = rate[-max(1, len(rate) // 10):] if rate else []
            tails.append(sum(tail) / len(tail) if tail else float("nan"))
        nms = [] if label == "dense" else sorted(
            {":".join(map(str, v)) for r in rs for v in r["final_nm"].values()})
        lines.append(f"| {label} | {', '.join(f'{e:.2f}' for e in finite) or '—'} | "
                     f"{mean:.2f} | {sum(r['diverged'] for r in rs)}/{len(rs)} | "
                     f"{', '.join(nms) or 'dense'} | "
                     f"{sum(tails) / len(tails):.2e} |")
    return "\n".join(lines) + "\n"


def figure(rows, path, note: str) -> Path:
    """Flip rate vs step per recipe (mean over seeds; a moving average over 1% of T)."""
    import numpy as np

    from stepsim.checks.plots import finish, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    groups = {}
    for r in rows:
        if r["recipe"] != "dense" and not r["diverged"]:
            groups.setdefault(r["recipe"], []).append(r["flip_rate"])
    for label, rates in groups.items():
        mean = np.nanmean(np.array(rates, dtype=np.float64), axis=0)
        width = max(1, len(mean) // 100)
        smooth = np.convolve(mean, np.ones(width) / width, mode="valid")
        steps = np.arange(1, len(smooth) + 1) + (width - 1)
        ax.plot(steps, np.where(smooth > 0, smooth, np.nan), label=label, lw=1.1)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("mask flip rate (fraction of mask entries changed)")
    ax.set_title("Mask flip rate per step (exploratory; digits)")
    ax.legend(fontsize=7, ncol=2)
    return finish(fig, path, note)


def main(argv=None) -> int:
    import stepsim  # noqa: F401  (portable BLAS before NumPy)
    from stepsim._ground.atomic import write_text
    from stepsim._ground.provenance import save_json
    from stepsim._ground.validate import NMRatio

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 steps, one seed (tests)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--nm", type=NMRatio.parse, default=(1, 8))
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).with_name("successors.json")))
    args = parser.parse_args(argv)
    steps, seeds = (60, 1) if args.quick else (args.steps, args.seeds)
    jobs = [(label, seed, tuple(args.nm), args.lr, steps) for label in RECIPES
            for seed in range(seeds)]
    if args.jobs > 1:
        from stepsim.experiments.executors import pool

        with pool(args.jobs) as ex:
            rows = list(ex.map(one, jobs))
    else:
        rows = [one(j) for j in jobs]
    out = Path(args.out)
    params = {"nm": list(args.nm), "lr": args.lr, "steps": steps, "seeds": seeds,
              "beta2": BETA2, "recipes": {k: [v[0], v[1]] for k, v in RECIPES.items()},
              "quick": args.quick}
    save_json(out, {"rows": [compact(r) for r in rows]}, params=params,
              seed=list(range(seeds)))
    nm = f"{args.nm[0]}:{args.nm[1]}"
    note = (f"digits {nm}, T = {steps}, Adam lr {args.lr:g}, beta2 {BETA2}, seeds "
            f"0..{seeds - 1} (paired); exploratory, outside the protocol")
    png = figure(rows, out.with_name(out.stem + "_flip_rate.png"), note)
    text = (f"# STEP among its successors (exploratory, outside the protocol)\n\n{note}.\n"
            f"Test error in points (100 per wrong image). Flip-rate figure: {png.name}.\n\n"
            + table(rows))
    write_text(out.with_suffix(".md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
