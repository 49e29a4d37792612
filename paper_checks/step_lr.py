"""Exploratory, OUTSIDE the registered protocol: STEP at learning rates other than SR-STE's.

The committed full check (``figures/check/``) follows PROTOCOL.md: STEP reuses SR-STE's
tuned learning rate, as the paper says. There STEP diverged (digits 1:8, lr 1e-2) or ended
near a model that knows nothing (LM, lr 1e-2). This script asks, after the fact, whether
STEP works at a smaller learning rate. It is a question for the next protocol draft, not
evidence for a verdict: the learning rates below were chosen after seeing the full run.

    python paper_checks/step_lr.py [--jobs 2] [--out paper_checks/step_lr.json]

Runs (the protocol's problems and timescales, ``stepsim.checks.budget.Budget``; 8 seeds on
digits, 4 on the LM): digits 1:8 main timescale, STEP-A1, STEP-SR and SR-STE at lr 1e-3
and 3e-3; LM 2:4 fast timescale, STEP-SR and SR-STE at lr 1e-3. Each run's error (digits:
test error in points; LM: test-loss gap to the entropy floor, nats), whether it went
non-finite and its switch step go to a JSON with provenance; a Markdown table beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DIGITS = [("digits", "main", key, (1, 8), lr, seed) for key in ("step-a1", "step-sr", "sr-ste")
          for lr in (1e-3, 3e-3) for seed in range(8)]
LM = [("lm", "fast", key, (2, 4), 1e-3, seed) for key in ("step-sr", "sr-ste")
      for seed in range(4)]


def run_spec(job):
    """The RunSpec of one run (the protocol's Budget at the job's problem and timescale)."""
    from stepsim.checks.budget import Budget

    problem, timescale, key, nm, lr, seed = job
    return Budget("full", problem, timescale, (seed,), lrs={}).run(
        key, seed, nm=nm, lr=lr, evaluate=False)


def row(job, spec, result) -> dict:
    """One run's error, divergence and switch step."""
    problem, timescale, key, nm, lr, seed = job
    m = result.metrics
    error = 100.0 * (1.0 - m["test_accuracy"]) if "test_accuracy" in m else m["gap"]
    return {"problem": problem, "timescale": timescale, "recipe": key, "nm": list(nm),
            "lr": lr, "seed": seed, "error": error, "diverged": result.stopped_at is not None,
            "switch_step": result.switch_step, "digest": spec.digest}


def table(rows) -> str:
    groups = {}
    for r in rows:
        groups.setdefault((r["problem"], r["recipe"], r["lr"]), []).append(r)
    lines = ["| problem | recipe | lr | mean error of finite runs | diverged | switch steps |",
             "|---|---|---|---|---|---|"]
    for (problem, recipe, lr), rs in groups.items():
        finite = [r["error"] for r in rs if not r["diverged"]]
        mean = sum(finite) / len(finite) if finite else float("nan")
        steps = sorted({r["switch_step"] for r in rs if r["switch_step"] is not None})
        span = f"{steps[0]}-{steps[-1]}" if steps else "—"
        lines.append(f"| {problem} | {recipe} | {lr:g} | {mean:.3g} | "
                     f"{sum(r['diverged'] for r in rs)}/{len(rs)} | {span} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import stepsim  # noqa: F401  (portable BLAS before NumPy)
    from stepsim._ground.atomic import write_text
    from stepsim._ground.provenance import save_json

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).with_name("step_lr.json")))
    args = parser.parse_args(argv)
    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    jobs = DIGITS + LM
    specs = [run_spec(j) for j in jobs]
    out = Path(args.out)
    # every finished run by digest: an interrupted script resumes where it stopped
    store = RunStore(out.with_suffix(".runs"))
    executors.run(specs, jobs=args.jobs, store=store, progress=None, label="step_lr")
    rows = [row(j, s, store.load(s)) for j, s in zip(jobs, specs)]
    save_json(out, {"rows": rows}, params={"jobs": [list(map(str, j)) for j in jobs]},
              seed=list(range(8)))
    write_text(out.with_suffix(".md"), "# STEP at other learning rates (exploratory, outside "
               "the protocol)\n\n" + table(rows))
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
