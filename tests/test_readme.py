"""The README's Python examples run as written, and its commands name real subcommands."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_python_examples_run_in_order():
    namespace = {}
    blocks = _blocks("python")
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert namespace["result"].switch_step is not None


def test_shell_examples_use_real_subcommands_and_options():
    from stepsim.cli import build_parser

    parser = build_parser()
    subparsers = parser._subparsers._group_actions[0].choices
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if not line.startswith("stepsim "):
                continue
            words = line.split()
            assert words[1] in subparsers, line
            actions = subparsers[words[1]]._actions
            known = {opt for action in actions for opt in action.option_strings}
            for word in words[2:]:
                if word.startswith("-"):
                    assert word in known, f"{word} is not an option of stepsim {words[1]}: {line}"
