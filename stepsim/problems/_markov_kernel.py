"""numba kernel for :meth:`stepsim.problems.markov.MarkovLanguage.sample`. Private.

:func:`chain_tokens_reference` is the NumPy loop it replaced (one vectorised step per
position, several NumPy calls each, a large part of an LM batch); the kernel walks the
same chain with the same uniforms and the same comparisons, so the tokens are identical
(integers: no rounding is involved). Imported lazily, so ``import stepsim`` stays fast.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground.jit import njit


def chain_tokens_reference(cdf, start, u, vocab, out):
    """out[:, k + t] for t < u.shape[1]: the token after context s is the number of cdf[s]
    entries <= u (u in [0, 1), cdf[s, -1] = 1), then s = (s * vocab + token) mod V^k.

    cdf (V^k, V) float64; start (count,) int64 contexts; u (count, L - k) float64 uniforms;
    out (count, L) int64, whose first k columns already hold the start windows.
    """
    k = out.shape[1] - u.shape[1]
    s = start.copy()
    for t in range(u.shape[1]):
        token = (cdf[s] <= u[:, t, None]).sum(axis=1)
        out[:, k + t] = token
        s = (s * vocab + token) % cdf.shape[0]


@njit
def chain_tokens(cdf, start, u, vocab, out):
    """:func:`chain_tokens_reference` in one compiled pass (same arguments, same tokens)."""
    count, steps = u.shape
    k = out.shape[1] - steps
    n_contexts, width = cdf.shape
    for i in range(count):
        s = start[i]
        for t in range(steps):
            x = u[i, t]
            token = 0
            for j in range(width):
                if cdf[s, j] <= x:
                    token += 1
            out[i, k + t] = token
            s = (s * vocab + token) % n_contexts


def sample_chain(cdf, start, u, vocab, out) -> None:
    """Fill out[:, k:] by the kernel (arrays as :func:`chain_tokens_reference` takes)."""
    chain_tokens(np.ascontiguousarray(cdf), np.ascontiguousarray(start, dtype=np.int64),
                 np.ascontiguousarray(u), np.int64(vocab), out)
