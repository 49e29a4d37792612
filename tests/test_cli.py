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
    assert set(built) == set(SUBCOMMANDS)
    for name in built:
        assert name in out.stdout


def test_bad_bench_section_is_a_one_line_error(capsys):
    assert main(["bench", "--only", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "unknown bench section(s) ['nonsense']" in err
    assert "Traceback" not in err


def test_bench_quick_kernels_smoke(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "kernels", "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "nm_mask 2:4 n=2^16" in printed and "adam_step frozen v" in printed
    doc = json.loads(path.read_text())
    rows = doc["result"]["rows"]
    cases = {(r["case"], r["impl"]) for r in rows}
    for case in ("nm_mask 2:4 n=2^20", "adam_step n=2^20", "sgdm_step n=2^16"):
        assert (case, "numba") in cases and (case, "numpy") in cases
    assert all(r["seconds"] > 0 and r["ns_per_unit"] > 0 for r in rows)
    assert doc["provenance"]["params"] == {"quick": True, "only": ["kernels"], "torch": False}
    assert doc["provenance"]["versions"]["numba"]


@pytest.mark.parametrize("argv", [["--version"], []])
def test_version_and_bare_command(argv, capsys):
    assert main(argv) == 0
    assert capsys.readouterr().out


def test_shared_option_parsers():
    import argparse

    from stepsim.cli._args import key_values, nm, run_params

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


def test_bench_quick_other_sections_print_each_row_once(capsys):
    from stepsim.bench import run_bench

    bench = run_bench(quick=True, only=["theorem1", "layout"])
    printed = capsys.readouterr().out
    sections = {row["section"] for row in bench.rows}
    assert sections == {"theorem1", "layout"}
    for row in bench.rows:
        assert row["seconds"] > 0
        line = f"{row['case']:<26} {row['impl']:<22}"
        assert printed.count(line) == 1, line
