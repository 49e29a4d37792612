"""Options: one KEY=VALUE grammar in every subcommand, one exception type for an unknown
option, and one name per option from the keyboard to the error message."""

from __future__ import annotations

import pytest

from stepsim._ground.validate import NMRatio, UnknownOptionError
from stepsim.cli.args import key_values, value


@pytest.mark.parametrize("text, expected", [  # "N:M" is the typed N:M a run carries
    ("true", True), ("False", False), ("none", None), ("3", 3), ("1e-3", 1e-3),
    ("2:4", NMRatio(2, 4)), ("256,256", (256, 256)), ("64,", (64,)), ("(64,)", (64,)),
    ("(1,4)", (1, 4)), ("[8, 8]", (8, 8)), ("bias-corrected", "bias-corrected"),
    ("all-but-last", "all-but-last")])
def test_one_value_grammar(text, expected):
    assert value(text) == expected and type(value(text)) is type(expected)


def test_key_values_use_that_grammar_and_name_the_option():
    assert key_values(["hidden=64,64", "weight-decay=0.1"], "-p") == {
        "hidden": (64, 64), "weight_decay": 0.1}
    with pytest.raises(ValueError, match="-p nm: bad value '2:x'"):
        key_values(["nm=2:x"], "-p")


def test_train_sweep_and_check_parse_a_value_alike():
    from stepsim.cli import train

    assert train._value is value


@pytest.mark.parametrize("build", [
    lambda: __import__("stepsim").make_problem("digits", width=3),
    lambda: __import__("stepsim").make_recipe("sr-ste", lamb=1.0),
    lambda: __import__("stepsim.recipes", fromlist=["make_optimizer"]).make_optimizer(
        "sgdm", beta2=0.9),
    lambda: __import__("stepsim").make_criterion("autoswitch", k0=5),
])
def test_an_unknown_option_is_one_exception_type_everywhere(build):
    with pytest.raises(UnknownOptionError) as err:
        build()
    # still what each raised before: a ValueError (and a TypeError, as make_criterion's was)
    assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)


def test_an_option_keeps_its_name_from_keyboard_to_error():
    from stepsim import make_recipe

    with pytest.raises(ValueError, match=r"^lam must be"):
        make_recipe("sr-ste", lam=-1)
    with pytest.raises(ValueError, match=r"^srste_lam must be"):
        make_recipe("step", srste_lam=-1)
    with pytest.raises(ValueError, match="placement"):
        make_recipe("sr-ste", placement="middle")


def test_p_nm_is_the_runs_nm_in_train_sweep_and_check(tmp_path):
    from stepsim.cli import build_parser
    from stepsim.cli.sweep import build_spec
    from stepsim.cli.train import run_spec

    parse = build_parser().parse_args
    assert run_spec(parse(["train", "-p", "nm=1:8"])).nm == (1, 8)
    spec = build_spec(parse(["sweep", "--recipes", "dense", "-p", "nm=2:4,1:8"]))
    assert spec["nm"] == ["2:4", "1:8"] and "nm" not in spec["problems"][0]["options"]
    with pytest.raises(ValueError, match="both given"):
        build_spec(parse(["sweep", "--recipes", "dense", "--nm", "2:4", "-p", "nm=1:4"]))
