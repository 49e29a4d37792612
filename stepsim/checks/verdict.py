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
* :func:`decide_parts` — one :class:`Part` verdict per part of a claim (its
  :class:`Evidence`: effect, premise) with margin m > 0
  (the smallest effect that counts): premise gate, then Holm's step-down
  (:func:`stepsim.stats.holm`, family-wise alpha = 0.05) with
  p_i = min(1, 2 min(P(E <= 0), P(E >= m))); a part rejected at Holm level a_i is judged on
  its (1 - a_i) interval: NOT REPRODUCED if the upper end < m (checked first: a real
  effect provably smaller than the margin is not the claim's), REPRODUCED if the lower
  end > 0; a part not rejected is INCONCLUSIVE. m = 0 gives direction-only parts.
* :func:`decide_equivalence` — flatness claims (C7): two one-sided tests per part against
  (-m, m) in a REPRODUCED family, the test that the effect lies outside (-m, m) in a NOT
  REPRODUCED family, Holm in each (draft 4).
* Divergence (draft 4): an effect of runs (``budget.effect``) is computed on the seeds
  whose runs all stayed finite; the two sides' divergence is its own outcome, compared by
  an exact paired test in the same Holm family (:func:`decide_parts`).
* :func:`combine` — a claim's verdict from its parts: NOT REPRODUCED if any part is, else
  REPRODUCED if every part is, else INCONCLUSIVE.

Every part reports the interval at the level it was judged at (``Part.level``, also
``Part.effect.ci_level``). ``tests/checks/test_verdict_calibration.py`` checks by simulation, with
n = 8 seeds and one shared test set, that each rule gives at most 5% wrong verdicts
(REPRODUCED with a true effect <= 0, NOT REPRODUCED with a true effect >= margin); its
draft-4 section simulates per-item 0/100 errors and divergence and feeds them through
``budget.effect`` and these functions (PROTOCOL.md, "Draft 4: statistics").
Everything here is plain data: frozen dataclasses that serialise to JSON with
:func:`stepsim._ground.provenance.to_jsonable`.
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
    divergence: for an effect of runs (``budget.effect``), which seeds lost a run
    (``budget.divergence``: the estimate and ``values`` are over the ``finite`` seeds only,
    n = their number); None for effects of other quantities.
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
    divergence: dict | None = None

    def __post_init__(self):
        # JSON stores NaN as the string "nan" (``to_jsonable``): an Effect rebuilt from its
        # dict with ``Effect(**d)`` gets its standard errors back as floats
        for field in ("estimate", "ci_low", "ci_high", "se_seeds", "se_test", "df"):
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


def negated(effect: Effect, name: str) -> Effect:
    """``effect`` with the opposite sign, named ``name``: -E with its interval mirrored,
    its values negated and its divergence record's sides swapped (the side that raised E
    lowers -E). The harm quantity of a part whose harm is -E (PROTOCOL.md D5.4)."""
    if not isinstance(effect, Effect):
        raise TypeError(f"expected an Effect, got {type(effect).__name__}")
    d = effect.divergence
    if d is not None:
        d = dict(d, plus=d["minus"], minus=d["plus"], only_plus=d["only_minus"],
                 only_minus=d["only_plus"],
                 runs={"plus": d["runs"]["minus"], "minus": d["runs"]["plus"]})
    return dataclasses.replace(effect, name=name, estimate=-effect.estimate,
                               ci_low=-effect.ci_high, ci_high=-effect.ci_low,
                               values=tuple(-v for v in effect.values), divergence=d)


def estimate_of(effect: Effect):
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
        t = stats.t_ppf(0.5 + effect.ci_level / 2, n - 1)
        se_seeds, se_test = (effect.ci_high - effect.ci_low) / (2 * t), 0.0
    else:
        se_seeds, se_test = math.nan, math.nan
    se = math.sqrt(se_seeds * se_seeds + se_test * se_test)
    df = float(effect.df) if math.isfinite(effect.df) else n - 1
    return stats.PairedEstimate(n=n, mean=float(effect.estimate), se=se, se_seeds=se_seeds,
                                se_test=se_test, df=df)


def at_level(effect: Effect, est, level: float) -> Effect:
    """``effect`` with its interval recomputed at two-sided coverage ``level``."""
    low, high = est.interval(level)
    return dataclasses.replace(effect, ci_low=low, ci_high=high, ci_level=level)


def percent(level: float) -> str:
    """A coverage level as the verdicts write it: 0.975 -> "97.5%"."""
    return f"{100 * level:.4g}%"


def units_suffix(units: str) -> str:
    return f" {units}" if units else ""


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What one part of a claim is decided from (:func:`decide_parts`, and draft 5's
    ``part_decisions.decide_both_ways``).

    effect: an :class:`Effect`, margin >= 0 (0 = direction only); premise: an Effect whose
    presence the part needs, or a tuple of Effects of which one must be present (each at
    alpha / their number: Bonferroni; draft 5 only), or None; premise_text: what the
    premise says. Draft 5 only: harm, the part's harm quantity H (PROTOCOL.md D5.4: > 0
    when STEP or the claimed-better side makes things worse; tested when the premise is
    absent), or None; gate, a premise the statistics cannot test, absent for this reason
    (e.g. "dense not converged": the part is INCONCLUSIVE "premise absent: ..."); kind,
    "direction" (E > 0 is the claim, margin delta) or "band" (the claim is |E| < margin:
    a flatness part, decided by two one-sided tests)."""

    effect: Effect
    premise: Effect | tuple | None = None
    premise_text: str = ""
    harm: Effect | None = None
    gate: str = ""
    kind: str = "direction"

    def __post_init__(self):
        if not isinstance(self.effect, Effect):
            raise TypeError(f"effect must be an Effect, got {type(self.effect).__name__}")
        premises = self.premise if isinstance(self.premise, tuple) else (self.premise,)
        if self.premise is not None and (not premises or not all(isinstance(p, Effect)
                                                                  for p in premises)):
            raise TypeError(f"premise must be an Effect, a tuple of Effects or None, "
                            f"got {self.premise!r:.80}")
        if self.harm is not None and not isinstance(self.harm, Effect):
            raise TypeError(f"harm must be an Effect or None, got {type(self.harm).__name__}")
        if self.kind not in ("direction", "band"):
            raise ValueError(f"kind must be 'direction' or 'band', got {self.kind!r}")
        if not (math.isfinite(self.effect.margin) and self.effect.margin >= 0):
            raise ValueError(f"margin must be finite and >= 0, got {self.effect.margin!r}")
        object.__setattr__(self, "premise_text", str(self.premise_text))
        object.__setattr__(self, "gate", str(self.gate))

    @property
    def premises(self) -> tuple:
        """The premise Effects (one of which must be present); () without a premise."""
        if self.premise is None:
            return ()
        return self.premise if isinstance(self.premise, tuple) else (self.premise,)


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where one part stands after Holm's step-down (:func:`decide_parts`,
    :func:`decide_equivalence`): est, the estimate behind its effect (None: its error
    hypothesis is not in the family: too few finite values); holm, (level a_i, rejected)
    of its error hypothesis (flatness: in the REPRODUCED family); p, that hypothesis's
    p-value; against, flatness only: (level, rejected) of "outside the band" in the NOT
    REPRODUCED family; div, (level, rejected) of its divergence hypothesis (None: not in
    the family); test, its exact divergence test (None: nothing to compare)."""

    est: object = None
    holm: tuple | None = None
    p: float | None = None
    against: tuple | None = None
    div: tuple | None = None
    test: object = None


@dataclasses.dataclass(frozen=True)
class Part:
    """The verdict of one part of a claim (:func:`decide_parts`, :func:`decide_equivalence`).

    name: the part; effect: its :class:`Effect` with the interval at ``level``; verdict: one
    of ``VERDICTS``; reason: one line; level: the two-sided coverage the part was judged at
    (its Holm-adjusted level, e.g. 0.975); premise: the premise's Effect (None: no premise);
    premise_text: what the premise says; absent: its premise is absent (a reading's
    REPRODUCED does not wait for it, PROTOCOL.md D5.5); bootstrap: draft 5's paired
    bootstrap interval (low, high) at ``level`` beside the t interval, () when none was
    made. JSON-ready via ``stepsim._ground.provenance.to_jsonable``.
    """

    name: str
    effect: Effect
    verdict: str
    reason: str
    level: float
    premise: Effect | tuple | None = None
    premise_text: str = ""
    absent: bool = False
    bootstrap: tuple = ()

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def premise_present(premise: Effect, alpha: float = 0.05) -> bool:
    """The premise gate (PROTOCOL §6): True iff the premise's one-sided lower bound at
    ``alpha`` (the lower end of its (1 - 2 alpha) two-sided t interval, se =
    sqrt(se_seeds^2 + se_test^2), df = n - 1) is > 0. False when no bound exists (n < 2)."""
    from stepsim._ground.validate import check_open_unit

    alpha = check_open_unit("alpha", alpha)
    lb = estimate_of(premise).lower_bound(alpha)
    return bool(lb > 0)


def holm_family(p_values: dict, alpha: float) -> dict:
    """name -> (Holm level, rejected) over the names of ``p_values``."""
    from stepsim import stats

    names = list(p_values)
    return dict(zip(names, stats.holm([p_values[k] for k in names], alpha)))


def min_finite_pairs() -> int:
    """The fewest seeds with every run finite for an error effect to be judged (RULES)."""
    from stepsim.checks import protocol

    return int(protocol.RULES.divergence.min_finite_pairs)


def divergence_test(effect: Effect):
    """The exact paired comparison of the two sides' divergence (``Effect.divergence``;
    :func:`stepsim.stats.paired_binary_exact`, A = the plus side, B = the minus side), or
    None when no seed has a diverged run on exactly one side (nothing to compare)."""
    from stepsim import stats

    d = effect.divergence
    if not d or d["only_plus"] + d["only_minus"] == 0:
        return None
    n = int(d["seeds"])
    plus = [True] * d["only_plus"] + [False] * d["only_minus"] + [True] * d["both"]
    minus = [False] * d["only_plus"] + [True] * d["only_minus"] + [True] * d["both"]
    rest = n - len(plus)
    return stats.paired_binary_exact(plus + [False] * rest, minus + [False] * rest)


def runs_lost(effect: Effect) -> bool:
    d = effect.divergence
    return bool(d) and len(d["finite"]) < int(d["seeds"])


def divergence_text(effect: Effect, test) -> str:
    d = effect.divergence
    n = d["seeds"]
    p = "" if test is None else f", exact McNemar p = {test.p_two_sided:.3g}"
    return (f"diverged: worse-claimed side in {d['plus']}/{n} seeds, better-claimed side in "
            f"{d['minus']}/{n} ({d['only_plus']} vs {d['only_minus']} seeds only one side"
            f"{p}); error on the {len(d['finite'])} finite pair(s)")


def interval_text(estimate: float, low: float, high: float, digits: int = 3) -> str:
    """"estimate [low, high]", each to ``digits`` significant digits: how every table,
    README cell and figure label writes an effect with its interval."""
    return f"{estimate:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}]"


def effect_text(effect: Effect, digits: int = 3) -> str:
    """An effect for a table: "estimate [low, high] units", and its finite pairs when runs
    were lost. Where no interval exists (too few finite pairs, PROTOCOL 'Draft 4:
    statistics') the divergence counts take its place: a diverged run is an outcome to
    count, never a number to show as "nan [nan, nan]"."""
    d = effect.divergence
    if math.isfinite(effect.ci_low) and math.isfinite(effect.ci_high):
        text = (interval_text(effect.estimate, effect.ci_low, effect.ci_high, digits)
                + f" {effect.units}")
        return text + (f" on {len(d['finite'])}/{d['seeds']} finite pairs" if runs_lost(effect)
                       else "")
    if not d:
        return "n/a"
    n = d["seeds"]
    return (f"n/a — diverged: worse-claimed side in {d['plus']}/{n} seeds, better-claimed "
            f"side in {d['minus']}/{n}; {len(d['finite'])} finite pair(s)")


def tarone(n_fixed: int, p_min: dict, alpha: float) -> set:
    """The discrete tests that join the family (Tarone 1990): drop, until none is dropped,
    every test whose smallest attainable p exceeds alpha / (family size). The choice is a
    function of the discordant counts the exact tests condition on, so it costs no error
    control, and a test that could never reject does not dilute the others' levels."""
    keep = set(p_min)
    while True:
        size = n_fixed + len(keep)
        drop = {k for k in keep if p_min[k] > alpha / max(size, 1)}
        if not drop:
            return keep
        keep -= drop


def decide_parts(parts, *, alpha: float = 0.05) -> dict:
    """The generic verdict of every part of a claim, with the premise gate, divergence as its
    own outcome and Holm's step-down across the parts (PROTOCOL.md section 6 and "Draft 4:
    statistics").

    parts: mapping name -> :class:`Evidence` (effect, premise, premise_text). Returns
    name -> :class:`Part`, in the input order.

    1. premise given and absent (:func:`premise_present` at alpha)  -> INCONCLUSIVE;
    2. the family (Holm at ``alpha``) holds two kinds of hypotheses:
       * error: a part with >= 2 values (>= ``min_finite_pairs`` finite seeds when runs
         diverged) and a finite se: p = min(1, 2 min(P(E <= 0), P(E >= margin))) on the
         finite seeds;
       * divergence: a part whose sides diverged in different seeds
         (:func:`divergence_test`): the exact two-sided McNemar p, in the family only when
         it can reach alpha / (family size) (:func:`tarone`);
    3. verdict: the better-claimed side diverged more (divergence rejected) -> NOT
       REPRODUCED; the worse-claimed side diverged more -> REPRODUCED, unless the error
       says NOT REPRODUCED (then INCONCLUSIVE: the outcomes disagree); else the error,
       rejected at level a_i, judged on its (1 - a_i) interval: upper end < margin -> NOT
       REPRODUCED, lower end > 0 -> REPRODUCED; else INCONCLUSIVE ("both diverged" /
       "diverged" when too few finite pairs were left).
    """
    from stepsim._ground.validate import check_open_unit

    alpha = check_open_unit("alpha", alpha)
    if not hasattr(parts, "items"):
        raise TypeError(f"parts must map name -> Evidence, got {type(parts).__name__}")
    for name, given in parts.items():
        if not isinstance(given, Evidence):
            raise TypeError(f"parts[{name!r}] must be an Evidence (effect, premise, "
                            f"premise_text), got {given!r:.80}")
    need = min_finite_pairs()
    out = {name: _gated(name, given, alpha, need) for name, given in parts.items()}
    family_est, family_p, div_tests = {}, {}, {}
    for name, given in parts.items():
        if out[name] is not None:
            continue
        effect = given.effect
        test = divergence_test(effect)
        if test is not None:
            div_tests[name] = test
        est = estimate_of(effect)
        if est.n >= (need if runs_lost(effect) else 2) and math.isfinite(est.se):
            family_est[name] = est
            family_p[("e", name)] = min(1.0, 2.0 * min(est.p_greater(0.0),
                                                       est.p_less(effect.margin)))
    keep = tarone(len(family_p), {k: t.p_min for k, t in div_tests.items()}, alpha)
    for k in keep:
        family_p[("d", k)] = div_tests[k].p_two_sided
    holm = holm_family(family_p, alpha)
    for name, given in parts.items():
        if out[name] is None:
            standing = Standing(est=family_est.get(name), holm=holm.get(("e", name)),
                                p=family_p.get(("e", name)), div=holm.get(("d", name)),
                                test=div_tests.get(name))
            out[name] = _judge_part(name, given, standing, alpha, need)
    return out


def _gated(name, given: Evidence, alpha: float, need: int) -> Part | None:
    """The part's verdict when its premise decides it (too few finite seeds, or absent),
    else None: the part joins the Holm family."""
    effect, premise, text = given.effect, given.premise, given.premise_text
    if given.gate:
        return Part(name, effect, INCONCLUSIVE, f"premise absent: {given.gate}",
                    effect.ci_level, None, given.gate, absent=True)
    if premise is None:
        return None
    if isinstance(premise, tuple):
        raise TypeError(f"part {name!r}: draft 4's rule takes one premise Effect, got "
                        f"{len(premise)}")
    if runs_lost(premise) and premise.n < need:
        d = (effect if runs_lost(effect) else premise).divergence
        head = "both diverged" if d["plus"] and d["minus"] else "diverged"
        reason = (f"{head}: the premise ({text}) has {premise.n} finite seed(s) of "
                  f"{premise.divergence['seeds']} (need {need})")
        if runs_lost(effect):
            reason += f"; {divergence_text(effect, divergence_test(effect))}"
        return Part(name, effect, INCONCLUSIVE, reason, 1.0 - alpha, premise, text)
    if premise_present(premise, alpha):
        return None
    est, p_est = estimate_of(effect), estimate_of(premise)
    level = 1.0 - 2.0 * alpha
    lost = f"; its runs diverged: {divergence_text(premise, None)}" if runs_lost(premise) else ""
    return Part(name, at_level(effect, est, level) if est.n >= 2 else effect, INCONCLUSIVE,
                f"premise absent: {text} ({p_est.mean:.3g}, one-sided "
                f"{percent(1.0 - alpha)} lower bound {p_est.lower_bound(alpha):.3g}{lost})",
                level, premise, text, absent=True)


def _judge_part(name, given: Evidence, standing: Standing, alpha: float, need: int) -> Part:
    """One part's verdict from its error and divergence hypotheses (:func:`decide_parts`)."""
    effect, premise, text = given.effect, given.premise, given.premise_text
    test, d_holm = standing.test, standing.div
    m, u = effect.margin, units_suffix(effect.units)
    lost = runs_lost(effect)
    err_dir, judged, level = None, effect, 1.0 - alpha
    if standing.holm is not None:
        a, rejected = standing.holm
        level = 1.0 - a
        judged = at_level(effect, standing.est, level)
        if rejected and judged.ci_high < m:
            err_dir = NOT_REPRODUCED
        elif rejected and judged.ci_low > 0:
            err_dir = REPRODUCED
    div_dir, div_where = None, ""
    if d_holm is not None and d_holm[1]:
        div_dir = REPRODUCED if test.p_a_more <= test.p_b_more else NOT_REPRODUCED
        div_where = f"Holm level {percent(1.0 - d_holm[0])}"
        if standing.holm is None:
            level = 1.0 - d_holm[0]
    div = f"; {divergence_text(effect, test)}" if lost else ""
    low, high = judged.ci_low, judged.ci_high
    where = f"(Holm level {percent(level)})"

    def part(verdict, reason, effect_shown=judged) -> Part:
        return Part(name, effect_shown, verdict, reason, level, premise, text)

    if div_dir == NOT_REPRODUCED:
        d = effect.divergence
        return part(NOT_REPRODUCED,
                    f"the better-claimed side diverged more often ({d['only_minus']} vs "
                    f"{d['only_plus']} seeds only one side, exact McNemar p = "
                    f"{test.p_two_sided:.3g}, {div_where}){div}")
    if div_dir == REPRODUCED and err_dir != NOT_REPRODUCED:
        d = effect.divergence
        return part(REPRODUCED,
                    f"the worse-claimed side diverged more often ({d['only_plus']} vs "
                    f"{d['only_minus']} seeds only one side, exact McNemar p = "
                    f"{test.p_two_sided:.3g}, {div_where}){div}")
    if div_dir == REPRODUCED:
        return part(INCONCLUSIVE,
                    f"the outcomes disagree: the worse-claimed side diverged more often "
                    f"(exact McNemar p = {test.p_two_sided:.3g}, {div_where}) but on the "
                    f"finite pairs CI upper end {high:.3g} < margin {m:.3g}{u}{div}")
    if err_dir == NOT_REPRODUCED:
        reason = (f"CI upper end {high:.3g} < margin {m:.3g}{u} {where}: an effect of the "
                  f"claimed size is ruled out" if m > 0 else
                  f"CI upper end {high:.3g} < 0{u} {where}: the opposite direction")
        return part(NOT_REPRODUCED, reason + div)
    if err_dir == REPRODUCED:
        return part(REPRODUCED, f"CI lower end {low:.3g} > 0{u} {where}{div}")
    if standing.holm is None:
        n = effect.n
        if lost and n < need:
            d = effect.divergence
            head = "both diverged" if d["plus"] and d["minus"] else "diverged"
            p = "" if test is None else f", exact McNemar p = {test.p_two_sided:.3g}" + (
                "" if d_holm is None else f" (Holm level {percent(1.0 - d_holm[0])})")
            reason = (f"{head}: {n} finite pair(s) of {d['seeds']} (need {need}); a diverged "
                      f"run in {d['plus']}/{d['seeds']} seeds on the worse-claimed side, "
                      f"{d['minus']}/{d['seeds']} on the better-claimed side{p}")
        else:
            reason = f"{n} paired value(s): no interval"
        return part(INCONCLUSIVE, reason, effect)
    ci = f"{percent(level)} CI [{low:.3g}, {high:.3g}]{u}"
    if low <= 0 and high >= m:
        reason = (f"{ci} contains 0 and reaches the margin {m:.3g} (Holm)" if m > 0
                  else f"{ci} contains 0 (Holm)")
    else:
        reason = (f"{ci}, margin {m:.3g}: not rejected by Holm's step-down "
                  f"(p = {standing.p:.3g})")
    return part(INCONCLUSIVE, reason + div)


def decide_equivalence(parts, margin: float, *, alpha: float = 0.05, others=None) -> dict:
    """Flatness (C7): is every part's effect inside (-margin, margin)? (PROTOCOL §6, draft 4)

    parts: mapping name -> :class:`Effect` of a deviation (per seed, e.g. a fraction's error
    minus the mean over fractions). margin > 0, in the effects' units. others: mapping
    name -> :class:`Directional` (further parts judged in the same two families, e.g. C7's
    landing). Returns name -> :class:`Part`, parts then others, in input order.

    Two Holm families at ``alpha``, one per verdict, so each verdict's family-wise error
    is at most alpha on its own (a part's two nulls, "outside" and "inside", are
    complementary: only one kind of error is possible for it):

    * REPRODUCED family: the TOST p_i = max(P(E <= -margin), P(E >= margin)); rejected at
      level a_i (its (1 - 2 a_i) interval inside (-margin, margin))  -> REPRODUCED;
    * NOT REPRODUCED family: p_i = min(1, 2 min(P(E <= margin), P(E >= -margin))) (the
      effect is outside the band), and for a part whose runs diverged in different seeds
      the exact McNemar p (divergence that depends on the part is not flat); rejected at
      level a_i (its (1 - a_i) interval outside the band)              -> NOT REPRODUCED;
    * otherwise, or n < 2 (fewer than ``min_finite_pairs`` finite seeds when runs
      diverged)                                                         -> INCONCLUSIVE.

    Draft 3 judged NOT REPRODUCED at the level the TOST ranking gave, so the most extreme
    deviation was judged at the unadjusted 95%. The claim is :func:`combine` of the parts.
    """
    from stepsim._ground.validate import check_open_unit, check_real

    alpha = check_open_unit("alpha", alpha)
    if alpha >= 0.5:
        raise ValueError(f"alpha must be < 0.5 for a (1 - 2 alpha) interval, got {alpha}")
    margin = check_real("margin", margin, minimum=0.0, min_open=True)
    if not hasattr(parts, "items"):
        raise TypeError(f"parts must map name -> Effect, got {type(parts).__name__}")
    others = dict(others or {})
    need = min_finite_pairs()
    out: dict = {}
    family_est: dict = {}
    p_rep: dict = {}
    p_not: dict = {}
    tests: dict = {}
    for name, effect in parts.items():
        if not isinstance(effect, Effect):
            raise TypeError(f"parts[{name!r}] must be an Effect, got {type(effect).__name__}")
        est = estimate_of(effect)
        test = divergence_test(effect)
        if test is not None and test.p_min <= alpha:
            tests[name] = test
            p_not[("d", name)] = test.p_two_sided
        if est.n < (need if runs_lost(effect) else 2) or not math.isfinite(est.se):
            continue
        family_est[name] = est
        p_rep[name] = max(est.p_greater(-margin), est.p_less(margin))
        p_not[("e", name)] = min(1.0, 2.0 * min(est.p_less(-margin), est.p_greater(margin)))
    for name, spec in others.items():
        if not isinstance(spec, Directional):
            raise TypeError(f"others[{name!r}] must be a Directional, "
                            f"got {type(spec).__name__}")
        p_rep[name] = spec.p_reproduced
        p_not[("o", name)] = spec.p_not_reproduced
    holm_rep = holm_family(p_rep, alpha)
    holm_not = holm_family(p_not, alpha)
    for name, effect in parts.items():
        standing = Standing(est=family_est.get(name), holm=holm_rep.get(name),
                            p=p_rep.get(name), against=holm_not.get(("e", name)),
                            div=holm_not.get(("d", name)), test=tests.get(name))
        out[name] = _judge_flat(name, effect, margin, standing, alpha, need)
    for name, spec in others.items():
        out[name] = spec.decide(holm_rep[name], holm_not[("o", name)])
    return out


@dataclasses.dataclass(frozen=True)
class Directional:
    """A part judged in :func:`decide_equivalence`'s two Holm families: its p-value for
    REPRODUCED, its p-value for NOT REPRODUCED, and ``decide((level, rejected) in the
    REPRODUCED family, (level, rejected) in the NOT REPRODUCED family) -> Part``."""

    p_reproduced: float
    p_not_reproduced: float
    decide: object


def _judge_flat(name, effect, margin, standing: Standing, alpha: float, need: int) -> Part:
    """One flatness part's verdict from its two families (:func:`decide_equivalence`)."""
    est, test, not_d = standing.est, standing.test, standing.div
    u = units_suffix(effect.units)
    band = f"(-{margin:.3g}, {margin:.3g}){u}"
    div = f"; {divergence_text(effect, test)}" if runs_lost(effect) else ""
    if not_d is not None and not_d[1]:
        return Part(name, effect, NOT_REPRODUCED,
                    f"divergence depends on the part (exact McNemar p = "
                    f"{test.p_two_sided:.3g}, Holm level {percent(1.0 - not_d[0])}){div}",
                    1.0 - not_d[0])
    if est is None:
        if runs_lost(effect) and effect.n < need:
            d = effect.divergence
            head = "both diverged" if d["plus"] and d["minus"] else "diverged"
            return Part(name, effect, INCONCLUSIVE,
                        f"{head}: {effect.n} finite pair(s) of {d['seeds']} (need {need})"
                        f"{div}", 1.0 - 2.0 * alpha)
        return Part(name, effect, INCONCLUSIVE, f"{effect.n} paired value(s): no interval",
                    1.0 - 2.0 * alpha)
    a, rejected = standing.holm
    inside = at_level(effect, est, 1.0 - 2.0 * a)
    if rejected and -margin < inside.ci_low and inside.ci_high < margin:
        return Part(name, inside, REPRODUCED,
                    f"{percent(1.0 - 2.0 * a)} CI [{inside.ci_low:.3g}, {inside.ci_high:.3g}] "
                    f"inside {band} (TOST, Holm){div}", 1.0 - 2.0 * a)
    b, out_rejected = standing.against
    judged = at_level(effect, est, 1.0 - b)
    low, high = judged.ci_low, judged.ci_high
    ci = f"{percent(1.0 - b)} CI [{low:.3g}, {high:.3g}]"
    if out_rejected and (low >= margin or high <= -margin):
        return Part(name, judged, NOT_REPRODUCED,
                    f"{ci} outside {band}: a deviation of at least the margin (Holm over "
                    f"the NOT REPRODUCED family){div}", 1.0 - b)
    return Part(name, judged, INCONCLUSIVE,
                f"{ci} neither inside nor outside {band} (TOST p = {standing.p:.3g}, "
                f"Holm){div}",
                1.0 - b)


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """The outcome of one paper check; JSON-ready via ``to_dict``.

    claim: "C1".."C12"; title: the claim in one line; verdict: one of ``VERDICTS``;
    reason: the one-line evidence; rule: the verdict rule (from the module docstring);
    effect: the :class:`Effect` the rule read (None for claims decided otherwise, e.g. an
    exact table match); problem: where it was measured; seeds: the seeds used; mode:
    "quick" or "full"; numbers: every number behind the verdict (JSON-ready dict);
    figures: paths of the figures made; runtime_s: wall seconds; versions: of the
    interpreter and packages (``stepsim._ground.provenance.versions``); setting: the
    report's setting key; parts: the decided :class:`Part` s; headline: the reason in a
    few words, for a verdict line that fits a terminal (empty: the reason is cut there).
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
    headline: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def line(self) -> str:
        """One line for a table: claim, verdict, effect, reason."""
        effect = "" if self.effect is None else f" {effect_text(self.effect)};"
        return f"{self.claim:<4} {self.verdict:<15}{effect} {self.reason}"

    def to_dict(self) -> dict:
        from stepsim._ground.provenance import to_jsonable

        return to_jsonable(self)


__all__ = [
    "INCONCLUSIVE",
    "NOT_REPRODUCED",
    "REPRODUCED",
    "VERDICTS",
    "ClaimResult",
    "Directional",
    "Effect",
    "Evidence",
    "Part",
    "Standing",
    "at_level",
    "combine",
    "decide_equivalence",
    "decide_parts",
    "divergence_test",
    "divergence_text",
    "effect_from",
    "effect_text",
    "estimate_of",
    "holm_family",
    "min_finite_pairs",
    "negated",
    "percent",
    "premise_present",
    "rule_of",
    "runs_lost",
    "tarone",
    "units_suffix",
]
