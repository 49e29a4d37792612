"""The Markov chain sampler's kernel gives the tokens of its NumPy reference."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stepsim.problems import _markov_kernel as K
from stepsim.problems.markov import MarkovLanguage


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(1, 3), st.floats(0.2, 3.0), st.integers(1, 12),
       st.integers(0, 20), st.integers(0, 2**32 - 1))
def test_the_kernel_walks_the_chain_of_the_reference(vocab, order, temperature, count,
                                                      extra, seed):
    lang = MarkovLanguage(vocab=vocab, order=order, temperature=temperature, seed=seed % 97)
    rng = np.random.default_rng(seed)
    start = rng.integers(0, lang.n_contexts, count)
    u = rng.random((count, extra + 1))
    # uniforms that land exactly on a cdf entry test the comparison's side (<=)
    u[:, 0] = lang.cdf[start, rng.integers(0, vocab - 1, count)]  # < 1, as uniforms are
    want = np.full((count, order + extra + 1), -1, dtype=np.int64)
    got = want.copy()
    K.chain_tokens_reference(lang.cdf, start, u, vocab, want)
    K.sample_chain(lang.cdf, start, u, vocab, got)
    assert np.array_equal(got, want)
    assert got[:, order:].min() >= 0 and got[:, order:].max() < vocab


def test_sample_is_reproducible_and_follows_the_chain():
    lang = MarkovLanguage(vocab=5, order=2, temperature=0.5, seed=3)
    a = lang.sample(50, 30, rng=11)
    assert np.array_equal(a, lang.sample(50, 30, rng=11))
    # every transition taken has positive probability under the chain
    s = a[:, 0] * 5 + a[:, 1]
    for t in range(2, 30):
        assert np.all(lang.probs[s, a[:, t]] > 0)
        s = (s * 5 + a[:, t]) % 25
