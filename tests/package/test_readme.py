"""The README's Python examples run as written, and its commands name real subcommands."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_python_examples_each_run_on_their_own():
    """Every python block runs in a fresh namespace: a reader can copy any one of them."""
    blocks = _blocks("python")
    assert len(blocks) >= 3
    trained = []
    for i, block in enumerate(blocks):
        namespace = {"__name__": f"readme_block_{i}"}
        exec(compile(block, f"{README}:python block {i}", "exec"), namespace)
        if "result" in namespace:
            trained.append(namespace["result"])
    assert trained, "no README block defines `result` (the training example)"
    assert all(result.switch_step is not None for result in trained)


def test_shell_examples_use_real_subcommands_and_options():
    from stepsim.cli import build_parser

    parser = build_parser()
    subparsers = parser._subparsers._group_actions[0].choices
    for block in _blocks("bash"):
        for full_line in block.splitlines():
            for line in full_line.split("#")[0].split("&&"):
                line = line.strip()
                if not line.startswith("stepsim "):
                    continue
                words = line.split()
                assert words[1] in subparsers, line
                actions = subparsers[words[1]]._actions
                known = {opt for action in actions for opt in action.option_strings}
                for word in words[2:]:
                    if word.startswith("-"):
                        assert word in known, f"stepsim {words[1]} has no {word}: {line}"


def test_setup_commands_are_what_ci_runs():
    """README's install and test commands are the ones .ci/run executes."""
    setup = _blocks("bash")[0]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python -m venv" in setup
    for command in ('pip install -e ".[test]"', "python -m pytest -q --runslow -n auto --dist loadfile"):
        assert command in setup, command
        assert command in ci, command


def test_the_sweep_spec_example_is_a_spec_file_of_the_repository_and_plans(tmp_path):
    """The README's TOML block is one of stepsim/experiments/specs/ (not a copy that
    drifts) and a valid spec (issue 28)."""
    from stepsim.experiments import parse_spec
    from stepsim.experiments.sweep_spec import read_spec_file

    blocks = _blocks("toml")
    assert blocks, "no sweep SPEC example in the README"
    specs = README.parent / "stepsim" / "experiments" / "specs"
    files = {p.name: read_spec_file(p) for p in specs.glob("*.toml")}
    for i, block in enumerate(blocks):
        path = tmp_path / f"block_{i}.toml"  # read as a spec file is
        path.write_text(block)
        data = read_spec_file(path)
        assert data in files.values()
        assert parse_spec(data).name == data["name"]


# the options through which a command writes files or directories
_OUTPUT_OPTIONS = ("out", "json", "plot", "output", "figure")


def _written_paths(words) -> list[str]:
    """The files and directories ``stepsim WORDS...`` writes, as the CLI resolves them:
    its output options, a sweep's default directory (sweeps/SPEC-NAME), a report's DIR."""
    from stepsim.cli import build_parser
    from stepsim.experiments.sweep_spec import read_spec_file

    args = build_parser().parse_args(words)
    paths = [getattr(args, name) for name in _OUTPUT_OPTIONS if getattr(args, name, None)]
    if args.command == "sweep" and args.out is None and not args.dry_run:
        spec = read_spec_file(README.parent / args.spec) if args.spec else {}
        paths.append(f"sweeps/{spec.get('name') or Path(args.spec or 'cli').stem}")
    if args.command == "report":
        paths.append(args.dir)
    return paths


def test_shell_examples_write_outside_the_repository_or_into_an_ignored_folder():
    """A README command run in a clone leaves nothing git would show: every path it writes
    is outside the repository (absolute, or a placeholder such as DIR) or git-ignored."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (README.parent / ".git").exists():
        pytest.skip("not a git checkout")
    checked = []
    for block in _blocks("bash"):
        for full_line in block.splitlines():
            for line in full_line.split("#")[0].split("&&"):
                words = line.split()
                if len(words) < 2 or words[0] != "stepsim" or "DIR" in words \
                        or any(w.startswith("tcp://") for w in words):
                    continue
                for path in _written_paths(words[1:]):
                    if Path(path).is_absolute() or path.startswith("~"):
                        continue
                    ignored = subprocess.run(["git", "check-ignore", "-q", path],
                                             cwd=README.parent).returncode == 0
                    assert ignored, f"{line.strip()!r} writes {path} into the repository"
                    checked.append(path)
    assert "sweeps/digits" in checked  # the sweep example, and its report
