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

ROOT = Path(__file__).resolve().parents[1]

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
    from stepsim.checks._setup import Budget
    from stepsim.cli import build_parser, main
    from stepsim.cli.train import run_spec
    from stepsim.experiments import executors, run_sweep
    from stepsim.experiments.store import RunStore, load_table, read_plan, run_paths

    sweep_dir = tmp_path / "sweep"
    problem = {"hidden": [64], "test_fraction": 0.5, "batch_size": 128}  # PROTOCOL §1
    run_sweep({"steps": 300, "seeds": 1, "nm": ["2:4"],
               "problem": {"name": "digits", "options": problem},
               "recipes": [{"name": "step", "options": {"lr": 1e-3, "beta2": 0.999}}]},
              sweep_dir, jobs=1, progress=False)
    (row,) = read_plan(sweep_dir)
    from_sweep = row.spec
    seed = from_sweep.seed  # a sweep's seed is a hash of its problem and seed index

    argv = ["train", "--problem", "digits", "-p", "hidden=(64,)", "-p", "test_fraction=0.5",
            "-p", "batch_size=128", "--recipe", "step", "--nm", "2:4", "--steps", "300",
            "--seed", str(seed), "-o", "lr=1e-3", "-o", "beta2=0.999",
            "--json", str(tmp_path / "train.json")]
    from_train = run_spec(build_parser().parse_args(argv[:-2]))
    assert main(argv) == 0
    capsys.readouterr()
    # a check's run at the main timescale (beta2 0.999); no learning curves, as in tuning
    budget = Budget("full", "digits", "main", (seed,), steps=300)
    from_check = budget.run("step-a1", seed, nm=(2, 4), lr=1e-3, evaluate=False)
    assert from_check.criterion == DEFAULT_CRITERION[0]
    assert dict(from_check.criterion_options) == dict(DEFAULT_CRITERION[1])
    assert from_train == from_sweep == from_check
    assert len({from_train.digest, from_sweep.digest, from_check.digest}) == 1

    store = RunStore(tmp_path / "check-runs")  # the check's path: executor, then its store
    executors.run_serial([from_check], store.save)
    train = _arrays(tmp_path / "train.npz")
    sweep = _arrays(run_paths(sweep_dir, row)[1])
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
