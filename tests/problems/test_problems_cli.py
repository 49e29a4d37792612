"""`stepsim train --problem NAME -p KEY=VALUE`: every registered problem from the CLI."""

import json

import pytest

from stepsim.cli import main
from stepsim.cli.train import _value


def test_values_parse_as_the_problems_expect():
    assert _value("2:4") == (2, 4)
    assert _value("128,64") == (128, 64) and _value("32,") == (32,)
    assert _value("all-but-last") == "all-but-last"
    assert _value("none") is None and _value("1e-3") == 1e-3 and _value("float32") == "float32"


@pytest.mark.parametrize("argv", [
    ["--problem", "digits", "-p", "hidden=32", "--nm", "1:8"],
    ["--problem", "teacher", "-p", "d_in=16", "-p", "hidden=32", "-p", "d_out=4",
     "-p", "n_test=64", "--teacher-nm", "2:4", "--batch-size", "16"],
    ["--problem", "nqm", "-p", "dim=32", "--lr", "0.01"],
])
def test_train_runs_every_problem_and_saves_its_test_metrics(argv, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["train", "--recipe", "sr-ste", "--steps", "20", *argv,
                 "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    doc, params = saved["result"], saved["provenance"]["params"]
    assert params["problem_name"] == argv[1]
    assert doc["metrics"] and all(isinstance(v, float) for v in doc["metrics"].values())
    if argv[1] != "nqm":
        assert "test_loss" in doc["metrics"]
    if argv[1] == "teacher":
        assert params["problem_config"]["teacher_nm"] == [2, 4]
        assert "mask_recovery" in doc["metrics"]
    if argv[1] == "digits":
        assert params["problem_config"]["hidden"] == [32] and doc["nm"]["w1"] == [1, 8]
    assert (tmp_path / "run.npz").exists()


def test_problem_options_are_listed(capsys):
    assert main(["train", "--problem", "teacher", "--problem-options"]) == 0
    printed = capsys.readouterr().out
    assert "-p teacher_nm=2:4" in printed and "-p hidden=256" in printed


@pytest.mark.parametrize("argv, message", [
    (["--problem", "digits", "--d-in", "8"], "--d-in does not apply to problem 'digits'"),
    (["--problem", "digits", "-p", "width=3"], "unknown option(s) ['width']"),
    (["--problem", "nqm", "--nm", "2:4", "-p", "nm=1:4"], "--nm and -p nm=... both given"),
    (["--problem", "mnist"], "unknown problem 'mnist'"),
    (["--json", "out/t.npz"], "must not end in .npz"),
])
def test_bad_problem_options_fail_before_training(argv, message, capsys, tmp_path,
                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--steps", "5", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
