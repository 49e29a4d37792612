"""Issue 13's closing numbers: dense, SR-STE and STEP at 2:4 and 1:8 on the synthetic
language, 3 seeds, under Adam and under momentum SGD; test-loss gap to the entropy floor.

    python paper_checks/lm_closing.py [--steps 1500] [--jobs 3] [--out paper_checks/lm_closing.json]

Every run is ``stepsim.training.fit`` on ``make_problem("lm", **PROBLEM)`` with a recipe
from ``make_recipe(name, optimizer=...)``; STEP switches by AutoSwitch (the paper's
criterion). STEP freezes Adam's second moment, so it has no momentum-SGD variant
(``make_recipe("step", optimizer="sgdm")`` is refused); that cell is reported as n/a.
Each worker runs with one BLAS and one numba thread. Results (every run's metrics, the
mean and sd per cell) go to a JSON with provenance, and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

PROBLEM = {"vocab": 16, "order": 2, "temperature": 0.7, "context": 32, "width": 32,
           "blocks": 2, "heads": 2, "batch_size": 32, "n_test": 512, "seed": 0}
OPTIMIZERS = {"adam": {"lr": 1e-2}, "sgdm": {"lr": 1.0, "momentum": 0.9}}
RECIPES = {"dense": {}, "sr-ste": {}, "step": {}}
RATIOS = ((2, 4), (1, 8))
SEEDS = (0, 1, 2)


def cells():
    """(recipe, optimizer, nm or None, seed) of every run."""
    out = []
    for optimizer in OPTIMIZERS:
        for recipe in RECIPES:
            if recipe == "step" and optimizer == "sgdm":
                continue
            for nm in ((None,) if recipe == "dense" else RATIOS):
                out.extend((recipe, optimizer, nm, seed) for seed in SEEDS)
    return out


def run_one(args):
    recipe_name, optimizer, nm, seed, steps = args
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    from threadpoolctl import threadpool_limits

    from stepsim.problems.registry import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    problem = make_problem("lm", **PROBLEM)
    recipe = make_recipe(recipe_name, optimizer=optimizer, **OPTIMIZERS[optimizer])
    criterion = "autoswitch" if recipe_name == "step" else None
    with threadpool_limits(limits=1, user_api="blas"):
        result = fit(problem, recipe, steps, rng=seed, nm=nm, criterion=criterion,
                     progress=False, threads=1)
    return {"recipe": recipe_name, "optimizer": optimizer, "nm": nm, "seed": seed,
            "switch_step": result.switch_step, "metrics": result.metrics,
            "final_nm": {k: list(v) for k, v in result.nm.items()}}


def summarise(runs):
    import numpy as np

    table = {}
    for run in runs:
        key = (run["recipe"], run["optimizer"], None if run["nm"] is None else tuple(run["nm"]))
        table.setdefault(key, []).append(run)
    out = []
    for (recipe, optimizer, nm), group in sorted(table.items(), key=str):
        gaps = np.array([r["metrics"]["gap"] for r in group])
        rel = np.array([r["metrics"]["gap"] / r["metrics"]["entropy_floor"] for r in group])
        acc = np.array([r["metrics"]["accuracy"] for r in group])
        out.append({"recipe": recipe, "optimizer": optimizer,
                    "nm": None if nm is None else f"{nm[0]}:{nm[1]}", "runs": len(group),
                    "gap_mean": float(gaps.mean()), "gap_sd": float(gaps.std(ddof=1)),
                    "rel_gap_mean": float(rel.mean()), "accuracy_mean": float(acc.mean()),
                    "switch_steps": [r["switch_step"] for r in group]})
    return out


def markdown(rows, floor, steps):
    lines = [f"Test-loss gap to the entropy floor ({floor:.4f} nats/token), mean +- sd over "
             f"3 seeds, {steps} steps.", "",
             "| recipe | N:M | optimizer | gap (nats) | gap / floor | accuracy | switch steps |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['recipe']} | {r['nm'] or 'dense'} | {r['optimizer']} | "
                     f"{r['gap_mean']:.4f} +- {r['gap_sd']:.4f} | {100 * r['rel_gap_mean']:.1f}% "
                     f"| {r['accuracy_mean']:.3f} | {r['switch_steps']} |")
    lines.append("| step | any | sgdm | n/a (STEP freezes Adam's v) | | | |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--out", default="paper_checks/lm_closing.json")
    args = parser.parse_args(argv)
    from multiprocessing import get_context

    from stepsim._atomic import write_text
    from stepsim._provenance import save_json
    from stepsim.problems.markov import MarkovLanguage

    # STEP first: whether AutoSwitch fires is the first thing to know
    jobs = sorted((cell + (args.steps,) for cell in cells()), key=lambda c: c[0] != "step")
    with get_context("spawn").Pool(args.jobs) as pool:
        runs = []
        for run in pool.imap_unordered(run_one, jobs):
            runs.append(run)
            print(run["recipe"], run["optimizer"], run["nm"], run["seed"],
                  f"gap={run['metrics']['gap']:.4f}", f"switch={run['switch_step']}", flush=True)
    rows = summarise(runs)
    floor = MarkovLanguage(**{k: PROBLEM[k] for k in ("vocab", "order", "temperature", "seed")}
                           ).loss_floor(PROBLEM["context"])
    out = Path(args.out)
    save_json(out, {"rows": rows, "runs": runs, "entropy_floor": floor},
              params={"problem": PROBLEM, "optimizers": OPTIMIZERS, "steps": args.steps,
                      "seeds": list(SEEDS), "criterion": "autoswitch (step)"}, seed=list(SEEDS))
    write_text(out.with_suffix(".md"), markdown(rows, floor, args.steps))
    print(markdown(rows, floor, args.steps))


if __name__ == "__main__":
    main()
