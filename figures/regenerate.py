"""Regenerate the committed figures from the commands recorded beside them.

Every result JSON under ``figures/`` carries in its provenance the exact ``stepsim``
command (argv) that wrote it and its PNG(s), so this script needs no list of its own —
``figures/theorem1/*.json`` (one ``stepsim theorem1`` run each) and
``figures/check/report.json`` (the full ``stepsim check --out figures/check``, which
writes every claim's figure under ``figures/check/figures/``):

    python figures/regenerate.py                   # every figure (minutes)
    python figures/regenerate.py theorem1/ar1      # those whose path contains the text
    python figures/regenerate.py --dry-run         # print the commands only

Run from the repository root (recorded paths are relative to it). Same seed, same bits:
a regenerated JSON differs from the committed one only in its provenance (time, versions).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

FIGURES = Path(__file__).resolve().parent
ROOT = FIGURES.parent


def recorded_commands(pattern: str = "") -> list[tuple[Path, list[str]]]:
    """(json path, stepsim arguments) for every result JSON whose path contains pattern."""
    out = []
    for path in sorted(FIGURES.rglob("*.json")):
        if pattern not in str(path.relative_to(FIGURES)) or "runs" in path.relative_to(
                FIGURES).parts:  # a check's run store (DIR/runs/), not a result
            continue
        argv = json.loads(path.read_text())["provenance"]["argv"]
        out.append((path, argv[1:]))  # argv[0] is the stepsim executable that ran
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pattern", nargs="?", default="", help="only paths containing this")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    commands = recorded_commands(args.pattern)
    if not commands:
        print(f"no recorded figure matches {args.pattern!r}", file=sys.stderr)
        return 2
    for i, (path, command) in enumerate(commands, start=1):
        print(f"[{i}/{len(commands)}] stepsim {' '.join(command)}", flush=True)
        if args.dry_run:
            continue
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "stepsim", *command], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        print(f"    {path.relative_to(ROOT)} in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
