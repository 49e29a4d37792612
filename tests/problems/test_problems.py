"""The registered problems: protocol, data, gradients, mask recovery, size checks."""

import json

import numpy as np
import pytest

from stepsim.core.sparsity import check_specs
from stepsim.problems import PROBLEMS, Problem, make_problem, problem_options
from stepsim.problems.digits import Digits
from stepsim.problems.teacher import TeacherStudent
from tests.gradcheck import numeric_grad

SMALL = {  # fast instances of every registered problem
    "regression": {},
    "digits": {"hidden": (16,)},
    "teacher": {"d_in": 16, "hidden": (32,), "d_out": 4, "n_test": 64, "batch_size": 8},
    "nqm": {"dim": 16},
    "lm": {"vocab": 8, "order": 1, "context": 8, "width": 16, "blocks": 1, "heads": 2,
           "batch_size": 4, "n_test": 32},
    "mnist1d": {"channels": (4, 4), "kernel_sizes": 3, "n_train": 200, "n_validation": 40,
                "n_test": 50},
}


def test_the_protocol_test_covers_every_registered_problem():
    assert set(SMALL) == set(PROBLEMS)


def test_registry_names():
    assert set(PROBLEMS) == {"regression", "digits", "teacher", "nqm", "lm", "mnist1d"}
    assert "hidden" in problem_options("digits") and "teacher_nm" in problem_options("teacher")
    with pytest.raises(ValueError, match="unknown option"):
        make_problem("digits", width=3)
    with pytest.raises(ValueError, match="problem"):
        make_problem("mnist")


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_problem_follows_the_protocol(name):
    problem = make_problem(name, **SMALL[name])
    assert isinstance(problem, Problem)
    json.dumps(problem.config())  # JSON-ready provenance
    params = problem.init_params(np.random.default_rng(0))
    check_specs(params, problem.specs)
    before = {k: v.copy() for k, v in params.items()}
    batch = problem.sample_batch(np.random.default_rng(1))
    loss, grads = problem.loss_and_grad(params, batch)
    assert np.isfinite(loss)
    assert set(grads) == set(params)
    for k in params:
        assert grads[k].shape == params[k].shape and grads[k].dtype == params[k].dtype
    metrics = problem.evaluate(params)
    assert metrics == problem.evaluate(params)  # deterministic
    assert all(isinstance(v, float) for v in metrics.values())
    assert all(np.array_equal(params[k], before[k]) for k in params)  # params untouched
    # same seed, same data and batches
    again = make_problem(name, **SMALL[name])
    b2 = again.sample_batch(np.random.default_rng(1))
    assert again.loss_and_grad(params, b2)[0] == loss


@pytest.mark.parametrize("name, options", [
    ("digits", {"hidden": (8,), "activation": "tanh"}),
    ("teacher", {"d_in": 8, "hidden": (8,), "d_out": 3, "task": "classification"}),
    ("teacher", {"d_in": 8, "hidden": (8, 8), "d_out": 3, "task": "regression",
                 "noise": 0.1, "n_train": 32}),
    ("mnist1d", {"channels": (4, 4), "kernel_sizes": (5, 2), "strides": (2, 3),
                 "n_train": 100, "n_validation": 20, "n_test": 50}),
])
def test_problem_gradients_match_finite_differences(name, options):
    problem = make_problem(name, dtype=np.float64, batch_size=5, **options)
    rng = np.random.default_rng(2)
    params = problem.init_params(rng)
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}
    batch = problem.sample_batch(rng)
    _, grads = problem.loss_and_grad(params, batch)
    for k in params:
        numeric = numeric_grad(lambda: problem.loss_and_grad(params, batch)[0], params[k])
        np.testing.assert_allclose(grads[k], numeric, rtol=1e-5, atol=1e-7)


def test_digits_split_is_stratified_standardised_and_seeded():
    a, b, c = Digits(seed=0), Digits(seed=0), Digits(seed=1)
    assert a.x.shape == (1437, 64) and a.x_test.shape == (360, 64) and a.x.dtype == np.float32
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert not np.array_equal(a.y_test, c.y_test)
    # every class keeps its share in the test set (stratified): 20% +- one image
    counts = np.bincount(a.y_test, minlength=10)
    totals = counts + np.bincount(a.y, minlength=10)
    assert np.all(np.abs(counts - 0.2 * totals) <= 1)
    moving = a.x.std(axis=0) > 0
    np.testing.assert_allclose(a.x.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(a.x.std(axis=0)[moving], 1, rtol=1e-4)
    assert set(a.evaluate(a.init_params(0))) == {"test_accuracy", "test_loss",
                                                 "train_accuracy", "train_loss"}
    assert a.mlp.sizes == (64, 256, 256, 10) and a.batch_size == 128
    assert Digits(sparsify="all-but-last").specs["w3"].sparse is False


def test_teacher_mask_recovery_sees_through_unit_permutations():
    problem = TeacherStudent(d_in=32, hidden=(64,), d_out=4, teacher_nm=(2, 4), n_test=512)
    teacher = dict(problem.teacher)
    perfect = problem.evaluate(teacher)
    assert perfect["test_accuracy"] == 1.0 and perfect["mask_recovery"] == 1.0
    # the same function with its hidden units shuffled: aligned recovery stays 1
    perm = np.random.default_rng(0).permutation(64)
    shuffled = dict(teacher, w1=teacher["w1"][perm], b1=teacher["b1"][perm],
                    w2=np.ascontiguousarray(teacher["w2"][:, perm]))
    metrics = problem.evaluate(shuffled)
    assert metrics["mask_recovery"] == 1.0 and metrics["test_accuracy"] == 1.0
    assert metrics["mask_recovery_unaligned"] < 0.7  # near chance (0.5) without alignment
    # a random student: near chance
    rand = problem.evaluate(problem.init_params(np.random.default_rng(1)))
    assert abs(rand["mask_recovery"] - 0.5) < 0.1 and rand["mask_recovery_chance"] == 0.5
    dense = TeacherStudent(d_in=8, hidden=(8,), d_out=2, teacher_nm=None, n_test=16)
    assert "mask_recovery" not in dense.evaluate(dense.init_params(0))


def test_teacher_is_sparse_and_wide_sizes_work():
    problem = TeacherStudent(d_in=64, hidden=(1024,), d_out=10, teacher_nm=(1, 8), nm=(1, 8),
                             n_test=256, batch_size=32)
    w1 = problem.teacher["w1"]
    assert w1.shape == (1024, 64)
    assert np.all(np.count_nonzero(w1.reshape(1024, 8, 8), axis=-1) == 1)
    loss, grads = problem.loss_and_grad(problem.init_params(0), problem.sample_batch(
        np.random.default_rng(0)))
    assert grads["w1"].shape == (1024, 64) and np.isfinite(loss)


def test_absurd_sizes_are_refused_before_allocating():
    with pytest.raises(ValueError, match="GiB"):
        TeacherStudent(d_in=64, hidden=(10**6, 10**6), d_out=10)
    with pytest.raises(ValueError, match="GiB"):
        TeacherStudent(n_train=10**11)
    with pytest.raises(ValueError, match="GiB"):
        Digits(hidden=(10**6, 10**6))
    with pytest.raises(ValueError, match="not divisible by M = 4"):
        TeacherStudent(d_in=6)
    with pytest.raises(ValueError, match="task"):
        TeacherStudent(task="ranking")
