"""Simulated run views whose truths are known, for calibrating the verdict rules
(PROTOCOL.md §6 and "Draft 4: statistics": the calibration of the rules; D5.8: the draft-5
calibration, ``paper_checks/calibration_draft5.py``).

One simulation is one test set of :data:`N_ITEMS` items drawn from a population of items,
shared by every seed and every recipe of a seed, as on the protocol's problems. Recipe r,
seed s, item i errs (100 points) with probability

    P = p + x (1 - p),   p = q_i (1 + shift_r / (100 mu)) (1 + g_rs)

q_i the item's difficulty (a three-stratum population, :data:`STRATA`, with mean mu),
shift_r the recipe's shift in points, g_rs = c_s + e_rs a seed factor (c_s common to the
recipes of a seed, e_rs the recipe's own; both uniform, mean 0), and the uniform draws of
the recipes of a seed shared per item with probability :data:`RHO` (common random
numbers: two recipes tend to miss the same images). x is the run's *extra* error rate, an
independent draw per item: 0 by default; ``extra`` for every run of a recipe (a recipe
much worse than the others without p leaving [0, 1]), ``far`` for a run that
*collapsed* (each run independently with probability ``collapse``, or exactly that share
of each block of :data:`N_SEEDS` of a simulation's seeds: bimodal seeds). A run
diverges with its recipe's rate (independently): its items are all 100 and its view says
``diverged``, as ``execution.view`` makes it.

So the expected error of a run that did not collapse is exactly
e0 + extra (100 - e0) with e0 = 100 mu + shift (:func:`expected_error`, which refuses a
shift that would push p above 1), and a contrast's truth is the contrast of the expected
errors.
"""

from __future__ import annotations

import dataclasses

import numpy as np

N_SEEDS = 8
N_ITEMS = 899  # the digits held-out half
STRATA = ((0.85, 0.01), (0.10, 0.20), (0.05, 0.50))  # (share of items, error probability)
MU = sum(w * q for w, q in STRATA)
SEED_COMMON, SEED_OWN, RHO = 0.3, 0.2, 0.5


@dataclasses.dataclass(frozen=True)
class Run:
    """What a claim holds of a run: its digest (the key of its view)."""

    digest: str


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One recipe of a simulation: shift (points), divergence rate, extra error rate of
    every run, collapse probability of a run and a collapsed run's extra error rate;
    exact: exactly round(collapse x 8) of each 8 seeds' runs collapse (which ones at
    random: the evaluation seeds, and again the extension seeds), else each run with
    probability ``collapse``."""

    shift: float = 0.0
    diverge: float = 0.0
    extra: float = 0.0
    collapse: float = 0.0
    far: float = 0.0
    exact: bool = False

    def __post_init__(self):
        for name in ("diverge", "extra", "collapse", "far"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Recipe.{name} must be in [0, 1], got {value!r}")
        top = max(q for _, q in STRATA) * (1 + self.shift / (100 * MU)) \
            * (1 + SEED_COMMON + SEED_OWN)
        if not (self.shift >= -100 * MU and top <= 1.0):
            raise ValueError(f"Recipe.shift must keep every item's error probability in "
                             f"[0, 1] (shift in [{-100 * MU:.3g}, "
                             f"{100 * MU * (1 / (max(q for _, q in STRATA) * 1.5) - 1):.3g}]"
                             f" points), got {self.shift!r}")


def expected_error(recipe: Recipe) -> float:
    """A run's expected error in points over seeds and test sets (collapses included)."""
    e0 = 100 * MU + recipe.shift
    normal = e0 + recipe.extra * (100 - e0)
    collapsed = e0 + recipe.far * (100 - e0)
    return (1 - recipe.collapse) * normal + recipe.collapse * collapsed


def _blocks(seeds: int) -> list:
    """``seeds`` as blocks of :data:`N_SEEDS` (the evaluation seeds, then each extension
    block), the last one shorter if it must be."""
    return [min(N_SEEDS, seeds - start) for start in range(0, seeds, N_SEEDS)]


def world(rng: np.random.Generator):
    """draw(recipes, seeds=N_SEEDS) for one stream of simulations (module docstring)."""

    def draw(recipes: dict, seeds: int = N_SEEDS) -> tuple[dict, dict]:
        """recipes: name -> :class:`Recipe` (or a (shift, divergence rate) pair). One
        simulation: a new test set and new seeds. Returns (views by digest
        "name/seed", runs: name -> [:class:`Run` per seed])."""
        strata = rng.choice(len(STRATA), size=N_ITEMS, p=[w for w, _ in STRATA])
        q = np.array([p for _, p in STRATA])[strata]
        common = rng.uniform(-SEED_COMMON, SEED_COMMON, size=(seeds, 1))
        shared_u = rng.random((seeds, N_ITEMS))
        views, runs = {}, {}
        for name, spec in recipes.items():
            spec = spec if isinstance(spec, Recipe) else Recipe(*spec)
            own = rng.uniform(-SEED_OWN, SEED_OWN, size=(seeds, 1))
            p = q[None, :] * (1 + spec.shift / (100 * MU)) * (1 + common + own)
            u = np.where(rng.random((seeds, N_ITEMS)) < RHO, shared_u,
                         rng.random((seeds, N_ITEMS)))
            lost = rng.random(seeds) < spec.diverge
            wrong = u < p
            collapsed = np.zeros(seeds, dtype=bool)
            if spec.extra > 0 or spec.collapse > 0:  # (draws only then: older streams keep)
                if spec.exact:  # exactly that share of each block of N_SEEDS seeds
                    collapsed = np.concatenate([
                        rng.permutation(size) < round(spec.collapse * size)
                        for size in _blocks(seeds)])
                else:
                    collapsed = rng.random(seeds) < spec.collapse
                x = np.where(collapsed, spec.far, spec.extra)[:, None]
                wrong = wrong | (rng.random((seeds, N_ITEMS)) < x)
            items = np.where(lost[:, None], 100.0, 100.0 * wrong)
            # a run's error, the mean of its items: sums of 0/100 values are exact in any
            # order, so this has the bits of np.mean per run
            error = (items.sum(axis=1) / N_ITEMS).tolist()
            runs[name] = [Run(f"{name}/{s}") for s in range(seeds)]
            for s, run in enumerate(runs[name]):
                views[run.digest] = {"items": items[s], "error": error[s],
                                 "diverged": bool(lost[s]), "collapsed": bool(collapsed[s])}
        return views, runs
    return draw


__all__ = ["MU", "N_ITEMS", "N_SEEDS", "RHO", "SEED_COMMON", "SEED_OWN", "STRATA", "Recipe",
           "Run", "expected_error", "world"]
