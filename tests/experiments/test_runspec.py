"""RunSpec: one description of a run for train, sweep and check — round trips, a digest that is
the same in every process, its defaults stated once, one door for N:M, and the same bits
whichever front end built it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepsim.experiments.run import DEFAULT_CRITERION, RunSpec

ROOT = Path(__file__).resolve().parents[2]

SPECS = [
    RunSpec(),
    RunSpec(problem="digits", problem_options={"hidden": (16,)}, recipe="step",
            recipe_options={"lr": 3e-3, "v_star": "bias-corrected"}, nm=(1, 4), steps=50,
            seed=2**63 + 5, eval_every=10),
    RunSpec(recipe="layerwise-sr-ste", recipe_options={"layerwise_m": 4,
                                                       "layerwise_allocation": {"w1": 1, "w2": 2}}),
    RunSpec(recipe="dense", criterion="tang", criterion_options={"window_length": 999},
            per_module=True, loss_scale=0.01, optimizer="adamw"),
    RunSpec(recipe="sr-ste", optimizer="sgdm", recipe_options={"lr": 0.05, "momentum": 0.9}),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.recipe)
def test_json_round_trip_keeps_the_run_and_its_digest(spec):
    again = RunSpec.from_json(spec.to_json())
    assert again == spec and again.digest == spec.digest and hash(again) == hash(spec)
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert len(spec.digest) == 64 and spec.to_json() == again.to_json()


def test_the_digest_is_the_same_in_another_process_and_pinned():
    code = ("import sys; from stepsim.experiments.run import RunSpec; "
            "[print(RunSpec.from_json(line).digest) for line in sys.stdin.read().splitlines()]")
    out = subprocess.run([sys.executable, "-c", code], input="\n".join(s.to_json() for s in SPECS),
                         capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "123", "PATH": ""})
    assert out.stdout.split() == [s.digest for s in SPECS]
    # the canonical text is part of the contract (stored runs are found by it)
    assert SPECS[0].to_json() == (
        '{"criterion":null,"eval_every":null,"format":"stepsim.RunSpec/1","loss_scale":1.0,'
        '"nm":null,"problem":{"name":"regression","options":{}},"recipe":{"name":"dense",'
        '"optimizer":"adam","options":{}},"seed":0,"steps":2000}')


# digests recorded before sweeps ran RunSpecs (issue 27, commit aeb0e34): the committed
# check's run store and every resumed sweep find their runs by them
PINNED = ["06e355297b58bc9e", "7e757bda8b93c86d", "ba3e9009c853a612", "5ed277df2e0b0659",
          "51bd45373c69f360"]
SWEEP = {"steps": 50, "seeds": 2, "nm": ["2:4", "1:8"], "eval_every": 10,
         "problem": {"name": "regression", "options": {"scale": 0.1}},
         "recipes": ["dense", {"name": "step", "criteria": [
             "autoswitch", {"name": "fixed-fraction",
                            "options": {"fraction": 0.2, "per_module": True}}]},
                     {"name": "sr-ste", "grid": {"lam": [1e-4, 2e-4]}}]}
SWEEP_PINNED = ["b8fa82da36c6", "37115120e363", "06de9058d747", "d36f22fffd4b", "8b8691b274a1",
                "a2738d2cbf2a", "029be38bcc8f", "e2eb3fc3a38e", "b6dda3cc81d4", "44f1b93d8fe5",
                "b2bf13761408", "b4262846ea0a", "6eaa005dbd3c", "f4c86dc4440f", "77e68882da4b",
                "107714b8900a", "77410a8cca3d", "95967ae103bf", "3a1b50d190f1", "28a5beb7310d"]


def test_digests_of_known_runs_and_of_a_sweeps_runs_are_unchanged():
    from stepsim._ground.validate import NMRatio
    from stepsim.experiments import plan_sweep

    assert [s.digest[:16] for s in SPECS] == PINNED
    assert [r.digest[:12] for r in plan_sweep(SWEEP)] == SWEEP_PINNED
    typed = SPECS[1].replace(nm=NMRatio(1, 4))  # the typed N:M is the same run
    assert typed == SPECS[1] and typed.digest == SPECS[1].digest


def test_the_run_nm_is_one_typed_value_from_the_cli_to_the_problem():
    from stepsim._ground.validate import NMRatio, check_nm_pair
    from stepsim.cli import build_parser
    from stepsim.cli.train import run_spec

    args = build_parser().parse_args(["train", "--problem", "nqm", "-p", "dim=16", "--nm",
                                      "1:4"])
    assert type(args.nm) is NMRatio and args.nm == (1, 4)
    spec = run_spec(args)
    assert spec.nm is args.nm  # not re-made on the way
    problem = spec.build_problem()
    assert problem.nm is args.nm and check_nm_pair("nm", args.nm) is args.nm
    assert [s.nm for s in problem.specs.values() if s.sparse] == [(1, 4)]
    assert RunSpec(nm=[1, 4]).nm == NMRatio(1, 4) and type(RunSpec(nm=(1, 4)).nm) is NMRatio
    with pytest.raises(ValueError, match=r"nm\[0\] must be <= nm\[1\]"):
        NMRatio(5, 4)
    with pytest.raises(ValueError, match="must look like N:M"):
        NMRatio.parse("2-4")


def test_fit_nm_makes_new_specs_and_never_changes_a_frozen_one():
    from stepsim._ground.validate import NMRatio
    from stepsim.problems import make_problem
    from stepsim.recipes import make_recipe
    from stepsim.training import fit

    problem = make_problem("regression", d_in=16, d_hidden=8)
    before = dict(problem.specs)
    result = fit(problem, make_recipe("ste"), 3, rng=0, nm=NMRatio(1, 8), progress=False)
    assert set(result.nm.values()) == {(1, 8)}
    assert problem.specs == before and all(s.nm in (None, (2, 4)) for s in before.values())


def test_defaults_are_stated_once_and_resolved_into_the_spec():
    step = RunSpec(recipe="step")
    assert (step.criterion, step.criterion_options) == (DEFAULT_CRITERION[0],
                                                        DEFAULT_CRITERION[1])
    assert RunSpec(recipe="step", criterion_options={"clip": False}).criterion_options == (
        ("clip", False),)  # options given without a name adjust the default criterion
    assert RunSpec(recipe="dense").criterion is None
    assert RunSpec(recipe="step", recipe_options={"switch_at": 0.5}).criterion is None
    # the optimizer's own lr, not another front end's
    assert RunSpec(optimizer="sgdm").build_recipe().optimizer.lr == 1e-2
    assert RunSpec().build_recipe().optimizer.lr == 1e-3
    with pytest.raises(ValueError, match="need a criterion name"):
        RunSpec(recipe="dense", criterion_options={"fraction": 0.2})


def test_nm_enters_through_one_door():
    with pytest.raises(ValueError, match="one door for N:M"):
        RunSpec(problem_options={"nm": (2, 4)})
    # the run's N:M is the problem's: its sparse parameters and what it derives from N:M
    nqm = RunSpec(problem="nqm", problem_options={"dim": 16}, nm=(1, 4)).build_problem()
    assert nqm.nm == (1, 4) and all(s.nm == (1, 4) for s in nqm.specs.values() if s.sparse)


def test_loss_scale_multiplies_the_training_loss_only():
    plain = RunSpec(recipe="dense", steps=20).run()
    scaled = RunSpec(recipe="dense", steps=20, loss_scale=0.01).run()
    assert scaled.trace.loss[0] == 0.01 * plain.trace.loss[0]  # same initial weights
    assert scaled.initial_metrics == plain.initial_metrics      # held-out metrics unscaled
    assert "ScaledLoss" in scaled.problem and "factor=0.01" in scaled.problem
    with pytest.raises(ValueError, match="loss_scale"):
        RunSpec(loss_scale=0.0)


def test_check_raises_what_fit_raises_before_training():
    bad = [RunSpec(recipe="dense", optimizer="sgdm", criterion="autoswitch", steps=5),
           RunSpec(recipe="ste", nm=(1, 32), steps=5),           # M = 32 does not tile 16
           RunSpec(recipe="step", criterion=None, steps=5)]     # STEP needs a criterion
    for spec in bad:
        with pytest.raises(ValueError) as checked:
            spec.check()
        with pytest.raises(ValueError) as ran:
            spec.run()
        assert str(checked.value) == str(ran.value)
    with pytest.raises(ValueError, match="unknown option"):
        RunSpec(recipe="sr-ste", recipe_options={"lamb": 1.0}).check()


def _arrays(npz) -> dict:
    with np.load(npz) as data:
        return {k: data[k] for k in data.files}


def test_train_sweep_and_check_give_the_same_run_the_same_bits(tmp_path, capsys):
    """One run (STEP, default criterion, lr 1e-3, beta2 0.999, 2:4, 300 steps, on the
    protocol's digits problem) built by `stepsim train`, by a sweep row and by a paper
    check's budget: one RunSpec, one set of bits."""
    from stepsim.checks import protocol
    from stepsim.checks.budget import Budget
    from stepsim.cli import build_parser, main
    from stepsim.cli.train import run_spec
    from stepsim.experiments import executors, run_sweep
    from stepsim.experiments.store import RunStore
    from stepsim.experiments.sweep_dir import load_table, read_plan, sweep_store

    sweep_dir = tmp_path / "sweep"
    problem = {"hidden": [64], "test_fraction": 0.5, "batch_size": 128}  # PROTOCOL §1
    run_sweep({"steps": 300, "seeds": 1, "nm": ["2:4"],
               "problem": {"name": "digits", "options": problem},
               "recipes": [{"name": "step", "options": {"lr": 1e-3, "beta2": 0.999}}]},
              sweep_dir, jobs=1, progress=False)
    ((from_sweep, _),) = read_plan(sweep_dir)
    seed = from_sweep.seed  # a sweep's seed is a hash of its problem and seed index

    argv = ["train", "--problem", "digits", "-p", "hidden=(64,)", "-p", "test_fraction=0.5",
            "-p", "batch_size=128", "--recipe", "step", "--nm", "2:4", "--steps", "300",
            "--seed", str(seed), "-o", "lr=1e-3", "-o", "beta2=0.999",
            "--json", str(tmp_path / "train.json")]
    from_train = run_spec(build_parser().parse_args(argv[:-2]))
    assert main(argv) == 0
    capsys.readouterr()
    # a check's run at the main timescale (beta2 0.999); no learning curves, as in tuning;
    # under draft 4's rules (draft 5's runs add a validation split and the blow-up stop)
    budget = Budget("full", "digits", "main", (seed,), steps=300, rules=protocol.TYPED[4])
    from_check = budget.run("step-a1", seed, nm=(2, 4), lr=1e-3, evaluate=False)
    assert from_check.criterion == DEFAULT_CRITERION[0]
    assert dict(from_check.criterion_options) == dict(DEFAULT_CRITERION[1])
    assert from_train == from_sweep == from_check
    assert len({from_train.digest, from_sweep.digest, from_check.digest}) == 1

    store = RunStore(tmp_path / "check-runs")  # the check's path: executor, then its store
    executors.run([from_check], jobs=1, store=store)
    train = _arrays(tmp_path / "train.npz")
    sweep = _arrays(sweep_store(sweep_dir).path(from_sweep).with_suffix(".npz"))
    check = _arrays(store.path(from_check).with_suffix(".npz"))
    assert set(train) == set(sweep) == set(check)
    for key in train:
        np.testing.assert_array_equal(train[key], sweep[key], err_msg=key)
        np.testing.assert_array_equal(train[key], check[key], err_msg=key)
    assert load_table(sweep_dir).rows[0]["switch_step"] == store.load(from_check).switch_step
    # train --json records its RunSpec: the run can be repeated from the file alone
    params = json.loads((tmp_path / "train.json").read_text())["provenance"]["params"]
    assert RunSpec.from_dict(params["run"]) == from_train
    assert params["run_digest"] == from_train.digest
