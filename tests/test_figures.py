"""Committed figures: each records its command, and re-running it gives the same result."""

import json
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
        assert command and command[0] in {"theorem1"}, (path, command)
        assert str(path.relative_to(ROOT)) in command, "the command writes this very file"
        assert path.with_suffix(".png").exists()


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
    # everything but the wall time must match to the bit (same seed, same bits)
    assert committed.pop("seconds") > 0 and again.pop("seconds") > 0
    assert again == committed


def test_dry_run_lists_without_running(capsys):
    assert regenerate.main(["--dry-run", "twopoint"]) == 0
    printed = capsys.readouterr().out
    assert "stepsim theorem1 --process twopoint" in printed
    assert regenerate.main(["--dry-run", "no-such-figure"]) == 2
