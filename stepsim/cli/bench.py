"""stepsim bench: kernel speeds beside their NumPy versions and the machine's limits."""

from __future__ import annotations

from stepsim.bench import LOAD_LIMIT, SECTIONS, SPREAD_LIMIT  # standard library only

HELP = ("measure speeds beside their peers (NumPy, PyTorch, a bandwidth probe), by section: "
        + ", ".join(SECTIONS))

RELIABILITY = (
    "Each row prints its spread (iqr: the interquartile range of its repeated timings over "
    "their median) and its load (the share of the usable cores that other processes kept "
    f"busy while it was timed). A row is UNRELIABLE, and says why instead of a result, when "
    f"its spread or its peer's is above {100 * SPREAD_LIMIT:.0f}%, when its load is above "
    f"{100 * LOAD_LIMIT:.0f}%, or when it claims more bandwidth than its probe reached; "
    "compare figures only from an idle machine.")


def add_arguments(parser) -> None:
    parser.description = f"{HELP}. {RELIABILITY}"
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and fewer repeats in every section; still minutes, "
                             "not seconds: the workers and portability sections start "
                             "worker processes and train short runs, and a busy machine "
                             "stretches every section (each prints its time, the end the "
                             "total)")
    parser.add_argument("--json", metavar="PATH",
                        help="also save every figure (with versions) as JSON")
    parser.add_argument(
        "--torch",
        action="store_true",
        help="also time PyTorch CPU peers (fused Adam, topk+scatter masks) if torch is installed",
    )
    parser.add_argument(
        "--only",
        metavar="SECTION",
        action="append",
        help="run only this section (repeatable): " + ", ".join(SECTIONS),
    )


def run(args) -> int:
    from stepsim.bench import run_bench
    from stepsim.cli.args import output_path

    json_path = output_path(args.json, option="--json")  # checked before any work
    run_bench(quick=args.quick, json_path=json_path, only=args.only, torch_peers=args.torch)
    return 0
