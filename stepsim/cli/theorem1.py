"""stepsim theorem1: check STEP's Theorem 1 (precondition error) by Monte-Carlo simulation."""

from __future__ import annotations

from stepsim.cli._args import key_values, run_params

HELP = "check Theorem 1 (|vhat_k - vhat_k0| bound) by simulation, with CIs and verdicts"


def add_arguments(parser) -> None:
    parser.add_argument("--process", default="uniform", metavar="NAME",
                        help="gradient process (see --list-processes); default uniform")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a process parameter, e.g. --param rho=0.99 (repeatable)")
    parser.add_argument("--list-processes", action="store_true",
                        help="list the built-in processes and their parameters, then exit")
    parser.add_argument("--beta2", type=float, default=0.999, help="Adam's beta2 (0.999)")
    parser.add_argument("--delta", type=float, default=0.05, help="failure probability (0.05)")
    parser.add_argument("--G", type=float, default=1.0, help="bound on g^2 (scales the process)")
    parser.add_argument("--trials", type=int, default=1000, help="independent runs (1000)")
    parser.add_argument("--dim", type=int, default=100, help="coordinates per run (100)")
    parser.add_argument("--horizon", type=int, default=10_000, help="largest lag k - k0 (10^4)")
    parser.add_argument("--k0", default="statement", metavar="K",
                        help="switch step: an integer, 'statement' (default: smallest k0 > "
                             "log_b2(1 - 1/sqrt 2)) or 'proof' (smallest k0 > log(1/2)/log b2)")
    parser.add_argument("--per-decade", type=int, default=8, help="lags per decade (8)")
    parser.add_argument("--ci-level", type=float, default=0.95,
                        help="confidence level of the Clopper-Pearson intervals (0.95)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--engine", choices=("numba", "numpy"), default="numba",
                        help="numba (default) or the NumPy reference (slow)")
    parser.add_argument("--json", metavar="PATH", help="save the result with provenance")
    parser.add_argument("--plot", metavar="PATH", help="save the figure (PNG)")


def _parse_k0(text: str):
    if text in ("statement", "proof"):
        return text
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--k0 must be an integer, 'statement' or 'proof', got {text!r}") from None


def run(args) -> int:
    from stepsim.theorem1 import PROCESSES, check_theorem1, make_process

    if args.list_processes:
        for name in PROCESSES:
            print(make_process(name).describe())
        return 0
    params = key_values(args.param, "--param", float)
    result = check_theorem1(
        args.process, beta2=args.beta2, delta=args.delta, G=args.G, trials=args.trials,
        dim=args.dim, horizon=args.horizon, k0=_parse_k0(args.k0), seed=args.seed,
        ci_level=args.ci_level, per_decade=args.per_decade, engine=args.engine,
        process_params=params, progress=True,
    )
    print(result.summary())
    if args.json:
        from stepsim._provenance import save_json

        save_json(args.json, result, params=run_params(args), seed=args.seed)
        print(f"saved {args.json}")
    if args.plot:
        from stepsim.theorem1.plot import plot_result

        plot_result(result, args.plot)
        print(f"saved {args.plot}")
    return 0
