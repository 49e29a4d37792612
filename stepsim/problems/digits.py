"""Handwritten digits (scikit-learn's ``load_digits``) classified by an MLP.

Data: the 1,797 8x8 images (64 features, pixel values 0..16, 10 classes) that ship inside
scikit-learn (no download). A stratified train/test split seeded by ``seed``
(``test_fraction`` of each class held out), then, when ``validation_fraction`` > 0, a
stratified validation split of that share of each class of the training part (seeded the
same way; the test images do not change with it); features standardised with the training
set's mean and standard deviation (constant pixels are left at 0). Choices made from data
(learning rates, regularisers) read the validation split, verdicts the test split.

Model: :class:`stepsim.nn.MLP` with sizes (64, *hidden, 10), default 64-256-256-10, ReLU;
loss: mean softmax cross-entropy over a minibatch of ``batch_size`` training images drawn
with replacement. Sparsity: every Linear weight N:M (``sparsify="all"``, the paper) or all
but the output layer (``"all-but-last"``, SR-STE), ``nm`` default 2:4.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from stepsim._ground.options import (
    NM,
    Bool,
    Choice,
    Described,
    Int,
    Option,
    Options,
    Real,
    Widths,
    declared_keywords,
)
from stepsim._ground.validate import check_choice, check_problem_memory
from stepsim.nn import fused
from stepsim.nn import layers as L
from stepsim.nn.mlp import ACTIVATIONS, MLP, SPARSIFY, float_dtype
from stepsim.problems.base import ITEM_SPLITS


class Batch(NamedTuple):
    """A minibatch: x (B, 64) standardised features, y (B,) int64 labels in 0..9."""

    x: np.ndarray
    y: np.ndarray


@functools.lru_cache(maxsize=1)
def _load() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x, y = data.data.astype(np.float64), data.target.astype(np.int64)
    x.flags.writeable = y.flags.writeable = False  # shared by every problem in the process
    return x, y


def stratified_split(y: np.ndarray, test_fraction: float, seed: int):
    """(train indices, test indices): ``test_fraction`` of each class, seeded, sorted."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=test_fraction, stratify=y, random_state=seed)
    return np.sort(train), np.sort(test)


class Digits:
    """MLP on scikit-learn's digits (see the module docstring).

    hidden: hidden widths. activation: relu, gelu or tanh. sparsify: all, all-but-last or
    none. nm: default N:M. batch_size: minibatch size. test_fraction: held-out share of each
    class. dtype: float32 (default) or float64. seed: the train/test split (``init_params``
    and ``sample_batch`` take the caller's generator).
    """

    #: the options, declared once (stepsim._ground.options): the defaults and checks of
    #: __init__'s keywords
    OPTIONS = Options({
        "hidden": Option(Widths(), (256, 256), "hidden layer widths"),
        "activation": Option(Choice(*ACTIVATIONS), "relu", "hidden activation"),
        "sparsify": Option(Choice(*SPARSIFY), "all", "which Linear weights are N:M sparse"),
        "nm": Option(NM(), (2, 4), "N:M of the sparse weights"),
        "batch_size": Option(Int(minimum=1), 128, "minibatch size"),
        "test_fraction": Option(Real(0.0, 1.0, min_open=True, max_open=True), 0.2,
                                "share of each class held out"),
        "validation_fraction": Option(Real(0.0, 1.0, max_open=True), 0.0,
                                      "share of each class of the training part held out "
                                      "for validation (0: none)"),
        "bias": Option(Bool(), True, "Linear layers have biases"),
        "dtype": Option(Described("float32|float64"), np.float32, "data and parameter dtype"),
        "seed": Option(Int(minimum=0), 0, "seed of the train/test split"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, hidden: tuple[int, ...], activation: str, sparsify: str,
                 nm: tuple[int, int], batch_size: int, test_fraction: float,
                 validation_fraction: float, bias: bool, dtype, seed: int):
        self.mlp = MLP((64, *hidden, 10), activation=activation, sparsify=sparsify, nm=nm,
                       bias=bias)
        self.batch_size, self.test_fraction = batch_size, test_fraction
        self.validation_fraction = validation_fraction
        self.dtype = float_dtype(dtype)
        self.seed = seed
        self.specs = self.mlp.specs()
        # parameters with Adam's m, v and copies, plus activations of the largest evaluation
        check_problem_memory("digits", {"hidden": hidden, "dtype": self.dtype.name},
                             self.dtype.itemsize * (8 * self.mlp.n_params()
                                                    + 4 * 1797 * max(self.mlp.sizes)),
                             "parameters, Adam's state, activations")

        x, y = _load()
        train, test = stratified_split(y, self.test_fraction, self.seed)
        validation = train[:0]
        if validation_fraction > 0:  # carved from the training part: the test images stay
            keep, held = stratified_split(y[train], validation_fraction, self.seed)
            train, validation = train[keep], train[held]
        mean = x[train].mean(axis=0)
        std = x[train].std(axis=0)
        std[std == 0] = 1.0  # constant pixels (always 0 in the training set) stay 0
        self.x = np.ascontiguousarray((x[train] - mean) / std, dtype=self.dtype)
        self.y = y[train]
        self.x_test = np.ascontiguousarray((x[test] - mean) / std, dtype=self.dtype)
        self.y_test = y[test]
        self.x_validation = np.ascontiguousarray((x[validation] - mean) / std,
                                                 dtype=self.dtype)
        self.y_validation = y[validation]

    def __repr__(self):
        m = self.mlp
        return (f"Digits(sizes={m.sizes}, activation={m.activation!r}, "
                f"sparsify={m.sparsify!r}, nm={m.nm}, batch_size={self.batch_size}, "
                f"dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        """The constructor arguments (for provenance)."""
        m = self.mlp
        return {"hidden": list(m.sizes[1:-1]), "activation": m.activation,
                "sparsify": m.sparsify, "nm": list(m.nm), "batch_size": self.batch_size,
                "test_fraction": self.test_fraction,
                "validation_fraction": self.validation_fraction, "bias": m.bias,
                "dtype": self.dtype.name, "seed": self.seed, "n_train": len(self.y),
                "n_validation": len(self.y_validation), "n_test": len(self.y_test)}

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        return self.mlp.init_params(rng, self.dtype)

    def sample_batch(self, rng) -> Batch:
        """batch_size training images drawn with replacement."""
        idx = rng.integers(0, len(self.y), size=self.batch_size)
        # take copies the same rows as x[idx] (the same new C-contiguous array), faster
        return Batch(self.x.take(idx, axis=0), self.y[idx])

    def loss_and_grad(self, params, batch: Batch):
        logits, cache = self.mlp.forward(params, batch.x)
        loss, dlogits = fused.softmax_cross_entropy(logits, batch.y)  # L's, in one kernel
        return loss, self.mlp.backward(dlogits, cache)

    def evaluate(self, params) -> dict:
        """Test and training accuracy (fraction correct) and mean cross-entropy; the
        validation split's too when there is one."""
        out = {}
        splits = [("test", self.x_test, self.y_test), ("train", self.x, self.y)]
        if len(self.y_validation):
            splits.append(("validation", self.x_validation, self.y_validation))
        for split, x, y in splits:
            logits = self.mlp.predict(params, x)
            out[f"{split}_accuracy"] = float(np.mean(np.argmax(logits, axis=1) == y))
            out[f"{split}_loss"] = L.softmax_cross_entropy(logits, y)[0]
        return out

    def _split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        check_choice("split", split, ITEM_SPLITS)
        if split == "validation":
            if not len(self.y_validation):
                raise ValueError("split='validation': this problem has no validation split "
                                 "(validation_fraction = 0)")
            return self.x_validation, self.y_validation
        return self.x_test, self.y_test

    def item_errors(self, params, split: str = "test") -> np.ndarray:
        """Per image of ``split`` ("test" or "validation"): 100.0 if misclassified else 0.0
        (float64, shape (n_split,)); their mean is the error in points, 100 (1 - accuracy).
        The paper checks read these to add the split's sampling error to their intervals."""
        x, y = self._split(split)
        logits = self.mlp.predict(params, x)
        return 100.0 * (np.argmax(logits, axis=1) != y).astype(np.float64)

    def diverged_item_errors(self, split: str = "test") -> np.ndarray:
        """``item_errors`` of a run that went non-finite: every image of ``split`` wrong."""
        return np.full(len(self._split(split)[1]), 100.0)
