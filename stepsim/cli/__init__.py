"""The ``stepsim`` command line: one subcommand per module in this package.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``, and may define ``interrupted(args) -> str``: the one line printed
when Ctrl-C stops it (what was kept and how to resume; exit status 130, no traceback).
Subcommand modules import only the standard library at module
level — NumPy, numba and matplotlib are imported inside ``run`` — so ``stepsim --help``
and ``stepsim SUBCOMMAND --help`` stay instant (``tests/cli/test_cli.py`` checks that building
the parser imports neither numba nor numpy). String options are parsed here, in the CLI,
and the Python API receives typed values.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys

# name -> module under stepsim.cli; the order is the order of `stepsim --help`.
SUBCOMMANDS = {
    "bench": "bench",
    "train": "train",
    "theorem1": "theorem1",
    "compress": "compress",
    "memory": "memory",
    "sweep": "sweep",
    "report": "report",
    "check": "check",
}


# argparse reads "-1" and "-.5" as values but "-1e-3" as an option ("expected one
# argument"); this matcher (argparse's own hook) also takes exponents, so a negative number
# reaches its option's check and gets the real message ("lr must be in [0.0, inf)")
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``PROG: error: MESSAGE (see PROG
    --help)``, with exit status 2: argparse's default prints its usage block
    (5 to 12 lines) before the one line that matters."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _load(module_name: str):
    return importlib.import_module(f"stepsim.cli.{module_name}")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="stepsim",
        description=(
            "Verify by simulation the theory and claims of STEP (Lu et al., ICML 2023): "
            "N:M sparsity masks learned with Adam, and the baselines it competes with."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--fast", action="store_true",
                        help="let OpenBLAS pick this CPU's fastest kernels: faster matrix "
                             "products on AVX-512 machines, but results are then specific to "
                             "this CPU (default: portable, same bits on any AVX2/AVX-512 CPU)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        try:
            module = _load(module_name)
        except ModuleNotFoundError as exc:  # a subcommand still being built
            if exc.name != f"stepsim.cli.{module_name}":
                raise
            continue
        sp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        sp._negative_number_matcher = NEGATIVE_NUMBER  # --lr -1e-3 is a value, not an option
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run, _interrupted=getattr(module, "interrupted", None),
                        _parser=sp)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # named by the subcommand they were given to, not by "stepsim"
            getattr(args, "_parser", parser).error(
                f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:
        # argparse has printed one error line naming the option (or the help); return
        # its exit status so main() reports bad options like bad input.
        return exc.code if isinstance(exc.code, int) else 2
    if args.fast:  # before anything loads NumPy (and so OpenBLAS) in this process
        from stepsim._ground.portability import release_blas_pin

        release_blas_pin()
    if args.version:
        from importlib.metadata import version

        print(f"stepsim {version('stepsim')}")
        return 0
    if not getattr(args, "_run", None):  # no subcommand: usage, and the status of bad usage
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: one line saying what was kept, not a traceback
        status = _interrupted(args)
        if argv is None:  # the command itself: leave now, with this status
            # CPython sometimes still ends a process whose Ctrl-C was handled here by
            # SIGINT at exit (status -2, measured in about 1 run of 3 of tests/
            # test_interrupt.py); so the exit handlers (pools' semaphores, threads) run
            # now and the process leaves with this status
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        return status
    except (ValueError, TypeError, FileNotFoundError) as exc:
        # Bad input: a one-line error naming the argument, not a traceback.
        print(f"stepsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `stepsim ... | head`: the reader has gone; nothing to say
        _silence_stdout()
        return 141  # 128 + SIGPIPE, as a shell reports a command its pipe's reader left
    except OSError as exc:  # a file that cannot be read or written: permissions, disk full
        print(f"stepsim {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # estimates refuse known sizes first; this is the backstop
        print(f"stepsim {args.command}: error: out of memory ({exc or 'MemoryError'})",
              file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null: Python flushes it again at exit, and a write to the
    closed pipe would print "Exception ignored ... BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test's capture)
        pass


def _interrupted(args) -> int:
    text = "interrupted"
    # a second Ctrl-C, or a folder half written: the line still says "interrupted"
    with contextlib.suppress(Exception, KeyboardInterrupt):
        if args._interrupted is not None:
            text = args._interrupted(args)
    print(f"stepsim {args.command}: {text}", file=sys.stderr)
    return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
