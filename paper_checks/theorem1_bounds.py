"""Verification of the corrected Theorem 1 bounds (issue 25): violation rates and tightness.

    python paper_checks/theorem1_bounds.py [--quick] [--out paper_checks]

For AR(1) (rho 0.5, 0.9, 0.99; squashed g^2 = Phi(x) and Gaussian g), a sticky chain,
regime switching, two two-state chains with known lambda and the sine, each simulated in
the Theorem 1 engine (b2 = 0.999, the statement's k0, lags 1..10^4), this evaluates every
bound of ``stepsim.theorem1.bounds`` whose assumptions the process meets, at delta in
{0.05, 0.01} and d in {1, dim}: violation rate with its Clopper-Pearson upper end (95%,
per lag), bound / empirical (1 - delta)-quantile and bound / trivial bound over lags, and
bound / Chebyshev for A, A+, A'+, B+ and B'+ (A / Chebyshev is the issue's "done when"), and for
the corrected bound the share of the lags where the paper's bound fails (CP lower end >
delta) at which it is below the trivial bound (C11 part (c)'s measure). Writes
``theorem1_bounds.json`` (with provenance), ``theorem1_bounds.md`` (the table) and
``theorem1_bounds.png`` (the figure) into --out. Full: 500 trials x 100 coordinates per
process (~30 min on 2 busy cores; far more on an overloaded machine: ``--update --only
LABELS`` re-runs some processes and keeps the rest); --quick: 40 x 4, lags to 300 (~2 min
under load). ``--trials N`` runs another count of trials into ``theorem1_bounds_<N>trials.*``
(e.g. to settle a violation rate whose Clopper-Pearson upper end straddles delta).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

FULL = {"trials": 500, "dim": 100, "horizon": 10_000, "per_decade": 8}
QUICK = {"trials": 40, "dim": 4, "horizon": 300, "per_decade": 2}


def table(results) -> str:
    from stepsim.theorem1.verify import summary_rows

    head = ("| process | bound | d | delta | proved | n | max rate | max CP upper | <= delta "
            "| bound/quantile median (min) | bound/trivial median | share < trivial "
            "| share < trivial where paper fails | bound/Chebyshev median [min, max] |")
    lines = [head, "|" + "---|" * 14]
    for r in results:
        for row in summary_rows(r):
            oc = ("n/a" if row["over_chebyshev"] is None else
                  "{:.3g} [{:.3g}, {:.3g}]".format(*row["over_chebyshev"]))
            f = lambda x: "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) \
                else f"{x:.3g}"
            lines.append(
                f"| {row['process']} | {row['bound']} | {row['d']} | {row['delta']:g} | "
                f"{'yes' if row['proved'] else 'no'} | {row['n']} | {row['max_rate']:.3g} | "
                f"{row['max_ci_high']:.3g} | {'yes' if row['holds'] else '**NO**'} | "
                f"{f(row['ratio_quantile_median'])} ({f(row['ratio_quantile_min'])}) | "
                f"{f(row['ratio_trivial_median'])} | {f(row['share_below_trivial'])} | "
                f"{f(row['share_below_trivial_where_paper_fails'])} | {oc} |")
    return "\n".join(lines) + "\n"


def figure(results, path) -> None:
    """One panel per process: the bounds at d = 1, delta = 0.05, and the quantile; one legend
    for every line drawn (in the first empty panel, else below the panels)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from stepsim._ground.atomic import atomic_path

    n = len(results)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    # constrained layout keeps the (wrapped) title, the panel titles and labels inside
    slot = n < rows * cols  # an empty panel holds the legend, else it goes to the right
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols + (0 if slot else 2.2),
                                                  2.9 * rows + 0.4), dpi=90,
                             squeeze=False, layout="constrained")
    styles = {"paper": ("k-", "paper"), "chebyshev": ("C2--", "Chebyshev"),
              "gaussian": ("C1-", "A (Gaussian)"), "markov": ("C4-.", "B (Markov)"),
              "gaussian-chernoff": ("C3-", "A+ (Gaussian, exact Chernoff)"),
              "markov-chernoff": ("C6-", "B+ (Markov, exact Chernoff)"),
              "copula-chernoff": ("C8-", "A'+ (Gaussian copula, Chernoff)"),
              "sticky-chernoff": ("C7-", "B'+ (sticky chain, Chernoff)"),
              "corrected": ("C9-", "corrected = min of the proved"),
              "plugin": ("C5:", "plug-in (heuristic, median)")}
    legend = {}
    for ax, r in zip(axes.flat, results):
        lags = np.asarray(r["lags"], dtype=float)
        case = next(c for c in r["cases"] if c["d"] == 1 and c["delta"] == 0.05)
        for kind, (style, label) in styles.items():
            if kind in case["bounds"]:
                # the corrected bound is one of the proved ones at each lag: a wide pale band
                # under them, so the bound it equals stays visible
                wide = {"lw": 4, "alpha": 0.35, "zorder": 1} if kind == "corrected" else {}
                ax.loglog(lags, case["bounds"][kind]["bound"], style,
                          **({"lw": 1.2} | wide), label=label)
        if r["trivial"] is not None:
            ax.loglog(lags, r["trivial"], color="0.6", lw=1, ls=":", label="trivial")
        q = np.asarray(case["quantile"], dtype=float)
        keep = q > 0
        ax.loglog(lags[keep], q[keep], "C0o", ms=2.5, label="empirical 0.95-quantile")
        ax.set_title(r["label"], fontsize=8)
        ax.tick_params(labelsize=6)
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    for ax in axes.flat[n:]:
        ax.axis("off")
    order = [label for _, label in styles.values()] + ["trivial", "empirical 0.95-quantile"]
    labels = sorted(legend, key=order.index)
    handles = [legend[label] for label in labels]
    if slot:
        axes.flat[n].legend(handles, labels, fontsize=6.5, loc="center")
    else:
        fig.legend(handles, labels, fontsize=6.5, loc="outside right center")
    title = (f"Theorem 1 bounds vs simulation, one coordinate, delta = 0.05 "
             f"(b2 = {results[0]['beta2']}, k0 = {results[0]['k0']}, "
             f"{results[0]['trials']} trials x {results[0]['dim']} coords)")
    fig.suptitle(textwrap.fill(title, int(3.4 * cols * 14)), fontsize=8)  # ~14 chars/inch
    fig.supxlabel("lag k - k0", fontsize=7)
    fig.supylabel("|vhat_k - vhat_k0|", fontsize=7)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def _kept_results(path: Path, size: dict, args) -> dict:
    """The results already in path by label (for --update), checked to have our sizes."""
    import json

    if not args.only:
        raise SystemExit("--update needs --only (the processes to re-run)")
    doc = json.loads(path.read_text())["result"]
    if any(doc.get(k) != v for k, v in size.items()) or doc.get("quick") != args.quick:
        raise SystemExit(f"--update: {path} was made with other sizes; re-run everything")
    made = json.loads(path.read_text())["provenance"].get("created_utc")
    return {r["label"]: {"made": made, **r} for r in doc["results"]}


def _commit() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--out", default=str(Path(__file__).parent), help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated labels (default: all)")
    parser.add_argument("--trials", type=int,
                        help="trials per process instead of the mode's (500; --quick 40), "
                             "written to theorem1_bounds_<N>trials.* beside the default "
                             "files: more trials resolve a violation rate near delta")
    parser.add_argument("--update", action="store_true",
                        help="re-run only the --only processes and replace them in the JSON "
                             "already in --out (same sizes required); the others are kept, "
                             "and each process records the commit that made it")
    args = parser.parse_args(argv)
    from stepsim._ground.atomic import write_text
    from stepsim._ground.provenance import save_json
    from stepsim.theorem1.verify import default_specs, verify_one

    size = dict(QUICK if args.quick else FULL)
    if args.trials is not None:
        if args.trials < 1:
            parser.error(f"--trials must be >= 1, got {args.trials}")
        size["trials"] = args.trials
    specs = default_specs()
    if args.only:
        keep = set(args.only.split(","))
        specs = [s for s in specs if s[0] in keep]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = ("theorem1_bounds" + ("_quick" if args.quick else "")
            + (f"_{args.trials}trials" if args.trials is not None else ""))
    command = ("python paper_checks/theorem1_bounds.py" + (" --quick" if args.quick else "")
               + (f" --trials {args.trials} --seed {args.seed}" if args.trials is not None
                  else "") + (f" --only '{args.only}'" if args.trials and args.only else ""))
    kept = _kept_results(out / f"{stem}.json", size, args) if args.update else {}
    commit = _commit()
    fresh = {}
    for label, process in specs:
        print(f"{label} ...", flush=True)
        fresh[label] = {"made": f"commit {commit}" if commit else "this run",
                        **verify_one(label, process, seed=args.seed, **size)}
    order = [label for label, _ in default_specs()]
    results = [fresh.get(label, kept.get(label)) for label in order
               if label in fresh or label in kept]
    save_json(out / f"{stem}.json", {"results": results, "quick": args.quick, **size},
              params={"quick": args.quick, "only": args.only, "update": args.update, **size},
              seed=args.seed)
    text = (f"# Theorem 1 bounds: verification ({'QUICK, ' if args.quick else ''}"
            f"{size['trials']} trials x {size['dim']} coordinates, seed {args.seed})\n\n"
            f"Made by `{command}`; numbers in `{stem}.json`.\n\n"
            + table(results) + "\nWhen each process was simulated (`--update` re-runs some "
            "and keeps the others; the bounds of a kept process are those of its run):\n\n"
            + "".join(f"- {r['label']}: {r.get('made', 'this run')}\n" for r in results))
    write_text(out / f"{stem}.md", text)
    figure(results, out / f"{stem}.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
