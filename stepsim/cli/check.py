"""stepsim check: a verdict with error bars for every claim of the STEP paper (C1-C12)."""

from __future__ import annotations

from stepsim.cli._args import positive_int

HELP = "check the STEP paper's claims C1-C12: verdicts with CIs, report.json/.md and figures"


def add_arguments(parser) -> None:
    parser.add_argument("claims", nargs="*", default=["all"], metavar="CLAIM",
                        help="claims to check: C1 ... C12 or 'all' (default)")
    parser.add_argument("--quick", action="store_true",
                        help="quick mode: 3 seeds, short runs (about a minute); the machinery, "
                             "not the evidence (default: full mode, >= 5 seeds)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write DIR/report.json, DIR/report.md, DIR/figures/ and keep "
                             "every finished run in DIR/runs/ (a second call resumes; equal "
                             "runs run once); default $STEPSIM_CHECK_DIR/MODE, else "
                             "~/.cache/stepsim/check/MODE; probed before any work")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="local worker processes, one numba and one BLAS thread each "
                             "(default: every core; 1 runs in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on a Dask cluster at ADDRESS (tcp://host:port) instead")
    parser.add_argument("--problem", metavar="NAME",
                        help="registry problem for the training claims C1-C10 (default: the "
                             "synthetic regression; see stepsim.problems.registry)")
    parser.add_argument("-p", "--problem-option", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="an option of --problem, as in `stepsim train` (e.g. "
                             "hidden=64,64, nm=1:4 sets the runs' default N:M); repeatable")
    parser.add_argument("--steps", type=int, metavar="N",
                        help="training steps of a run (default: quick 1500, full 4000; >= 1500)")


def run(args) -> int:
    import time

    from stepsim.checks import parse_claims, run_checks
    from stepsim.checks.report import default_out, probe_out
    from stepsim.cli._args import key_values

    # bad input is a one-line error before any work starts
    claims = parse_claims(args.claims)
    mode = "quick" if args.quick else "full"
    out = probe_out(args.out if args.out is not None else default_out(mode))
    options = key_values(args.problem_option, "--problem-option")
    if options and not args.problem:
        raise ValueError("--problem-option needs --problem")
    nm = options.pop("nm", None)  # the runs' N:M: RunSpec's one door
    start = time.perf_counter()
    report = run_checks(claims, mode=mode, out=out, n_jobs=args.jobs,
                        scheduler=args.scheduler, problem=args.problem,
                        problem_options=options, steps=args.steps, nm=nm)
    print(report.table())
    print(f"{len(report.claims)} claim(s) in {time.perf_counter() - start:.1f} s; wrote "
          f"{out}/report.json, {out}/report.md and {out}/figures/")
    return 0
