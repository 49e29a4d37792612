"""Two check reports compared apart from their times: ``python -m tests.checks.same_report
A/report.json B/report.json`` prints the first differences and exits 1, or exits 0.

What may differ between two checks of the same claims on the same code path: wall and
worker times (``runtime_s``, ``worker_s``, ``seconds``), the run id, the ledger of the
checks that wrote the report (``checks``, ``wall_s``), when and how the
report was made (provenance: time, argv, machine). Everything else — verdicts, reasons,
effects and intervals, parts, numbers, tuning tables, learning rates, the protocol record,
figure names, run counts — must be equal. Used to show that a refactor of the check
changes no result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: keys whose values are times or ids of one execution, at any depth of the result (and
#: the ledger of the checks that wrote a report: compute.checks, compute.wall_s)
TIMES = frozenset({"runtime_s", "worker_s", "seconds", "run_id", "checks", "wall_s"})


def comparable(path) -> dict:
    """A report.json without its times: the result, and the parameters it was made with."""
    doc = json.loads(Path(path).read_text())
    return {"result": _without_times(doc["result"]),
            "params": _without_times(doc["provenance"]["params"])}


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def differences(a, b, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` (JSON values) differ: one line each."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'the second' if key in b else 'the first'}")
            else:
                out += differences(a[key], b[key], f"{where}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} entries"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r:.120} != {b!r:.120}"]


def main(argv=None) -> int:
    first, second = (argv if argv is not None else sys.argv[1:])
    found = differences(comparable(first), comparable(second))
    for line in found[:40]:
        print(line)
    print(f"{len(found)} difference(s) apart from times and run ids")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
