"""Teacher–student: a student MLP learns a random teacher MLP, optionally itself N:M-sparse.

Teacher: an MLP of sizes (d_in, *hidden, d_out) with the student's activation, weights
N(0, gain^2 / fan_in), biases N(0, 0.1^2), all drawn from ``seed``; with ``teacher_nm``
every teacher weight the student sparsifies is N:M-pruned by magnitude (so a sparse student
of the same N:M can represent it exactly). Inputs x ~ N(0, I_{d_in}).

Tasks: ``"classification"``: label = argmax of the teacher's outputs (d_out classes),
softmax cross-entropy; ``"regression"``: y = teacher(x) + noise * N(0, I), half squared
error averaged over the batch (:func:`stepsim.nn.layers.mse_loss`).

Data: ``n_train`` fixed training inputs (minibatches drawn with replacement), or
``n_train=None`` for fresh inputs at every step (online: a stationary gradient process).
``n_test`` held-out inputs from the same distribution.

Mask recovery (in :meth:`TeacherStudent.evaluate` when the teacher is sparse): of the
teacher's kept positions, the fraction the student keeps, where "kept" for the student
means the teacher's N:M mask computed from the student's |w| (its own support when it is
N:M at the teacher's ratio). Hidden units can be permuted without changing the function, so
identity-aligned recovery of a hidden layer sits at chance (N/M) even for a perfect
student; ``mask_recovery`` therefore first aligns every hidden layer's units with the
teacher's (an assignment maximising the correlation of their activations on the test
inputs) and permutes the student's rows and the next layer's columns accordingly.
``mask_recovery_unaligned`` is the plain positional overlap.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim._ground.options import (
    NM,
    Choice,
    Described,
    Int,
    Option,
    Options,
    OrNone,
    Real,
    Widths,
    declared_keywords,
)
from stepsim._ground.validate import check_problem_memory
from stepsim.nn import layers as L
from stepsim.nn.mlp import ACTIVATIONS, MLP, SPARSIFY, float_dtype

TASKS = ("classification", "regression")


class Batch(NamedTuple):
    """x (B, d_in); y (B,) int64 labels (classification) or (B, d_out) targets (regression)."""

    x: np.ndarray
    y: np.ndarray


class TeacherStudent:
    """A student MLP fit to a random teacher MLP (see the module docstring).

    d_in, hidden, d_out: sizes of teacher and student (widths up to thousands). activation,
    sparsify, nm: the student's (the teacher uses the same activation; ``teacher_nm``
    prunes the weights ``sparsify`` selects). task: classification or regression. noise:
    regression label noise std. n_train: fixed training-set size, or None (fresh inputs
    every step). n_test: held-out inputs. batch_size. dtype: float32 (default) or float64.
    seed: the teacher and the data (``init_params`` and ``sample_batch`` take the caller's
    generator).
    """

    #: the options, declared once (stepsim._ground.options): the defaults and checks of
    #: __init__'s keywords
    OPTIONS = Options({
        "d_in": Option(Int(minimum=1), 64, "input size"),
        "hidden": Option(Widths(), (256,), "hidden layer widths (student and teacher)"),
        "d_out": Option(Int(minimum=1), 10, "output size (classes)"),
        "activation": Option(Choice(*ACTIVATIONS), "relu", "hidden activation"),
        "sparsify": Option(Choice(*SPARSIFY), "all", "which Linear weights are N:M sparse"),
        "nm": Option(NM(), (2, 4), "N:M of the student's sparse weights"),
        "teacher_nm": Option(OrNone(NM()), (2, 4), "N:M of the teacher (none: dense)"),
        "task": Option(Choice(*TASKS), "classification", "classification or regression"),
        "noise": Option(Real(minimum=0.0), 0.0, "label noise"),
        "n_train": Option(OrNone(Int(minimum=1)), None,
                          "training set size (none: fresh samples every batch)"),
        "n_test": Option(Int(minimum=1), 2048, "test samples"),
        "batch_size": Option(Int(minimum=1), 128, "minibatch size"),
        "dtype": Option(Described("float32|float64"), np.float32, "data and parameter dtype"),
        "seed": Option(Int(minimum=0), 0, "seed of the teacher and the data"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, d_in: int, hidden: tuple[int, ...], d_out: int, activation: str,
                 sparsify: str, nm: tuple[int, int], teacher_nm: tuple[int, int] | None,
                 task: str, noise: float, n_train: int | None, n_test: int, batch_size: int,
                 dtype, seed: int):
        self.mlp = MLP((d_in, *hidden, d_out), activation=activation, sparsify=sparsify, nm=nm)
        self.task = task
        if self.task == "classification" and d_out < 2:
            raise ValueError(f"classification needs d_out >= 2 classes, got {d_out}")
        self.noise, self.n_train, self.n_test = noise, n_train, n_test
        self.batch_size = batch_size
        self.dtype = float_dtype(dtype)
        self.seed = seed
        self.teacher_nm = teacher_nm
        self.specs = self.mlp.specs()
        if self.teacher_nm is not None:
            self.teacher_mlp = MLP(self.mlp.sizes, activation=activation, sparsify=sparsify,
                                   nm=self.teacher_nm)  # checks M divides the input sizes
        else:
            self.teacher_mlp = MLP(self.mlp.sizes, activation=activation, sparsify="none")

        rows = (self.n_train or 0) + self.n_test + self.batch_size
        width = max(self.mlp.sizes)
        # parameters of teacher + student (+ Adam's m, v and copies), data, activations
        check_problem_memory(
            "teacher", {"d_in": d_in, "hidden": hidden, "d_out": d_out, "n_train": n_train,
                        "n_test": n_test, "batch_size": batch_size},
            self.dtype.itemsize * (8 * self.mlp.n_params() + rows * (d_in + d_out)
                                   + 4 * min(rows, 4096) * width),
            "teacher and student parameters, Adam's state, the data, activations")

        # a stream of its own: default_rng(seed) would make the teacher equal to a student
        # initialised with init_params(default_rng(seed))
        rng = np.random.default_rng([self.seed, 0x7EAC4E2])
        teacher = self.teacher_mlp.init_params(rng, np.float64)
        for name, spec in self.teacher_mlp.specs().items():
            if name.startswith("b"):
                teacher[name] = 0.1 * rng.standard_normal(teacher[name].shape)
            elif spec.sparse:
                from stepsim.core.masks import nm_mask

                teacher[name] = np.where(nm_mask(teacher[name], *spec.nm, axis=-1),
                                         teacher[name], 0.0)
        self.teacher = {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in teacher.items()}
        self.x_test, self.y_test = self._draw(rng, self.n_test)
        self.x = self.y = None
        if self.n_train is not None:
            self.x, self.y = self._draw(rng, self.n_train)

    def __repr__(self):
        m = self.mlp
        return (f"TeacherStudent(sizes={m.sizes}, activation={m.activation!r}, "
                f"sparsify={m.sparsify!r}, nm={m.nm}, teacher_nm={self.teacher_nm}, "
                f"task={self.task!r}, n_train={self.n_train}, batch_size={self.batch_size}, "
                f"dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        """The constructor arguments (for provenance)."""
        m = self.mlp
        return {"d_in": m.sizes[0], "hidden": list(m.sizes[1:-1]), "d_out": m.sizes[-1],
                "activation": m.activation, "sparsify": m.sparsify, "nm": list(m.nm),
                "teacher_nm": None if self.teacher_nm is None else list(self.teacher_nm),
                "task": self.task, "noise": self.noise, "n_train": self.n_train,
                "n_test": self.n_test, "batch_size": self.batch_size,
                "dtype": self.dtype.name, "seed": self.seed}

    def _label(self, x: np.ndarray, rng) -> np.ndarray:
        out = self.teacher_mlp.predict(self.teacher, x)
        if self.task == "classification":
            return np.argmax(out, axis=1).astype(np.int64)
        if self.noise > 0:
            out = out + (self.noise * rng.standard_normal(out.shape)).astype(self.dtype)
        return out

    def _draw(self, rng, count: int):
        x = rng.standard_normal((count, self.mlp.sizes[0]), dtype=self.dtype)
        return x, self._label(x, rng)

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        return self.mlp.init_params(rng, self.dtype)

    def sample_batch(self, rng) -> Batch:
        """Fresh inputs labelled by the teacher (n_train None), else a draw with replacement."""
        if self.n_train is None:
            return Batch(*self._draw(rng, self.batch_size))
        idx = rng.integers(0, self.n_train, size=self.batch_size)
        return Batch(self.x[idx], self.y[idx])

    def _loss(self, out, y):
        if self.task == "classification":
            return L.softmax_cross_entropy(out, y)
        return L.mse_loss(out, y)

    def loss_and_grad(self, params, batch: Batch):
        out, cache = self.mlp.forward(params, batch.x)
        loss, dout = self._loss(out, batch.y)
        return loss, self.mlp.backward(dout, cache)

    def evaluate(self, params) -> dict:
        """Test loss (and accuracy for classification); mask recovery when the teacher is sparse.

        mask_recovery pools every sparse layer (after aligning hidden units, see the module
        docstring); ``mask_recovery/NAME`` per layer; mask_recovery_unaligned without
        alignment; mask_recovery_chance = N/M of the teacher, what a random N:M mask scores.
        """
        out = self.mlp.predict(params, self.x_test)
        metrics = {"test_loss": self._loss(out, self.y_test)[0]}
        if self.task == "classification":
            metrics["test_accuracy"] = float(np.mean(np.argmax(out, axis=1) == self.y_test))
        if self.teacher_nm is not None:
            metrics.update(self.mask_recovery(params))
        return metrics

    def mask_recovery(self, params) -> dict:
        """Recovery of the teacher's N:M support by ``params`` (see :meth:`evaluate`)."""
        aligned = align_hidden_units(self.mlp, params, self.teacher, self.x_test)
        metrics = {}
        for label, weights in (("", aligned), ("_unaligned", params)):
            kept_total = hit_total = 0
            for name, spec in self.teacher_mlp.specs().items():
                if not spec.sparse:
                    continue
                teacher_kept = self.teacher[name] != 0
                student_kept = _nm_support(weights[name], *spec.nm)
                hits = int(np.count_nonzero(teacher_kept & student_kept))
                kept = int(np.count_nonzero(teacher_kept))
                if not label:
                    metrics[f"mask_recovery/{name}"] = hits / kept
                kept_total += kept
                hit_total += hits
            metrics[f"mask_recovery{label}"] = hit_total / kept_total
        n, m = self.teacher_nm
        metrics["mask_recovery_chance"] = n / m
        return metrics


def _nm_support(w: np.ndarray, n: int, m: int) -> np.ndarray:
    from stepsim.core.masks import nm_mask

    return nm_mask(np.ascontiguousarray(w), n, m, axis=-1)


def align_hidden_units(mlp: MLP, params, teacher, x: np.ndarray) -> dict:
    """``params`` with each hidden layer's units permuted to best match the teacher's.

    Layer by layer, the student's hidden units are assigned one-to-one to the teacher's
    (scipy's ``linear_sum_assignment``) maximising the summed correlation of their
    pre-activations on inputs x (n, d_in); the student's rows of w_l, b_l and columns of
    w_{l+1} are permuted accordingly, which leaves the student's function unchanged.
    """
    from scipy.optimize import linear_sum_assignment

    params = dict(params)
    hs, ht = x, x
    for l in range(1, mlp.layers):
        zs, _ = L.linear_forward(hs, params[f"w{l}"], params.get(f"b{l}"))
        zt, _ = L.linear_forward(ht, teacher[f"w{l}"], teacher.get(f"b{l}"))
        corr = _correlation(zt.astype(np.float64), zs.astype(np.float64))
        _, perm = linear_sum_assignment(corr, maximize=True)  # teacher unit i <- student perm[i]
        params[f"w{l}"] = params[f"w{l}"][perm]
        if f"b{l}" in params:
            params[f"b{l}"] = params[f"b{l}"][perm]
        params[f"w{l + 1}"] = np.ascontiguousarray(params[f"w{l + 1}"][:, perm])
        act = {"relu": L.relu_forward, "gelu": L.gelu_forward, "tanh": L.tanh_forward}
        hs = act[mlp.activation](zs[:, perm])[0]
        ht = act[mlp.activation](zt)[0]
    return params


def _correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(p, q) Pearson correlations between the columns of a (n, p) and b (n, q)."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    na = np.linalg.norm(a, axis=0)
    nb = np.linalg.norm(b, axis=0)
    na[na == 0] = 1.0
    nb[nb == 0] = 1.0
    return (a / na).T @ (b / nb)
