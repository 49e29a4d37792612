"""Fake run views whose right verdict is known, for the tests of the verdict rules
(test_rules_c1_c6.py, test_rules_c7_c12.py, test_check_pieces.py, test_figures.py).

No training: each claim module's ``jobs(budget)`` is generated for a protocol budget,
every job is classified back into what it is (recipe key, optimizer, N:M, criterion, loss
scale, seed), and a scenario decides its view — on digits, the per-image errors are 100.0
on a chosen number of the 899 held-out images (a prefix, so that runs of one seed are
nested and their contrasts have a known test-set sampling error); on the LM, per-sequence
loss gaps.
"""

from __future__ import annotations

import importlib
import zlib

import numpy as np

from stepsim.checks import protocol
from stepsim.checks.budget import RECIPES, Budget
from stepsim.checks.registry import CLAIMS, EXTRAS
from stepsim.checks.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, ClaimResult, combine

R, NR, INC = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
SEEDS = tuple(range(8))
N_DIGITS = 899  # the held-out half of scikit-learn's 1797 digits (PROTOCOL §1)
N_LM = 512
#: recipe options that are not part of a recipe key (set per run by the budget)
PER_RUN = {"lr", "beta2", "momentum", "layerwise_m", "layerwise_target", "freeze_scope"}


# --- budgets and job classification -----------------------------------------------------


def claim_module(claim: str):
    """The module of ``claim`` (its ``jobs``, ``decide_claim`` and registered ``CLAIM``)."""
    return importlib.import_module(f"stepsim.checks.{({**CLAIMS, **EXTRAS})[claim]}")


#: the rules these tests decide by: draft 4's (each claim's own rule, one budget at a time;
#: draft 5's rules across readings have tests of their own, test_draft5_*.py)
DRAFT_4 = protocol.TYPED[4]


def needed_keys(module, problem="digits", timescale="main", only=None, steps=0) -> set:
    probe = Budget("full", problem, timescale, SEEDS, lrs=None, only=only, steps=steps,
                   rules=DRAFT_4)
    module.jobs(probe)
    return set(probe.needed)


def budget_for(module, problem="digits", timescale="main", *, only=None, steps=0, lrs=None):
    """A full-mode budget whose every needed config has lr 1e-3 (or ``lrs``' value)."""
    keys = needed_keys(module, problem, timescale, only, steps)
    chosen = {k: 1e-3 for k in keys}
    chosen.update(lrs or {})
    return Budget("full", problem, timescale, SEEDS, lrs=chosen, only=only, steps=steps,
                  rules=DRAFT_4)


def classify(spec) -> dict:
    """What a RunSpec is, in the protocol's words."""
    options = dict(spec.recipe_options)
    core = {k: v for k, v in options.items() if k not in PER_RUN}
    keys = [k for k, (name, o) in RECIPES.items() if name == spec.recipe and o == core]
    assert len(keys) == 1, (spec.recipe, core, keys)
    criterion = dict(spec.criterion_options)
    return {"key": keys[0], "opt": spec.optimizer, "nm": spec.nm, "m": options.get("layerwise_m"),
            "criterion": spec.criterion, "clip": bool(criterion.pop("clip", False)),
            "copts": criterion, "scale": spec.loss_scale, "seed": spec.seed,
            "lr": options["lr"], "steps": spec.steps}


# --- fake views -------------------------------------------------------------------------


def digit_items(wrong) -> np.ndarray:
    """100.0 on the first ``wrong`` images (or on images[start:start + count])."""
    start, count = (0, wrong) if isinstance(wrong, int) else wrong
    assert 0 <= start and 0 <= count and start + count <= N_DIGITS
    x = np.zeros(N_DIGITS)
    x[start:start + count] = 100.0
    return x


def lm_items(gap: float, salt: str) -> np.ndarray:
    """Per-sequence loss gaps around ``gap`` nats (a run's own small noise)."""
    rng = np.random.default_rng(zlib.crc32(salt.encode()))
    return gap + 0.01 * rng.standard_normal(N_LM)


def make_view(items, *, steps=5000, switch_step=None, curve=None, lm=False, v_late_ratio=0.05,
              z_min=1e-9, diverged=False, score=1.0) -> dict:
    """A run's view as ``execution.view`` makes it. curve: error at each of the 10 evaluation
    points (default: flat at the final error, i.e. converged)."""
    items = np.asarray(items, dtype=np.float64)
    error = float(np.mean(items))
    at = [steps // 10 * (j + 1) for j in range(10)]
    curve = [error] * 10 if curve is None else list(curve)
    curves = {"step": at, "gap": curve} if lm else {
        "step": at, "test_accuracy": [1.0 - e / 100.0 for e in curve]}
    v_steps = [1, 10, 100, 1000, steps]
    return {"error": error, "items": items, "diverged": diverged, "switch_step": switch_step,
            "curves": curves, "v_late_ratio": v_late_ratio,
            "z_window": {"min_mean": z_min, "at_step": steps, "window": 1000},
            "v_curve": {"step": v_steps, "v_l1": [1.0, 2.0, 1.5, 1.0, v_late_ratio * 2],
                        "z": [1e-3, 1e-5, 1e-7, 1e-9, 1e-10]},
            "table1": {"k0": switch_step, "score": score}, "seconds": 0.0}


def views(module, budget, scenario) -> dict:
    """digest -> view for every job of ``module``; scenario(job, i) -> the view's keyword
    arguments, "wrong" (digits: number of wrong images, or (start, count)) or "gap" (lm),
    i = the seed's index."""
    out = {}
    lm = budget.problem == "lm"
    for spec in module.jobs(budget):
        job = classify(spec)
        i = budget.seeds.index(job["seed"])
        kw = dict(scenario(job, i))
        if lm:
            items = lm_items(kw.pop("gap"), f"{spec.digest}")
        else:
            items = digit_items(kw.pop("wrong"))
        out[spec.digest] = make_view(items, steps=budget.steps, lm=lm, **kw)
    return out


def decided(module, budget, scenario) -> ClaimResult:
    result = module.decide_claim(budget, views(module, budget, scenario))
    assert result.verdict in (R, NR, INC) and result.rule == module.CLAIM.rule
    assert tuple(p.name for p in result.parts) == module.CLAIM.parts(budget)  # as declared
    assert result.parts and all(p.verdict in (R, NR, INC) for p in result.parts)
    assert combine(p.verdict for p in result.parts) in (R, NR, INC)
    return result


def parts(result) -> dict:
    return {p.name: p for p in result.parts}


def base(i: int) -> int:
    """Per-seed variation common to every run of a seed (cancels in a paired contrast)."""
    return 20 + i % 3
