"""stepsim bench: kernel speeds beside their NumPy versions and the machine's limits."""

from __future__ import annotations

from stepsim.bench import SECTIONS  # the registry of sections (standard library only)

HELP = ("measure speeds beside their peers (NumPy, PyTorch, a bandwidth probe), by section: "
        + ", ".join(SECTIONS))


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repeats (seconds)")
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
