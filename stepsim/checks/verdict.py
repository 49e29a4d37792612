"""The shared verdict vocabulary and result record of every paper check (C1-C12).

Every claim module returns one :class:`ClaimResult`: the verdict, the rule that decided
it (the "Rule" paragraph of the module's docstring, registered in
``paper_checks/PROTOCOL.md``), its parts (:class:`Part`: effect, premise, Holm level,
verdict), the seeds, the problem, the raw numbers, the runtime and the versions. Verdicts
are three strings:

* ``REPRODUCED``     — the claim's effect is there, in the claimed direction;
* ``NOT REPRODUCED`` — the data rule out an effect of the size the claim needs;
* ``INCONCLUSIVE``   — neither: too much noise, or the premise the effect needs is absent
  (e.g. a baseline with no gap to dense to close: "premise absent: ...").

The rules (PROTOCOL.md §6):

* :func:`effect_from` — the :class:`Effect` of per-seed values with the test set's
  sampling error in its standard error (:func:`stepsim.stats.paired_estimate`): SE =
  sqrt(SE_seeds^2 + SE_test^2), a Student-t interval (Welch-Satterthwaite degrees of
  freedom when every seed shares one test set). The Effect keeps ``se_seeds``,
  ``se_test`` and ``df`` so later rules can recompute intervals at other levels.
* :func:`premise_present` — the premise gate: the premise's one-sided lower bound at
  alpha = 0.05 is > 0.
* :func:`decide_parts` — one :class:`Part` verdict per part of a claim with margin m > 0
  (the smallest effect that counts): premise gate, then Holm's step-down
  (:func:`stepsim.stats.holm`, family-wise alpha = 0.05) with
  p_i = min(1, 2 min(P(E <= 0), P(E >= m))); a part rejected at Holm level a_i is judged on
  its (1 - a_i) interval: NOT REPRODUCED if the upper end < m (checked first: a real
  effect provably smaller than the margin is not the claim's), REPRODUCED if the lower
  end > 0; a part not rejected is INCONCLUSIVE. m = 0 gives direction-only parts.
* :func:`decide_equivalence` — flatness claims (C7): two one-sided tests per part against
  (-m, m), Holm over the parts; a rejected part is equivalent (REPRODUCED), a part whose
  (1 - a_i) interval lies outside (-m, m) is NOT REPRODUCED.
* :func:`combine` — a claim's verdict from its parts: NOT REPRODUCED if any part is, else
  REPRODUCED if every part is, else INCONCLUSIVE.

Every part reports the interval at the level it was judged at (``Part.level``, also
``Part.effect.ci_level``). ``tests/test_verdict_calibration.py`` checks by simulation, with
n = 8 seeds and one shared test set, that each rule gives at most 5% wrong verdicts
(REPRODUCED with a true effect <= 0, NOT REPRODUCED with a true effect >= margin).
Everything here is plain data: frozen dataclasses that serialise to JSON with
:func:`stepsim._provenance.to_jsonable`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

REPRODUCED = "REPRODUCED"
NOT_REPRODUCED = "NOT REPRODUCED"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclasses.dataclass(frozen=True)
class Effect:
    """An effect size with its confidence interval.

    name: what is measured (e.g. "gap(SR-STE, Adam) - gap(SR-STE, SGD-M)"); estimate: the
    mean over the n paired values; [ci_low, ci_high]: its two-sided interval at ci_level;
    units: of the estimate (e.g. "accuracy points", "log test-loss ratio"); margin: the
    smallest effect the claim needs (see the module docstring); values: the n paired
    values themselves (one per seed). se_seeds, se_test: the standard error's parts
    (:class:`stepsim.stats.PairedEstimate`, units of the estimate) when the Effect was made
    by :func:`effect_from`; NaN for an Effect built directly without them (the rules then
    use sd(values)/sqrt(n)).
    """

    name: str
    estimate: float
    ci_low: float
    ci_high: float
    ci_level: float
    n: int
    units: str
    margin: float
    values: tuple = ()
    se_seeds: float = math.nan
    se_test: float = math.nan
    df: float = math.nan

    def __post_init__(self):
        # JSON stores NaN as the string "nan" (``to_jsonable``): an Effect rebuilt from its
        # dict with ``Effect(**d)`` gets its standard errors back as floats
        for field in ("se_seeds", "se_test", "df"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float, str, np.floating,
                                                                  np.integer)):
                raise TypeError(f"Effect.{field} must be a real number, got {value!r}")
            object.__setattr__(self, field, float(value))

    def __str__(self) -> str:
        return (f"{self.name} = {self.estimate:.4g} {self.units} "
                f"[{self.ci_low:.4g}, {self.ci_high:.4g}] ({100 * self.ci_level:g}% CI, "
                f"n={self.n}, "
                f"margin {self.margin:.4g})")


def combine(verdicts) -> str:
    """One verdict from a claim's parts: any NOT REPRODUCED wins, then all REPRODUCED."""
    verdicts = list(verdicts)
    if not verdicts or any(v not in VERDICTS for v in verdicts):
        raise ValueError(f"combine needs verdicts from {VERDICTS}, got {verdicts}")
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    return REPRODUCED if all(v == REPRODUCED for v in verdicts) else INCONCLUSIVE


def rule_of(docstring: str) -> str:
    """The paragraph of a claim module's docstring that starts with "Rule" (one line)."""
    for paragraph in docstring.split("\n\n"):
        if paragraph.lstrip().startswith("Rule"):
            return " ".join(paragraph.split())
    raise ValueError("the docstring has no paragraph starting with 'Rule'")




# --- the registered protocol (PROTOCOL.md §6) -------------------------------------------

def effect_from(values, test_vars=None, *, name: str, units: str, margin: float,
                ci_level: float = 0.95, shared_test_var=None, test_df=None) -> Effect:
    """Effect = mean of ``values`` (one per seed) with a Student-t interval whose standard
    error includes the test-set sampling error (:func:`stepsim.stats.paired_estimate`).

    values: shape (n,), finite, units ``units``. test_vars: shape (n,), per seed the test-set
    sampling variance of its value (``units`` squared, >= 0), or None. shared_test_var: the
    test-set sampling variance of the mean when all seeds share one test set (what the
    protocol's problems do; ``stats.paired_estimate``). margin: the smallest
    effect the claim needs, finite and >= 0 (0: a direction-only part). n = 1 gives NaN
    interval ends (INCONCLUSIVE).
    """
    from stepsim import stats

    if not 0.0 < ci_level < 1.0:
        raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating,
                                                           np.integer)):
        raise TypeError(f"margin must be a real number, got {margin!r}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be finite and >= 0, got {margin!r}")
    try:
        est = stats.paired_estimate(values, test_vars, shared_test_var=shared_test_var,
                                    test_df=test_df)
    except (TypeError, ValueError) as e:
        raise type(e)(f"effect {name!r}: {e}") from None
    low, high = est.interval(ci_level)
    return Effect(name=name, estimate=est.mean, ci_low=low, ci_high=high, ci_level=ci_level,
                  n=est.n, units=units, margin=float(margin),
                  values=tuple(float(v) for v in np.asarray(values, dtype=np.float64).ravel()),
                  se_seeds=est.se_seeds, se_test=est.se_test, df=float(est.df))


def _estimate_of(effect: Effect):
    """The :class:`stepsim.stats.PairedEstimate` behind ``effect``: from its se fields when
    both are finite (:func:`effect_from`), else sd(values)/sqrt(n) from its values (an
    Effect built without them), else from its interval's width; NaN se if none is known."""
    from stepsim import stats

    if not isinstance(effect, Effect):
        raise TypeError(f"expected an Effect, got {type(effect).__name__}")
    n = int(effect.n)
    if math.isfinite(effect.se_seeds) and math.isfinite(effect.se_test):
        se_seeds, se_test = effect.se_seeds, effect.se_test
    elif len(effect.values) == n and n >= 2:
        se_seeds, se_test = float(np.std(effect.values, ddof=1)) / math.sqrt(n), 0.0
    elif n >= 2 and math.isfinite(effect.ci_low) and math.isfinite(effect.ci_high):
        t = stats._t_ppf(0.5 + effect.ci_level / 2, n - 1)
        se_seeds, se_test = (effect.ci_high - effect.ci_low) / (2 * t), 0.0
    else:
        se_seeds, se_test = math.nan, math.nan
    se = math.sqrt(se_seeds * se_seeds + se_test * se_test)
    df = float(effect.df) if math.isfinite(effect.df) else n - 1
    return stats.PairedEstimate(n=n, mean=float(effect.estimate), se=se, se_seeds=se_seeds,
                                se_test=se_test, df=df)


def _at_level(effect: Effect, est, level: float) -> Effect:
    """``effect`` with its interval recomputed at two-sided coverage ``level``."""
    low, high = est.interval(level)
    return dataclasses.replace(effect, ci_low=low, ci_high=high, ci_level=level)


def _pct(level: float) -> str:
    return f"{100 * level:.4g}%"


def _u(units: str) -> str:
    return f" {units}" if units else ""


@dataclasses.dataclass(frozen=True)
class Part:
    """The verdict of one part of a claim (:func:`decide_parts`, :func:`decide_equivalence`).

    name: the part; effect: its :class:`Effect` with the interval at ``level``; verdict: one
    of ``VERDICTS``; reason: one line; level: the two-sided coverage the part was judged at
    (its Holm-adjusted level, e.g. 0.975); premise: the premise's Effect (None: no premise);
    premise_text: what the premise says. JSON-ready via ``stepsim._provenance.to_jsonable``.
    """

    name: str
    effect: Effect
    verdict: str
    reason: str
    level: float
    premise: Effect | None = None
    premise_text: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def premise_present(premise: Effect, alpha: float = 0.05) -> bool:
    """The premise gate (PROTOCOL §6): True iff the premise's one-sided lower bound at
    ``alpha`` (the lower end of its (1 - 2 alpha) two-sided t interval, se =
    sqrt(se_seeds^2 + se_test^2), df = n - 1) is > 0. False when no bound exists (n < 2)."""
    from stepsim._validate import check_open_unit

    alpha = check_open_unit("alpha", alpha)
    lb = _estimate_of(premise).lower_bound(alpha)
    return bool(lb > 0)


def _holm_family(p_values: dict, alpha: float) -> dict:
    """name -> (Holm level, rejected) over the names of ``p_values``."""
    from stepsim import stats

    names = list(p_values)
    return dict(zip(names, stats.holm([p_values[k] for k in names], alpha)))


def decide_parts(parts, *, alpha: float = 0.05) -> dict:
    """The generic verdict of every part of a claim, with the premise gate and Holm's
    step-down across the parts (PROTOCOL §6; the rules in the module docstring).

    parts: mapping name -> (effect, premise, premise_text): effect an :class:`Effect`
    (margin >= 0; 0 = direction only), premise an Effect or None, premise_text a string.
    Returns name -> :class:`Part`, in the input order.

    1. premise given and absent (:func:`premise_present` at alpha)  -> INCONCLUSIVE;
    2. n < 2 or no finite standard error                           -> INCONCLUSIVE;
    3. the others: p_i = min(1, 2 min(P(E <= 0), P(E >= margin))), Holm at ``alpha``; a part
       rejected at level a_i is judged on its (1 - a_i) interval: upper end < margin ->
       NOT REPRODUCED, else lower end > 0 -> REPRODUCED; a part not rejected is INCONCLUSIVE.
    """
    from stepsim._validate import check_open_unit

    alpha = check_open_unit("alpha", alpha)
    if not hasattr(parts, "items"):
        raise TypeError(f"parts must map name -> (effect, premise, premise_text), "
                        f"got {type(parts).__name__}")
    out: dict = {}
    family_est: dict = {}
    family_p: dict = {}
    given: dict = {}
    for name, spec in parts.items():
        if not isinstance(spec, tuple) or len(spec) != 3:
            raise TypeError(f"parts[{name!r}] must be (effect, premise, premise_text), "
                            f"got {spec!r:.80}")
        effect, premise, text = spec
        if not isinstance(effect, Effect):
            raise TypeError(f"parts[{name!r}] effect must be an Effect, "
                            f"got {type(effect).__name__}")
        if premise is not None and not isinstance(premise, Effect):
            raise TypeError(f"parts[{name!r}] premise must be an Effect or None, "
                            f"got {type(premise).__name__}")
        if not (math.isfinite(effect.margin) and effect.margin >= 0):
            raise ValueError(f"parts[{name!r}] margin must be finite and >= 0, "
                             f"got {effect.margin!r}")
        given[name] = (effect, premise, str(text))
        est = _estimate_of(effect)
        if premise is not None and not premise_present(premise, alpha):
            p_est = _estimate_of(premise)
            level = 1.0 - 2.0 * alpha
            out[name] = Part(name, _at_level(effect, est, level), INCONCLUSIVE,
                             f"premise absent: {text} ({p_est.mean:.3g}, one-sided "
                             f"{_pct(1.0 - alpha)} lower bound {p_est.lower_bound(alpha):.3g})",
                             level, premise, str(text))
        elif est.n < 2 or not math.isfinite(est.se):
            out[name] = Part(name, effect, INCONCLUSIVE, f"{est.n} paired value(s): no interval",
                             1.0 - alpha, premise, str(text))
        else:
            m = effect.margin
            family_est[name] = est
            family_p[name] = min(1.0, 2.0 * min(est.p_greater(0.0), est.p_less(m)))
    holm = _holm_family(family_p, alpha)
    for name, est in family_est.items():
        effect, premise, text = given[name]
        a, rejected = holm[name]
        level = 1.0 - a
        judged = _at_level(effect, est, level)
        low, high, m, u = judged.ci_low, judged.ci_high, effect.margin, _u(effect.units)
        where = f"(Holm level {_pct(level)})"
        if rejected and high < m:
            verdict = NOT_REPRODUCED
            reason = (f"CI upper end {high:.3g} < margin {m:.3g}{u} {where}: an effect of the "
                      f"claimed size is ruled out" if m > 0 else
                      f"CI upper end {high:.3g} < 0{u} {where}: the opposite direction")
        elif rejected and low > 0:
            verdict, reason = REPRODUCED, f"CI lower end {low:.3g} > 0{u} {where}"
        else:
            verdict = INCONCLUSIVE
            ci = f"{_pct(level)} CI [{low:.3g}, {high:.3g}]{u}"
            if low <= 0 and high >= m:
                reason = (f"{ci} contains 0 and reaches the margin {m:.3g} (Holm)" if m > 0
                          else f"{ci} contains 0 (Holm)")
            else:
                reason = (f"{ci}, margin {m:.3g}: not rejected by Holm's step-down "
                          f"(p = {family_p[name]:.3g})")
        out[name] = Part(name, judged, verdict, reason, level, premise, text)
    return {name: out[name] for name in given}


def decide_equivalence(parts, margin: float, *, alpha: float = 0.05) -> dict:
    """Flatness (C7): is every part's effect inside (-margin, margin)? Two one-sided tests
    per part, Holm's step-down across the parts (PROTOCOL §6).

    parts: mapping name -> :class:`Effect` of a deviation (per seed, e.g. a fraction's error
    minus the mean over fractions, with its test variances folded in). margin > 0, in the
    effects' units. Returns name -> :class:`Part`, in the input order:

    * n < 2 or no finite standard error                              -> INCONCLUSIVE;
    * p_i = max(P(E <= -margin), P(E >= margin)) rejected by Holm at level a_i (its
      (1 - 2 a_i) interval inside (-margin, margin))                  -> REPRODUCED;
    * its (1 - a_i) two-sided interval entirely outside (-margin, margin) -> NOT REPRODUCED;
    * otherwise                                                        -> INCONCLUSIVE.

    The claim is :func:`combine` of the parts' verdicts.
    """
    from stepsim._validate import check_open_unit, check_real

    alpha = check_open_unit("alpha", alpha)
    if alpha >= 0.5:
        raise ValueError(f"alpha must be < 0.5 for a (1 - 2 alpha) interval, got {alpha}")
    margin = check_real("margin", margin, minimum=0.0, min_open=True)
    if not hasattr(parts, "items"):
        raise TypeError(f"parts must map name -> Effect, got {type(parts).__name__}")
    out: dict = {}
    family_est: dict = {}
    family_p: dict = {}
    for name, effect in parts.items():
        if not isinstance(effect, Effect):
            raise TypeError(f"parts[{name!r}] must be an Effect, got {type(effect).__name__}")
        est = _estimate_of(effect)
        if est.n < 2 or not math.isfinite(est.se):
            out[name] = Part(name, effect, INCONCLUSIVE, f"{est.n} paired value(s): no interval",
                             1.0 - 2.0 * alpha)
        else:
            family_est[name] = est
            family_p[name] = max(est.p_greater(-margin), est.p_less(margin))
    holm = _holm_family(family_p, alpha)
    for name, est in family_est.items():
        effect = parts[name]
        a, rejected = holm[name]
        u = _u(effect.units)
        band = f"(-{margin:.3g}, {margin:.3g}){u}"
        inside = _at_level(effect, est, 1.0 - 2.0 * a)
        if rejected and -margin < inside.ci_low and inside.ci_high < margin:
            out[name] = Part(name, inside, REPRODUCED,
                             f"{_pct(1.0 - 2.0 * a)} CI [{inside.ci_low:.3g}, "
                             f"{inside.ci_high:.3g}] inside {band} (TOST, Holm)",
                             1.0 - 2.0 * a)
            continue
        judged = _at_level(effect, est, 1.0 - a)
        low, high = judged.ci_low, judged.ci_high
        ci = f"{_pct(1.0 - a)} CI [{low:.3g}, {high:.3g}]"
        if low >= margin or high <= -margin:
            out[name] = Part(name, judged, NOT_REPRODUCED,
                             f"{ci} outside {band}: a deviation of at least the margin",
                             1.0 - a)
        else:
            out[name] = Part(name, judged, INCONCLUSIVE,
                             f"{ci} neither inside nor outside {band} (TOST p = "
                             f"{family_p[name]:.3g}, Holm)", 1.0 - a)
    return {name: out[name] for name in parts}


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """The outcome of one paper check; JSON-ready via ``to_dict``.

    claim: "C1".."C12"; title: the claim in one line; verdict: one of ``VERDICTS``;
    reason: the one-line evidence; rule: the verdict rule (from the module docstring);
    effect: the :class:`Effect` the rule read (None for claims decided otherwise, e.g. an
    exact table match); problem: where it was measured; seeds: the seeds used; mode:
    "quick" or "full"; numbers: every number behind the verdict (JSON-ready dict);
    figures: paths of the figures made; runtime_s: wall seconds; versions: of the
    interpreter and packages (``stepsim._provenance.versions``).
    """

    claim: str
    title: str
    verdict: str
    reason: str
    rule: str
    effect: Effect | None
    problem: str
    seeds: tuple
    mode: str
    numbers: dict
    figures: tuple = ()
    runtime_s: float = 0.0
    versions: dict = dataclasses.field(default_factory=dict)
    setting: str = ""
    parts: tuple = ()

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def line(self) -> str:
        """One line for a table: claim, verdict, effect, reason."""
        effect = "" if self.effect is None else (
            f" {self.effect.estimate:.3g} [{self.effect.ci_low:.3g}, {self.effect.ci_high:.3g}]"
            f" {self.effect.units};")
        return f"{self.claim:<4} {self.verdict:<15}{effect} {self.reason}"

    def to_dict(self) -> dict:
        from stepsim._provenance import to_jsonable

        return to_jsonable(self)


__all__ = [
    "INCONCLUSIVE",
    "NOT_REPRODUCED",
    "REPRODUCED",
    "VERDICTS",
    "ClaimResult",
    "Effect",
    "Part",
    "combine",
    "decide_equivalence",
    "decide_parts",
    "effect_from",
    "premise_present",
    "rule_of",
]
