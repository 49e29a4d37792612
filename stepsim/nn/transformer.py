"""A decoder-only (GPT-style) transformer, forward and backward by hand.

    h = tok_emb[ids] + pos_emb[:T]                                   (B, T, D)
    for each block i:                    (pre-LayerNorm, residual around each sub-layer)
        h = h + SelfAttention(LN1(h))     causal, H heads      (stepsim.nn.attention)
        h = h + W2 GELU(W1 LN2(h) + b1) + b2                   W1 (F, D), W2 (D, F)
    logits = LNf(h) Wh^T                   Wh (V, D), or tok_emb itself when tied

Parameters (a flat dict, names below) store every linear weight (out, in), so N:M groups
run along the input axis (``ParamSpec(n, m, axis=-1)``). :func:`linear_names` lists them
by kind -- ``wq wk wv wo`` (attention), ``w1 w2`` (MLP), ``head`` -- and the problem
chooses which kinds are sparsified (the paper sparsifies every linear module of BERT and
GPT-2). Embeddings, LayerNorm parameters and biases stay dense.

``kernels=True`` (the default) runs :mod:`stepsim.nn._transformer_fused`: the same
products on OpenBLAS, the element-wise work between them fused into numba kernels
(:mod:`stepsim.nn._kernels`), no layout copies. ``kernels=False`` composes the NumPy layers
of :mod:`stepsim.nn.layers` and the reference attention, which the tests compare against.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from stepsim._ground.validate import check_int, check_real
from stepsim.nn import _transformer_fused, fused
from stepsim.nn import layers as L
from stepsim.nn.attention import self_attention_backward, self_attention_forward
from stepsim.nn.embedding import embedding_forward, input_grads

LINEAR_KINDS = ("wq", "wk", "wv", "wo", "w1", "w2", "head")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Sizes of the model.

    vocab: V tokens. context: T_max positions. width: D. blocks: number of blocks. heads:
    H (divides D). mlp_ratio: F = mlp_ratio * D. tied: the head reuses tok_emb (no head
    weight). bias: linear layers have biases. eps: LayerNorm's epsilon.
    """

    vocab: int = 16
    context: int = 32
    width: int = 64
    blocks: int = 2
    heads: int = 4
    mlp_ratio: int = 4
    tied: bool = False
    bias: bool = True
    eps: float = 1e-5

    def __post_init__(self):
        check_int("vocab", self.vocab, minimum=2)
        check_int("context", self.context, minimum=1)
        check_int("width", self.width, minimum=1)
        check_int("blocks", self.blocks, minimum=1)
        check_int("heads", self.heads, minimum=1)
        check_int("mlp_ratio", self.mlp_ratio, minimum=1)
        check_real("eps", self.eps, minimum=0.0, min_open=True)
        if self.width % self.heads:
            raise ValueError(f"heads = {self.heads} must divide width = {self.width}")

    @property
    def hidden(self) -> int:
        return self.mlp_ratio * self.width


def param_shapes(cfg: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """name -> shape of every parameter, in a fixed order (embeddings, blocks, head)."""
    d, f, v = cfg.width, cfg.hidden, cfg.vocab
    shapes = {"tok_emb": (v, d), "pos_emb": (cfg.context, d)}
    for i in range(cfg.blocks):
        p = f"blocks.{i}."
        shapes.update({p + "ln1.g": (d,), p + "ln1.b": (d,)})
        for w in ("wq", "wk", "wv", "wo"):
            shapes[p + "attn." + w] = (d, d)
            if cfg.bias:
                shapes[p + "attn.b" + w[1]] = (d,)
        shapes.update({p + "ln2.g": (d,), p + "ln2.b": (d,), p + "mlp.w1": (f, d)})
        if cfg.bias:
            shapes[p + "mlp.b1"] = (f,)
        shapes[p + "mlp.w2"] = (d, f)
        if cfg.bias:
            shapes[p + "mlp.b2"] = (d,)
    shapes.update({"lnf.g": (d,), "lnf.b": (d,)})
    if not cfg.tied:
        shapes["head.w"] = (v, d)
    return shapes


def linear_names(cfg: TransformerConfig) -> dict[str, list[str]]:
    """kind (``LINEAR_KINDS``) -> names of the linear weights of that kind (head: [] if tied)."""
    out = {kind: [] for kind in LINEAR_KINDS}
    for i in range(cfg.blocks):
        for w in ("wq", "wk", "wv", "wo"):
            out[w].append(f"blocks.{i}.attn.{w}")
        out["w1"].append(f"blocks.{i}.mlp.w1")
        out["w2"].append(f"blocks.{i}.mlp.w2")
    if not cfg.tied:
        out["head"].append("head.w")
    return out


def init_params(cfg: TransformerConfig, rng, dtype=np.float32) -> dict[str, np.ndarray]:
    """GPT-2's initialisation: weights and embeddings N(0, 0.02^2), the two projections
    into the residual stream (wo, w2) N(0, (0.02 / sqrt(2 * blocks))^2), biases 0,
    LayerNorm gains 1 and offsets 0. All randomness from ``rng``."""
    rng = np.random.default_rng(rng)
    residual_std = 0.02 / np.sqrt(2 * cfg.blocks)
    params = {}
    for name, shape in param_shapes(cfg).items():
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith(".g"):
            value = np.ones(shape)
        elif name.endswith(".b") or leaf in ("bq", "bk", "bv", "bo", "b1", "b2"):
            value = np.zeros(shape)
        else:
            std = residual_std if leaf in ("wo", "w2") else 0.02
            value = std * rng.standard_normal(shape)
        params[name] = np.ascontiguousarray(value, dtype=dtype)
    return params


# --------------------------------------------------------------------------- forward/backward
class BlockCache(NamedTuple):
    ln1: object
    attn: object
    ln2: object
    fc1: L.LinearCache
    act: object
    fc2: L.LinearCache


class TransformerCache(NamedTuple):
    """Everything the backward pass needs: the embedding's cache, each block's, the final
    LayerNorm's and the head's (its input (B*T, D) and weight)."""

    emb: object
    blocks: tuple
    lnf: object
    head: L.LinearCache
    shape: tuple


def forward(params, ids, cfg: TransformerConfig, *, kernels: bool = True):
    """Logits (B, T, V) of the next token at every position of ids (B, T), and the cache."""
    if kernels:
        check_params(params, cfg)
        return _transformer_fused.forward(params, ids, cfg)
    h, emb = embedding_forward(ids, params["tok_emb"], params["pos_emb"])
    b, t, d = h.shape
    h = h.reshape(b * t, d)
    caches = []
    for i in range(cfg.blocks):
        p = f"blocks.{i}."
        a, ln1 = L.layernorm_forward(h, params[p + "ln1.g"], params[p + "ln1.b"], cfg.eps)
        attn_params = {k: params[p + "attn." + k] for k in _ATTN_KEYS[cfg.bias]}
        att, attn = self_attention_forward(a.reshape(b, t, d), attn_params, cfg.heads,
                                           kernel=False)
        h = h + att.reshape(b * t, d)
        m, ln2 = L.layernorm_forward(h, params[p + "ln2.g"], params[p + "ln2.b"], cfg.eps)
        u, fc1 = L.linear_forward(m, params[p + "mlp.w1"], params.get(p + "mlp.b1"))
        g, act = L.gelu_forward(u)
        f, fc2 = L.linear_forward(g, params[p + "mlp.w2"], params.get(p + "mlp.b2"))
        h = h + f
        caches.append(BlockCache(ln1, attn, ln2, fc1, act, fc2))
    z, lnf = L.layernorm_forward(h, params["lnf.g"], params["lnf.b"], cfg.eps)
    head_w = params["tok_emb"] if cfg.tied else params["head.w"]
    logits, head = L.linear_forward(z, head_w, None)
    return logits.reshape(b, t, cfg.vocab), TransformerCache(emb, tuple(caches), lnf, head,
                                                             (b, t, d))


def backward(dlogits, cache: TransformerCache, cfg: TransformerConfig, *,
             kernels: bool = True) -> dict[str, np.ndarray]:
    """Gradients of every parameter (name -> array of its shape) from dlogits (B, T, V).

    The cache decides the path (a forward with ``kernels=True`` gives a fused cache, one
    with ``kernels=False`` the reference's); ``kernels`` is kept for symmetry."""
    if isinstance(cache, _transformer_fused.FusedCache):
        L.check_same_dtype("the forward's activations", cache.z, "dlogits", dlogits)
        L.check_shape("dlogits", dlogits, cache.shape[:2] + (cfg.vocab,), "the logits'")
        grads = _transformer_fused.backward(dlogits, cache, cfg)
        return {name: np.ascontiguousarray(grads[name]) for name in param_shapes(cfg)}
    b, t, d = cache.shape
    grads = {}
    dz, dhead, _ = L.linear_backward(dlogits.reshape(b * t, cfg.vocab), cache.head)
    dh, grads["lnf.g"], grads["lnf.b"] = L.layernorm_backward(dz, cache.lnf)
    for i in reversed(range(cfg.blocks)):
        p = f"blocks.{i}."
        c = cache.blocks[i]
        dg, grads[p + "mlp.w2"], db2 = L.linear_backward(dh, c.fc2)
        du = L.gelu_backward(dg, c.act)
        dm, grads[p + "mlp.w1"], db1 = L.linear_backward(du, c.fc1)
        if cfg.bias:
            grads[p + "mlp.b1"], grads[p + "mlp.b2"] = db1, db2
        dres, grads[p + "ln2.g"], grads[p + "ln2.b"] = L.layernorm_backward(dm, c.ln2)
        dh = dh + dres
        da, attn_grads = self_attention_backward(dh.reshape(b, t, d), c.attn, kernel=False)
        for k, g in attn_grads.items():
            grads[p + "attn." + k] = g
        dres, grads[p + "ln1.g"], grads[p + "ln1.b"] = L.layernorm_backward(
            da.reshape(b * t, d), c.ln1)
        dh = dh + dres
    input_grads(dh.reshape(b, t, d), cache.emb, dhead, cfg.tied, grads)
    return {name: np.ascontiguousarray(grads[name]) for name in param_shapes(cfg)}


def loss_and_grad(params, ids, targets, cfg: TransformerConfig, *, kernels: bool = True):
    """(mean next-token cross-entropy in nats, grads) for inputs ids and targets (B, T)."""
    logits, cache = forward(params, ids, cfg, kernels=kernels)
    xent = fused.softmax_cross_entropy if kernels else L.softmax_cross_entropy  # same bits
    loss, dlogits = xent(logits, targets)
    return loss, backward(dlogits, cache, cfg, kernels=kernels)


_ATTN_KEYS = {True: ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"),
              False: ("wq", "wk", "wv", "wo")}


@functools.lru_cache(maxsize=32)
def _expected_shapes(cfg: TransformerConfig) -> tuple:
    return tuple(param_shapes(cfg).items())


def check_params(params, cfg: TransformerConfig) -> None:
    """Every parameter present with its shape, all of one float dtype (float32/float64):
    a ``KeyError``/``ValueError``/``TypeError`` naming it, before any kernel sees them."""
    dtype = None
    for name, shape in _expected_shapes(cfg):
        try:
            array = params[name]
        except KeyError:
            raise KeyError(f"params has no {name!r} (the model {cfg} needs it)") from None
        if dtype is None:
            dtype = L.check_float(name, array).dtype
        elif getattr(array, "dtype", None) != dtype:
            L.check_same_dtype(next(iter(params)), params[next(iter(params))], name, array)
        if array.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
