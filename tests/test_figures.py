"""Committed figures: each records its command, and re-running it gives the same result."""

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "figures"))

import regenerate


def test_every_committed_result_records_a_stepsim_command():
    commands = regenerate.recorded_commands()
    assert len(commands) >= 10
    for path, command in commands:
        assert command and command[0] in {"theorem1", "check"}, (path, command)
        if command[0] == "theorem1":
            assert str(path.relative_to(ROOT)) in command, "the command writes this very file"
            assert path.with_suffix(".png").exists()
        else:  # stepsim check --out DIR writes DIR/report.json and DIR/figures/*.png
            out = command[command.index("--out") + 1]
            assert path.parent == ROOT / out and path.name == "report.json"
            figures = json.loads(path.read_text())["result"]["claims"]
            for claim in figures:
                for figure in claim["figures"]:
                    assert (path.parent / figure).exists(), figure


def test_a_recorded_command_reproduces_its_committed_result(tmp_path):
    (path, command), = regenerate.recorded_commands("uniform_k0_1")
    out = tmp_path / "again.json"
    command = [str(out) if arg == str(path.relative_to(ROOT)) else arg for arg in command]
    command = [arg for arg in command if not arg.endswith(".png")]
    if "--plot" in command:
        command.remove("--plot")
    subprocess.run([sys.executable, "-m", "stepsim", *command], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    committed = json.loads(path.read_text())["result"]
    again = json.loads(out.read_text())["result"]
    # everything but the wall time must match to the bit (same seed, same bits): the
    # Monte-Carlo counts are counter-based and the analytic columns use scalar pow in a
    # fixed order (stepsim.theorem1.check._pow), so this holds on any x86-64 CPU
    assert committed.pop("seconds") > 0 and again.pop("seconds") > 0
    differences = list(leaf_differences(committed, again))
    assert not differences, short_summary(differences)


def leaf_differences(a, b, where="result"):
    """(path, a, b) for every leaf where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from leaf_differences(a.get(key), b.get(key), f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from leaf_differences(x, y, f"{where}[{i}]")
    elif a != b:
        yield where, a, b


def short_summary(differences, shown: int = 5) -> str:
    """A few lines: how many leaves differ, the first few with their distance in ulps."""
    lines = [f"{len(differences)} value(s) differ from the committed result; first {shown}:"]
    for path, a, b in differences[:shown]:
        ulps = ""
        if isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and a != 0:
            ulps = f" ({abs(a - b) / math.ulp(a):.3g} ulp)"
        lines.append(f"  {path}: committed {a!r}, again {b!r}{ulps}")
    return "\n".join(lines)


def test_short_summary_names_the_first_differences_only():
    a = {"rows": [{"x": 1.0}, {"x": 2.0}], "y": "HOLDS"}
    b = {"rows": [{"x": 1.0 + 2**-52}, {"x": 3.0}], "y": "VIOLATED"}
    differences = list(leaf_differences(a, b))
    assert [d[0] for d in differences] == ["result.rows[0].x", "result.rows[1].x", "result.y"]
    text = short_summary(differences, shown=2)
    assert text.count("\n") == 2 and "(1 ulp)" in text and "3 value(s) differ" in text


def test_dry_run_lists_without_running(capsys):
    assert regenerate.main(["--dry-run", "twopoint"]) == 0
    printed = capsys.readouterr().out
    assert "stepsim theorem1 --process twopoint" in printed
    assert regenerate.main(["--dry-run", "no-such-figure"]) == 2
