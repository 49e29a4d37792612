"""Theorem 1 of STEP, checked by simulation: bounds, confidence intervals and verdicts.

The claim (SPEC section 5): if g_k^2 is stationary with ||g_k^2||_inf <= G, k0 >
log_{b2}(1 - 1/sqrt(2)) and k > k0, then with probability >= 1 - delta

    ||vhat_k - vhat_k0||_inf < sqrt(4 G^2 (1 - b2)^2 (k - k0) log(2 / delta)).

A *violation* at lag n = k - k0 is the event statistic >= bound. Per lag we estimate its
probability (per coordinate, and for the inf-norm over the dim coordinates of a trial)
with an exact Clopper-Pearson interval at ``ci_level`` and call the lag

* ``HOLDS``        if the interval's upper end is <= delta (violation probability <= delta
                   with the stated confidence),
* ``VIOLATED``     if its lower end is > delta,
* ``INCONCLUSIVE`` otherwise.

Over all lags (the *overall* verdicts) the intervals are widened by Bonferroni to level
1 - (1 - ci_level) / n_lags, so the family of lag verdicts holds jointly with probability
>= ci_level: VIOLATED if any lag is, HOLDS if all lags do. The lags share their paths, so
they are positively dependent and Bonferroni is conservative.

Per-coordinate samples pool trials x coordinates only when the process declares its
coordinates i.i.d. (``independent_coordinates``); otherwise only coordinate 0 of each trial
is used, so the Clopper-Pearson interval's independence assumption is true.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from stepsim._ground.validate import check_int, check_real
from stepsim.stats import clopper_pearson
from stepsim.theorem1 import bounds
from stepsim.theorem1.closed_forms import hoeffding_bound, theorem1_bound, worst_case
from stepsim.theorem1.engine import (
    check_beta2,
    check_lags,
    k0_proof,
    k0_statement,
    lag_grid,
    simulate,
)
from stepsim.theorem1.processes import BuiltinProcess, check_process, make_process, process_name
from stepsim.theorem1.scoring import plugin_bounds, pre_switch_g2, score

HOLDS, VIOLATED, INCONCLUSIVE = "HOLDS", "VIOLATED", "INCONCLUSIVE"


def verdicts(ci_low, ci_high, delta: float) -> tuple[str, ...]:
    """HOLDS (upper <= delta), VIOLATED (lower > delta) or INCONCLUSIVE, per entry."""
    return tuple(
        HOLDS if hi <= delta else VIOLATED if lo > delta else INCONCLUSIVE
        for lo, hi in zip(np.atleast_1d(ci_low), np.atleast_1d(ci_high))
    )


def overall(violations, n: int, delta: float, level: float) -> str:
    """One verdict over all lags with Bonferroni-adjusted intervals (level 1 - alpha/L)."""
    violations = np.atleast_1d(violations)
    adjusted = 1.0 - (1.0 - level) / len(violations)
    v = verdicts(*clopper_pearson(violations, n, adjusted), delta)
    if VIOLATED in v:
        return VIOLATED
    return HOLDS if all(x == HOLDS for x in v) else INCONCLUSIVE


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What one sample of the statistic says at one lag.

    n: sample size (pairs for a coordinate, trials for the inf-norm); violations: how
    many reached the bound; rate = violations / n with its Clopper-Pearson interval
    [ci_low, ci_high]; quantile: the empirical (1 - delta)-quantile of the statistic;
    tightness = quantile / bound (1: the bound is exact; < 1: it holds); verdict: HOLDS /
    VIOLATED / INCONCLUSIVE (module docstring).
    """

    n: int
    violations: int
    rate: float
    ci_low: float
    ci_high: float
    quantile: float
    tightness: float
    verdict: str


@dataclasses.dataclass(frozen=True)
class LagRow:
    """One lag n = k - k0: the bounds there and the two estimates.

    bound: the paper's bound; worst_case: the largest value any [0, G]-valued sequence
    can reach; hoeffding_bound: the bound valid for independent g^2; coord: one
    coordinate; inf: the inf-norm over the ``dim`` coordinates of a trial.
    """

    lag: int
    bound: float
    worst_case: float
    hoeffding_bound: float
    coord: Estimate
    inf: Estimate


@dataclasses.dataclass(frozen=True)
class Theorem1Result:
    """Everything a Theorem 1 check found: the set-up, one :class:`LagRow` per lag, and the
    overall verdicts over all lags (Bonferroni; see the module docstring).

    ``result.at(lag)`` is one row; ``result.column("coord.quantile")`` one column as an
    array (any field of :class:`LagRow`, or ``coord.``/``inf.`` + a field of
    :class:`Estimate`); ``result.lags`` the lags.
    """

    process: str
    process_params: dict
    process_law: str
    stationary: bool | None
    independent_coordinates: bool
    G: float
    beta2: float
    delta: float
    ci_level: float
    k0: int
    k0_statement: int
    k0_proof: int
    k0_meets_condition: bool
    trials: int
    dim: int
    seed: int
    engine: str
    rows: tuple
    coord_overall: str
    inf_overall: str
    max_g2: float
    coordinate_steps: int
    seconds: float
    notes: tuple
    #: the bound chosen with ``bound=`` (not "paper"): :func:`score_bound`'s dict, or None
    bound_report: dict | None = None

    @property
    def lags(self) -> tuple:
        return tuple(row.lag for row in self.rows)

    @property
    def coord_n(self) -> int:
        """Size of the per-coordinate sample (the same at every lag)."""
        return self.rows[0].coord.n

    @property
    def inf_n(self) -> int:
        """Size of the inf-norm sample: the number of trials."""
        return self.rows[0].inf.n

    def at(self, lag: int) -> LagRow:
        """The row of one lag (must be one of ``lags``)."""
        for row in self.rows:
            if row.lag == lag:
                return row
        raise ValueError(f"lag {lag} was not simulated; lags are {list(self.lags)}")

    def column(self, name: str) -> np.ndarray:
        """One field across lags, e.g. "bound", "inf.rate", "coord.verdict" (array)."""
        head, _, tail = name.partition(".")
        fields = {f.name for f in dataclasses.fields(LagRow)}
        sub = {f.name for f in dataclasses.fields(Estimate)}
        if head not in fields or (head in ("coord", "inf")) != bool(tail) or (
                tail and tail not in sub):
            raise ValueError(f"unknown column {name!r}; choose a LagRow field "
                             f"{sorted(fields - {'coord', 'inf'})} or coord.X / inf.X with X "
                             f"in {sorted(sub)}")
        values = [getattr(row, head) for row in self.rows]
        if tail:
            values = [getattr(v, tail) for v in values]
        return np.array(values)

    def summary(self) -> str:
        """A readable report: set-up, one line per lag, overall verdicts and notes."""
        params = ", ".join(f"{k}={v:g}" for k, v in self.process_params.items())
        lines = [
            f"Theorem 1 check: process {self.process}"
            + (f" ({params})" if params else "")
            + f", stationary={self.stationary}",
            (f"  G={self.G:g} beta2={self.beta2:g} delta={self.delta:g} k0={self.k0} "
             f"(statement needs > {self.k0_statement - 1}, proof text > {self.k0_proof - 1}) "
             f"trials={self.trials} dim={self.dim} seed={self.seed}"),
            (f"  {self.coordinate_steps:.3g} coordinate-steps in {self.seconds:.1f} s; "
             f"CIs: Clopper-Pearson {100 * self.ci_level:g}%; per-coordinate "
             f"n={self.coord_n}, inf-norm n={self.inf_n}"),
            (f"  {'lag':>6} {'bound':>9} | {'coord q':>9} {'q/bnd':>6} {'rate [CI]':>27} "
             f"{'verdict':<12} | {'inf q':>9} {'q/bnd':>6} {'rate [CI]':>27} verdict"),
        ]
        for row in self.rows:
            c, f = row.coord, row.inf
            lines.append(
                f"  {row.lag:>6} {row.bound:9.3g} | {c.quantile:9.3g} {c.tightness:6.3f} "
                f"{_rate(c.rate, c.ci_low, c.ci_high)} {c.verdict:<12} | "
                f"{f.quantile:9.3g} {f.tightness:6.3f} {_rate(f.rate, f.ci_low, f.ci_high)} "
                f"{f.verdict}"
            )
        lines.append(
            f"  overall over {len(self.rows)} lags (Bonferroni): per coordinate "
            f"{self.coord_overall}, inf-norm over d={self.dim}: {self.inf_overall}"
        )
        if self.bound_report is not None:
            lines += _bound_lines(self.bound_report, self.lags, self.delta, self.dim)
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        lags = self.lags
        return (f"Theorem1Result(process={self.process!r}, coord_overall={self.coord_overall!r}, "
                f"inf_overall={self.inf_overall!r}, lags={lags[0]}..{lags[-1]} "
                f"({len(lags)}), k0={self.k0}, trials={self.trials}, dim={self.dim}, "
                f"seed={self.seed})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _bound_lines(report, lags, delta, dim) -> list[str]:
    r = report
    lines = [(f"  bound {r['kind']!r} ({'PROVED' if r['proved'] else 'HEURISTIC'}; "
              f"assumes {r['assumptions']}): violations |X| > bound, CP 95%; "
              f"bound/q = bound / empirical {1 - delta:g}-quantile, bound/triv = bound / "
              "trivial bound G(1-b2^n)/(1-b2^k)"),
             (f"  {'lag':>6} | {'coord bnd':>9} {'bnd/q':>6} {'bnd/triv':>8} {'rate [CI]':>27} | "
              f"{'inf bnd':>9} {'bnd/q':>6} {'bnd/triv':>8} {'rate [CI]':>27}  (d={dim})")]
    c, f = r["coord"], r["inf"]
    for i, lag in enumerate(lags):
        lines.append(
            f"  {lag:>6} | {c['bound'][i]:9.3g} {c['ratio_quantile'][i]:6.3g} "
            f"{c['ratio_trivial'][i]:8.3g} "
            f"{_rate(c['rate'][i], c['ci_low'][i], c['ci_high'][i])} | "
            f"{f['bound'][i]:9.3g} {f['ratio_quantile'][i]:6.3g} {f['ratio_trivial'][i]:8.3g} "
            f"{_rate(f['rate'][i], f['ci_low'][i], f['ci_high'][i])}")
    lines.append(f"  bound {r['kind']!r}: largest CP upper end per coordinate "
                 f"{c['max_ci_high']:.3g}, inf-norm {f['max_ci_high']:.3g} (delta = {delta:g})")
    return lines


ASSUMPTIONS = {
    "paper": "the paper's: stationary g^2 <= G (false for dependent g^2: C11 (a))",
    "chebyshev": "weakly stationary g^2 with a known autocovariance",
    "gaussian": "g stationary Gaussian (chi-square form), or g^2 = F(x) with x stationary "
                "Gaussian and F Lipschitz",
    "markov": "g^2 = h(X), X a stationary Markov chain with absolute spectral gap "
              "1 - lambda, h bounded",
    "gaussian-chernoff": "g stationary Gaussian with known autocovariance (exact m.g.f. "
                         "of the quadratic form, Chernoff)",
    "markov-chernoff": "g^2 | state path independent with a known law given the current "
                       "state, the state a stationary finite-state Markov chain (exact "
                       "m.g.f. by transfer matrices, Chernoff)",
    "copula-chernoff": "g^2 = G Phi(x), x a stationary Gaussian AR(1) (the built-in ar1; "
                       "exact m.g.f. of a Gaussian quadratic majorant, Chernoff)",
    "sticky-chernoff": "g^2 = G u, u the stationary sticky chain (keep with probability "
                       "1 - q, else a fresh U[0, 1]; the built-in sticky): m.g.f. from the "
                       "backward recursion over runs, trapezoid upper bound, Chernoff",
    "plugin": "nothing proved: autocovariance estimated (Sokal window) on the k0 steps "
              "before the switch, Gaussian tail",
}


def score_bound(kind: str, process, stats: np.ndarray, *, beta2: float, k0: int, lags,
                delta: float, seed: int) -> dict:
    """Bound ``kind`` (``stepsim.theorem1.bounds.KINDS``) against the simulated statistics.

    stats: (trials, dim, n_lags) from :func:`simulate` with this ``seed``. For one
    coordinate (d = 1) and the inf-norm (union over dim): the bound per lag (the plug-in's
    is per trial; its median is shown), violations, Clopper-Pearson interval, bound /
    empirical (1 - delta)-quantile and bound / trivial bound.
    """
    kind, delta, _ = bounds.check_bound_args(kind, delta, 1)
    trials, dim, _ = stats.shape
    lags = check_lags(lags)
    independent = bool(getattr(process, "independent_coordinates", False))
    trivial = (None if hasattr(process, "gaussian_autocovariance")
               else worst_case(float(process.G), beta2, k0, lags))
    out = {"kind": kind, "proved": bounds.PROVED[kind], "assumptions": ASSUMPTIONS[kind]}
    pre = pre_switch_g2(process, seed, trials, dim, k0) if kind == "plugin" else None
    for form, d in (("coord", 1), ("inf", dim)):
        if kind == "plugin":
            b = plugin_bounds(pre[:, :, :1] if d == 1 else pre, beta2, k0, lags, delta, d)
            sample = stats[:, 0, :] if d == 1 else stats.max(axis=1)
        else:
            b = bounds.bound(kind, process, beta2=beta2, k0=k0, lags=lags, delta=delta, dim=d)
            sample = (stats.reshape(-1, len(lags)) if independent else stats[:, 0, :]) \
                if d == 1 else stats.max(axis=1)
        out[form] = score(sample, b, kind == "paper", delta, trivial)
    return out


def _rate(rate, lo, hi) -> str:
    return f"{rate:8.2e} [{lo:7.1e}, {hi:7.1e}]"


def analyse(stats: np.ndarray, *, process, G: float, beta2: float, delta: float, k0: int,
            lags, seed: int, ci_level: float = 0.95, engine: str = "numba",
            max_g2: float = float("nan"), coordinate_steps: int = 0,
            seconds: float = 0.0) -> Theorem1Result:
    """Turn raw statistics (trials, dim, n_lags) from :func:`simulate` into a result."""
    stats = np.asarray(stats, dtype=np.float64)
    trials, dim, n_lags = stats.shape
    lags = check_lags(lags)
    if len(lags) != n_lags:
        raise ValueError(f"stats has {n_lags} lags but lags has {len(lags)}")
    bound = theorem1_bound(G, beta2, lags, delta)
    independent = bool(getattr(process, "independent_coordinates", False))
    coord = stats.reshape(trials * dim, n_lags) if independent else stats[:, 0, :]
    inf = stats.max(axis=1)

    def estimates(sample) -> list[Estimate]:
        n = sample.shape[0]
        violations = np.count_nonzero(sample >= bound, axis=0)
        lo, hi = clopper_pearson(violations, n, ci_level)
        q = np.quantile(sample, 1.0 - delta, axis=0, method="inverted_cdf")
        return [Estimate(n=int(n), violations=int(v), rate=float(v / n), ci_low=float(a),
                         ci_high=float(b), quantile=float(x), tightness=float(x / bnd),
                         verdict=verdict)
                for v, a, b, x, bnd, verdict in zip(violations, lo, hi, q, bound,
                                                    verdicts(lo, hi, delta))]

    coord_est, inf_est = estimates(coord), estimates(inf)
    k_stmt, k_prf = k0_statement(beta2), k0_proof(beta2)
    worst = worst_case(G, beta2, k0, lags)
    hoeffding = hoeffding_bound(G, beta2, k0, lags, delta)
    rows = tuple(LagRow(lag=int(n), bound=float(b), worst_case=float(w), hoeffding_bound=float(h),
                        coord=c, inf=f)
                 for n, b, w, h, c, f in zip(lags, bound, worst, hoeffding, coord_est, inf_est))
    notes = _notes(process, independent, k0, k_stmt, lags, bound, worst, G, dim)
    return Theorem1Result(
        process=process_name(process),
        process_params=dict(getattr(process, "params", {})),
        process_law=str(getattr(process, "law", getattr(process, "description", ""))),
        stationary=getattr(process, "stationary", None),
        independent_coordinates=independent,
        G=float(G), beta2=float(beta2), delta=float(delta), ci_level=float(ci_level),
        k0=int(k0), k0_statement=k_stmt, k0_proof=k_prf, k0_meets_condition=k0 >= k_stmt,
        trials=trials, dim=dim, seed=int(seed), engine=engine, rows=rows,
        coord_overall=overall([e.violations for e in coord_est], coord.shape[0], delta,
                              ci_level),
        inf_overall=overall([e.violations for e in inf_est], inf.shape[0], delta, ci_level),
        max_g2=float(max_g2), coordinate_steps=int(coordinate_steps), seconds=float(seconds),
        notes=tuple(notes),
    )


def _notes(process, independent, k0, k_stmt, lags, bound, worst, G, dim) -> list[str]:
    notes = []
    if getattr(process, "stationary", None) is False:
        notes.append("the process is NOT stationary: Theorem 1 makes no claim about it "
                     "(a negative control; VIOLATED is the expected outcome)")
    if k0 < k_stmt:
        notes.append(f"k0={k0} is below the theorem's condition (k0 >= {k_stmt}): the theorem "
                     "makes no claim at this k0")
    safe = [int(n) for n, b, w in zip(lags, bound, worst) if w < b]
    if safe:
        notes.append(f"{len(safe)} lag(s) <= {max(safe)} cannot be violated by any [0, G] "
                     "sequence (worst case below the bound)")
    if np.any(bound >= G):
        notes.append("the bound is >= G (vacuous: |vhat_k - vhat_k0| <= G always) from lag "
                     f"{int(lags[np.argmax(bound >= G)])}")
    if not independent and dim > 1:
        notes.append("coordinates are not declared i.i.d.: per-coordinate rates use coordinate "
                     "0 of each trial only")
    if dim > 1:
        notes.append("the statement's inf-norm has no d: a per-coordinate bound needs a union "
                     f"bound (log(2 d / delta)) to cover d={dim} coordinates")
    return notes


def check_theorem1(process="uniform", *, beta2: float = 0.999, delta: float = 0.05,
                   G: float | None = None, trials: int = 1000, dim: int = 100,
                   horizon: int = 10_000, k0=None, seed: int = 0, ci_level: float = 0.95,
                   per_decade: int = 8, lags=None, engine: str = "numba",
                   process_params: dict | None = None, progress: bool = False,
                   bound: str = "paper") -> Theorem1Result:
    """Simulate Adam's vhat under ``process`` and check Theorem 1 at log-spaced lags.

    process: a built-in name (``PROCESSES``), a :class:`BuiltinProcess`, or an object
    following the protocol in ``stepsim.theorem1.processes``. G: scales a built-in named by
    string (default 1); for a process object it defaults to (and must equal) process.G.
    k0: an int >= 1, ``"statement"`` (default: smallest k0 > log_b2(1 - 1/sqrt 2)) or
    ``"proof"`` (smallest k0 > log(1/2)/log(b2)). lags: explicit lags (default
    ``lag_grid(horizon, per_decade)``). Costs trials * dim * (k0 + horizon) coordinate-steps
    and holds the raw statistics, trials * dim * n_lags float64, in memory.

    bound: besides the paper's bound (always checked), one of ``stepsim.theorem1.bounds.
    KINDS`` to score against the same simulation (``result.bound_report``, shown by
    ``summary()``): "chebyshev" (proved, any weakly stationary g^2 with known
    autocovariance), "gaussian" (proved, Statement A: Gaussian g, or g^2 a Lipschitz
    function of a stationary Gaussian process), "markov" (proved, Statement B: g^2 a
    bounded function of a stationary Markov chain with absolute spectral gap 1 - lambda),
    "gaussian-chernoff" (proved, Statement A+: Gaussian g, exact m.g.f. and Chernoff),
    "markov-chernoff" (proved, Statement B+: g^2 modulated by a finite-state stationary
    Markov chain with known conditional laws, exact m.g.f. and Chernoff),
    "copula-chernoff" (proved, Statement A'+: g^2 = G Phi(x) with x a stationary Gaussian
    AR(1), the built-in ar1; Chernoff with the exact m.g.f. of a quadratic majorant),
    "sticky-chernoff" (proved, Statement B'+: the built-in sticky chain; Chernoff with an
    upper bound on its m.g.f. from the recursion over runs, §5.13),
    "plugin" (heuristic: estimated autocovariance). A process outside the chosen bound's
    assumptions raises ValueError before simulating.
    """

    beta2 = check_beta2(beta2)
    delta = check_real("delta", delta, minimum=0.0, maximum=1.0, min_open=True, max_open=True)
    ci_level = check_real("ci_level", ci_level, minimum=0.0, maximum=1.0, min_open=True,
                          max_open=True)
    if isinstance(process, str):
        process = make_process(process, G=1.0 if G is None else G, **(process_params or {}))
    else:
        check_process(process)
        if process_params:
            raise ValueError("process_params applies to a built-in process named by string only")
        if G is not None and check_real("G", G, minimum=0.0, min_open=True) != process.G:
            raise ValueError(f"G={G!r} differs from process.G={process.G!r}; omit G or make "
                             "them equal")
    G = float(process.G)
    bound = bounds.check_bound_args(bound, delta, 1)[0]
    why = bounds.applicable(bound, process)
    if why is not None:
        raise ValueError(f"bound {bound!r}: {why}")
    if k0 is None or k0 == "statement":
        k0 = k0_statement(beta2)
    elif k0 == "proof":
        k0 = k0_proof(beta2)
    else:
        k0 = check_int("k0", k0, minimum=1)
    lags = lag_grid(horizon, per_decade) if lags is None else check_lags(lags)
    check_int("trials", trials, minimum=1)
    check_int("dim", dim, minimum=1)
    check_statistics_memory(trials, dim, len(lags))
    bar = None
    if progress:
        from stepsim._ground.progress import Progress

        bar = Progress(trials, f"theorem1 {process_name(process)}", unit="trial")
    with bar if bar is not None else _Null():
        sim = simulate(process, beta2=beta2, k0=k0, lags=lags, trials=trials, dim=dim,
                       seed=seed, engine=engine, progress=bar)
    result = analyse(sim.stats, process=process, G=G, beta2=beta2, delta=delta, k0=k0,
                     lags=lags, seed=seed, ci_level=ci_level, engine=engine,
                     max_g2=sim.max_g2, coordinate_steps=sim.coordinate_steps,
                     seconds=sim.seconds)
    if bound == "paper":
        return result
    report = score_bound(bound, process, sim.stats, beta2=beta2, k0=k0, lags=lags,
                         delta=delta, seed=seed)
    return dataclasses.replace(result, bound_report=report)


def check_statistics_memory(trials: int, dim: int, n_lags: int, *,
                            names: tuple[str, str] = ("trials", "dim")) -> None:
    """Refuse, before simulating, statistics that cannot fit in memory: float64 (trials,
    dim, lags), their sorted copy for the quantiles, and the per-coordinate largest g^2.
    names: how the two sizes are called in the message (the CLI passes its option names)."""
    from stepsim._ground.validate import check_memory

    nbytes = 8 * trials * dim * (2 * n_lags + 1)
    check_memory(f"{names[0]} {trials} x {names[1]} {dim} x {n_lags} lags (float64 "
                 f"statistics and their sorted copy)", nbytes)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# clopper_pearson (stepsim.stats) and the closed forms (.closed_forms) are re-exported: the
# check's verdicts are made of them
__all__ = ["BuiltinProcess", "Estimate", "LagRow", "Theorem1Result", "analyse",
           "check_theorem1", "clopper_pearson", "hoeffding_bound", "score_bound",
           "theorem1_bound", "verdicts", "worst_case"]
