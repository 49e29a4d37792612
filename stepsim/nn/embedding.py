"""Token and position embeddings, forward and backward.

    out[b, t] = table[ids[b, t]] + positions[t]      ids (B, T) ints in [0, V)

``table`` (V, D) is the token embedding (also the output head's weight when the head is
tied); ``positions`` (T_max, D) the learned position embedding, of which the first T rows
are used.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class EmbeddingCache(NamedTuple):
    """ids: (B, T) token ids; vocab: V; max_len: T_max (the shapes of the gradients)."""

    ids: np.ndarray
    vocab: int
    max_len: int


def embedding_forward(ids, table, positions):
    """Token plus position embedding.

    Parameters
    ----------
    ids : ndarray of int, shape (B, T)
        Token ids in [0, V).
    table : ndarray, shape (V, D)
    positions : ndarray, shape (T_max, D), T <= T_max

    Returns
    -------
    out : ndarray, shape (B, T, D), dtype of ``table``
    cache : EmbeddingCache
    """
    ids = np.asarray(ids)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a 2-d integer array (B, T), got {ids.dtype} {ids.shape}")
    vocab, width = table.shape
    if positions.ndim != 2 or positions.shape[1] != width:
        raise ValueError(f"positions must have shape (T_max, {width}), got {positions.shape}")
    if ids.shape[1] > positions.shape[0]:
        raise ValueError(f"sequence length {ids.shape[1]} exceeds the {positions.shape[0]} "
                         "position embeddings")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"ids must lie in [0, {vocab}), got range [{ids.min()}, {ids.max()}]")
    out = table[ids]
    out += positions[:ids.shape[1]]
    return out, EmbeddingCache(ids, vocab, positions.shape[0])


def embedding_backward(dout, cache: EmbeddingCache):
    """(dtable (V, D), dpositions (T_max, D)) from dout (B, T, D).

    A token's gradient is the sum of dout over every place it occurs (in order of
    occurrence); rows of unused tokens and unused positions are 0.
    """
    ids, vocab, max_len = cache
    _b, t, d = dout.shape
    dtable = np.zeros((vocab, d), dtype=dout.dtype)
    from stepsim.nn import _kernels as K

    # a scatter-add loop: np.add.at does the same, many times slower
    K.scatter_add_rows(np.ascontiguousarray(ids.reshape(-1)),
                       np.ascontiguousarray(dout.reshape(-1, d)), dtable)
    dpos = np.zeros((max_len, d), dtype=dout.dtype)
    dpos[:t] = dout.sum(axis=0)
    return dtable, dpos


def input_grads(dout, cache: EmbeddingCache, head_grad, tied: bool, grads: dict) -> None:
    """Write the input side's gradients into ``grads``: ``tok_emb`` and ``pos_emb`` from
    dout (B, T, D) (:func:`embedding_backward`), and the head's gradient head_grad (V, D),
    added to ``tok_emb``'s when the head is tied to the token table, else ``head.w``."""
    dtable, grads["pos_emb"] = embedding_backward(dout, cache)
    if tied:
        dtable += head_grad
    else:
        grads["head.w"] = head_grad
    grads["tok_emb"] = dtable
