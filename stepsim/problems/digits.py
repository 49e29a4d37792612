"""Handwritten digits (scikit-learn's ``load_digits``) classified by an MLP.

Data: the 1,797 8x8 images (64 features, pixel values 0..16, 10 classes) that ship inside
scikit-learn (no download). A stratified train/test split seeded by ``seed``
(``test_fraction`` of each class held out), features standardised with the training set's
mean and standard deviation (constant pixels are left at 0).

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
from stepsim._ground.validate import check_memory
from stepsim.nn import fused
from stepsim.nn import layers as L
from stepsim.nn.mlp import ACTIVATIONS, MLP, SPARSIFY, float_dtype


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
        "bias": Option(Bool(), True, "Linear layers have biases"),
        "dtype": Option(Described("float32|float64"), np.float32, "data and parameter dtype"),
        "seed": Option(Int(minimum=0), 0, "seed of the train/test split"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, hidden: tuple[int, ...], activation: str, sparsify: str,
                 nm: tuple[int, int], batch_size: int, test_fraction: float, bias: bool, dtype,
                 seed: int):
        self.mlp = MLP((64, *hidden, 10), activation=activation, sparsify=sparsify, nm=nm,
                       bias=bias)
        self.batch_size, self.test_fraction = batch_size, test_fraction
        self.dtype = float_dtype(dtype)
        self.seed = seed
        self.specs = self.mlp.specs()
        # parameters with Adam's m, v and copies, plus activations of the largest evaluation
        check_memory(f"digits MLP {self.mlp.sizes}", self.dtype.itemsize * (
            8 * self.mlp.n_params() + 4 * 1797 * max(self.mlp.sizes)))

        x, y = _load()
        train, test = stratified_split(y, self.test_fraction, self.seed)
        mean = x[train].mean(axis=0)
        std = x[train].std(axis=0)
        std[std == 0] = 1.0  # constant pixels (always 0 in the training set) stay 0
        self.x = np.ascontiguousarray((x[train] - mean) / std, dtype=self.dtype)
        self.y = y[train]
        self.x_test = np.ascontiguousarray((x[test] - mean) / std, dtype=self.dtype)
        self.y_test = y[test]

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
                "test_fraction": self.test_fraction, "bias": m.bias, "dtype": self.dtype.name,
                "seed": self.seed, "n_train": len(self.y), "n_test": len(self.y_test)}

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
        """Test and training accuracy (fraction correct) and mean cross-entropy."""
        out = {}
        for split, x, y in (("test", self.x_test, self.y_test), ("train", self.x, self.y)):
            logits = self.mlp.predict(params, x)
            out[f"{split}_accuracy"] = float(np.mean(np.argmax(logits, axis=1) == y))
            out[f"{split}_loss"] = L.softmax_cross_entropy(logits, y)[0]
        return out

    def item_errors(self, params) -> np.ndarray:
        """Per test image: 100.0 if misclassified else 0.0 (float64, shape (n_test,)); their
        mean is the test error in points, 100 (1 - test_accuracy). The paper checks read
        these to add the test set's sampling error to their intervals."""
        logits = self.mlp.predict(params, self.x_test)
        return 100.0 * (np.argmax(logits, axis=1) != self.y_test).astype(np.float64)

    def diverged_item_errors(self) -> np.ndarray:
        """``item_errors`` of a run that went non-finite: every test image wrong."""
        return np.full(len(self.y_test), 100.0)
