"""stepsim report: statistics of a sweep directory — a markdown table and a figure."""

from __future__ import annotations

from stepsim.cli.args import OptionError, finite_float, seed

HELP = "summarise a sweep directory: mean and CI over seeds, paired tests, metric vs sparsity"


def add_arguments(parser) -> None:
    parser.add_argument("dir", metavar="DIR", help="a sweep directory (made by stepsim sweep)")
    parser.add_argument("--metric", default=None,
                        help="table column to summarise (default test_loss if present, "
                             "else final_loss)")
    parser.add_argument("--baseline", default=None,
                        help="recipe to pair every condition with on the same seeds "
                             "(default dense, when the sweep ran it; 'none' for no comparison)")
    parser.add_argument("--ci", choices=("t", "bootstrap"), default="t",
                        help="interval over seeds: Student t (default) or a seeded bootstrap")
    parser.add_argument("--confidence", type=finite_float, default=0.95,
                        help="CI level in (0, 1) (default 0.95)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--figure", metavar="PATH",
                        help="figure path (default DIR/METRIC_vs_sparsity.png)")


def run(args) -> int:
    from pathlib import Path

    from stepsim._ground.atomic import write_text
    from stepsim.cli.args import output_path
    from stepsim.experiments import load_table, plot_vs_sparsity, report_markdown

    for option, value in (("--metric", args.metric), ("--baseline", args.baseline)):
        if value is not None and not value.strip():
            raise OptionError(f"{option}: empty value; give a name")
    if args.figure is not None and not args.figure.strip():
        raise OptionError("--figure: empty path; give a file name (default "
                          "DIR/METRIC_vs_sparsity.png)")
    out = Path(args.dir)
    table = load_table(out)
    if not table.rows:
        raise ValueError(f"sweep directory {args.dir!r} has no finished runs yet")
    metric = args.metric or ("test_loss" if "test_loss" in table.columns else "final_loss")
    if metric not in table.columns:
        raise ValueError(f"--metric {metric!r} is not a column of the table; numeric columns: "
                         f"{[c for c in table.columns if _numeric(table.column(c))]}")
    figure = output_path(args.figure or str(out / f"{metric}_vs_sparsity.png"),
                         option="--figure", suffixes=(".png", ".pdf", ".svg"))
    output_path(str(out / f"report_{metric}.md"), option="DIR")
    recipes = sorted(set(table.column("recipe")))
    baseline = args.baseline or "dense"
    if baseline.lower() == "none":
        baseline = None
    elif args.baseline is not None and baseline not in recipes:
        raise OptionError(f"--baseline {baseline!r} is not a recipe of this sweep; recipes: "
                          f"{recipes} (or 'none' for no comparison)")
    text = report_markdown(table, metric, baseline=baseline, confidence=args.confidence,
                           method=args.ci, rng=args.seed)
    print(text)
    report = write_text(out / f"report_{metric}.md", text)
    plot_vs_sparsity(table, metric, figure, confidence=args.confidence, method=args.ci,
                     rng=args.seed)
    print(f"wrote {report} and {figure}")
    return 0


def _numeric(values) -> bool:
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
