"""stepsim theorem1: check STEP's Theorem 1 (precondition error) by Monte-Carlo simulation."""

from __future__ import annotations

from stepsim.cli.args import (
    add_quiet,
    check_distinct_outputs,
    finite_float,
    key_values,
    output_path,
    positive_int,
    run_params,
    seed,
)

HELP = "check Theorem 1 (|vhat_k - vhat_k0| bound) by simulation, with CIs and verdicts"


def add_arguments(parser) -> None:
    parser.add_argument("--process", default="uniform", metavar="NAME",
                        help="gradient process (see --list-processes); default uniform")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a process parameter, e.g. --param rho=0.99 (repeatable)")
    parser.add_argument("--list-processes", action="store_true",
                        help="list the built-in processes and their parameters, then exit")
    parser.add_argument("--beta2", type=finite_float, default=0.999, help="Adam's beta2 (0.999)")
    parser.add_argument("--delta", type=finite_float, default=0.05,
                        help="failure probability (0.05)")
    parser.add_argument("--G", type=finite_float, default=1.0,
                        help="bound on g^2 (scales the process)")
    parser.add_argument("--trials", type=positive_int, default=1000, help="independent runs (1000)")
    parser.add_argument("--dim", type=positive_int, default=100, help="coordinates per run (100)")
    parser.add_argument("--horizon", type=positive_int, default=10_000,
                        help="largest lag k - k0 (10^4)")
    parser.add_argument("--k0", default="statement", metavar="K",
                        help="switch step: an integer, 'statement' (default: smallest k0 > "
                             "log_b2(1 - 1/sqrt 2)) or 'proof' (smallest k0 > log(1/2)/log b2)")
    parser.add_argument("--per-decade", type=positive_int, default=8, help="lags per decade (8)")
    parser.add_argument("--ci-level", type=finite_float, default=0.95,
                        help="confidence level of the Clopper-Pearson intervals (0.95)")
    parser.add_argument("--seed", type=seed, default=0, help="random seed (0)")
    parser.add_argument("--engine", choices=("numba", "numpy"), default="numba",
                        help="numba (default) or the NumPy reference (slow)")
    parser.add_argument("--bound", choices=("paper", "chebyshev", "gaussian", "markov",
                                             "gaussian-chernoff", "markov-chernoff",
                                             "copula-chernoff", "sticky-chernoff", "plugin"),
                        default="paper",
                        help="also score this bound on the same simulation: chebyshev "
                             "(proved, any stationary g^2), gaussian (proved: Gaussian g or "
                             "g^2 = F(Gaussian), e.g. ar1), markov (proved: chain with a "
                             "spectral gap, e.g. ar1, regime, i.i.d.), gaussian-chernoff "
                             "(proved, exact m.g.f.: Gaussian g, e.g. gauss_ar1), "
                             "markov-chernoff (proved, exact m.g.f.: finite-state chain, "
                             "e.g. regime, twostate, i.i.d. uniform), copula-chernoff "
                             "(proved: g^2 = G Phi(Gaussian AR(1)), the ar1 built-in), "
                             "sticky-chernoff (proved: the sticky chain built-in), "
                             "plugin (heuristic); "
                             "default paper only. Assumptions: paper_checks/theorem1.md §5")
    parser.add_argument("--json", metavar="PATH", help="save the result with provenance")
    parser.add_argument("--plot", metavar="PATH", help="save the figure (.png, .pdf or .svg)")
    add_quiet(parser)


def _parse_k0(text: str):
    if text in ("statement", "proof"):
        return text
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--k0 must be an integer, 'statement' or 'proof', got {text!r}") from None


_PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _check_memory(args) -> None:
    """Refuse sizes whose statistics cannot fit in memory, before simulating anything."""
    from stepsim._ground.validate import check_int
    from stepsim.theorem1.check import check_statistics_memory
    from stepsim.theorem1.engine import lag_grid

    # built-in processes draw random numbers for steps < 2^30 (and lag_grid's integer
    # arithmetic needs a horizon far below 2^63): refuse a larger one by its option name
    check_int("--horizon", args.horizon, maximum=2**30 - 1)
    n_lags = len(lag_grid(args.horizon, args.per_decade))
    check_statistics_memory(args.trials, args.dim, n_lags, names=("--trials", "--dim"))


def run(args) -> int:
    from stepsim.theorem1 import PROCESSES, check_theorem1, make_process

    if args.list_processes:
        from stepsim.theorem1.chains import CHAINS

        for name in [*PROCESSES, *CHAINS]:
            print(make_process(name).describe())
        return 0
    # every output is checked before the simulation starts, not after it has finished
    json_path = output_path(args.json, option="--json")
    plot_path = output_path(args.plot, option="--plot", suffixes=_PLOT_SUFFIXES)
    check_distinct_outputs(**{"--json": json_path, "--plot": plot_path})
    params = key_values(args.param, "--param", float)
    k0 = _parse_k0(args.k0)
    _check_memory(args)
    result = check_theorem1(
        args.process, beta2=args.beta2, delta=args.delta, G=args.G, trials=args.trials,
        dim=args.dim, horizon=args.horizon, k0=k0, seed=args.seed,
        ci_level=args.ci_level, per_decade=args.per_decade, engine=args.engine,
        process_params=params, progress=not args.quiet, bound=args.bound,
    )
    print(result.summary())
    if json_path is not None:
        from stepsim._ground.provenance import save_json

        save_json(json_path, result, params=run_params(args), seed=args.seed)
        print(f"saved {json_path}")
    if plot_path is not None:
        from stepsim._ground.atomic import atomic_path
        from stepsim.theorem1.plot import plot_result

        with atomic_path(plot_path) as tmp:  # the figure appears whole or not at all
            plot_result(result, tmp)
        print(f"saved {plot_path}")
    return 0
