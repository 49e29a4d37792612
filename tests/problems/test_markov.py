"""stepsim.problems.markov: the synthetic language and its exact entropy rate."""

import numpy as np
import pytest

from stepsim.problems.markov import MarkovLanguage


def apply_chain(lang, pi):
    """pi P on the V^k contexts, written out with explicit loops (independent of the class)."""
    out = np.zeros_like(pi)
    for s in range(lang.n_contexts):
        for j in range(lang.vocab):
            out[(s * lang.vocab + j) % lang.n_contexts] += pi[s] * lang.probs[s, j]
    return out


@pytest.mark.parametrize("vocab, order, temperature", [(4, 1, 1.0), (3, 3, 0.4), (6, 2, 2.0)])
def test_stationary_law_is_invariant_and_normalised(vocab, order, temperature):
    lang = MarkovLanguage(vocab=vocab, order=order, temperature=temperature, seed=5)
    pi = lang.stationary
    assert pi.shape == (vocab ** order,) and np.all(pi > 0)
    assert np.sum(pi) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(apply_chain(lang, pi), pi, atol=1e-13)


@pytest.mark.parametrize("kwargs", [{"vocab": 16, "order": 2, "temperature": 0.5},  # the LM's
                                    {"vocab": 8, "order": 3, "temperature": 1.0, "seed": 2}])
def test_direct_solve_agrees_with_power_iteration(kwargs):
    """The direct solve (issue 16) gives the law power iteration converged to, to ~1e-13."""
    lang = MarkovLanguage(**kwargs)
    np.testing.assert_allclose(lang.stationary, lang._stationary_by_power(), rtol=0, atol=1e-12)


def test_a_cold_chain_is_solved_directly_and_a_colder_one_refused():
    """temperature 0.1 mixes too slowly for power iteration (it spun ~20 s, then raised);
    the linear system is fine (condition ~1e6). At 0.05 (~6e10) it is refused in one line."""
    lang = MarkovLanguage(vocab=16, order=2, temperature=0.1)
    pi = lang.stationary
    assert np.all(pi > 0) and np.sum(pi) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(apply_chain(lang, pi), pi, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match=r"condition number 5\.59e\+10 \(> 1e\+10\).*temperature"):
        MarkovLanguage(vocab=16, order=2, temperature=0.05)


def test_order_one_matches_the_leading_eigenvector():
    lang = MarkovLanguage(vocab=5, order=1, temperature=0.8, seed=2)
    values, vectors = np.linalg.eig(lang.probs.T)
    top = np.real(vectors[:, np.argmax(np.real(values))])
    np.testing.assert_allclose(lang.stationary, top / top.sum(), atol=1e-12)
    expected = -np.sum(lang.stationary[:, None] * lang.probs * np.log(lang.probs))
    assert lang.entropy_rate == pytest.approx(expected, rel=1e-12)


def test_entropy_moves_with_temperature_between_zero_and_log_v():
    rates = [MarkovLanguage(vocab=8, order=2, temperature=t, seed=0).entropy_rate
             for t in (0.2, 0.5, 1.0, 100.0)]
    assert all(0 < r < np.log(8) for r in rates)
    assert rates == sorted(rates)
    assert rates[-1] == pytest.approx(np.log(8), abs=1e-3)


def test_empirical_loss_of_the_true_chain_matches_the_exact_floor():
    lang = MarkovLanguage(vocab=6, order=2, temperature=0.7, seed=3)
    tokens = lang.sample(4000, 12, rng=1)
    nll = lang.nll(tokens)  # (count, 11)
    floors = lang.position_floors(11)
    per_pos = nll.mean(axis=0)
    se = nll.std(axis=0) / np.sqrt(nll.shape[0])
    assert np.all(np.abs(per_pos - floors) < 4.5 * se)
    assert floors[0] > floors[1] == pytest.approx(lang.entropy_rate)  # 1 token < k of context
    assert lang.loss_floor(11) == pytest.approx(floors.mean())
    assert nll.mean() == pytest.approx(lang.loss_floor(11), abs=4.5 * nll.std() / np.sqrt(nll.size))


def test_transition_frequencies_match_the_table():
    lang = MarkovLanguage(vocab=3, order=1, temperature=1.0, seed=7)
    tokens = lang.sample(3000, 20, rng=4)
    counts = np.zeros((3, 3))
    np.add.at(counts, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1)
    freq = counts / counts.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(freq, lang.probs, atol=0.02)
    first = np.bincount(tokens[:, 0], minlength=3) / 3000
    np.testing.assert_allclose(first, lang.stationary, atol=0.03)


def test_predictive_is_a_distribution_consistent_with_nll():
    lang = MarkovLanguage(vocab=5, order=3, temperature=0.6, seed=1)
    tokens = lang.sample(40, 9, rng=0)
    p = lang.predictive(tokens)
    assert p.shape == (40, 8, 5)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-12)
    picked = np.take_along_axis(p, tokens[:, 1:, None], axis=-1)[..., 0]
    np.testing.assert_allclose(-np.log(picked), lang.nll(tokens), atol=1e-12)


def test_same_seed_same_language_and_samples():
    a = MarkovLanguage(vocab=7, order=2, seed=11)
    b = MarkovLanguage(vocab=7, order=2, seed=11)
    assert np.array_equal(a.probs, b.probs)
    assert np.array_equal(a.sample(5, 10, rng=3), b.sample(5, 10, rng=3))
    assert not np.array_equal(a.probs, MarkovLanguage(vocab=7, order=2, seed=12).probs)


@pytest.mark.parametrize("kwargs, word", [
    ({"vocab": 1}, "vocab"), ({"order": 0}, "order"), ({"temperature": 0.0}, "temperature"),
    ({"temperature": -1.0}, "temperature"), ({"vocab": 256, "order": 3}, "contexts"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_name_themselves(kwargs, word):
    with pytest.raises(ValueError, match=word):
        MarkovLanguage(**kwargs)


def test_bad_tokens_and_lengths():
    lang = MarkovLanguage(vocab=4, order=2)
    with pytest.raises(ValueError, match="length"):
        lang.sample(3, 2)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        lang.nll(np.array([[0, 4, 1]]))
    with pytest.raises(ValueError, match="tokens"):
        lang.predictive(np.array([0, 1, 2]))
