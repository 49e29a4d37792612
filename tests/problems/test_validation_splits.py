"""Validation splits: choices made from data (learning rates, regularisers) read a split of
their own, and the test split the verdicts read is the same with or without it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_digits_are_scikit_learns_and_read_without_importing_it():
    # the arrays load_digits gives, read from its shipped file in a process that never
    # imports scikit-learn (its import was most of a short check's subprocess)
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    x, y = _load()
    data = load_digits()
    assert x.dtype == np.float64 and y.dtype == np.int64 and x.shape == (1797, 64)
    assert x.tobytes() == data.data.astype(np.float64).tobytes()
    assert y.tobytes() == data.target.astype(np.int64).tobytes()
    code = ("import sys, stepsim\nfrom stepsim.problems import make_problem\n"
            "make_problem('digits', validation_fraction=0.1)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.77]),
       st.integers(0, 3))
def test_the_stratified_split_is_scikit_learns(seed, fraction, labels):
    # train_test_split(..., stratify=y, random_state=seed), sorted: on the digits labels,
    # on a part of them (the validation split's case) and on uneven made-up classes
    # (remainders tied, so the random tie-breaks are exercised)
    from sklearn.model_selection import train_test_split

    _, digits = _load()
    y = (digits, digits[::3], np.repeat(np.arange(7), [2, 3, 5, 5, 8, 13, 40]),
         np.random.default_rng(seed).integers(0, 4, 60))[labels]
    counts = np.unique(y, return_counts=True)[1]
    held = math.ceil(fraction * len(y))
    if counts.min() < 2 or min(held, len(y) - held) < len(counts):
        with pytest.raises(ValueError, match="cannot split"):
            stratified_split(y, fraction, seed)
        return
    train, test = stratified_split(y, fraction, seed)
    want_train, want_test = train_test_split(np.arange(len(y)), test_size=fraction,
                                             stratify=y, random_state=seed)
    assert train.tolist() == sorted(want_train) and test.tolist() == sorted(want_test)
