"""A synthetic regression problem with controllable gradient noise and scale.

Data: n_samples inputs x in R^{d_in}, feature j scaled by s_j = scale * condition^(-j/(d_in-1))
(log-spaced from ``scale`` down to ``scale / condition``, so coordinates see gradients of
different sizes and Adam's v is informative). Targets from a teacher two-layer linear net,
y = W2* (W1* x + b1*) + b2* + noise * N(0, I); the teacher's weights are themselves N:M
sparse when ``teacher_nm`` is given (else dense). A held-out set of n_test samples is drawn
the same way.

Model (the student): a two-layer linear network with parameters, shaped (out, in) so N:M
groups run along the input axis:

    w1 (d_hidden, d_in), b1 (d_hidden,), w2 (d_out, d_hidden), b2 (d_out,)
    h = x w1^T + b1;  p = h w2^T + b2;  loss = (1 / 2B) sum_batch ||p - y||^2

w1 and w2 are sparsified (``nm``, default 2:4), biases are dense. Gradient noise is set by
the minibatch size (sampled with replacement), the label noise and ``grad_noise`` (the std
of Gaussian noise added to every gradient entry, drawn in ``sample_batch``); its scale by
``scale``. Gradients are hand-written (``tests/training/test_training.py`` checks them against
central finite differences in float64).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stepsim._ground.options import (
    NM,
    Bool,
    Described,
    Int,
    Option,
    Options,
    OrNone,
    Real,
    declared_keywords,
)
from stepsim._ground.validate import check_problem_memory
from stepsim.core.sparsity import ParamSpec


class Batch(NamedTuple):
    """A minibatch: x (B, d_in), y (B, d_out), and gradient noise (name -> array) or None."""

    x: np.ndarray
    y: np.ndarray
    grad_noise: dict | None


class ForwardCache(NamedTuple):
    """What the backward pass needs: x (B, d_in), h (B, d_hidden), residual r = (p - y)/B."""

    x: np.ndarray
    h: np.ndarray
    r: np.ndarray


class SyntheticRegression:
    """Two-layer linear regression on a synthetic teacher (see the module docstring).

    All randomness of the data comes from ``seed``; ``init_params`` and ``sample_batch``
    take the caller's generator. dtype: np.float32 or np.float64 (data and parameters).
    """

    #: the options, declared once (stepsim._ground.options): the defaults and checks of
    #: __init__'s keywords
    OPTIONS = Options({
        "d_in": Option(Int(minimum=1), 32, "input size"),
        "d_hidden": Option(Int(minimum=1), 16, "hidden size"),
        "d_out": Option(Int(minimum=1), 4, "output size"),
        "n_samples": Option(Int(minimum=1), 512, "training samples"),
        "n_test": Option(Int(minimum=1), 256, "test samples"),
        "batch_size": Option(Int(minimum=1), 16, "minibatch size"),
        "noise": Option(Real(minimum=0.0), 0.1, "label noise std"),
        "grad_noise": Option(Real(minimum=0.0), 0.0, "std of noise added to every gradient entry"),
        "scale": Option(Real(minimum=0.0, min_open=True), 1.0, "input (hence gradient) scale"),
        "condition": Option(Real(minimum=1.0), 10.0, "largest / smallest feature scale"),
        "teacher_nm": Option(OrNone(NM()), None, "make the teacher N:M sparse"),
        "nm": Option(NM(), (2, 4), "N:M of the sparse weights"),
        "bias": Option(Bool(), True, "Linear layers have biases"),
        "dtype": Option(Described("float32|float64"), np.float64, "data and parameter dtype"),
        "seed": Option(Int(minimum=0), 0, "seed of the data"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, d_in: int, d_hidden: int, d_out: int, n_samples: int, n_test: int,
                 batch_size: int, noise: float, grad_noise: float, scale: float,
                 condition: float, teacher_nm: tuple[int, int] | None, nm: tuple[int, int],
                 bias: bool, dtype, seed: int):
        self.d_in, self.d_hidden, self.d_out = d_in, d_hidden, d_out
        self.n_samples, self.n_test, self.batch_size = n_samples, n_test, batch_size
        self.noise, self.grad_noise, self.scale = noise, grad_noise, scale
        self.condition = condition
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"dtype must be float32 or float64, got {self.dtype}")
        self.bias = bias
        n, m = nm
        self.nm = (n, m)
        self.teacher_nm = teacher_nm
        self.seed = seed
        sparse = ParamSpec(n, m, axis=-1)
        self.specs = {"w1": sparse, "w2": sparse}
        if self.bias:
            self.specs.update(b1=ParamSpec(), b2=ParamSpec())
        from stepsim.core.sparsity import check_divides

        check_divides("w1", (self.d_hidden, self.d_in), -1, m)
        check_divides("w2", (self.d_out, self.d_hidden), -1, m)

        n_params = d_in * d_hidden + d_hidden + d_hidden * d_out + d_out
        # teacher and student weights, gradients, Adam's m and v, masks: ~7 arrays each;
        # the data (inputs and targets, train and test) and a batch's activations
        rows = n_samples + n_test
        check_problem_memory(
            "regression", {"d_in": d_in, "d_hidden": d_hidden, "d_out": d_out,
                           "n_samples": n_samples, "n_test": n_test, "batch_size": batch_size},
            self.dtype.itemsize * (7 * n_params + 2 * rows * (d_in + d_out)
                                   + 4 * min(rows, max(batch_size, 4096)) * d_hidden),
            f"{n_params:,} parameters x ~7 {self.dtype} arrays, the data, activations")
        rng = np.random.default_rng(seed)
        self.feature_scale = scale * condition ** (-np.arange(d_in) / max(d_in - 1, 1))
        w1 = rng.standard_normal((d_hidden, d_in)) / np.sqrt(d_in)
        w2 = rng.standard_normal((d_out, d_hidden)) / np.sqrt(d_hidden)
        if self.teacher_nm is not None:
            from stepsim.core.reference import nm_mask

            tn, tm = self.teacher_nm
            check_divides("teacher w1", w1.shape, -1, tm)
            check_divides("teacher w2", w2.shape, -1, tm)
            w1 = np.where(nm_mask(w1, tn, tm), w1, 0.0)
            w2 = np.where(nm_mask(w2, tn, tm), w2, 0.0)
        b1 = 0.1 * rng.standard_normal(d_hidden) if self.bias else np.zeros(d_hidden)
        b2 = 0.1 * rng.standard_normal(d_out) if self.bias else np.zeros(d_out)
        self.teacher = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}

        def draw(count):
            x = rng.standard_normal((count, d_in)) * self.feature_scale
            y = (x @ w1.T + b1) @ w2.T + b2 + noise * rng.standard_normal((count, d_out))
            return x.astype(self.dtype), y.astype(self.dtype)

        self.x, self.y = draw(self.n_samples)
        self.x_test, self.y_test = draw(self.n_test)

    def __repr__(self):
        return (f"SyntheticRegression(d_in={self.d_in}, d_hidden={self.d_hidden}, "
                f"d_out={self.d_out}, n_samples={self.n_samples}, batch_size={self.batch_size}, "
                f"noise={self.noise}, grad_noise={self.grad_noise}, scale={self.scale}, "
                f"condition={self.condition}, teacher_nm={self.teacher_nm}, nm={self.nm}, "
                f"dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        """The constructor arguments (for provenance)."""
        return {"d_in": self.d_in, "d_hidden": self.d_hidden, "d_out": self.d_out,
                "n_samples": self.n_samples, "n_test": self.n_test,
                "batch_size": self.batch_size, "noise": self.noise,
                "grad_noise": self.grad_noise, "scale": self.scale,
                "condition": self.condition, "teacher_nm": self.teacher_nm, "nm": self.nm,
                "bias": self.bias, "dtype": self.dtype.name, "seed": self.seed}

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        """w ~ N(0, 1/fan_in) (shape (out, in)), biases 0; in the problem's dtype."""
        rng = np.random.default_rng(rng)
        w1 = rng.standard_normal((self.d_hidden, self.d_in)) / np.sqrt(self.d_in)
        w2 = rng.standard_normal((self.d_out, self.d_hidden)) / np.sqrt(self.d_hidden)
        params = {"w1": w1, "w2": w2}
        if self.bias:
            params.update(b1=np.zeros(self.d_hidden), b2=np.zeros(self.d_out))
        return {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in params.items()}

    def sample_batch(self, rng) -> Batch:
        """batch_size samples drawn with replacement (and gradient noise if grad_noise > 0)."""
        idx = rng.integers(0, self.n_samples, size=self.batch_size)
        noise = None
        if self.grad_noise > 0:
            noise = {name: (self.grad_noise * rng.standard_normal(shape)).astype(self.dtype)
                     for name, shape in self._shapes().items()}
        return Batch(self.x[idx], self.y[idx], noise)

    def _shapes(self):
        shapes = {"w1": (self.d_hidden, self.d_in), "w2": (self.d_out, self.d_hidden)}
        if self.bias:
            shapes.update(b1=(self.d_hidden,), b2=(self.d_out,))
        return shapes

    def forward(self, params, x, y):
        """(loss, cache) for inputs x (B, d_in), targets y (B, d_out)."""
        h = x @ params["w1"].T
        if self.bias:
            h = h + params["b1"]
        p = h @ params["w2"].T
        if self.bias:
            p = p + params["b2"]
        diff = p - y
        loss = 0.5 * float(np.sum(diff.astype(np.float64) ** 2)) / x.shape[0]
        return loss, ForwardCache(x, h, diff / diff.dtype.type(x.shape[0]))

    def backward(self, params, cache: ForwardCache) -> dict:
        """Gradients: dw2 = r^T h, db2 = sum r, dh = r w2, dw1 = dh^T x, db1 = sum dh."""
        r = cache.r
        grads = {"w2": np.ascontiguousarray(r.T @ cache.h)}
        dh = r @ params["w2"]
        grads["w1"] = np.ascontiguousarray(dh.T @ cache.x)
        if self.bias:
            grads["b2"] = r.sum(axis=0)
            grads["b1"] = dh.sum(axis=0)
        return grads

    def loss_and_grad(self, params, batch: Batch):
        loss, cache = self.forward(params, batch.x, batch.y)
        grads = self.backward(params, cache)
        if batch.grad_noise is not None:
            grads = {k: g + batch.grad_noise[k] for k, g in grads.items()}
        return loss, grads

    def evaluate(self, params) -> dict:
        """Full training-set loss and held-out loss (same formula as the minibatch loss)."""
        train, _ = self.forward(params, self.x, self.y)
        test, _ = self.forward(params, self.x_test, self.y_test)
        return {"loss": train, "test_loss": test}
