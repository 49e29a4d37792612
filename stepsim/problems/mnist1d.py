"""MNIST-1D (Greydanus & Kobak, ICML 2024) classified by a small 1-D CNN.

Data: the ``mnist1d`` package's procedural generator (``mnist1d.data.make_dataset``, with
the package's default arguments: 10 digit templates of 12 points padded, scaled,
translated, sheared, with correlated and iid noise, then resampled to 40 points;
never its downloader). ``n_train + n_test`` signals are made with the generator's seed
``seed`` (the package's own data set is seed 42, 4000 + 1000) and standardised over all of
them, as the package does; the first ``n_train`` (in the package's shuffled order) are
its training part, the rest the test split. ``n_validation`` of the training part, a
seeded random choice (``numpy.random.default_rng(seed)``), form the validation split and
the remaining ``n_train - n_validation`` the training split. Lrs and regularisers are
tuned on the validation split; the test split is for verdicts only.

The generator seeds Python's and NumPy's *global* random state (``mnist1d.utils.set_seed``)
and draws from it; stepsim saves both states before the call and restores them after, so
neither stepsim's seeding (every draw from the caller's ``Generator``) nor the caller's
global state is touched. The generated arrays are cached per process and on disk (one
generation is slow: :mod:`stepsim._ground.data_cache`). They are rounded to float32
before anything else: NumPy takes another SIMD path for some of the generator's float64
arithmetic on AVX-512 CPUs, which moves the last bits of the float64 signals (seen: 9e-16),
and the float32 values are the same on every CPU (``tests/package/test_cpu_portability.py``
checks a run on them).

Model: :class:`stepsim.nn.cnn.CNN`, input (B, 40, 1) channels-last, default three
stride-2 conv layers of 16 channels (kernel size 3, padding 1; lengths 40 -> 20 -> 10 -> 5),
ReLU, a linear head to 10 classes (2,442 parameters); loss: mean softmax cross-entropy over
a minibatch of ``batch_size`` (default 64) training signals drawn with replacement. The
defaults are the model the pilot study proposes for the protocol
(``paper_checks/mnist1d_pilot.md``: at 32 channels SR-STE left no gap to dense).
Sparsity: every conv weight but the first (groups of M input channels at each kernel tap)
and the head (``sparsify="all"``), or the convs only (``"all-but-last"``); ``nm`` default
2:4.

Errors are in points (100 per misclassified signal), as digits' ``item_errors``:
``item_errors(params, split="test" | "validation" | "train")``.
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import numpy as np

from stepsim._ground.options import (
    NM,
    Bool,
    Choice,
    Described,
    Int,
    IntOrInts,
    Option,
    Options,
    Widths,
    declared_keywords,
)
from stepsim._ground.validate import check_choice, check_memory
from stepsim.nn import fused
from stepsim.nn import layers as L
from stepsim.nn.cnn import CNN, SPARSIFY

LENGTH = 40  # the package's final_seq_length
CLASSES = 10
SPLITS = ("test", "validation", "train")


class Batch(NamedTuple):
    """A minibatch: x (B, 40, 1) float signals (channels-last), y (B,) int64 labels 0..9."""

    x: np.ndarray
    y: np.ndarray


# ------------------------------------------------------------------------------- data
_GLOBAL_RNG_LOCK = threading.Lock()


def _make_dataset_isolated(samples: int, seed: int) -> dict:
    """``mnist1d.data.make_dataset`` with the package's default arguments but
    ``num_samples=samples``, ``seed`` and no train/test split, its writes to Python's and
    NumPy's global random state undone (the lock keeps another thread of this process
    from drawing from them meanwhile, through stepsim)."""
    import random

    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples, args.seed, args.train_split = samples, seed, 1.0
    with _GLOBAL_RNG_LOCK:
        python_state, numpy_state = random.getstate(), np.random.get_state()
        try:
            return make_dataset(args)
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def data_key(samples: int, seed: int) -> dict:
    """What :func:`generate`'s arrays depend on: the generator's arguments and the versions
    of the packages that compute them (the data cache's key,
    :mod:`stepsim._ground.data_cache`: a new version of any is another file)."""
    from importlib.metadata import version

    return {"data": "mnist1d.data.make_dataset, package defaults, float32", "format": 1,
            "samples": int(samples), "seed": int(seed),
            "versions": {p: version(p) for p in ("mnist1d", "numpy", "scipy")}}


def _made(samples: int, seed: int) -> dict:
    """{"x": (samples, 40) float32, "y": (samples,) int64}, made by the package."""
    data = _make_dataset_isolated(samples, seed)
    x = np.ascontiguousarray(data["x"], dtype=np.float32)
    y = np.ascontiguousarray(data["y"], dtype=np.int64)
    if x.shape != (samples, LENGTH) or y.shape != (samples,):
        raise RuntimeError(f"mnist1d's make_dataset returned x {x.shape} and y {y.shape}, "
                           f"expected ({samples}, {LENGTH}) and ({samples},)")
    return {"x": x, "y": y}


@functools.lru_cache(maxsize=4)
def generate(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(x (samples, 40) float32, y (samples,) int64): the package's signals and labels in
    its shuffled order, standardised over all of them, rounded to float32 (the module
    docstring says why); read-only, cached per process and on disk (one generation of the
    default 5,000 signals is slow, and was paid again by every process that built the
    problem: :mod:`stepsim._ground.data_cache`, ``STEPSIM_DATA_CACHE=off`` turns it off).
    ``samples`` must be a multiple of 10 (the generator makes samples // 10 per class)."""
    from stepsim._ground.data_cache import cached

    arrays = cached("mnist1d", data_key(samples, seed), lambda: _made(samples, seed))
    x, y = arrays["x"], arrays["y"]
    x.flags.writeable = y.flags.writeable = False  # shared by every problem in the process
    return x, y


def split_indices(n_train: int, n_validation: int, seed: int):
    """(training indices, validation indices) of the package's training part (0..n_train-1):
    ``n_validation`` chosen by ``numpy.random.default_rng(seed)``, each sorted."""
    order = np.random.default_rng(seed).permutation(n_train)
    return np.sort(order[n_validation:]), np.sort(order[:n_validation])


# ---------------------------------------------------------------------------- problem
class MNIST1D:
    """A 1-D CNN on MNIST-1D (see the module docstring).

    channels: output channels of each conv layer (its length is the depth). kernel_sizes,
    strides: an int for every conv layer or one per layer (padding (k - 1) // 2).
    sparsify: all, all-but-last or none. nm: default N:M. batch_size: minibatch size.
    n_train, n_test: signals in the package's training part and in the test split (their
    sum a multiple of 10); n_validation: carved from the training part. bias: layers have
    biases. dtype: float32 (default) or float64. seed: the generator's seed and the
    validation choice's (``init_params`` and ``sample_batch`` take the caller's generator).
    """

    OPTIONS = Options({
        "channels": Option(Widths(), (16, 16, 16), "output channels of each conv layer"),
        "kernel_sizes": Option(IntOrInts(minimum=1), 3,
                               "kernel size of every conv layer, or one per layer"),
        "strides": Option(IntOrInts(minimum=1), 2, "stride of every conv layer, or one per layer"),
        "sparsify": Option(Choice(*SPARSIFY), "all",
                           "which weights are N:M sparse (the first conv never)"),
        "nm": Option(NM(), (2, 4), "N:M of the sparse weights"),
        "batch_size": Option(Int(minimum=1), 64, "minibatch size"),
        "n_train": Option(Int(minimum=2), 4000,
                          "signals in the training part (validation carved from it)"),
        "n_validation": Option(Int(minimum=1), 500, "validation signals, from the training part"),
        "n_test": Option(Int(minimum=1), 1000, "test signals"),
        "bias": Option(Bool(), True, "layers have biases"),
        "dtype": Option(Described("float32|float64"), np.float32, "data and parameter dtype"),
        "seed": Option(Int(minimum=0), 42, "seed of the generator and the validation choice"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, channels, kernel_sizes, strides, sparsify: str, nm: tuple[int, int],
                 batch_size: int, n_train: int, n_validation: int, n_test: int, bias: bool,
                 dtype, seed: int):
        if n_validation >= n_train:
            raise ValueError(f"n_validation = {n_validation} must be < n_train = {n_train} "
                             "(the validation split is carved from the training part)")
        if (n_train + n_test) % CLASSES:
            raise ValueError(f"n_train + n_test = {n_train + n_test} must be a multiple of "
                             f"{CLASSES} (the generator makes as many signals of each digit)")
        dtype = np.dtype(dtype)
        if dtype not in L.FLOATS:
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        self.cnn = CNN(length=LENGTH, channels=channels, kernel_sizes=kernel_sizes,
                       strides=strides, classes=CLASSES, sparsify=sparsify, nm=nm, bias=bias)
        self.batch_size, self.dtype, self.seed = batch_size, dtype, seed
        self.n_train, self.n_validation, self.n_test = n_train, n_validation, n_test
        self.specs = self.cnn.specs()
        # parameters with Adam's m, v and copies, plus the column matrices of the largest
        # evaluation chunk (CNN.predict: 2048 signals)
        c_ins = (1,) + self.cnn.channels[:-1]
        widest = max(l_out * k * c for l_out, k, c in zip(self.cnn.lengths()[1:],
                                                          self.cnn.kernel_sizes, c_ins))
        check_memory(f"mnist1d CNN {self.cnn.channels}", dtype.itemsize * (
            8 * self.cnn.n_params() + 4 * 2048 * widest))

        x, y = generate(n_train + n_test, seed)
        train, validation = split_indices(n_train, n_validation, seed)
        signals = x.astype(dtype)[:, :, None]  # (n, 40, 1): channels-last, one channel
        self.x, self.y = np.ascontiguousarray(signals[train]), y[train]
        self.x_validation, self.y_validation = (np.ascontiguousarray(signals[validation]),
                                                y[validation])
        self.x_test = np.ascontiguousarray(signals[n_train:])
        self.y_test = y[n_train:]

    def __repr__(self):
        c = self.cnn
        return (f"MNIST1D(channels={c.channels}, kernel_sizes={c.kernel_sizes}, "
                f"strides={c.strides}, sparsify={c.sparsify!r}, nm={c.nm}, "
                f"batch_size={self.batch_size}, n_train={self.n_train}, "
                f"n_validation={self.n_validation}, n_test={self.n_test}, "
                f"dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        """The constructor arguments (for provenance), with the split sizes."""
        c = self.cnn
        return {"channels": list(c.channels), "kernel_sizes": list(c.kernel_sizes),
                "strides": list(c.strides), "sparsify": c.sparsify, "nm": list(c.nm),
                "batch_size": self.batch_size, "n_train": self.n_train,
                "n_validation": self.n_validation, "n_test": self.n_test, "bias": c.bias,
                "dtype": self.dtype.name, "seed": self.seed,
                "train_signals": len(self.y), "n_params": c.n_params()}

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        return self.cnn.init_params(rng, self.dtype)

    def sample_batch(self, rng) -> Batch:
        """batch_size training signals drawn with replacement."""
        idx = rng.integers(0, len(self.y), size=self.batch_size)
        return Batch(self.x.take(idx, axis=0), self.y[idx])

    def loss_and_grad(self, params, batch: Batch):
        logits, cache = self.cnn.forward(params, batch.x)
        loss, dlogits = fused.softmax_cross_entropy(logits, batch.y)
        return loss, self.cnn.backward(dlogits, cache)

    def split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(x (n, 40, 1), y (n,)) of split "test", "validation" or "train"."""
        check_choice("split", split, SPLITS)
        return {"test": (self.x_test, self.y_test),
                "validation": (self.x_validation, self.y_validation),
                "train": (self.x, self.y)}[split]

    def evaluate(self, params) -> dict:
        """Error (points: 100 x the misclassified fraction) and mean cross-entropy on the
        test, validation and training splits: ``test_error``, ``test_loss``, ..."""
        out = {}
        for split in SPLITS:
            x, y = self.split(split)
            logits = self.cnn.predict(params, x)
            out[f"{split}_error"] = 100.0 * float(np.mean(np.argmax(logits, axis=1) != y))
            out[f"{split}_loss"] = L.softmax_cross_entropy(logits, y)[0]
        return out

    def item_errors(self, params, split: str = "test") -> np.ndarray:
        """Per signal of ``split`` ("test", "validation" or "train"): 100.0 if misclassified
        else 0.0 (float64, shape (n,)); their mean is the split's error in points."""
        x, y = self.split(split)
        logits = self.cnn.predict(params, x)
        return 100.0 * (np.argmax(logits, axis=1) != y).astype(np.float64)

    def diverged_item_errors(self, split: str = "test") -> np.ndarray:
        """``item_errors`` of a run that went non-finite: every signal of ``split`` wrong."""
        return np.full(len(self.split(split)[1]), 100.0)
