"""stepsim sweep: run a seeded grid of training runs (resumable; local pool or Dask)."""

from __future__ import annotations

from stepsim.cli.args import (
    OptionError,
    add_quiet,
    choices_text,
    key_values,
    output_dir,
    positive_int,
)
from stepsim.cli.args import value as _value

HELP = "run a grid of recipes x N:M x seeds (TOML/JSON spec or flags); resumes after a kill"


def add_arguments(parser) -> None:
    parser.add_argument("spec", nargs="?", metavar="SPEC",
                        help="sweep spec, a .toml or .json file (see "
                             "stepsim.experiments.sweep_spec); the grid flags below override "
                             "its fields")
    parser.add_argument("--out", metavar="DIR",
                        help="sweep directory, made if missing in a directory that exists "
                             "(default sweeps/SPEC-NAME); run the same command "
                             "again to resume: finished runs are skipped. A directory holding "
                             "another sweep is refused (see --force)")
    parser.add_argument("--force", action="store_true",
                        help="replace the plan of another sweep in --out (its finished runs "
                             "that this grid shares are kept; the others leave the table)")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="local worker processes, one numba and one BLAS thread each "
                             "(default: every core; 1 runs in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on Dask distributed at this scheduler address "
                             "(e.g. tcp://10.0.0.5:8786) instead of the local pool")
    parser.add_argument("--verify", metavar="DIR", default=None,
                        help="read every run stored in sweep directory DIR and list the "
                             "damaged ones (cut short, changed, half a pair) and foreign "
                             "files; runs nothing and changes nothing. Exit status 0: the "
                             "store is whole (runs not done yet are not damage); 1: it is "
                             "not (the same sweep command sets them aside in DIR/runs/damaged "
                             "and redoes them); 2: DIR is not a sweep directory")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the spec and list the runs; train nothing")
    add_quiet(parser)
    grid = parser.add_argument_group(
        "grid on the command line", "options as in `stepsim train`; --grid makes an axis")
    grid.add_argument("--recipes", metavar="A,B,...",
                      help="e.g. dense,asp,sr-ste,step; recipes: "
                           + choices_text("stepsim.recipes.registry", "RECIPES"))
    grid.add_argument("--optimizer", default=None,
                      help=choices_text("stepsim.recipes.registry", "OPTIMIZERS")
                           + " (default adam)")
    grid.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                      help="recipe/optimizer option for every recipe, repeatable (lr=1e-3)")
    grid.add_argument("--criterion", metavar="NAME",
                      help="criterion for recipes that need one (default: the spec's, else "
                           "RunSpec's: AutoSwitch clipped to [0.1T, 0.5T], as `stepsim train`)")
    grid.add_argument("-c", "--criterion-option", action="append", metavar="KEY=VALUE",
                      help="option of that criterion, repeatable")
    grid.add_argument("--problem", metavar="NAME",
                      help="problem name: " + choices_text("stepsim.problems.registry",
                                                           "PROBLEMS")
                           + " (default regression)")
    grid.add_argument("-p", "--problem-option", action="append", metavar="KEY=VALUE",
                      help="problem option, repeatable (scale=0.1)")
    grid.add_argument("--grid", action="append", metavar="WHERE.KEY=V1,V2,...",
                      help="a grid axis over a recipe (WHERE=recipe) or problem (WHERE=problem) "
                           "option, repeatable: --grid recipe.lr=1e-3,3e-3 "
                           "--grid problem.batch_size=16,64")
    grid.add_argument("--nm", metavar="N:M[,N:M...]", help="e.g. 2:4,1:8")
    grid.add_argument("--steps", metavar="T[,T...]", help="training steps (default 2000)")
    grid.add_argument("--seeds", metavar="K", help="seed count K (indices 0..K-1) or a list 0,3,7")


def _grid_values(text: str) -> list:
    return [_value(part.strip()) for part in text.split(",")]


def _grids(items) -> dict:
    """--grid WHERE.KEY=V1,V2 options -> {"recipe": {KEY: [...]}, "problem": {...}}."""
    out = {"recipe": {}, "problem": {}}
    for key, values in key_values(items, "--grid", _grid_values).items():
        where, _, name = key.partition(".")
        if where not in out or not name:
            raise ValueError(f"--grid {key}: must look like recipe.KEY=V1,V2 or "
                             "problem.KEY=V1,V2")
        out[where][name] = values
    return out


def build_spec(args) -> dict:
    """The spec dict: SPEC's contents (if given) with the grid flags applied on top.

    --recipes / --problem replace the spec's entries; -o, -p and --grid set options of every
    recipe / problem entry; --nm, --steps, --seeds and --criterion replace those fields.
    """
    from stepsim.experiments.sweep_spec import read_spec_file

    data = read_spec_file(args.spec) if args.spec else {}
    if "problem" in data and "problems" in data:
        raise ValueError("spec: give 'problem' (one entry) or 'problems' (a list), not both")
    grids = _grids(args.grid)
    if args.recipes:
        data["recipes"] = [r.strip() for r in args.recipes.split(",")]
    if not data.get("recipes"):
        raise ValueError("no recipes: give a SPEC file or --recipes (e.g. dense,step)")
    recipe_options = key_values(args.option, "--option", _value)
    data["recipes"] = _edited(data["recipes"], recipe_options, grids["recipe"])
    if args.optimizer and isinstance(data["recipes"], list):
        for entry in data["recipes"]:
            entry["optimizer"] = args.optimizer
    if args.problem:
        data.pop("problems", None)
        data["problem"] = args.problem
    problems = [data.pop("problem")] if "problem" in data else data.pop("problems",
                                                                        ["regression"])
    problem_options = key_values(args.problem_option, "--problem-option", _value)
    if "nm" in problem_options:  # -p nm=N:M is the runs' N:M, as in `stepsim train`
        if args.nm:
            raise ValueError("--nm and -p nm=... both given; use one")
        nm = problem_options.pop("nm")
        pairs = nm if nm and isinstance(nm[0], tuple) else (nm,)  # 2:4 or 2:4,1:8
        data["nm"] = [":".join(str(v) for v in pair) for pair in pairs]
    data["problems"] = _edited(problems, problem_options, grids["problem"])
    if args.criterion or args.criterion_option:
        opts = key_values(args.criterion_option, "--criterion-option", _value)
        data["criterion"] = {"name": args.criterion or "autoswitch", "options": opts}
    if args.nm:
        data["nm"] = [part.strip() for part in args.nm.split(",")]
    if args.steps:
        steps = _ints("--steps", args.steps)
        data["steps"] = steps[0] if len(steps) == 1 else steps
    if args.seeds:
        seeds = _ints("--seeds", args.seeds)
        data["seeds"] = seeds[0] if len(seeds) == 1 and "," not in args.seeds else seeds
    return data


def _edited(entries, options: dict, grid: dict):
    """Spec entries (names or tables) as tables with ``options`` and ``grid`` added to each.

    Anything but a list is returned as it is, for parse_spec to reject with its message.
    """
    if not isinstance(entries, list):
        return entries
    out = []
    for e in entries:
        e = dict(e) if isinstance(e, dict) else {"name": e}
        if not all(isinstance(e.get(k, {}), dict) for k in ("options", "grid")):
            out.append(e)  # parse_spec names the entry and the key
            continue
        e["options"] = dict(e.get("options", {}), **options)
        e["grid"] = dict(e.get("grid", {}), **grid)
        out.append(e)
    return out


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
    from stepsim.experiments.sweep import check_same_sweep
    from stepsim.experiments.sweep_report import diverged

    if args.verify is not None:
        return verify(args)
    if args.out is not None and not args.out.strip():
        raise OptionError("--out: empty path; give a directory (default sweeps/SPEC-NAME)")
    spec = parse_spec(build_spec(args))
    runs = plan_sweep(spec)  # every check happens here, before anything runs
    if args.dry_run:
        for run in runs:
            print(run.digest[:16], run.describe())
        print(f"{len(runs)} runs; spec OK")
        return 0
    stem = spec.name or (Path(args.spec).stem if args.spec else "cli")
    out = Path(args.out) if args.out is not None else Path("sweeps") / stem
    # the directory must be one we can write in (not a file, not read-only, in a directory
    # that exists unless it is the default) before any run
    output_dir(out, option="--out", default=args.out is None)
    args._out = out  # for interrupted()
    if not args.force:
        check_same_sweep(out, runs)
    start = time.perf_counter()
    where = f"Dask at {args.scheduler}" if args.scheduler else f"jobs={args.jobs or 'all cores'}"
    print(f"sweep      {len(runs)} runs into {out} ({where})")
    table = run_sweep(spec, out, jobs=args.jobs, scheduler=args.scheduler, force=args.force,
                      progress=False if args.quiet else None)
    wall = time.perf_counter() - start
    metric = "test_loss" if "test_loss" in table.columns else "final_loss"
    print(report_markdown(table, metric))
    lost = [row for row in table.rows if diverged(row)]
    if lost:  # an outcome, counted per condition above (column diverged), not an error
        print(f"diverged   {len(lost)} of {len(table)} runs stopped at a non-finite value "
              f"(status non-finite in the table; left out of the means)")
    print(f"wall time  {wall:.1f} s for {len(runs)} runs; table in {out / 'table.csv'}")
    return 0


def verify(args) -> int:
    """``--verify DIR``: every run stored in sweep directory DIR read and judged; 0 whole,
    1 not."""
    from stepsim.experiments import sweep_dir

    if args.spec is not None or args.out is not None:
        raise ValueError("--verify DIR reads the sweep directory DIR; give no SPEC and no "
                         "--out with it")
    check, whole, planned = sweep_dir.verify(args.verify)
    lines = check.lines(f"`stepsim sweep SPEC --out {args.verify}` (the same command)")
    print("\n".join(lines + [f"{args.verify}: {whole} of {planned} planned runs stored whole"]))
    return 0 if check.ok else 1


def interrupted(args) -> str:
    """The line Ctrl-C prints: the runs kept in the sweep directory (``stepsim.cli``)."""
    from stepsim.experiments import sweep_dir

    out = getattr(args, "_out", None)
    if out is None or not (out / sweep_dir.SWEEP_FILE).exists():
        return "interrupted before any run started; nothing was written"
    runs = (run for run, _ in sweep_dir.read_plan(out))
    done = sum(map(sweep_dir.sweep_store(out).is_finished, runs))
    return f"interrupted; {done} finished runs kept in {out}; the same command resumes"
