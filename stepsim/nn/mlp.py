"""A multilayer perceptron built from :mod:`stepsim.nn.layers`, with its sparsity specs.

``MLP(sizes=(64, 256, 256, 10))`` is Linear(64->256), act, Linear(256->256), act,
Linear(256->10): ``len(sizes) - 1`` Linear layers, the activation between them (none after
the last). Parameters are a dict ``w1, b1, ..., wL, bL``; ``wl`` has shape
(sizes[l], sizes[l-1]) (out, in), so N:M groups run along the input axis, and ``bl`` has
shape (sizes[l],).

Which Linear weights are N:M-sparsified is ``sparsify``:

- ``"all"``: every Linear weight (what the STEP paper does);
- ``"all-but-last"``: every weight but the output layer's (what SR-STE's code does);
- ``"none"``: a dense model (every spec dense).

Biases are always dense. The MLP never masks: recipes hand it the forward weights Pi*w.
When they come as a :class:`~stepsim.nn.nm_linear.ForwardWeights` (the masks with them), a
masked layer's forward product and input gradient run on its kept entries wherever
:func:`~stepsim.nn.nm_linear.sparse_pays` for the batch's shape (other sums, other last
bits: :mod:`stepsim.nn.nm_linear`); the weight gradient is always the dense product.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import check_bool, check_choice, check_int, check_nm_pair
from stepsim.core.sparsity import ParamSpec, check_divides
from stepsim.nn import fused, nm_linear
from stepsim.nn import layers as L

ACTIVATIONS = {
    "relu": (L.relu_forward, L.relu_backward),
    "gelu": (L.gelu_forward, L.gelu_backward),
    "tanh": (L.tanh_forward, L.tanh_backward),
}
SPARSIFY = ("all", "all-but-last", "none")
# std of the initial weights is gain / sqrt(fan_in) (He for ReLU/GELU, LeCun for tanh)
_GAIN = {"relu": math.sqrt(2.0), "gelu": math.sqrt(2.0), "tanh": 1.0}


class MLPCache(NamedTuple):
    """Per-layer caches of a forward pass: linear[l] (LinearCache), act[l] (ActivationCache;
    one fewer than linear, there is no activation after the last layer)."""

    linear: tuple
    act: tuple


@dataclasses.dataclass(frozen=True)
class MLP:
    """A ReLU/GELU/tanh MLP; see the module docstring.

    sizes: (d_in, hidden..., d_out), at least two entries. activation: "relu", "gelu" or
    "tanh". sparsify: "all", "all-but-last" or "none". nm: the default N:M of the sparse
    weights (every sparse weight's input size must be divisible by M). bias: Linear layers
    have biases.
    """

    sizes: tuple[int, ...]
    activation: str = "relu"
    sparsify: str = "all"
    nm: tuple[int, int] = (2, 4)
    bias: bool = True

    def __post_init__(self):
        sizes = tuple(self.sizes)
        if len(sizes) < 2:
            raise ValueError(f"sizes must list at least an input and an output size, got {sizes}")
        sizes = tuple(check_int(f"sizes[{i}]", s, minimum=1) for i, s in enumerate(sizes))
        object.__setattr__(self, "sizes", sizes)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("sparsify", self.sparsify, SPARSIFY)
        object.__setattr__(self, "nm", check_nm_pair("nm", self.nm))
        object.__setattr__(self, "bias", check_bool("bias", self.bias))
        for name, spec in self.specs().items():
            if spec.sparse:
                check_divides(name, self.shapes()[name], spec.axis, spec.m)

    @property
    def layers(self) -> int:
        """Number of Linear layers."""
        return len(self.sizes) - 1

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape of every parameter, in layer order (w1, b1, w2, b2, ...)."""
        out = {}
        for l in range(1, self.layers + 1):
            out[f"w{l}"] = (self.sizes[l], self.sizes[l - 1])
            if self.bias:
                out[f"b{l}"] = (self.sizes[l],)
        return out

    def n_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes().values())

    def specs(self) -> dict[str, ParamSpec]:
        """name -> ParamSpec: sparse weights N:M along the input axis (-1), the rest dense."""
        n, m = self.nm
        last = self.layers if self.sparsify == "all" else self.layers - 1
        if self.sparsify == "none":
            last = 0
        specs = {}
        for l in range(1, self.layers + 1):
            specs[f"w{l}"] = ParamSpec(n, m, axis=-1) if l <= last else ParamSpec()
            if self.bias:
                specs[f"b{l}"] = ParamSpec()
        return specs

    def init_params(self, rng, dtype=np.float32) -> dict[str, np.ndarray]:
        """Weights ~ N(0, gain^2 / fan_in) (gain sqrt(2) for ReLU/GELU, 1 for tanh), biases 0.

        rng: a Generator or seed (the only randomness). dtype: float32 or float64.
        Returns C-contiguous arrays of ``dtype``, shapes as :meth:`shapes`.
        """
        rng = np.random.default_rng(rng)
        dtype = float_dtype(dtype)
        gain = _GAIN[self.activation]
        params = {}
        for name, shape in self.shapes().items():
            if name.startswith("w"):
                w = rng.standard_normal(shape) * (gain / math.sqrt(shape[1]))
                params[name] = np.ascontiguousarray(w, dtype=dtype)
            else:
                params[name] = np.zeros(shape, dtype=dtype)
        return params

    def forward(self, params, x: np.ndarray):
        """Outputs (..., d_out) for inputs x (..., d_in), and an :class:`MLPCache`."""
        act_forward = ACTIVATIONS[self.activation][0]
        relu = self.activation == "relu"
        names = _layer_names(len(self.sizes) - 1)
        last = len(names)
        linear, act = [], []
        h = x
        rows = math.prod(x.shape[:-1])
        for l, (w_name, b_name) in enumerate(names, 1):
            # a masked layer's kept entries, where its products are faster that way
            w, w_back = nm_linear.weights_for(params, w_name, rows)
            if relu and l < last:  # bias and rectifier in one pass over the product
                h, cache = fused.linear_relu_forward(h, w, params.get(b_name), w_back)
            elif isinstance(w, np.ndarray):
                h, cache = L.linear_forward(h, w, params.get(b_name))
            else:
                h, cache = _sparse_linear_forward(h, w, params.get(b_name), w_back)
            linear.append(cache)
            if l < last:
                if relu:  # h is this layer's own fresh output, rectified in place
                    cache = L.ActivationCache(h)
                else:
                    h, cache = act_forward(h)
                act.append(cache)
        return h, MLPCache(tuple(linear), tuple(act))

    def backward(self, dout: np.ndarray, cache: MLPCache) -> dict[str, np.ndarray]:
        """Gradients of every parameter (dict like the params) from dout (..., d_out)."""
        act_backward = ACTIVATIONS[self.activation][1]
        relu = self.activation == "relu"
        names = _layer_names(len(self.sizes) - 1)
        last = len(names)
        per_layer = [None] * last
        d = dout
        for l in range(last, 0, -1):
            db = None
            if l < last:
                if relu:  # d is the fresh dx of the layer above: zeroed in place, and the
                    # bias gradient summed in the same pass
                    d, db = fused.relu_backward_bias_grad(d, cache.act[l - 1].saved,
                                                           self.bias)
                else:
                    d = act_backward(d, cache.act[l - 1])
            need_dx = l > 1  # the input's gradient is never used
            d, dw, db = _linear_backward(d, cache.linear[l - 1], need_dx, db)
            per_layer[l - 1] = dw, db
        grads = {}  # in the order of shapes(): w1, b1, w2, b2, ...
        for (w_name, b_name), (dw, db) in zip(names, per_layer):
            grads[w_name] = dw
            if self.bias:
                grads[b_name] = db
        return grads

    def predict(self, params, x: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """Outputs for many inputs x (n, d_in), ``chunk`` rows at a time (bounded memory)."""
        outs = [self.forward(params, x[i:i + chunk])[0] for i in range(0, len(x), chunk)]
        return np.concatenate(outs) if outs else np.empty((0, self.sizes[-1]), x.dtype)


@functools.lru_cache(maxsize=32)
def _layer_names(layers: int) -> tuple:
    """(("w1", "b1"), ..., ("wL", "bL")): the parameter names of each Linear layer."""
    return tuple((f"w{l}", f"b{l}") for l in range(1, layers + 1))


def _sparse_linear_forward(x, w, b, w_back):
    """linear_forward for a SparseWeight w: (x @ w.T + b, a LinearCache holding w_back, the
    weight the input gradient multiplies by)."""
    out = nm_linear.product(x, w)
    if b is not None:
        L.check_same_dtype("x", x, "b", b)
        L.check_shape("b", b, (w.shape[0],), "w's out")
        out += b
    return out, L.LinearCache(x, w_back, b is not None)


def _linear_backward(dout, cache: L.LinearCache, need_dx: bool, db=None):
    """linear_backward's (dx, dw, db), skipping dx (a matmul) for the first layer; db
    given: the bias gradient already summed (with the rectifier's backward). The cache's
    weight may be a SparseWeight (its input gradient from the kept entries)."""
    x, w, has_bias = cache
    rows = math.prod(x.shape[:-1])
    dout2 = dout.reshape(rows, w.shape[0])
    dx = nm_linear.input_grad(dout, w) if need_dx else None
    dw = np.ascontiguousarray(dout2.T @ x.reshape(rows, w.shape[1]))
    if db is None and has_bias:
        db = _rows_sum(dout2)
    return dx, dw, db if has_bias else None


def _rows_sum(d):
    """``d.sum(axis=0)`` of a 2-d gradient, on the kernel that sums in NumPy's order
    (:func:`stepsim.nn._kernels.rows_sum`: the same bits) when d is C-contiguous float;
    NumPy's reduction sets up for longer than it sums the output layer's few columns."""
    if not (d.flags.c_contiguous and d.dtype in L.FLOATS and d.shape[0]):
        return d.sum(axis=0)
    from stepsim.nn import _kernels as K

    out = np.empty(d.shape[1], d.dtype)
    K.rows_sum(d, out)
    return out


def float_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    return dtype
