"""stepsim sweep: run a seeded grid of training runs (resumable; local pool or Dask)."""

from __future__ import annotations

from stepsim.cli._args import key_values

HELP = "run a grid of recipes x N:M x seeds (TOML/JSON spec or flags); resumes after a kill"


def add_arguments(parser) -> None:
    parser.add_argument("spec", nargs="?", metavar="SPEC",
                        help="sweep spec, a .toml or .json file (see stepsim.experiments.spec); "
                             "the grid flags below override its fields")
    parser.add_argument("--out", metavar="DIR",
                        help="sweep directory (default sweeps/SPEC-NAME); run the same command "
                             "again to resume: finished runs are skipped")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="local worker processes, one numba thread each (default: every "
                             "core; 1 runs in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on Dask distributed at this scheduler address "
                             "(e.g. tcp://10.0.0.5:8786) instead of the local pool")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the spec and list the runs; train nothing")
    grid = parser.add_argument_group(
        "grid on the command line", "a comma list of values is a grid axis (a tuple-valued "
        "option, e.g. teacher_nm, needs a SPEC file)")
    grid.add_argument("--recipes", metavar="A,B,...", help="e.g. dense,asp,sr-ste,step")
    grid.add_argument("--optimizer", default=None, help="adam (default), adamw or sgdm")
    grid.add_argument("-o", "--option", action="append", metavar="KEY=V[,V...]",
                      help="recipe/optimizer option for every recipe, repeatable (lr=1e-3)")
    grid.add_argument("--criterion", metavar="NAME",
                      help="criterion for recipes that need one (default autoswitch)")
    grid.add_argument("-c", "--criterion-option", action="append", metavar="KEY=VALUE",
                      help="option of that criterion, repeatable (one value each)")
    grid.add_argument("--problem", metavar="NAME", help="problem name (default regression)")
    grid.add_argument("-p", "--problem-option", action="append", metavar="KEY=V[,V...]",
                      help="problem option, repeatable (scale=0.1, batch_size=16,64)")
    grid.add_argument("--nm", metavar="N:M[,N:M...]", help="e.g. 2:4,1:8")
    grid.add_argument("--steps", metavar="T[,T...]", help="training steps (default 2000)")
    grid.add_argument("--seeds", metavar="K", help="seed count K (indices 0..K-1) or a list 0,3,7")


def _values(text: str) -> list:
    from stepsim.cli.train import _value

    return [_value(part.strip()) for part in text.split(",")]


def _split_grid(items, option: str) -> tuple[dict, dict]:
    """KEY=V options -> (fixed options, grid of those given several comma values)."""
    fixed, grid = {}, {}
    for key, values in key_values(items, option, _values).items():
        if len(values) == 1:
            fixed[key] = values[0]
        else:
            grid[key] = values
    return fixed, grid


def build_spec(args) -> dict:
    """The spec dict: SPEC's contents (if given) with the grid flags applied on top."""
    from stepsim.experiments.spec import read_spec_file

    data = read_spec_file(args.spec) if args.spec else {}
    if args.recipes:
        fixed, grid = _split_grid(args.option, "--option")
        data["recipes"] = [{"name": r.strip(), "options": fixed, "grid": grid,
                            **({"optimizer": args.optimizer} if args.optimizer else {})}
                           for r in args.recipes.split(",")]
    elif args.option or args.optimizer:
        raise ValueError("--option/--optimizer apply to --recipes; give --recipes too")
    if args.criterion or args.criterion_option:
        from stepsim.cli.train import _value

        opts = key_values(args.criterion_option, "--criterion-option", _value)
        data["criterion"] = {"name": args.criterion or "autoswitch", "options": opts}
    elif not args.spec:
        data["criterion"] = "autoswitch"  # as `stepsim train`: the default for STEP
    if args.problem or args.problem_option:
        fixed, grid = _split_grid(args.problem_option, "--problem-option")
        data.pop("problems", None)
        data["problem"] = {"name": args.problem or "regression", "options": fixed, "grid": grid}
    if args.nm:
        data["nm"] = [part.strip() for part in args.nm.split(",")]
    if args.steps:
        data["steps"] = _ints("--steps", args.steps)
        data["steps"] = data["steps"][0] if len(data["steps"]) == 1 else data["steps"]
    if args.seeds:
        seeds = _ints("--seeds", args.seeds)
        data["seeds"] = seeds[0] if len(seeds) == 1 and "," not in args.seeds else seeds
    if not data.get("recipes"):
        raise ValueError("no recipes: give a SPEC file or --recipes (e.g. dense,step)")
    return data


def _ints(option: str, text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{option} must be an integer or a comma list of integers, "
                         f"got {text!r}") from None


def run(args) -> int:
    import time
    from pathlib import Path

    from stepsim.experiments import parse_spec, plan_sweep, report_markdown, run_sweep

    spec = parse_spec(build_spec(args))
    runs = plan_sweep(spec)  # every check happens here, before anything runs
    if args.dry_run:
        for run in runs:
            print(run.name)
        print(f"{len(runs)} runs; spec OK")
        return 0
    stem = spec.name or (Path(args.spec).stem if args.spec else "cli")
    out = Path(args.out) if args.out else Path("sweeps") / stem
    start = time.perf_counter()
    where = f"Dask at {args.scheduler}" if args.scheduler else f"jobs={args.jobs or 'all cores'}"
    print(f"sweep      {len(runs)} runs into {out} ({where})")
    table = run_sweep(spec, out, jobs=args.jobs, scheduler=args.scheduler)
    wall = time.perf_counter() - start
    metric = "test_loss" if "test_loss" in table.columns else "final_loss"
    print(report_markdown(table, metric))
    print(f"wall time  {wall:.1f} s for {len(runs)} runs; table in {out / 'table.csv'}")
    return 0
