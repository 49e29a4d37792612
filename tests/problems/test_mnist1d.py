"""The mnist1d problem: the package's generator with its global-RNG side effect undone,
the splits, the per-item errors of each split, bad options, and the CLI."""

import json
import random

import numpy as np
import pytest

from stepsim.cli import main
from stepsim.problems import make_problem
from stepsim.problems.mnist1d import generate, split_indices

TINY = {"channels": (4, 4), "kernel_sizes": 3, "n_train": 200, "n_validation": 40,
        "n_test": 50}


def _global_states():
    return random.getstate(), np.random.get_state(legacy=False)


def _same_states(a, b) -> bool:
    (py_a, np_a), (py_b, np_b) = a, b
    return py_a == py_b and json.dumps(np_a, default=lambda v: v.tolist()) == json.dumps(
        np_b, default=lambda v: v.tolist())


def test_generation_leaves_the_callers_global_random_state_untouched(monkeypatch):
    monkeypatch.setenv("STEPSIM_DATA_CACHE", "off")  # the package's generator runs here
    random.seed(11)
    np.random.seed(12)
    np.random.standard_normal()  # a cached Gaussian too (legacy state's has_gauss)
    before = _global_states()
    generate.cache_clear()
    x, y = generate(130, 3)  # runs the package's make_dataset, which seeds both globals
    assert _same_states(before, _global_states())
    assert x.shape == (130, 40) and x.dtype == np.float32 and y.dtype == np.int64
    assert np.bincount(y).tolist() == [13] * 10
    assert generate(130, 3)[0] is x  # cached per process
    assert not x.flags.writeable
    generate.cache_clear()  # the arrays made with the cache off are in no process's cache


def test_the_data_is_the_packages_make_dataset_rounded_to_float32():
    from mnist1d.data import get_dataset_args, make_dataset

    x, y = generate(130, 3)
    args = get_dataset_args()
    args.num_samples, args.seed = 130, 3  # its own 80/20 split of the same signals
    state = np.random.get_state(), random.getstate()
    try:
        theirs = make_dataset(args)
    finally:
        np.random.set_state(state[0])
        random.setstate(state[1])
    np.testing.assert_array_equal(x, np.concatenate([theirs["x"], theirs["x_test"]])
                                  .astype(np.float32))
    np.testing.assert_array_equal(y, np.concatenate([theirs["y"], theirs["y_test"]]))


def test_stepsims_seeding_does_not_depend_on_the_global_state():
    from stepsim import fit, make_recipe

    def run():
        problem = make_problem("mnist1d", **TINY, batch_size=8)
        return fit(problem, make_recipe("sr-ste", lr=1e-2), 6, rng=4, nm=(1, 4),
                   progress=False)

    generate.cache_clear()
    np.random.seed(1)
    first = run()
    generate.cache_clear()
    np.random.seed(2)
    random.seed(2)
    second = run()
    for name in first.weights:
        assert first.weights[name].tobytes() == second.weights[name].tobytes()
    assert first.metrics == second.metrics


def test_splits_are_disjoint_sized_and_seeded():
    a = make_problem("mnist1d", **TINY)
    assert (len(a.y), len(a.y_validation), len(a.y_test)) == (160, 40, 50)
    x, y = generate(250, 42)
    train, val = split_indices(200, 40, 42)
    assert not set(train) & set(val) and len(set(train) | set(val)) == 200
    np.testing.assert_array_equal(a.x[:, :, 0], x[train])
    np.testing.assert_array_equal(a.x_validation[:, :, 0], x[val])
    np.testing.assert_array_equal(a.x_test[:, :, 0], x[200:])  # the package's test part
    np.testing.assert_array_equal(a.y_test, y[200:])
    assert a.x.shape[1:] == (40, 1) and a.x.dtype == np.float32 and a.x.flags.c_contiguous
    b = make_problem("mnist1d", **TINY, seed=7)
    assert not np.array_equal(b.x_test, a.x_test)
    assert not np.array_equal(split_indices(200, 40, 7)[1], val)
    c = make_problem("mnist1d", **{**TINY, "dtype": np.float64})
    np.testing.assert_array_equal(c.x, a.x.astype(np.float64))


def test_item_errors_of_every_split_match_evaluate():
    problem = make_problem("mnist1d", **TINY)
    params = problem.init_params(np.random.default_rng(0))
    metrics = problem.evaluate(params)
    assert set(metrics) == {f"{s}_{m}" for s in ("test", "validation", "train")
                            for m in ("error", "loss")}
    for split, n in (("test", 50), ("validation", 40), ("train", 160)):
        items = problem.item_errors(params, split=split)
        assert items.shape == (n,) and items.dtype == np.float64
        assert set(np.unique(items)) <= {0.0, 100.0}
        assert float(np.mean(items)) == pytest.approx(metrics[f"{split}_error"])
        assert problem.diverged_item_errors(split).tolist() == [100.0] * n
    np.testing.assert_array_equal(problem.item_errors(params), problem.item_errors(params,
                                                                                  "test"))
    with pytest.raises(ValueError, match="split"):
        problem.item_errors(params, split="valid")


@pytest.mark.parametrize("options, match", [
    ({"n_validation": 200}, "n_validation = 200 must be < n_train = 200"),
    ({"n_test": 55}, "multiple of 10"),
    ({"channels": (4, 0)}, r"channels\[1\]"),
    ({"kernel_sizes": (3, 3, 3)}, "one value per conv layer"),
    ({"strides": "2"}, "strides"),
    ({"dtype": "float16"}, "float32 or float64"),
    ({"channels": (4, 6, 4), "nm": (2, 4)}, "not divisible by M = 4"),
])
def test_bad_options_are_one_line_errors(options, match):
    with pytest.raises((ValueError, TypeError), match=match) as err:
        make_problem("mnist1d", **{**TINY, **options})
    assert "\n" not in str(err.value)


def test_train_runs_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["train", "--problem", "mnist1d", "--recipe", "sr-ste", "--nm", "1:4",
                 "--steps", "30", "--eval-every", "10", "-p", "channels=8,8",
                 "-p", "n_train=400", "-p", "n_validation=100", "-p", "n_test=100",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "MNIST1D(channels=(8, 8)" in printed and "test_error" in printed
    saved = json.loads(out.read_text())
    doc = saved["result"]
    assert doc["nm"] == {"conv2.w": [1, 4], "head.w": [1, 4]}
    assert saved["provenance"]["params"]["problem_config"]["n_validation"] == 100
    assert {"test_error", "validation_error", "test_loss"} <= set(doc["metrics"])


def test_learning_curves_read_as_the_checks_read_them():
    from stepsim.checks.c01_srste_adam import curve_error
    from stepsim.experiments import traces
    from stepsim.experiments.run import RunSpec

    spec = RunSpec(problem="mnist1d", problem_options=TINY, recipe="dense", steps=20,
                   eval_every=10, seed=0)
    result = spec.run()
    curves = traces.summary(result)["curves"]
    assert list(curves["step"])[-1] == 20 and len(curves["validation_error"]) == len(
        curves["step"])
    assert curve_error(curves, -1) == result.metrics["test_error"]


def test_the_sweep_spec_plans_checked_runs():
    from pathlib import Path

    from stepsim.experiments.sweep import plan_sweep

    spec = Path(__file__).resolve().parents[2] / "stepsim/experiments/specs/mnist1d.toml"
    runs = plan_sweep(spec)
    assert len(runs) == 3 * 2 * 3 and {r.problem for r in runs} == {"mnist1d"}
    assert {r.nm for r in runs} == {(1, 4), (1, 8)} and all(r.steps == 3000 for r in runs)
