"""Validation splits: choices made from data (learning rates, regularisers) read a split of
their own, and the test split the verdicts read is the same with or without it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepsim import fit, make_recipe
from stepsim.problems import make_problem
from stepsim.problems.digits import _load, stratified_split

SMALL_LM = {"vocab": 8, "order": 1, "context": 8, "width": 16, "blocks": 1, "heads": 2,
            "batch_size": 8, "n_test": 32}


def test_digits_validation_is_carved_from_the_training_part_and_leaves_the_test_images():
    plain = make_problem("digits", hidden=(16,), test_fraction=0.5)
    held = make_problem("digits", hidden=(16,), test_fraction=0.5, validation_fraction=0.25)
    assert np.array_equal(plain.y_test, held.y_test)
    _, y = _load()
    train, test = stratified_split(y, 0.5, 0)
    # the images: test identical, validation + train = the old training part, disjoint
    assert len(held.y_validation) + len(held.y) == len(plain.y) == len(train)
    assert len(held.y_validation) == math.ceil(0.25 * len(train))  # scikit-learn rounds up
    # stratified: every class is in the validation split, in proportion (within one image)
    counts = np.bincount(held.y_validation, minlength=10)
    expected = 0.25 * np.bincount(y[train], minlength=10)
    assert np.all(np.abs(counts - expected) <= 1)
    # the training images are the old training part minus the validation images: the same
    # multiset of labels, split in two
    assert np.array_equal(np.sort(np.concatenate([held.y, held.y_validation])),
                          np.sort(y[train]))
    assert held.config()["n_validation"] == len(held.y_validation)
    assert len(test) == len(held.y_test)


def test_digits_item_errors_per_split_and_their_refusals():
    held = make_problem("digits", hidden=(16,), test_fraction=0.5, validation_fraction=0.25)
    params = held.init_params(np.random.default_rng(0))
    val = held.item_errors(params, "validation")
    test = held.item_errors(params, "test")
    assert val.shape == (len(held.y_validation),) and test.shape == (len(held.y_test),)
    assert set(np.unique(val)) <= {0.0, 100.0}
    metrics = held.evaluate(params)
    assert metrics["validation_accuracy"] == pytest.approx(1 - val.mean() / 100)
    assert metrics["test_accuracy"] == pytest.approx(1 - test.mean() / 100)
    assert np.all(held.diverged_item_errors("validation") == 100.0)
    plain = make_problem("digits", hidden=(16,), test_fraction=0.5)
    assert "validation_accuracy" not in plain.evaluate(params)
    with pytest.raises(ValueError, match="validation_fraction = 0"):
        plain.item_errors(params, "validation")
    with pytest.raises(ValueError, match="split"):
        held.item_errors(params, "train")
    with pytest.raises(ValueError, match="validation_fraction"):
        make_problem("digits", validation_fraction=1.0)


def test_lm_validation_sequences_leave_test_set_and_training_unchanged():
    plain = make_problem("lm", **SMALL_LM)
    held = make_problem("lm", **SMALL_LM, n_validation=24)
    assert np.array_equal(plain.test_inputs, held.test_inputs)
    assert held.validation_inputs.shape == (24, SMALL_LM["context"])
    assert not np.array_equal(held.validation_inputs[:24], held.test_inputs[:24])
    runs = [fit(p, make_recipe("sr-ste", lr=1e-2), 30, rng=3, progress=False)
            for p in (plain, held)]
    for name, w in runs[0].weights.items():
        assert np.array_equal(w, runs[1].weights[name])  # the batch stream is untouched
    params = runs[1].weights
    val = held.item_errors(params, "validation")
    assert val.shape == (24,) and np.all(np.isfinite(val))
    assert held.evaluate(params)["validation_gap"] == pytest.approx(val.mean())
    assert held.diverged_item_errors("validation").shape == (24,)
    with pytest.raises(ValueError, match="n_validation = 0"):
        plain.item_errors(params, "validation")
    with pytest.raises(ValueError, match="n_validation"):
        make_problem("lm", **SMALL_LM, n_validation=-1)
