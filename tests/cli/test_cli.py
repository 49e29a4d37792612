"""The command line: instant help (no numba/numpy at parse time), errors, bench smoke run."""

import json
import subprocess
import sys

import pytest

from stepsim.cli import SUBCOMMANDS, build_parser, main


def test_building_the_parser_imports_no_heavy_package():
    code = (
        "import sys\n"
        "from stepsim.cli import build_parser\n"
        "build_parser()\n"
        "heavy = ('numba', 'numpy', 'scipy', 'matplotlib', 'torch')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_lists_every_built_subcommand():
    out = subprocess.run([sys.executable, "-m", "stepsim", "--help"], capture_output=True,
                         text=True, check=True)
    assert "bench" in out.stdout
    parser = build_parser()
    built = [a for a in parser._subparsers._group_actions[0].choices]
    # slots whose module is not written yet (on this branch) are skipped by design
    from importlib.util import find_spec

    present = {name for name, module in SUBCOMMANDS.items()
               if find_spec(f"stepsim.cli.{module}") is not None}
    assert {"bench", "train", "theorem1", "compress", "memory"} <= present
    assert set(built) == present
    for name in built:
        assert name in out.stdout


def test_bad_bench_section_is_a_one_line_error(capsys):
    assert main(["bench", "--only", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "unknown bench section(s) ['nonsense']" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_bench_quick_kernels_smoke(tmp_path, capsys):
    """`stepsim bench --quick --only kernels` from the CLI, as a user runs it (this is
    test_bench's every-section-from-the-CLI test for the kernels section, with more checks:
    it is not run twice)."""
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "kernels", "--json", str(path)]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "Traceback" not in captured.err
    assert "nm_mask 2:4 n=2^16" in printed and "adam_step frozen v" in printed
    doc = json.loads(path.read_text())
    rows = doc["result"]["rows"]
    assert rows and {r["section"] for r in rows} == {"kernels"}
    cases = {(r["case"], r["impl"]) for r in rows}
    for case in ("nm_mask 2:4 n=2^20", "adam_step n=2^20", "sgdm_step n=2^16"):
        assert (case, "numba") in cases and (case, "numpy") in cases
    assert all(r["seconds"] > 0 and r["ns_per_unit"] > 0 for r in rows)
    assert doc["provenance"]["params"] == {"quick": True, "only": ["kernels"], "torch": False}
    assert doc["provenance"]["versions"]["numba"]


def test_version_and_bare_command(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out
    assert main([]) == 2  # no subcommand: the usage, with the status of bad usage
    assert "usage: stepsim" in capsys.readouterr().err


def test_help_lists_every_choice_of_the_registries(capsys):
    """Help texts read the registries' names from their source (no NumPy at parse time):
    the same names as the imported registries, and every one is listed (issue 28)."""
    from stepsim.bench import SECTIONS
    from stepsim.cli.args import registry_names
    from stepsim.problems.registry import PROBLEMS
    from stepsim.recipes.criteria import CRITERIA
    from stepsim.recipes.registry import OPTIMIZERS, RECIPES
    from stepsim.sparse24.memory import MODELS

    for module, name, real in [("stepsim.problems.registry", "PROBLEMS", PROBLEMS),
                               ("stepsim.recipes.registry", "RECIPES", RECIPES),
                               ("stepsim.recipes.registry", "OPTIMIZERS", OPTIMIZERS),
                               ("stepsim.recipes.criteria", "CRITERIA", CRITERIA),
                               ("stepsim.sparse24.memory", "MODELS", MODELS)]:
        assert registry_names(module, name) == tuple(real)
    helps = {}
    for command in ("train", "sweep", "bench", "memory"):
        assert main([command, "--help"]) == 0
        helps[command] = "".join(capsys.readouterr().out.split())  # wrapped at hyphens too
    for names, commands in [(PROBLEMS, ("train", "sweep")), (RECIPES, ("train", "sweep")),
                            (CRITERIA, ("train",)), (SECTIONS, ("bench",)),
                            (MODELS, ("memory",))]:
        for command in commands:
            assert ",".join(names) in helps[command], (command, list(names))
    assert "Table5" in helps["memory"]


def test_shared_option_parsers():
    import argparse

    from stepsim.cli.args import key_values, nm, run_params

    assert nm("2:4") == (2, 4) and nm("1:16") == (1, 16)
    for bad, why in [("a:b", "must look like N:M"), ("2", "must look like N:M"),
                     ("5:4", "needs 1 <= N <= M"), ("0:4", "needs 1 <= N <= M")]:
        with pytest.raises(ValueError, match=why):
            nm(bad)
    assert key_values(None, "--param") == {}
    assert key_values([" rho = 0.5", "weight-decay=1"], "--param", float) == {
        "rho": 0.5, "weight_decay": 1.0}
    with pytest.raises(ValueError, match="--param must look like KEY=VALUE, got 'rho'"):
        key_values(["rho"], "--param", float)
    with pytest.raises(ValueError, match="--param rho: bad value 'x'"):
        key_values(["rho=x"], "--param", float)
    args = argparse.Namespace(seed=1, _run=print, nm=(2, 4))
    assert run_params(args) == {"seed": 1, "nm": (2, 4)}


@pytest.mark.parametrize("argv, option", [(["train", "--nm", "a:b"], "--nm"),
                                          (["train", "--teacher-nm", "3:2"], "--teacher-nm"),
                                          (["memory", "--model", "gpt2", "--nm", "4:2"], "--nm")])
def test_bad_nm_option_is_a_one_line_error_naming_the_option(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: argument {option}: " in err and "Traceback" not in err


@pytest.mark.slow
def test_bench_quick_other_sections_print_each_row_once(tmp_path, capsys):
    """`stepsim bench --quick --only theorem1 --only layout` from the CLI (these sections'
    every-section-from-the-CLI test in test_bench, with more checks: each section's rows
    are printed once and saved under that section's name)."""
    path = tmp_path / "bench.json"
    argv = ["bench", "--quick", "--only", "theorem1", "--only", "layout", "--json", str(path)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "Traceback" not in captured.err
    rows = json.loads(path.read_text())["result"]["rows"]
    for section in ("theorem1", "layout"):  # which section lost its rows, if one did
        assert [r for r in rows if r["section"] == section], section
    assert {row["section"] for row in rows} == {"theorem1", "layout"}
    for row in rows:
        assert row["seconds"] > 0
        line = f"{row['case']:<26} {row['impl']:<22}"
        assert printed.count(line) == 1, line


def test_output_path_accepts_good_paths_and_creates_nothing(tmp_path):
    from pathlib import Path

    from stepsim.cli.args import check_distinct_outputs, output_path

    from stepsim.cli.args import OptionError, output_dir

    assert output_path(None, option="--json") is None
    got = output_path(str(tmp_path / "r.json"), option="--json", sidecars=(".npz",))
    assert got == Path(tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind
    new_dir = tmp_path / "not" / "yet"
    with pytest.raises(OptionError, match=r"directory .*not/yet does not exist"):
        output_path(str(new_dir / "r.json"), option="--json")  # never made for a file
    assert output_dir(str(tmp_path / "not"), option="--out") == tmp_path / "not"  # made later
    with pytest.raises(OptionError, match=r"--out .*not/yet: directory .*not does not exist"):
        output_dir(str(new_dir), option="--out")
    assert output_dir(str(new_dir), option="--out", default=True) == new_dir  # a default
    assert list(tmp_path.iterdir()) == []  # ... and nothing was created
    existing = tmp_path / "old.png"
    existing.write_bytes(b"x")
    assert output_path(str(existing), option="--plot", suffixes=(".png",)) == existing
    check_distinct_outputs(**{"--json": tmp_path / "a.json", "--plot": None})


def test_number_option_types():
    from stepsim.cli.args import finite_float, positive_int, seed

    assert seed("0") == 0 and seed(" 12 ") == 12 and seed(str(2**70)) == 2**70
    assert positive_int("3") == 3
    assert finite_float("1e-3") == 1e-3 and finite_float("-2") == -2.0
    for parse, bad in [(seed, "-1"), (seed, "1e3"), (positive_int, "0"), (positive_int, "x"),
                       (finite_float, "nan"), (finite_float, "-inf"),
                       (finite_float, "")]:
        with pytest.raises(ValueError):
            parse(bad)


def test_a_reader_that_leaves_the_pipe_early_gets_no_error_line():
    """`stepsim sweep ... --dry-run | head -1` (a listing larger than the pipe's buffer):
    the output stops silently with status 141 (as for SIGPIPE), not with "error: [Errno
    32] Broken pipe" or a traceback at exit."""
    import os
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "stepsim", "sweep", "--recipes", "dense",
                             "--steps", "1", "--seeds", "5000", "--dry-run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader leaves, as head does
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "regression, dense(optimizer=adam)" in first, first
    assert err == ""


def test_help_texts_carry_no_measured_numbers():
    """A duration or a speed measured once goes stale in a help text (bench --quick said
    "(seconds)" and took minutes): every subcommand's --help but check's (which states the
    protocol's budgets) and stepsim --help name no durations."""
    import re

    duration = re.compile(r"\b\d[\d.,]*\s*(?:-\s*\d[\d.,]*\s*)?(?:s|sec|seconds?|min|minutes?|ms|"
                          r"h|hours?)\b|\bmeasured\b|\(seconds\)", re.IGNORECASE)
    parser = build_parser()
    texts = {"stepsim": parser.format_help()}
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        if name != "check":
            texts[name] = sub.format_help()
    for name, text in texts.items():
        found = duration.findall(" ".join(text.split()))
        assert not found, f"{name} --help: {found}"
