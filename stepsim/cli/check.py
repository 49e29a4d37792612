"""stepsim check: a verdict with error bars for every claim of the STEP paper (C1-C12)."""

from __future__ import annotations

HELP = "check the STEP paper's claims C1-C12: verdicts with CIs, report.json/.md and figures"


def add_arguments(parser) -> None:
    parser.add_argument("claims", nargs="*", default=["all"], metavar="CLAIM",
                        help="claims to check: C1 ... C12 or 'all' (default)")
    parser.add_argument("--quick", action="store_true",
                        help="quick mode: 3 seeds, short runs (about a minute); the machinery, "
                             "not the evidence (default: full mode, >= 5 seeds)")
    parser.add_argument("--out", default="check-report", metavar="DIR",
                        help="write DIR/report.json, DIR/report.md, DIR/figures/ "
                             "(default: check-report)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="worker processes for the runs (default 1)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on a Dask cluster at ADDRESS (tcp://host:port) instead")
    parser.add_argument("--problem", metavar="NAME",
                        help="registry problem for the training claims C1-C10 (default: the "
                             "synthetic regression; see stepsim.problems.registry)")
    parser.add_argument("--problem-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of --problem as a Python literal, e.g. hidden=(64,) "
                             "or nm=(1,4) (repeatable)")
    parser.add_argument("--steps", type=int, metavar="N",
                        help="training steps of a run (default: quick 1500, full 4000; >= 1500)")


def run(args) -> int:
    import os
    import time
    from pathlib import Path

    from stepsim.checks import parse_claims, run_checks

    # bad input is a one-line error before any work starts
    claims = parse_claims(args.claims)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    out = Path(args.out)
    if not args.out or (out.exists() and not out.is_dir()):
        raise ValueError(f"--out must be a directory, got {args.out!r}")
    out.mkdir(parents=True, exist_ok=True)
    if not os.access(out, os.W_OK):
        raise ValueError(f"--out {args.out!r} is not writable")
    import ast

    from stepsim.cli._args import key_values

    def literal(text):
        try:
            return ast.literal_eval(text)
        except SyntaxError as exc:
            raise ValueError(f"not a Python literal: {exc.msg}") from None

    options = key_values(args.problem_option, "--problem-option", literal)
    if options and not args.problem:
        raise ValueError("--problem-option needs --problem")
    if args.problem:
        from stepsim.problems.registry import make_problem

        make_problem(args.problem, **options)  # unknown names/options: fail before any work
    mode = "quick" if args.quick else "full"
    start = time.perf_counter()
    report = run_checks(claims, mode=mode, out=args.out, n_jobs=args.jobs,
                        scheduler=args.scheduler, problem=args.problem,
                        problem_options=options, steps=args.steps)
    print(report.table())
    print(f"{len(report.claims)} claim(s) in {time.perf_counter() - start:.1f} s; wrote "
          f"{args.out}/report.json, {args.out}/report.md and {args.out}/figures/")
    return 0
