"""Every part of a claim on a problem decided in two directions (PROTOCOL.md, "Draft 5":
premises at the margin, error control at the claim in both directions, intervals that hold
on bimodal seeds).

:func:`decide_both_ways` takes every part of one claim on one problem — every reading's,
primary and secondary — as :class:`~stepsim.checks.verdict.Evidence` (or a
:class:`~stepsim.checks.verdict.Directional`, or a :class:`~stepsim.checks.verdict.Part`
already decided), and returns one :class:`~stepsim.checks.verdict.Part` each:

* **REPRODUCED direction**, part by part at the one-sided level alpha / K (K: the claim's
  primary readings, :func:`k_of`): the effect's lower bound above 0 (a flatness part: its
  (1 - 2 alpha / K) interval inside the band), or the worse-claimed side diverged more
  often (one-sided exact McNemar p <= alpha / K);
* **NOT REPRODUCED direction**, one Holm family at alpha over every part: P(E >= delta)
  (the upper bound below the margin; a flatness part: its interval outside the band), the
  harm test P(H <= 0) of a part whose premise is absent, and the one-sided McNemar test of
  "the better-claimed side diverged more often" (those that can reach their Holm level:
  Tarone); a rejected hypothesis makes the part NOT REPRODUCED, which wins over
  REPRODUCED;
* **premise at the margin**: a premise is present when its one-sided lower bound (alpha)
  exceeds its margin (the problem's delta); absent, the part is INCONCLUSIVE "no gap of the
  claimed size" unless harm is shown (NOT REPRODUCED "harm shown");
* **the bootstrap guard**: beside each t interval a paired bootstrap interval
  (``stats.paired_bootstrap``, seeded by the rules' bootstrap seed and the part's name,
  which is its key here); an error verdict stands only when both intervals give it, else
  the part is INCONCLUSIVE "the intervals disagree (t: ..., bootstrap: ...)".

Every part reports its interval at the level it was judged at (two-sided coverage
``Part.level``: 1 - 2 alpha / K for the REPRODUCED direction, 1 - 2 a for a one-sided Holm
level a) and its bootstrap interval at the same level (``Part.bootstrap``).
"""

from __future__ import annotations

import dataclasses
import math

from stepsim.checks.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Directional,
    Effect,
    Evidence,
    Part,
    at_level,
    divergence_test,
    divergence_text,
    estimate_of,
    holm_family,
    percent,
    runs_lost,
    tarone,
    units_suffix,
)

#: the reasons' heads, for a line that names a part's verdict in a word or two
NO_GAP = "no gap of the claimed size"
HARM = "harm shown"
DISAGREE = "the intervals disagree"


def k_of(claim: str, rules) -> int:
    """K of ``claim`` (PROTOCOL.md D5.8): lr readings x readings of STEP for a claim about
    STEP (``rules.readings.step_claims``), else 1."""
    primary = rules.readings.primary
    if claim in rules.readings.step_claims:
        return len(primary["lr"]) * len(primary["step"])
    return 1


@dataclasses.dataclass(frozen=True)
class Levels:
    """The numbers a decision reads from the rules: alpha, K, the finite pairs an error
    effect needs, the bootstrap's resamples and seed, and whether a premise is gated at
    its margin (draft 5) or at 0."""

    alpha: float
    k: int
    need: int
    resamples: int
    seed: int
    at_margin: bool

    @classmethod
    def of(cls, rules, k: int) -> Levels:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        boot = rules.intervals.bootstrap
        return cls(alpha=float(rules.alpha), k=k,
                   need=int(rules.divergence.min_finite_pairs),
                   resamples=int(boot.resamples), seed=int(boot.seed),
                   at_margin=rules.premise.at == "margin")

    @property
    def rep(self) -> float:
        """The one-sided level of the REPRODUCED direction: alpha / K."""
        return self.alpha / self.k


@dataclasses.dataclass(frozen=True)
class _State:
    """One part on its way through the two directions: kind ("direction", "band",
    "absent": a premise-absent part whose harm is tested, "other": a Directional); the
    quantity tested (E, or H for "absent") with its estimate and bootstrap (None: too few
    finite pairs); p_rep, the REPRODUCED direction's p; test, the exact divergence test of
    E; absent_text, why the premise is absent."""

    given: object
    kind: str
    tested: Effect | None = None
    est: object = None
    boot: object = None
    p_rep: float | None = None
    test: object = None
    absent_text: str = ""


def decide_both_ways(parts, *, k: int, rules) -> dict:
    """One :class:`Part` per entry of ``parts`` (name -> Evidence | Directional | Part,
    the names unique across the claim's readings on the problem: they seed the
    bootstrap), in input order, decided in two directions (module docstring) with K =
    ``k`` under ``rules`` (draft 5's: ``intervals``, ``premise``, ``divergence``,
    ``alpha``)."""
    lv = Levels.of(rules, k)
    if not hasattr(parts, "items"):
        raise TypeError(f"parts must map name -> Evidence, got {type(parts).__name__}")
    out, states, family, div_p, div_min = {}, {}, {}, {}, {}
    for name, given in parts.items():
        if isinstance(given, Part):
            out[name] = given
            continue
        if isinstance(given, Directional):
            states[name] = _State(given, "other", p_rep=given.p_reproduced)
            family[("o", name)] = given.p_not_reproduced
            continue
        if not isinstance(given, Evidence):
            raise TypeError(f"parts[{name!r}] must be an Evidence, Directional or Part, "
                            f"got {given!r:.80}")
        fixed = _fixed(name, given, lv)
        if fixed is not None:
            out[name] = fixed
            continue
        state = _prepare(name, given, lv)
        states[name] = state
        if state.est is not None:
            family[("h" if state.kind == "absent" else "e", name)] = _p_not(state)
        test = state.test
        if test is not None:
            band = state.kind == "band"
            div_p[("d", name)] = test.p_two_sided if band else test.p_b_more
            div_min[("d", name)] = test.p_min if band else test.p_min_one_sided
    for key in tarone(len(family), div_min, lv.alpha):
        family[key] = div_p[key]
    holm = holm_family(family, lv.alpha)
    for name, state in states.items():
        out[name] = _judge(name, state, lv, holm)
    return {name: out[name] for name in parts}


# ----------------------------------------------------------------------- preparing a part
def _fixed(name: str, given: Evidence, lv: Levels) -> Part | None:
    """The part's verdict when no test can decide it: a gate (a premise the statistics
    cannot test) or a premise whose runs diverged in too many seeds; else None."""
    effect = given.effect
    if given.gate:
        return Part(name, effect, INCONCLUSIVE, f"premise absent: {given.gate}",
                    effect.ci_level, None, given.gate, absent=True)
    premises = given.premises
    if not premises or _premise_present(premises, lv):
        return None
    lost = [p for p in premises if runs_lost(p) and p.n < lv.need]
    if len(lost) < len(premises):
        return None  # absent on its finite seeds: the harm is tested
    d = lost[0].divergence
    reason = (f"diverged: the premise ({given.premise_text}) has {lost[0].n} finite seed(s) "
              f"of {d['seeds']} (need {lv.need})")
    if runs_lost(effect):
        reason += f"; {divergence_text(effect, divergence_test(effect))}"
    return Part(name, effect, INCONCLUSIVE, reason, 1.0 - 2.0 * lv.rep, given.premise,
                given.premise_text)


def _threshold(premise: Effect, lv: Levels) -> float:
    return float(premise.margin) if lv.at_margin else 0.0


def _premise_present(premises: tuple, lv: Levels) -> bool:
    """Some premise's one-sided lower bound at alpha / (their number) exceeds its
    threshold (its margin under draft 5)."""
    each = lv.alpha / len(premises)
    for p in premises:
        est = estimate_of(p)
        if est.n >= 2 and math.isfinite(est.se) and est.lower_bound(each) > _threshold(p, lv):
            return True
    return False


def _estimable(effect: Effect, lv: Levels) -> bool:
    est = estimate_of(effect)
    return est.n >= (lv.need if runs_lost(effect) else 2) and math.isfinite(est.se)


def _bootstrap(effect: Effect, name: str, lv: Levels):
    from stepsim import stats

    est = estimate_of(effect)
    se_test = est.se_test if math.isfinite(est.se_test) else 0.0
    return stats.paired_bootstrap(effect.values, se_test=se_test, resamples=lv.resamples,
                                  seed=lv.seed, name=name)


def _prepare(name: str, given: Evidence, lv: Levels) -> _State:
    effect = given.effect
    test = divergence_test(effect)
    if given.premises and not _premise_present(given.premises, lv):
        words = "; ".join(_premise_words(p, lv) for p in given.premises)
        harm = given.harm
        if harm is None or not _estimable(harm, lv):
            return _State(given, "absent", harm, test=test, absent_text=words)
        return _State(given, "absent", harm, estimate_of(harm),
                      _bootstrap(harm, f"{name} (harm)", lv), test=test, absent_text=words)
    kind = given.kind
    if not _estimable(effect, lv):
        return _State(given, kind, effect, test=test)
    est = estimate_of(effect)
    m = effect.margin
    p_rep = (est.p_greater(0.0) if kind == "direction"
             else max(est.p_greater(-m), est.p_less(m)))
    return _State(given, kind, effect, est, _bootstrap(effect, name, lv), p_rep, test)


def _premise_words(premise: Effect, lv: Levels) -> str:
    est = estimate_of(premise)
    each = lv.alpha
    bound = est.lower_bound(each) if est.n >= 2 else math.nan
    return (f"{premise.name} = {est.mean:.3g}{units_suffix(premise.units)}, one-sided "
            f"{percent(1.0 - each)} lower bound {bound:.3g} <= {_threshold(premise, lv):.3g}")


def _p_not(state: _State) -> float:
    """The NOT REPRODUCED family's p of a part's tested quantity."""
    est, m = state.est, state.tested.margin
    if state.kind == "absent":
        return est.p_greater(0.0)  # H <= 0 rejected: harm shown
    if state.kind == "band":
        return min(1.0, 2.0 * min(est.p_less(-m), est.p_greater(m)))
    return est.p_less(m)  # E >= delta rejected: an effect of the claimed size ruled out


# ----------------------------------------------------------------------- judging a part
def _judge(name: str, state: _State, lv: Levels, holm: dict) -> Part:
    if state.kind == "other":
        rep = (lv.rep, state.p_rep <= lv.rep)
        return state.given.decide(rep, holm[("o", name)])
    if state.kind == "absent":
        return _judge_absent(name, state, lv, holm)
    return _judge_present(name, state, lv, holm)


def _interval_words(low: float, high: float) -> str:
    return f"[{low:.3g}, {high:.3g}]"


def _direction_votes(name: str, state: _State, lv: Levels, holm: dict):
    """(t's vote, the bootstrap's vote, judged Effect, level, bootstrap interval): a vote is
    NOT_REPRODUCED, REPRODUCED or None; the interval shown at the level of the vote."""
    est, boot, effect, m = state.est, state.boot, state.tested, state.tested.margin
    a, rejected = holm[("e", name)]
    band = state.kind == "band"
    if band:
        t_rep = state.p_rep <= lv.rep
        r_low, r_high = boot.interval(1.0 - 2.0 * lv.rep)
        b_rep = -m < r_low and r_high < m
        n_low, n_high = boot.interval(1.0 - a)
        b_not = n_low >= m or n_high <= -m
        not_level, rep_level = 1.0 - a, 1.0 - 2.0 * lv.rep
    else:
        t_rep = state.p_rep <= lv.rep
        b_rep = boot.lower_bound(lv.rep) > 0.0
        b_not = boot.upper_bound(a) < m
        not_level, rep_level = 1.0 - 2.0 * a, 1.0 - 2.0 * lv.rep
    t_vote = NOT_REPRODUCED if rejected else REPRODUCED if t_rep else None
    b_vote = NOT_REPRODUCED if b_not else REPRODUCED if b_rep else None
    level = not_level if NOT_REPRODUCED in (t_vote, b_vote) else rep_level
    return t_vote, b_vote, at_level(effect, est, level), level, boot.interval(level)


def _judge_present(name: str, state: _State, lv: Levels, holm: dict) -> Part:
    given, effect, test = state.given, state.tested, state.test
    m, u = effect.margin, units_suffix(effect.units)
    band = state.kind == "band"
    lost = runs_lost(effect)
    div = f"; {divergence_text(effect, test)}" if lost else ""
    d = holm.get(("d", name))

    def part(verdict, reason, shown=effect, level=1.0 - 2.0 * lv.rep, boot=()) -> Part:
        return Part(name, shown, verdict, reason, level, given.premise, given.premise_text,
                    bootstrap=tuple(boot))

    if d is not None and d[1]:
        shown, level, boot = effect, 1.0 - 2.0 * lv.rep, ()
        if state.est is not None:
            shown, boot = at_level(effect, state.est, level), state.boot.interval(level)
        words = ("divergence depends on the part" if band else
                 "the better-claimed side diverged more often")
        return part(NOT_REPRODUCED, f"{words} ({_mcnemar_words(test, band, d[0])}){div}",
                    shown, level, boot)
    if state.est is None:
        if test is not None and not band and test.p_a_more <= lv.rep:
            return part(REPRODUCED, f"the worse-claimed side diverged more often "
                        f"({test.only_a} vs {test.only_b} seeds only one side, one-sided exact "
                        f"McNemar p = {test.p_a_more:.3g} <= alpha/{lv.k}){div}")
        return part(INCONCLUSIVE, _no_interval_words(effect, test, lv))
    t_vote, b_vote, judged, level, boot = _direction_votes(name, state, lv, holm)
    low, high = judged.ci_low, judged.ci_high
    ci = f"{percent(level)} CI {_interval_words(low, high)}{u}"
    bci = f"bootstrap {_interval_words(*boot)}"
    if t_vote == b_vote == NOT_REPRODUCED:
        if band:
            why = f"{ci} outside (-{m:.3g}, {m:.3g}){u}: a deviation of at least the margin"
        elif m > 0:
            why = (f"CI upper end {high:.3g} < margin {m:.3g}{u} at {percent(level)} (Holm): "
                   f"an effect of the claimed size is ruled out")
        else:
            why = (f"CI upper end {high:.3g} < 0{u} at {percent(level)} (Holm): "
                   f"the opposite direction")
        return part(NOT_REPRODUCED, f"{why}; {bci}{div}", judged, level, boot)
    if NOT_REPRODUCED in (t_vote, b_vote):
        return part(INCONCLUSIVE, f"{DISAGREE} (t: {_vote(t_vote)} {ci}; {_vote(b_vote)} "
                    f"{bci}){div}", judged, level, boot)
    if t_vote == b_vote == REPRODUCED:
        why = (f"{ci} inside (-{m:.3g}, {m:.3g}){u} (TOST at alpha/{lv.k})" if band else
               f"CI lower end {low:.3g} > 0{u} at {percent(level)} (one-sided alpha/{lv.k})")
        return part(REPRODUCED, f"{why}; {bci}{div}", judged, level, boot)
    if test is not None and not band and test.p_a_more <= lv.rep:
        return part(REPRODUCED, f"the worse-claimed side diverged more often ({test.only_a} vs "
                    f"{test.only_b} seeds only one side, one-sided exact McNemar p = "
                    f"{test.p_a_more:.3g} <= alpha/{lv.k}); {ci}; {bci}{div}", judged, level,
                    boot)
    if t_vote != b_vote:
        return part(INCONCLUSIVE, f"{DISAGREE} (t: {_vote(t_vote)} {ci}; {_vote(b_vote)} "
                    f"{bci}){div}", judged, level, boot)
    if band:
        why = f"{ci} neither inside nor outside (-{m:.3g}, {m:.3g}){u}"
    elif low <= 0 and high >= m:
        why = f"{ci} contains 0 and reaches the margin {m:.3g}" if m > 0 else f"{ci} contains 0"
    else:
        why = f"{ci}, margin {m:.3g}: neither direction shown at its level"
    return part(INCONCLUSIVE, f"{why}; {bci}{div}", judged, level, boot)


def _vote(vote) -> str:
    return {None: "undecided", REPRODUCED: "REPRODUCED",
            NOT_REPRODUCED: "NOT REPRODUCED"}[vote]


def _mcnemar_words(test, band: bool, level: float) -> str:
    """The NOT REPRODUCED family's McNemar test of a part, rejected at Holm level
    ``level`` (one-sided: the better-claimed side's seeds first)."""
    if band:
        return f"exact McNemar p = {test.p_two_sided:.3g}, Holm level {percent(1.0 - level)}"
    return (f"{test.only_b} vs {test.only_a} seeds only one side, one-sided exact McNemar "
            f"p = {test.p_b_more:.3g}, Holm level {percent(1.0 - level)}")


def _no_interval_words(effect: Effect, test, lv: Levels) -> str:
    d = effect.divergence
    if runs_lost(effect) and effect.n < lv.need:
        head = "both diverged" if d["plus"] and d["minus"] else "diverged"
        p = "" if test is None else (f", one-sided exact McNemar p = {test.p_a_more:.3g} "
                                     f"(worse-claimed side more) / {test.p_b_more:.3g} "
                                     f"(better-claimed side more)")
        return (f"{head}: {effect.n} finite pair(s) of {d['seeds']} (need {lv.need}); a "
                f"diverged run in {d['plus']}/{d['seeds']} seeds on the worse-claimed side, "
                f"{d['minus']}/{d['seeds']} on the better-claimed side{p}")
    return f"{effect.n} paired value(s): no interval"


def _judge_absent(name: str, state: _State, lv: Levels, holm: dict) -> Part:
    """A part whose premise is absent: NOT REPRODUCED "harm shown" when its harm test (or
    the better-claimed side's divergence) rejects at its Holm level and both intervals
    agree, else INCONCLUSIVE "no gap of the claimed size"."""
    given, effect, test = state.given, state.given.effect, state.test
    level = 1.0 - 2.0 * lv.rep
    shown = effect
    if _estimable(effect, lv):
        shown = at_level(effect, estimate_of(effect), level)

    def part(verdict, reason, lvl=level, boot=()) -> Part:
        return Part(name, shown, verdict, reason, lvl, given.premise, given.premise_text,
                    absent=True, bootstrap=tuple(boot))

    d = holm.get(("d", name))
    if d is not None and d[1]:
        return part(NOT_REPRODUCED, f"{HARM}: the better-claimed side diverged more often "
                    f"({_mcnemar_words(test, False, d[0])}); {NO_GAP}: {state.absent_text}")
    h = holm.get(("h", name))
    if h is None:
        return part(INCONCLUSIVE, f"{NO_GAP}: {state.absent_text}")
    a, rejected = h
    harm = state.tested
    judged = at_level(harm, state.est, 1.0 - 2.0 * a)
    boot = state.boot.interval(1.0 - 2.0 * a)
    b_shown = boot[0] > 0.0
    words = (f"{harm.name} = {judged.estimate:.3g} {_interval_words(judged.ci_low, judged.ci_high)}"
             f"{units_suffix(harm.units)} at {percent(1.0 - 2.0 * a)} (Holm), bootstrap "
             f"{_interval_words(*boot)}")
    if rejected and b_shown:
        return part(NOT_REPRODUCED, f"{HARM}: {words}; {NO_GAP}: {state.absent_text}",
                    1.0 - 2.0 * a, boot)
    if rejected != b_shown:
        return part(INCONCLUSIVE, f"{NO_GAP}: {state.absent_text}; {DISAGREE} on harm "
                    f"(t: {'shown' if rejected else 'not shown'}, bootstrap: "
                    f"{'shown' if b_shown else 'not shown'}: {words})", 1.0 - 2.0 * a, boot)
    return part(INCONCLUSIVE, f"{NO_GAP}: {state.absent_text}; harm not shown: {words}",
                1.0 - 2.0 * a, boot)


__all__ = ["DISAGREE", "HARM", "NO_GAP", "Levels", "decide_both_ways", "k_of"]
