"""The shared verdict vocabulary and result record of every paper check (C1-C12).

Every claim module returns one :class:`ClaimResult`: the verdict, the rule that decided
it (written in the module's docstring before any result was seen), the effect size with
its confidence interval, the seeds, the problem, the raw numbers, the runtime and the
versions. Verdicts are three strings:

* ``REPRODUCED``     — the claim's effect is there, in the claimed direction;
* ``NOT REPRODUCED`` — the data rule out an effect of the size the claim needs;
* ``INCONCLUSIVE``   — neither: too few seeds, too much noise, or a problem on which the
  compared recipes cannot be told apart (``discriminates=False``: e.g. every recipe
  reaches the same noise floor, so "A beats B" has nothing to bite on).

The generic rule for a one-sided claim "effect > 0" (:func:`decide`), with a *margin*
m > 0 = the smallest effect that would count as the claim's effect (stated per claim):

1. the problem does not discriminate                      -> INCONCLUSIVE;
2. fewer than 2 paired values, or a non-finite interval   -> INCONCLUSIVE;
3. the CI's upper end < m (an effect of size m ruled out)  -> NOT REPRODUCED;
4. the CI's lower end > 0 (the effect is there)            -> REPRODUCED;
5. otherwise                                                -> INCONCLUSIVE.

Claims with several parts (e.g. "beats ASP and SR-STE, at 2:4 and 1:4") decide each part
by this rule and combine them with :func:`combine`: NOT REPRODUCED if any part is, else
REPRODUCED if every part is, else INCONCLUSIVE.

3 is tested before 4: an effect that is real but provably smaller than the margin is not
the claim's effect. The CI is a two-sided Student-t interval of the mean paired
difference (seeds paired: same seed = same data, initialisation and batches).
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
    values themselves (one per seed).
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

    def __str__(self) -> str:
        return (f"{self.name} = {self.estimate:.4g} {self.units} "
                f"[{self.ci_low:.4g}, {self.ci_high:.4g}] ({100 * self.ci_level:g}% CI, "
                f"n={self.n}, "
                f"margin {self.margin:.4g})")


def paired_effect(a, b, *, name: str, units: str, margin: float,
                  ci_level: float = 0.95) -> Effect:
    """Effect = mean of a_i - b_i over paired values (same seed i), with a t interval.

    a, b: 1-D sequences of equal length n (n = 1 gives no interval, hence an INCONCLUSIVE
    verdict). NaN values are an error: a run that failed must be reported,
    not averaged away.
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"paired values need equal non-zero lengths, got {a.size} and {b.size}")
    return effect_of(a - b, name=name, units=units, margin=margin, ci_level=ci_level)


def effect_of(values, *, name: str, units: str, margin: float, ci_level: float = 0.95) -> Effect:
    """Effect = mean of ``values`` (one per seed) with a two-sided Student-t interval
    (:func:`stepsim.stats.mean_ci`; one value: no interval, NaN ends, INCONCLUSIVE)."""
    from stepsim import stats

    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"effect {name!r} needs finite values, got {x.tolist()}")
    if not 0.0 < ci_level < 1.0:
        raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin!r}")
    est = stats.mean_ci(x, confidence=ci_level)
    return Effect(name=name, estimate=est.mean, ci_low=est.low, ci_high=est.high,
                  ci_level=ci_level, n=int(x.size), units=units, margin=float(margin),
                  values=tuple(float(v) for v in x))


def decide(effect: Effect, *, discriminates: bool = True,
           why_not: str = "the problem cannot tell the compared recipes apart") -> tuple[str, str]:
    """(verdict, one-line reason) by the generic rule of the module docstring."""
    if not discriminates:
        return INCONCLUSIVE, why_not
    if effect.n < 2 or not (math.isfinite(effect.ci_low) and math.isfinite(effect.ci_high)):
        return INCONCLUSIVE, f"{effect.n} paired value(s): no interval"
    if effect.ci_high < effect.margin:
        return NOT_REPRODUCED, (f"CI upper end {effect.ci_high:.3g} < margin {effect.margin:.3g}"
                                f" {effect.units}: an effect of the claimed size is ruled out")
    if effect.ci_low > 0:
        return REPRODUCED, f"CI lower end {effect.ci_low:.3g} > 0 {effect.units}"
    return INCONCLUSIVE, (f"CI [{effect.ci_low:.3g}, {effect.ci_high:.3g}] contains 0 and "
                          f"reaches the margin {effect.margin:.3g}")


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


def separated(a, b, *, ci_level: float = 0.95) -> bool:
    """True if the paired difference a - b has a CI excluding 0 (either sign).

    The discrimination test of the claims that compare recipes: when even the reference
    pair (e.g. dense vs the worst sparse baseline) is not separated, the problem is too
    easy (or too noisy) to rank recipes, and the verdict is INCONCLUSIVE.
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size < 2:
        return False
    e = effect_of(d, name="separation", units="", margin=1.0, ci_level=ci_level)
    return e.ci_low > 0 or e.ci_high < 0


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
    "combine",
    "decide",
    "effect_of",
    "paired_effect",
    "rule_of",
    "separated",
]
