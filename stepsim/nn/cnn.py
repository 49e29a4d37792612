"""A small 1-D CNN built from :mod:`stepsim.nn.conv`: conv blocks + ReLU + a linear head.

``CNN(length=40, channels=(32, 32, 32), kernel_sizes=(5, 3, 3), strides=(2, 2, 2))`` is
Conv(1->32, k5, s2) ReLU, Conv(32->32, k3, s2) ReLU, Conv(32->32, k3, s2) ReLU, then a
Linear head on the flattened last activation. Each conv pads ``(k - 1) // 2`` zeros on both
ends ("same" padding for odd k at stride 1), so with the defaults the lengths run
40 -> 20 -> 10 -> 5 and the head is Linear(5 * 32 -> 10).

Layout (as :mod:`stepsim.nn.conv`): inputs and activations channels-last (B, L, C); conv
weights ``convL.w`` (C_out, K, C_in), input channels innermost; biases ``convL.b``
(C_out,); the head ``head.w`` (classes, L_last * C_last) on the activation flattened
channels-last (feature ``l * C_last + c``), ``head.b`` (classes,).

Sparsity (``sparsify``), every N:M group being M input channels at one kernel tap (one
position, for the head), ``ParamSpec(n, m, axis=-1)``:

- ``"all"``: every conv weight but the first, and the head;
- ``"all-but-last"``: every conv weight but the first (the head dense, as SR-STE's code
  keeps the classifier);
- ``"none"``: a dense model.

The first conv stays dense: its input is the raw signal, whose C_in (1 for MNIST-1D) no
group of M input channels tiles. Biases are always dense. The CNN never masks: recipes
hand it the forward weights Pi * w.

``forward``/``backward`` run the products on OpenBLAS -- a masked conv's forward and
input-gradient products on its kept entries instead where
:func:`~stepsim.nn.conv.sparse_pays` says so, when the weights
come as a :class:`~stepsim.nn.nm_linear.ForwardWeights` (the step's masks with them;
other sums, other last bits) -- and the bias + ReLU of each conv block, forward and
backward, in one numba pass over its product (the kernels of the MLP:
:func:`stepsim.nn.fused.linear_relu_forward`'s); ``kernels=False`` composes
:func:`~stepsim.nn.conv.conv1d_forward` and the ReLU of :mod:`stepsim.nn.layers` instead,
which the tests compare against (the same bits).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import check_bool, check_choice, check_int, check_nm_pair
from stepsim.core.sparsity import ParamSpec, check_divides
from stepsim.nn import conv as C
from stepsim.nn import layers as L
from stepsim.nn import nm_linear

SPARSIFY = ("all", "all-but-last", "none")
_GAIN = math.sqrt(2.0)  # He initialisation (ReLU)


class CNNCache(NamedTuple):
    """A forward pass's caches: convs[l] (Conv1dCache of conv l+1), acts[l] (its ReLU's
    output, (B * L_out, C_out)), head (the head's LinearCache), shape (B, L_last, C_last)."""

    convs: tuple
    acts: tuple
    head: L.LinearCache
    shape: tuple


def _per_layer(name: str, value, depth: int) -> tuple:
    """An int (every layer) or a tuple of one int per conv layer, as a tuple of ``depth``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,) * depth
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be an int or one int per conv layer, got {value!r}")
    value = tuple(value)
    if len(value) != depth:
        raise ValueError(f"{name} must give one value per conv layer ({depth}: one per entry "
                         f"of channels), got {len(value)}: {value}")
    return value


@dataclasses.dataclass(frozen=True)
class CNN:
    """A 1-D CNN; see the module docstring.

    length: input length L. in_channels: input channels. channels: C_out of each conv layer
    (depth = len(channels)). kernel_sizes, strides: an int for every layer or one per layer.
    classes: outputs of the head. sparsify: "all", "all-but-last" or "none". nm: the default
    N:M of the sparse weights (each sparse conv's C_in and the head's input size must be
    divisible by M). bias: layers have biases.
    """

    length: int
    channels: tuple[int, ...] = (32, 32, 32)
    kernel_sizes: tuple[int, ...] | int = (5, 3, 3)
    strides: tuple[int, ...] | int = 2
    in_channels: int = 1
    classes: int = 10
    sparsify: str = "all"
    nm: tuple[int, int] = (2, 4)
    bias: bool = True

    def __post_init__(self):
        check_int("length", self.length, minimum=1)
        check_int("in_channels", self.in_channels, minimum=1)
        check_int("classes", self.classes, minimum=1)
        channels = self.channels
        if isinstance(channels, (int, np.integer)) and not isinstance(channels, bool):
            channels = (channels,)
        channels = tuple(check_int(f"channels[{i}]", c, minimum=1)
                         for i, c in enumerate(channels))
        if not channels:
            raise ValueError("channels must list at least one conv layer, got ()")
        object.__setattr__(self, "channels", channels)
        depth = len(channels)
        ks = tuple(check_int(f"kernel_sizes[{i}]", k, minimum=1) for i, k in
                   enumerate(_per_layer("kernel_sizes", self.kernel_sizes, depth)))
        strides = tuple(check_int(f"strides[{i}]", s, minimum=1) for i, s in
                        enumerate(_per_layer("strides", self.strides, depth)))
        object.__setattr__(self, "kernel_sizes", ks)
        object.__setattr__(self, "strides", strides)
        check_choice("sparsify", self.sparsify, SPARSIFY)
        object.__setattr__(self, "nm", check_nm_pair("nm", self.nm))
        object.__setattr__(self, "bias", check_bool("bias", self.bias))
        length = self.length
        for l, (k, s) in enumerate(zip(ks, strides), 1):
            if length + 2 * ((k - 1) // 2) < k:
                raise ValueError(f"conv{l}'s kernel size {k} exceeds its padded input length "
                                 f"{length} (+ 2 * {(k - 1) // 2}): choose smaller "
                                 "kernel_sizes or strides")
            length = C.output_length(length, k, s, (k - 1) // 2)
        shapes = self.shapes()
        for name, spec in self.specs().items():
            if spec.sparse:
                check_divides(name, shapes[name], spec.axis, spec.m)

    # ------------------------------------------------------------------ geometry
    @property
    def depth(self) -> int:
        """Number of conv layers."""
        return len(self.channels)

    def paddings(self) -> tuple[int, ...]:
        """Zeros padded on both ends of each conv's input: (k - 1) // 2."""
        return _paddings(self.kernel_sizes)

    def lengths(self) -> tuple[int, ...]:
        """(L, L_1, ..., L_depth): the input length and each conv's output length."""
        return _lengths(self)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape of every parameter, in layer order (conv1.w, conv1.b, ..., head.b)."""
        return dict(_shapes(self))

    def _shapes(self) -> dict[str, tuple[int, ...]]:
        out = {}
        c_in = self.in_channels
        for l, (c, k) in enumerate(zip(self.channels, self.kernel_sizes), 1):
            out[f"conv{l}.w"] = (c, k, c_in)
            if self.bias:
                out[f"conv{l}.b"] = (c,)
            c_in = c
        out["head.w"] = (self.classes, self.lengths()[-1] * c_in)
        if self.bias:
            out["head.b"] = (self.classes,)
        return out

    def n_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes().values())

    def specs(self) -> dict[str, ParamSpec]:
        """name -> ParamSpec: sparse weights N:M along their last axis (input channels at a
        tap), the first conv, the biases (and the head unless ``sparsify="all"``) dense."""
        n, m = self.nm
        sparse = ParamSpec(n, m, axis=-1)
        specs = {}
        for name in self.shapes():
            if name.endswith(".b") or name == "conv1.w" or self.sparsify == "none":
                specs[name] = ParamSpec()
            elif name == "head.w":
                specs[name] = sparse if self.sparsify == "all" else ParamSpec()
            else:
                specs[name] = sparse
        return specs

    def init_params(self, rng, dtype=np.float32) -> dict[str, np.ndarray]:
        """Weights ~ N(0, 2 / fan_in) (He; fan_in = K * C_in for a conv, the head's input
        size for the head), biases 0. rng: a Generator or seed (the only randomness).
        Returns C-contiguous arrays of ``dtype`` (float32 or float64), shapes as :meth:`shapes`."""
        rng = np.random.default_rng(rng)
        dtype = np.dtype(dtype)
        if dtype not in L.FLOATS:
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        params = {}
        for name, shape in self.shapes().items():
            if name.endswith(".w"):
                fan_in = math.prod(shape[1:])
                w = rng.standard_normal(shape) * (_GAIN / math.sqrt(fan_in))
                params[name] = np.ascontiguousarray(w, dtype=dtype)
            else:
                params[name] = np.zeros(shape, dtype=dtype)
        return params

    # ----------------------------------------------------------- forward / backward
    def _check_x(self, x):
        L.check_float("x", x)
        want = (self.length, self.in_channels)
        if x.ndim != 3 or x.shape[1:] != want:
            raise ValueError(f"x must have shape (B, {want[0]}, {want[1]}) (batch, length, "
                             f"channels), got {x.shape}")

    def forward(self, params, x: np.ndarray, *, kernels: bool = True):
        """Logits (B, classes) for inputs x (B, length, in_channels), and a :class:`CNNCache`."""
        self._check_x(x)
        names = _names(self.depth)
        convs, acts = [], []
        h = x
        paddings, lengths = self.paddings(), self.lengths()
        for l, (w_name, b_name) in enumerate(names):
            w, b = params[w_name], params.get(b_name)
            stride, padding = self.strides[l], paddings[l]
            matrices = nm_linear.weights_for(params, w_name, x.shape[0] * lengths[l + 1],
                                             C.sparse_pays)
            if kernels:
                h, cache = _conv_relu_forward(h, w, b, stride, padding, matrices)
            else:
                h, cache = C.conv1d_forward(h, w, b, stride, padding, matrices)
                h = L.relu_forward(h)[0]
            convs.append(cache)
            acts.append(h.reshape(-1, h.shape[2]))
        batch = x.shape[0]
        logits, head = L.linear_forward(h.reshape(batch, -1), params["head.w"],
                                        params.get("head.b"))
        return logits, CNNCache(tuple(convs), tuple(acts), head, h.shape)

    def backward(self, dlogits: np.ndarray, cache: CNNCache, *,
                 kernels: bool = True) -> dict[str, np.ndarray]:
        """Gradients of every parameter (dict like the params, C-contiguous) from dlogits
        (B, classes)."""
        grads = {}
        dflat, grads["head.w"], db = L.linear_backward(dlogits, cache.head)
        if self.bias:
            grads["head.b"] = db
        batch, length, channels = cache.shape
        d = dflat.reshape(batch * length, channels)
        names = _names(self.depth)
        for l in range(self.depth - 1, -1, -1):
            w_name, b_name = names[l]
            conv = cache.convs[l]
            if kernels:
                d, dw, db = _conv_relu_backward(d, cache.acts[l], conv, need_dx=l > 0)
            else:
                d = L.relu_backward(d, L.ActivationCache(cache.acts[l]))
                dout = d.reshape(conv.cols.shape[0], conv.cols.shape[1], -1)
                d, dw, db = C.conv1d_backward(dout, conv, need_dx=l > 0)
                if d is not None:
                    d = d.reshape(-1, d.shape[2])
            grads[w_name] = dw
            if self.bias:
                grads[b_name] = db
        return {name: grads[name] for name in _shapes(self)}

    def loss_and_grad(self, params, x, labels, *, kernels: bool = True):
        """(mean softmax cross-entropy, grads) for inputs x (B, length, in_channels) and
        integer labels (B,)."""
        from stepsim.nn import fused

        logits, cache = self.forward(params, x, kernels=kernels)
        xent = fused.softmax_cross_entropy if kernels else L.softmax_cross_entropy
        loss, dlogits = xent(logits, labels)  # the same bits either way
        return loss, self.backward(dlogits, cache, kernels=kernels)

    def predict(self, params, x: np.ndarray, chunk: int = 2048) -> np.ndarray:
        """Logits (n, classes) for many inputs x (n, length, in_channels), ``chunk`` at a time."""
        outs = [self.forward(params, x[i:i + chunk])[0] for i in range(0, len(x), chunk)]
        dtype = params["head.w"].dtype
        return np.concatenate(outs) if outs else np.empty((0, self.classes), dtype)


# the geometry of a model, computed once per model (a step reads it several times; the
# frozen dataclass is its own cache key)
@functools.lru_cache(maxsize=64)
def _paddings(kernel_sizes: tuple) -> tuple:
    return tuple((k - 1) // 2 for k in kernel_sizes)


@functools.lru_cache(maxsize=64)
def _lengths(cnn: CNN) -> tuple:
    out = [cnn.length]
    for k, s, p in zip(cnn.kernel_sizes, cnn.strides, cnn.paddings()):
        out.append(C.output_length(out[-1], k, s, p))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _shapes(cnn: CNN) -> dict:
    return cnn._shapes()


@functools.lru_cache(maxsize=16)
def _names(depth: int) -> tuple:
    return tuple((f"conv{l}.w", f"conv{l}.b") for l in range(1, depth + 1))


def _conv_relu_forward(x, w, b, stride, padding, matrices):
    """maximum(conv1d(x, w, b), 0): the gather and the forward product as
    :func:`~stepsim.nn.conv.conv1d_forward` (``matrices`` as there), the bias and the
    rectifier in one kernel pass in place on the product (the bits of conv1d_forward then
    np.maximum(out, 0)). (out (B, L_out, C_out), its Conv1dCache)."""
    from stepsim.nn import _kernels as K

    stride, padding = C.check_conv_input(x, w, b, stride, padding)
    forward, backward = C.weight_matrices(matrices, w)
    c_out, k, _ = w.shape
    cols = C.im2col(np.ascontiguousarray(x), k, stride, padding)
    batch, l_out = cols.shape[:2]
    out = C.forward_product(cols.reshape(batch * l_out, -1), forward)
    K.bias_relu(out, out[0] if b is None else b, b is not None)
    return (out.reshape(batch, l_out, c_out),
            C.Conv1dCache(cols, w, x.shape[1], stride, padding, b is not None, backward))


def _conv_relu_backward(d, saved, cache: C.Conv1dCache, need_dx: bool):
    """The rectifier's backward and the conv's: d (B * L_out, C_out) the gradient at the
    block's output (modified in place), saved the block's output. (dx (B * L, C_in) or None,
    dw, db): the rectifier and the bias gradient in one kernel pass, the products as
    :func:`~stepsim.nn.conv.conv1d_backward`."""
    from stepsim.nn import _kernels as K

    cols, w, length, stride, padding, has_bias, w_back = cache
    L.check_same_dtype("the forward's input", cols, "dout", d)
    d = np.ascontiguousarray(d)
    db = np.empty(d.shape[1], d.dtype) if has_bias else d[0]
    K.relu_backward_bias(d, saved, db, has_bias)
    cols2 = cols.reshape(d.shape[0], -1)
    dw = C.weight_grad_product(d, cols2).reshape(w.shape)
    dx = None
    if need_dx:
        dcols = C.input_grad_product(d, w_back)
        dx = C.col2im(dcols.reshape(cols.shape), length, stride, padding)
        dx = dx.reshape(-1, dx.shape[2])
    return dx, dw, db if has_bias else None
