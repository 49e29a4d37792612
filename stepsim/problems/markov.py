"""A synthetic language whose best possible next-token loss is known exactly.

:class:`MarkovLanguage` is a seeded random Markov chain of order k over V tokens: the next
token depends on the previous k through a table of V^k categorical distributions,

    P(x_{t+1} = j | context s) = softmax(g_s / temperature)_j,   g_s ~ N(0, I_V)  (seeded),

so the temperature sets the entropy (temperature -> inf: uniform, log V nats a token;
temperature -> 0: nearly deterministic). Every probability is positive, so the chain on the
V^k contexts is irreducible and aperiodic, and it has one stationary distribution pi. Up to
1024 contexts pi solves the linear system pi (P - I) = 0, sum(pi) = 1 directly (LU with
partial pivoting in float64, written with elementwise NumPy operations only, so the bits
do not depend on the CPU's BLAS); a chain whose system is too ill-conditioned (condition
number above 1e10: a low temperature, e.g. 0.05) is refused with a ValueError. Larger
chains use power iteration to 1e-13 in L1, refused the same way if it does not converge.

Sequences start from a stationary draw of their first k tokens, then follow the chain, so
every window of a sequence has the stationary law. The best mean loss a model can reach in
predicting token t+1 from tokens 0..t (nats, averaged over the T predicted positions of a
sequence of T + 1 tokens) is then exact:

    floor_t = H(X_0..X_{t+1}) - H(X_0..X_t)  for t < k   (entropies of stationary windows)
    floor_t = h = sum_s pi(s) H(P(. | s))      for t >= k - 1 (the entropy rate)

``loss_floor(T)`` is their mean; the entropy rate ``h`` is the floor as T -> inf.
All sizes: 2 <= V, 1 <= k, V^k <= 2^20 contexts.
"""

from __future__ import annotations

import numpy as np

from stepsim._ground import libm as _libm
from stepsim._ground.validate import check_int, check_real

MAX_CONTEXTS = 1 << 20
DIRECT_CONTEXTS = 1024  # up to here the stationary law is solved directly (O(n^3) / 3)
MAX_CONDITION = 1e10  # the law is then accurate to ~ MAX_CONDITION * 2.2e-16 = 2e-6 relative


class MarkovLanguage:
    """A seeded random order-``order`` Markov chain over ``vocab`` tokens (module docstring).

    Parameters
    ----------
    vocab : int
        V, the number of tokens (>= 2).
    order : int
        k, how many previous tokens the next one depends on (>= 1).
    temperature : float
        > 0; divides the Gaussian logits of every context's distribution.
    seed : int
        Seeds the transition table (and nothing else; sampling takes its own rng).

    Attributes
    ----------
    probs : ndarray, shape (V^k, V), float64
        probs[s, j] = P(next = j | context s); context s of tokens (c_1, ..., c_k), oldest
        first, is s = sum_i c_i V^(k-i).
    stationary : ndarray, shape (V^k,), float64
        pi, the stationary law of k-token windows.
    entropy_rate : float
        h in nats per token.
    """

    def __init__(self, *, vocab: int = 16, order: int = 2, temperature: float = 1.0,
                 seed: int = 0):
        self.vocab = check_int("vocab", vocab, minimum=2)
        self.order = check_int("order", order, minimum=1)
        self.temperature = check_real("temperature", temperature, minimum=0.0, min_open=True)
        self.seed = check_int("seed", seed, minimum=0)
        if self.vocab ** self.order > MAX_CONTEXTS:
            raise ValueError(f"vocab ** order = {self.vocab}**{self.order} contexts exceeds "
                             f"{MAX_CONTEXTS}; use a smaller vocab or order")
        self.n_contexts = self.vocab ** self.order
        logits = np.random.default_rng(self.seed).standard_normal((self.n_contexts, self.vocab))
        logits /= self.temperature
        logits -= logits.max(axis=1, keepdims=True)
        probs = _libm.exp(logits)
        self.probs = probs / probs.sum(axis=1, keepdims=True)
        self.cdf = np.cumsum(self.probs, axis=1)
        self.cdf[:, -1] = 1.0  # sampling compares u < 1 against it: never past the last token
        self.stationary = self._stationary()
        row_entropy = -np.sum(self.probs * _libm.log(self.probs), axis=1)
        self.entropy_rate = float(self.stationary @ row_entropy)

    def __repr__(self):
        return (f"MarkovLanguage(vocab={self.vocab}, order={self.order}, "
                f"temperature={self.temperature}, seed={self.seed})")

    def config(self) -> dict:
        return {"vocab": self.vocab, "order": self.order, "temperature": self.temperature,
                "seed": self.seed}

    # ------------------------------------------------------------ exact quantities
    def _successors(self) -> np.ndarray:
        """(V^k, V) index of the context after context s emits token j."""
        s = np.arange(self.n_contexts)[:, None]
        return (s * self.vocab + np.arange(self.vocab)) % self.n_contexts

    def _stationary(self) -> np.ndarray:
        """pi with pi P = pi and sum(pi) = 1 (module docstring: direct up to DIRECT_CONTEXTS).

        The system A pi = e_n with A = P^T - I whose last row is replaced by ones (the
        chain is irreducible, so A is non-singular). Raises ValueError naming the
        temperature when A's condition number exceeds MAX_CONDITION.
        """
        n = self.n_contexts
        if n > DIRECT_CONTEXTS:
            return self._stationary_by_power()
        a = np.zeros((n, n))
        np.add.at(a, (self._successors().ravel(), np.repeat(np.arange(n), self.vocab)),
                  self.probs.ravel())  # a[t, s] = P(s -> t)
        a[np.arange(n), np.arange(n)] -= 1.0
        a[-1] = 1.0
        norm = np.abs(a).sum(axis=0).max()
        lu, perm = _lu(a)
        pi = _lu_solve(lu, perm, np.eye(1, n, n - 1)[0])
        condition = norm * _inverse_norm1(lu, perm)
        if not (condition <= MAX_CONDITION and pi.min() > 0):
            raise ValueError(f"{self!r}: the stationary law's linear system has condition "
                             f"number {condition:.3g} (> {MAX_CONDITION:.0e}), so the law and "
                             f"the loss floor would be inaccurate; raise the temperature "
                             f"(-p temperature=...) or lower the order")
        return pi / pi.sum()

    def _stationary_by_power(self, tol: float = 1e-13, max_iter: int = 100_000) -> np.ndarray:
        """pi by power iteration (chains too large for the direct solve)."""
        succ = self._successors().ravel()
        pi = np.full(self.n_contexts, 1.0 / self.n_contexts)
        for _ in range(max_iter):
            new = np.bincount(succ, weights=(pi[:, None] * self.probs).ravel(),
                              minlength=self.n_contexts)
            new /= new.sum()
            if np.abs(new - pi).sum() < tol:
                return new
            pi = new
        raise ValueError(f"{self!r}: the stationary law did not converge in {max_iter} power "
                         f"iterations (the chain mixes too slowly); raise the temperature "
                         f"(-p temperature=...) or use at most {DIRECT_CONTEXTS} contexts")

    def window_entropies(self) -> np.ndarray:
        """H_j = H(X_1..X_j) of a stationary window, j = 0..k+1 (nats; H_0 = 0)."""
        out = np.zeros(self.order + 2)
        joint = self.stationary  # law of k-windows, index s = sum c_i V^(k-i)
        for j in range(self.order, 0, -1):
            out[j] = _entropy(joint)
            joint = joint.reshape(-1, self.vocab).sum(axis=1)  # drop the newest token
        out[self.order + 1] = out[self.order] + self.entropy_rate
        return out

    def position_floors(self, length: int) -> np.ndarray:
        """(length,) best expected loss predicting token t+1 from tokens 0..t, t < length."""
        length = check_int("length", length, minimum=1)
        h = self.window_entropies()
        t = np.arange(length)
        floors = np.full(length, self.entropy_rate)
        short = t < self.order
        floors[short] = h[t[short] + 2] - h[t[short] + 1]
        return floors

    def loss_floor(self, length: int) -> float:
        """Best expected mean loss (nats) over the ``length`` predicted positions of a sequence."""
        return float(self.position_floors(length).mean())

    # ------------------------------------------------------------ sampling
    def sample(self, count: int, length: int, rng=None) -> np.ndarray:
        """``count`` sequences of ``length`` tokens, shape (count, length), int64.

        The first k tokens are a stationary draw, the rest follow the chain (needs
        length >= k + 1). All randomness from ``rng`` (seed or Generator).
        """
        count = check_int("count", count, minimum=1)
        length = check_int("length", length, minimum=self.order + 1)
        rng = np.random.default_rng(rng)
        out = np.empty((count, length), dtype=np.int64)
        cdf_pi = np.cumsum(self.stationary)
        cdf_pi[-1] = 1.0
        s = np.minimum(np.searchsorted(cdf_pi, rng.random(count), side="right"),
                       self.n_contexts - 1)
        for i in range(self.order):  # unpack the context index into its k tokens
            out[:, i] = s // self.vocab ** (self.order - 1 - i) % self.vocab
        u = rng.random((count, length - self.order))
        from stepsim.problems import _markov_kernel

        _markov_kernel.sample_chain(self.cdf, s, u, self.vocab, out)  # the chain's tokens
        return out

    def predictive(self, tokens: np.ndarray) -> np.ndarray:
        """(count, length-1, V): P(x_{t+1} = . | x_0..x_t) of sequences under this chain.

        The Bayes-optimal predictor: while fewer than k tokens are seen, the stationary
        window law conditioned on them; after that the transition table.
        """
        tokens = self._check_tokens(tokens)
        count, length = tokens.shape
        out = np.empty((count, length - 1, self.vocab))
        laws = self._window_laws()
        for t in range(length - 1):
            seen = min(t + 1, self.order)
            s = np.zeros(count, dtype=np.int64)
            for i in range(t + 1 - seen, t + 1):
                s = s * self.vocab + tokens[:, i]
            if seen == self.order:
                out[:, t] = self.probs[s]
            else:
                rows = laws[seen + 1].reshape(-1, self.vocab)[s]
                out[:, t] = rows / rows.sum(axis=1, keepdims=True)
        return out

    def _window_laws(self) -> list:
        """laws[j] (V^j,): the stationary law of j consecutive tokens, j = 1..k (laws[0] None)."""
        laws = [None] * (self.order + 1)
        joint = self.stationary
        for j in range(self.order, 0, -1):
            laws[j] = joint
            joint = joint.reshape(-1, self.vocab).sum(axis=1)  # drop the newest token
        return laws

    def _check_tokens(self, tokens):
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or tokens.shape[1] < 2 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"tokens must be integers of shape (count, length >= 2), got "
                             f"{tokens.dtype} {tokens.shape}")
        if tokens.min() < 0 or tokens.max() >= self.vocab:
            raise ValueError(f"tokens must lie in [0, {self.vocab}), got range "
                             f"[{tokens.min()}, {tokens.max()}]")
        return tokens

    def nll(self, tokens: np.ndarray) -> np.ndarray:
        """(count, length-1) exact -log P(x_{t+1} | x_0..x_t) of sequences under this chain.

        The Bayes-optimal predictor's loss, position by position: for t + 1 < k it uses the
        stationary window law, after that the transition table.
        """
        tokens = self._check_tokens(tokens)
        count, length = tokens.shape
        out = np.empty((count, length - 1))
        laws = self._window_laws()  # each indexed by its tokens' base-V number
        prefix = np.zeros(count, dtype=np.int64)
        for t in range(length - 1):
            if t + 1 < self.order:  # p(x_{t+1} | x_0..x_t) = law_{t+2} / law_{t+1}
                both = prefix * self.vocab + tokens[:, t]
                both = both * self.vocab + tokens[:, t + 1]
                out[:, t] = (_libm.log(laws[t + 1][both // self.vocab])
                             - _libm.log(laws[t + 2][both]))
                prefix = prefix * self.vocab + tokens[:, t]
            else:
                if t + 1 == self.order:
                    prefix = prefix * self.vocab + tokens[:, t]
                else:
                    prefix = (prefix * self.vocab + tokens[:, t]) % self.n_contexts
                out[:, t] = -_libm.log(self.probs[prefix, tokens[:, t + 1]])
        return out


def _lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LU with partial pivoting of square ``a``, in place: (lu, perm) with a[perm] = L U, L
    unit lower (below the diagonal of lu) and U upper. Elementwise operations only (no BLAS),
    so the bits are the same on every CPU."""
    n = a.shape[0]
    perm = np.arange(n)
    for k in range(n - 1):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if p != k:
            a[[k, p]] = a[[p, k]]
            perm[[k, p]] = perm[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.multiply.outer(a[k + 1:, k], a[k, k + 1:])
    return a, perm


def _lu_solve(lu: np.ndarray, perm: np.ndarray, b: np.ndarray, *,
              transpose: bool = False) -> np.ndarray:
    """x with A x = b (or A^T x = b), from :func:`_lu`'s factors; column operations only."""
    n = lu.shape[0]
    if not transpose:  # L U x = b[perm]
        x = b[perm].astype(np.float64)
        for k in range(n - 1):
            x[k + 1:] -= lu[k + 1:, k] * x[k]
        for k in range(n - 1, -1, -1):
            x[k] /= lu[k, k]
            x[:k] -= lu[:k, k] * x[k]
        return x
    x = b.astype(np.float64)  # U^T L^T y = b, then x[perm] = y
    for k in range(n):
        x[k] /= lu[k, k]
        x[k + 1:] -= lu[k, k + 1:] * x[k]
    for k in range(n - 1, 0, -1):
        x[:k] -= lu[k, :k] * x[k]
    out = np.empty_like(x)
    out[perm] = x
    return out


def _inverse_norm1(lu: np.ndarray, perm: np.ndarray, iterations: int = 5) -> float:
    """An estimate (a lower bound, usually exact) of ||A^-1||_1 from A's LU factors: Hager's
    method, as LAPACK's condition estimators, deterministic."""
    n = lu.shape[0]
    x = np.full(n, 1.0 / n)
    estimate = 0.0
    for i in range(iterations):
        y = _lu_solve(lu, perm, x)
        estimate = max(estimate, float(np.abs(y).sum()))
        z = _lu_solve(lu, perm, np.where(y >= 0, 1.0, -1.0), transpose=True)
        j = int(np.argmax(np.abs(z)))
        if i > 0 and abs(z[j]) <= float((z * x).sum()):
            break
        x = np.zeros(n)
        x[j] = 1.0
    return estimate


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * _libm.log(p)))
