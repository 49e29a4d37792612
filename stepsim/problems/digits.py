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
import gzip
import math
from pathlib import Path
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
    """x (1797, 64) float64 pixel values 0..16 and y (1797,) int64 labels 0..9: the digits
    file scikit-learn ships (``sklearn/datasets/data/digits.csv.gz``), parsed as
    ``sklearn.datasets.load_digits`` parses it (``np.loadtxt``, comma-separated: 64
    features, then the label), so the same arrays (a test compares them). Read without
    importing scikit-learn: its import (scipy.stats and more) was most of the start-up of
    every process that builds the problem (a check's workers, its CLI). Falls back to
    load_digits when the file is not where scikit-learn keeps it."""
    path = _shipped_digits_file()
    if path is None:
        from sklearn.datasets import load_digits

        data = load_digits()
        x, y = data.data, data.target
    else:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            table = np.loadtxt(f, delimiter=",")
        x, y = table[:, :-1], table[:, -1]
    x, y = x.astype(np.float64), y.astype(np.int64)
    x.flags.writeable = y.flags.writeable = False  # shared by every problem in the process
    return x, y


def _shipped_digits_file() -> Path | None:
    """Where scikit-learn keeps digits.csv.gz, found without importing scikit-learn (a
    top-level package's spec names its folder), or None."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def stratified_split(y: np.ndarray, test_fraction: float, seed: int):
    """(train indices, test indices), each sorted: ``test_fraction`` of each class held
    out, seeded by ``seed``. The split scikit-learn's ``train_test_split(np.arange(len(y)),
    test_size=test_fraction, stratify=y, random_state=seed)`` makes (a test compares them),
    computed here without importing scikit-learn (see :func:`_load`): ceil(test_fraction *
    len(y)) images are held out; each class's share of the training and of the test images
    is its share of the images, rounded down, the images left over going to the classes
    with the largest remainders (ties drawn at random); then each class's images, in index
    order, are shuffled, its first ones train and the next ones test. Every draw comes, in
    that order, from ``np.random.RandomState(seed)`` (NumPy keeps that stream fixed)."""
    y = np.asarray(y)
    n = len(y)
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    n_test = math.ceil(test_fraction * n)
    n_train = n - n_test
    classes, of_class, counts = np.unique(y, return_inverse=True, return_counts=True)
    if counts.min() < 2 or min(n_train, n_test) < len(classes):
        raise ValueError(f"cannot split {n} labels of {len(classes)} classes (smallest class "
                         f"{counts.min()}) into {n_train} train and {n_test} test, stratified")
    members = np.split(np.argsort(of_class, kind="stable"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    train_counts = _apportion(counts, n_train, rng)
    test_counts = _apportion(counts - train_counts, n_test, rng)
    train, test = [], []
    for images, k_train, k_test in zip(members, train_counts, test_counts):
        shuffled = images[rng.permutation(len(images))]
        train.append(shuffled[:k_train])
        test.append(shuffled[k_train:k_train + k_test])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _apportion(counts: np.ndarray, draws: int, rng) -> np.ndarray:
    """``draws`` shared among classes of ``counts`` images: each class its proportional
    share rounded down, then one more to the classes with the largest remainders, largest
    first, until the shares sum to ``draws``; a tie that cannot all get one is settled by
    ``rng.choice`` (always called for a remainder's classes, as the split's stream has it)."""
    share = counts / counts.sum() * draws
    got = np.floor(share)
    short = int(draws - got.sum())
    if short > 0:
        left = share - got
        for value in np.unique(left)[::-1]:
            tied = np.flatnonzero(left == value)
            take = min(len(tied), short)
            got[rng.choice(tied, size=take, replace=False)] += 1
            short -= take
            if short == 0:
                break
    return got.astype(np.int64)


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
