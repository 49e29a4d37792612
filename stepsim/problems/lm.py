"""Language modelling on a synthetic language whose best possible loss is known.

A small GPT-style transformer (:mod:`stepsim.nn.transformer`) learns to predict the next
token of sequences from a seeded random order-k Markov chain
(:class:`~stepsim.problems.markov.MarkovLanguage`). Its exact entropy rate makes the
best achievable test loss a number: ``evaluate`` reports the test loss, its gap to that
floor, and next-token accuracy beside the Bayes-optimal predictor's.

Training data is an endless stream: every minibatch is ``batch_size`` fresh sequences of
``context + 1`` tokens drawn with the caller's generator (no sequence is seen twice, so
the gap measures optimisation and capacity, not overfitting). The test set is ``n_test``
sequences drawn once from ``seed``.

Sparsified parameters: the linear weights of the kinds in ``sparse`` (default: all linear
modules -- wq, wk, wv, wo, w1, w2 and the head when untied -- as the paper does for BERT and
GPT-2), N:M along the input axis. Embeddings, LayerNorms and biases stay dense.
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
    Real,
    declared_keywords,
)
from stepsim._ground.validate import check_choice, check_problem_memory
from stepsim.core.sparsity import ParamSpec, check_divides
from stepsim.nn import transformer as tr
from stepsim.problems.base import ITEM_SPLITS
from stepsim.problems.markov import MarkovLanguage


def memory_estimate(cfg, *, order: int, batch_size: int, n_test: int, itemsize: int) -> int:
    """Bytes a :class:`LanguageModel` of transformer ``cfg`` needs at its peak, an upper
    estimate: every parameter with its gradient, Adam's m and v and copies (8 arrays of
    ``itemsize`` bytes), the largest weight drawn in float64 by the initialisation, the
    activations a step keeps per block (B x C x (12 D + 2 F) plus two B x H x C x C
    attention maps; B the larger of the minibatch and the evaluation's 128 sequences) and
    the logits, twice (the backward's gradients), the held-out sequences (``n_test``: test
    and validation together) and the language's tables (V^order contexts x V, and the
    dense linear system of its stationary law up to ``markov.DIRECT_CONTEXTS`` contexts)."""
    from stepsim.problems.markov import DIRECT_CONTEXTS, MAX_CONTEXTS

    shapes = tr.param_shapes(cfg).values()
    n_params = sum(int(np.prod(shape)) for shape in shapes)
    largest = max(int(np.prod(shape)) for shape in shapes)
    b, c, d, v = max(batch_size, 128), cfg.context, cfg.width, cfg.vocab
    activations = 2 * (cfg.blocks * b * c * (12 * d + 2 * cfg.hidden + 2 * cfg.heads * c)
                       + 3 * b * c * v)  # x2: the backward's gradients of the same sizes
    contexts = v ** order  # more than MAX_CONTEXTS: MarkovLanguage refuses it by name
    contexts = contexts if contexts <= MAX_CONTEXTS else 0
    language = 8 * (4 * contexts * v + (contexts**2 if contexts <= DIRECT_CONTEXTS else 0))
    test_set = 8 * n_test * (c + 1) + 8 * 64 * c * v
    return (itemsize * (8 * n_params + activations) + 8 * largest + language + test_set)


class Batch(NamedTuple):
    """inputs (B, T) token ids and targets (B, T), the inputs shifted by one."""

    inputs: np.ndarray
    targets: np.ndarray


class LanguageModel:
    """Next-token prediction on a :class:`MarkovLanguage` (see the module docstring).

    Parameters (keyword-only)
    -------------------------
    vocab, order, temperature : the language (V tokens, order k, logit temperature).
    context : T, positions per sequence (the model predicts T tokens of each).
    width, blocks, heads, mlp_ratio, tied, bias : the model (:class:`TransformerConfig`).
    sparse : kinds of linear weights to sparsify (subset of ``LINEAR_KINDS``, or a string
        "w1,w2"); None: all linear modules the model has; () none.
    nm : their N:M (groups of M along the input axis).
    batch_size : sequences per minibatch. n_test : held-out sequences.
    dtype : float32 (default) or float64. kernels : numba element-wise kernels (else the
        NumPy layers). seed : the language's transition table and the test set. BLAS
        threads are set by ``fit`` (``blas_threads``, default 1), not by the problem.
    """

    #: the options, declared once (stepsim._ground.options): the defaults and checks of
    #: __init__'s keywords
    OPTIONS = Options({
        "vocab": Option(Int(minimum=2), 16, "tokens V"),
        "order": Option(Int(minimum=1), 2, "order k of the Markov language"),
        "temperature": Option(Real(minimum=0.0, min_open=True), 0.5,
                              "logit temperature of the language"),
        "context": Option(Int(minimum=1), 32, "positions per sequence (>= order)"),
        "width": Option(Int(minimum=1), 64, "model width D"),
        "blocks": Option(Int(minimum=1), 2, "transformer blocks"),
        "heads": Option(Int(minimum=1), 4, "attention heads (divide width)"),
        "mlp_ratio": Option(Int(minimum=1), 4, "MLP hidden size / width"),
        "tied": Option(Bool(), False, "the head reuses the token embedding"),
        "bias": Option(Bool(), True, "linear layers have biases"),
        "sparse": Option(Described("kinds (e.g. wq,wk) or none"), None,
                         "linear weights to sparsify (none: all)"),
        "nm": Option(NM(), (2, 4), "N:M of the sparse weights"),
        "batch_size": Option(Int(minimum=1), 32, "sequences per minibatch"),
        "n_test": Option(Int(minimum=1), 512, "held-out sequences"),
        "n_validation": Option(Int(minimum=0), 0, "validation sequences (choices made "
                                                  "from data read these; 0: none)"),
        "dtype": Option(Described("float32|float64"), np.float32, "data and parameter dtype"),
        "kernels": Option(Bool(), True, "numba element-wise kernels (else NumPy layers)"),
        "seed": Option(Int(minimum=0), 0, "seed of the language and the test set"),
    }, none_is_default=False)

    @declared_keywords(OPTIONS)  # each value checked by its declaration before the body
    def __init__(self, *, vocab: int, order: int, temperature: float, context: int,
                 width: int, blocks: int, heads: int, mlp_ratio: int, tied: bool, bias: bool,
                 sparse: tuple[str, ...] | None, nm: tuple[int, int], batch_size: int,
                 n_test: int, n_validation: int, dtype, kernels: bool, seed: int):
        self.model = tr.TransformerConfig(vocab=vocab, context=context, width=width,
                                          blocks=blocks, heads=heads, mlp_ratio=mlp_ratio,
                                          tied=tied, bias=bias)
        check_problem_memory(
            "lm", {"vocab": vocab, "order": order, "context": context, "width": width,
                   "blocks": blocks, "heads": heads, "mlp_ratio": mlp_ratio,
                   "batch_size": batch_size, "n_test": n_test, "n_validation": n_validation},
            memory_estimate(self.model, order=order, batch_size=batch_size,
                            n_test=n_test + n_validation, itemsize=np.dtype(dtype).itemsize),
            "parameters, Adam's state, activations, the language's tables")
        self.language = MarkovLanguage(vocab=vocab, order=order, temperature=temperature,
                                       seed=seed)
        if context < order:
            raise ValueError(f"context = {context} must be >= order = {order}")
        self.batch_size, self.n_test, self.n_validation = batch_size, n_test, n_validation
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"dtype must be float32 or float64, got {self.dtype}")
        self.kernels = kernels
        self.seed = seed
        self.nm = nm
        names = tr.linear_names(self.model)
        if isinstance(sparse, str):  # one kind, or "wq,wk" as the command line gives it
            kinds = tuple(kind.strip() for kind in sparse.split(",") if kind.strip())
            if not kinds:
                raise ValueError(f"sparse: no kind in {sparse!r}; give kinds (e.g. 'wq,wk') or "
                                 "an empty tuple for a dense model")
            sparse = kinds
        if sparse is None:
            sparse = tuple(kind for kind in tr.LINEAR_KINDS if names[kind])
        sparse = tuple(sparse)
        for kind in sparse:
            if kind not in tr.LINEAR_KINDS:
                raise ValueError(f"sparse: unknown kind {kind!r}; choose from "
                                 f"{list(tr.LINEAR_KINDS)}")
            if not names[kind]:
                raise ValueError(f"sparse: kind {kind!r} has no weight in this model "
                                 "(a tied head is the token embedding; it stays dense)")
        self.sparse = sparse
        shapes = tr.param_shapes(self.model)
        sparse_names = {name for kind in sparse for name in names[kind]}
        self.specs = {name: ParamSpec(*self.nm, axis=-1) if name in sparse_names else ParamSpec()
                      for name in shapes}
        for name in sparse_names:
            check_divides(name, shapes[name], -1, self.nm[1])
        tokens = self.language.sample(self.n_test, context + 1, rng=[seed, 1])
        self.test_inputs, self.test_targets = tokens[:, :-1], tokens[:, 1:]
        # validation sequences from a stream of their own: the test set and every
        # training batch are the same with or without them
        held = (self.language.sample(n_validation, context + 1, rng=[seed, 2]) if n_validation
                else np.empty((0, context + 1), dtype=np.int64))
        self.validation_inputs, self.validation_targets = held[:, :-1], held[:, 1:]
        self.entropy_floor = self.language.loss_floor(context)
        oracle = self.language.nll(tokens)
        self.oracle_test_loss = float(oracle.mean())
        hits = sum(int(np.sum(np.argmax(self.language.predictive(tokens[lo:lo + 64]), -1)
                              == self.test_targets[lo:lo + 64]))
                   for lo in range(0, self.n_test, 64))
        self.oracle_accuracy = hits / self.test_targets.size

    def __repr__(self):
        m = self.model
        return (f"LanguageModel(vocab={m.vocab}, order={self.language.order}, "
                f"temperature={self.language.temperature}, context={m.context}, "
                f"width={m.width}, blocks={m.blocks}, heads={m.heads}, tied={m.tied}, "
                f"sparse={list(self.sparse)}, nm={self.nm}, batch_size={self.batch_size}, "
                f"dtype={self.dtype.name}, seed={self.seed})")

    def config(self) -> dict:
        m = self.model
        return {"vocab": m.vocab, "order": self.language.order,
                "temperature": self.language.temperature, "context": m.context,
                "width": m.width, "blocks": m.blocks, "heads": m.heads,
                "mlp_ratio": m.mlp_ratio, "tied": m.tied, "bias": m.bias,
                "sparse": list(self.sparse), "nm": list(self.nm),
                "batch_size": self.batch_size, "n_test": self.n_test,
                "n_validation": self.n_validation,
                "dtype": self.dtype.name, "kernels": self.kernels,
                "seed": self.seed}

    # ---------------------------------------------------------------- protocol
    def init_params(self, rng) -> dict:
        """GPT-2's initialisation (:func:`stepsim.nn.transformer.init_params`)."""
        return tr.init_params(self.model, rng, self.dtype)

    def sample_batch(self, rng) -> Batch:
        """batch_size fresh sequences of the language (context + 1 tokens each)."""
        tokens = self.language.sample(self.batch_size, self.model.context + 1, rng=rng)
        return Batch(tokens[:, :-1], tokens[:, 1:])

    def loss_and_grad(self, params, batch: Batch):
        return tr.loss_and_grad(params, batch.inputs, batch.targets, self.model,
                                kernels=self.kernels)

    def evaluate(self, params, chunk: int = 128) -> dict:
        """test_loss (nats/token), entropy_floor, gap = test_loss - entropy_floor,
        oracle_test_loss (the true chain's loss on the same test set), accuracy and the
        oracle's accuracy (argmax of the true next-token distribution)."""
        from stepsim.nn.layers import softmax_cross_entropy

        total = correct = 0.0
        for lo in range(0, self.n_test, chunk):
            x = self.test_inputs[lo:lo + chunk]
            y = self.test_targets[lo:lo + chunk]
            logits, _ = tr.forward(params, x, self.model, kernels=self.kernels)
            loss, _ = softmax_cross_entropy(logits, y)
            total += loss * y.size
            correct += float(np.sum(np.argmax(logits, axis=-1) == y))
        n = self.test_targets.size
        test_loss = total / n
        out = {"test_loss": test_loss, "entropy_floor": self.entropy_floor,
               "gap": test_loss - self.entropy_floor,
               "oracle_test_loss": self.oracle_test_loss,
               "accuracy": correct / n, "oracle_accuracy": self.oracle_accuracy}
        if self.n_validation:
            out["validation_gap"] = float(np.mean(self.item_errors(params, "validation",
                                                                   chunk=chunk)))
        return out

    def _split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        check_choice("split", split, ITEM_SPLITS)
        if split == "validation":
            if not self.n_validation:
                raise ValueError("split='validation': this problem has no validation "
                                 "sequences (n_validation = 0)")
            return self.validation_inputs, self.validation_targets
        return self.test_inputs, self.test_targets

    def item_errors(self, params, split: str = "test", chunk: int = 128) -> np.ndarray:
        """Per sequence of ``split`` ("test" or "validation"): its mean next-token loss minus
        the entropy floor, in nats (float64, shape (n_split,)); the test items' mean is
        ``evaluate``'s gap up to the order of summation. The paper checks read these to add
        the split's sampling error (the sequences are independent draws; tokens within one
        are not) to their intervals."""
        from stepsim.nn.layers import softmax_cross_entropy

        inputs, targets = self._split(split)
        out = np.empty(len(targets), dtype=np.float64)
        for lo in range(0, len(targets), chunk):
            x = inputs[lo:lo + chunk]
            y = targets[lo:lo + chunk]
            logits, _ = tr.forward(params, x, self.model, kernels=self.kernels)
            for i in range(len(y)):
                out[lo + i] = softmax_cross_entropy(logits[i], y[i])[0]
        return out - self.entropy_floor

    def diverged_item_errors(self, split: str = "test") -> np.ndarray:
        """``item_errors`` of a run that went non-finite: the loss of knowing nothing (the
        uniform prediction, ln V nats a token) minus the floor, for every sequence of
        ``split``."""
        import math

        return np.full(len(self._split(split)[1]),
                       math.log(self.language.vocab) - self.entropy_floor)
