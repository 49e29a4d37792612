"""stepsim check: a verdict with error bars for every claim of the STEP paper (C1-C12)."""

from __future__ import annotations

from stepsim.cli.args import add_quiet, output_dir, positive_int

HELP = "check the STEP paper's claims C1-C12: verdicts with CIs, report.json/.md and figures"


def add_arguments(parser) -> None:
    parser.add_argument("claims", nargs="*", default=["all"], metavar="CLAIM",
                        help="claims to check: C1 ... C12 or 'all' (default); S1, the "
                             "successors comparison beyond the paper (PROTOCOL.md section "
                             "S1: S-STE, masked decay, transposable SR-STE, ... vs SR-STE "
                             "and STEP), runs only when named")
    parser.add_argument("--quick", action="store_true",
                        help="quick mode: digits, the transformer LM and MNIST-1D at short "
                             "run lengths, 3 seeds, the primary readings and the learning "
                             "rates of the committed full run (a few minutes; indicative, not "
                             "evidence). Default: full mode, the registered protocol "
                             "(paper_checks/PROTOCOL.md): lrs and regularisers tuned on a "
                             "validation split, 8 seeds, digits, the transformer LM and "
                             "MNIST-1D, with the readings of its current draft (--dry-run "
                             "estimates the time)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write DIR/report.json, DIR/report.md, DIR/figures/ and keep "
                             "every finished run in DIR/runs/ (a second call resumes; equal "
                             "runs run once; other claims already reported in DIR stay, "
                             "merged); default $STEPSIM_CHECK_DIR/MODE, else "
                             "~/.cache/stepsim/check/MODE; probed before any work")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="local worker processes, one numba and one BLAS thread each "
                             "(default: every core; 1 runs in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on a Dask cluster at ADDRESS (tcp://host:port) instead")
    parser.add_argument("--extended", action="store_true",
                        help="full mode plus the extended set of PROTOCOL.md (\"Budget, "
                             "quick mode, the extended set\"): what the registered rules "
                             "run beyond the full run's time budget (draft 5: the LM, S1, "
                             "C9, the secondary readings, cosine with warm-up, more tuning "
                             "seeds for the stability map); meant for --scheduler (Dask)")
    parser.add_argument("--verify", metavar="DIR", default=None,
                        help="read every run stored in DIR/runs (a check's --out) and list "
                             "the damaged ones (cut short, changed, half a pair) and foreign "
                             "files; runs nothing and changes nothing. Exit status 0: the "
                             "store is whole; 1: it is not (the same check with --out DIR "
                             "sets them aside in DIR/runs/damaged and redoes them); 2: DIR is "
                             "not a check's folder")
    parser.add_argument("--problem", action="append", choices=("digits", "lm", "mnist1d"),
                        default=None, metavar="NAME",
                        help="only this problem of the protocol (digits | lm | mnist1d); "
                             "repeatable (default: every problem of the mode)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan — the runs and tasks per setting and claim, "
                             "tuning and evaluation, how many --out's store already holds, "
                             "the estimated worker time — and exit without running or "
                             "writing anything")
    add_quiet(parser)


def run(args) -> int:
    import time
    from pathlib import Path

    from stepsim.checks import parse_claims, run_checks
    from stepsim.checks.outputs import default_out
    from stepsim.experiments.executors import connected

    if args.verify is not None:
        return verify(args)
    # bad input is a one-line error before any work starts (run_checks probes --out after
    # every argument is checked, so a refused command leaves no folder)
    parse_claims(args.claims)  # unknown names refused here; "all" stays a word: in full
    claims = args.claims       # mode without --extended it leaves the extended set's out
    mode = "quick" if args.quick else "full"
    if args.extended and args.quick:
        raise ValueError("--extended adds to the full check; it cannot be combined with "
                         "--quick")
    if args.out is not None and not args.out.strip():  # Path("") is "." (the current directory)
        raise ValueError("--out: empty path; give a directory")
    if args.out is not None and not Path(args.out).absolute().parent.exists():
        output_dir(args.out, option="--out")  # made if missing, in a directory that exists
    out = Path(args.out if args.out is not None else default_out(mode))
    if args.dry_run:
        return _dry_run(claims, mode, out, args)
    args._out = out
    start = time.perf_counter()
    with connected(args.scheduler) as scheduler:  # an unreachable one: no folder made
        report = run_checks(claims, mode=mode, out=out, jobs=args.jobs,
                            scheduler=scheduler, problems=args.problem,
                            extended=bool(args.extended), progress=not args.quiet)
    print(report.table())
    print(f"{len(report.claims)} verdict(s) in {time.perf_counter() - start:.1f} s; wrote "
          f"{out}/report.json, {out}/report.md and {out}/figures/")
    return 0


def verify(args) -> int:
    """``--verify DIR``: every run stored in DIR/runs read and judged; 0 whole, 1 not."""
    from pathlib import Path

    from stepsim.checks.outputs import RUNS_DIR
    from stepsim.experiments.store import RunStore

    if args.out is not None or args.claims != ["all"]:
        raise ValueError("--verify DIR reads the runs stored in DIR; give no claims and no "
                         "--out with it")
    runs = Path(args.verify) / RUNS_DIR
    if not runs.is_dir():
        raise ValueError(f"--verify {args.verify!r}: no {RUNS_DIR}/ folder in it (not a "
                         "check's --out)")
    check = RunStore(runs).verify()
    print("\n".join(check.lines(f"`stepsim check ... --out {args.verify}` (the same command)")))
    return 0 if check.ok else 1


def _dry_run(claims, mode: str, out, args) -> int:
    """Print the plan (``stepsim.checks.dry_run``); nothing is run, created or written."""
    from stepsim.checks.dry_run import describe
    from stepsim.checks.planning import plan
    from stepsim.experiments.executors import usable_cores

    made = plan(claims, mode, problems=args.problem, extended=bool(args.extended))
    workers = args.jobs or usable_cores()
    print(describe(made, out, workers))
    return 0


def interrupted(args) -> str:
    """The line Ctrl-C prints: the runs kept in ``--out``'s runs/ (``stepsim.cli``)."""
    from stepsim.checks.outputs import RUNS_DIR

    out = getattr(args, "_out", None)
    if out is None or not (out / RUNS_DIR).is_dir():
        return "interrupted before any run finished; nothing was kept"
    done = len(list((out / RUNS_DIR).glob("[!.]*.json")))
    return f"interrupted; {done} finished runs kept in {out}; the same command resumes"
