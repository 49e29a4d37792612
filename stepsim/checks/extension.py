"""The sequential extension stage (PROTOCOL.md "Divergence: one blow-up rule, and decidable
divergence-only parts"): more seeds only where divergence alone differs.

After the evaluation stage of a full check, a claim on a problem is **extended** when, for
some pair of its run groups (the runs of one RunSpec at every seed: same recipe, options,
N:M, lr, ..., the seed aside), fewer than ``divergence.min_finite_pairs`` seeds have both
runs finite and at least one seed has exactly one of the two diverged. Then every budget
of that claim on that problem gets ``divergence.extension_seeds`` appended to its seeds,
the claim's jobs are made again on them (the runs of the first seeds are the same
RunSpecs, found in the store), run, and the claim is decided on all of them. The trigger
reads which seeds diverged, never which side did, so the exact McNemar test over every
seed keeps its level. Quick mode never extends; a claim is extended once.

A claim on a problem is extended too when its seeds are **bimodal** (PROTOCOL.md D5.8's
amendment, ``rules.bimodal``): some finite run's error lies more than ``far_margins``
problem margins from the median error of its run group's finite runs (:func:`far_runs`).
That reads which runs are far from their own group, never which side of a part they are
on. In such a claim a part reads NOT REPRODUCED only when the claim was decided on the
extension seeds and the part's own paired values show the far mode (at least
``part_far_values`` of them more than ``far_margins`` margins from their median: its
interval saw the collapse); a part whose seeds all fell in one mode may have missed the
other (:func:`bimodal_hold`, which the
claim's decision reads).

:func:`extend` returns the evaluation stage with the extended claims' budgets and jobs
(``Evaluation.claim_budgets``), or None when no claim needs more seeds. Pure: nothing
runs here.
"""

from __future__ import annotations

import dataclasses
import itertools


def run_groups(jobs) -> dict:
    """RunSpec digest at seed 0 -> {seed: the RunSpec} of ``jobs`` (tasks left out)."""
    out = {}
    for job in jobs:
        if hasattr(job, "steps") and hasattr(job, "replace"):
            out.setdefault(job.replace(seed=0).digest, {})[job.seed] = job
    return out


def trigger(jobs, results: dict, min_finite_pairs: int) -> tuple | None:
    """The first pair of run groups of ``jobs`` that calls for more seeds, as (finite pairs,
    discordant seeds), or None. results: digest -> view (its ``diverged``)."""
    groups = [g for g in run_groups(jobs).values() if len(g) > 1]
    for a, b in itertools.combinations(groups, 2):
        seeds = sorted(set(a) & set(b))
        lost = [(bool(results[a[s].digest].get("diverged")),
                 bool(results[b[s].digest].get("diverged"))) for s in seeds]
        finite = sum(not x and not y for x, y in lost)
        discordant = sum(x != y for x, y in lost)
        if finite < min_finite_pairs and discordant:
            return finite, discordant
    return None


def far_runs(jobs, results: dict, far: float) -> tuple | None:
    """The first run group of ``jobs`` with a far run — a finite run whose error lies more
    than ``far`` (in the error's units) from the median error of the group's finite runs —
    as (the group's RunSpec description at seed 0, far runs, finite runs), or None.
    results: digest -> view (its ``error``, ``diverged``); a view without an error is
    not counted."""
    import statistics

    for group in run_groups(jobs).values():
        errors = [results[j.digest].get("error") for j in group.values()
                  if not results[j.digest].get("diverged")]
        errors = [float(e) for e in errors if e is not None]
        if len(errors) < 2:
            continue
        middle = statistics.median(errors)
        n_far = sum(abs(e - middle) > far for e in errors)
        if n_far:
            first = next(iter(group.values()))
            return first.replace(seed=0).describe(), n_far, len(errors)
    return None


def needs_more_seeds(jobs, results: dict, rules, margin: float) -> str | None:
    """Why the claim whose runs on a problem are ``jobs`` gets the extension seeds
    (divergence alone differs, or bimodal seeds: module docstring), or None. ``margin``:
    the problem's (its error units)."""
    found = trigger(jobs, results, rules.divergence.min_finite_pairs)
    if found is not None:
        return (f"a pair of its run groups had {found[0]} seed(s) with both runs finite and "
                f"{found[1]} with one of them diverged")
    bimodal = getattr(rules, "bimodal", None)
    if bimodal is None or not bimodal.extend:
        return None
    far = far_runs(jobs, results, float(bimodal.far_margins) * float(margin))
    if far is not None:
        return (f"bimodal seeds: {far[1]} of {far[2]} finite run(s) of {far[0]} more than "
                f"{bimodal.far_margins:g} margins from their group's median error")
    return None


def far_values(values, far: float) -> int:
    """How many of ``values`` (a part's paired values) lie more than ``far`` from their
    median."""
    import statistics

    values = [float(v) for v in values]
    if len(values) < 2:
        return 0
    middle = statistics.median(values)
    return sum(abs(v - middle) > far for v in values)


def bimodal_hold(budgets, jobs, results: dict):
    """PROTOCOL.md D5.8's amendment for a claim decided on ``budgets`` (one problem's, the
    same rules) from ``jobs``: None when the claim has no far run (every part may read NOT
    REPRODUCED), else ``hold(values, margin) -> str | None``: why a part with those paired
    values and its own margin may not read NOT REPRODUCED (the claim not decided on the
    extension seeds, or the part's values all in one mode: fewer than ``part_far_values``
    more than ``far_margins`` of its margins from their median), None when it may."""
    budgets = list(budgets)
    rules = getattr(budgets[0], "rules", None) if budgets else None
    bimodal = getattr(rules, "bimodal", None)
    if bimodal is None:
        return None
    far = float(bimodal.far_margins) * float(budgets[0].margin)
    found = far_runs(jobs, results, far)
    if found is None:
        return None
    head = (f"bimodal seeds: {found[1]} of {found[2]} finite run(s) of {found[0]} more than "
            f"{bimodal.far_margins:g} margins from their group's median error")
    more = set(rules.divergence.extension_seeds or ())
    extended = bool(more) and all(more <= set(b.seeds) for b in budgets)

    def hold(values, margin: float = 0.0) -> str | None:
        """values: the part's paired values; margin: its own (its units; 0: the
        problem's is used)."""
        if not extended:
            return f"{head}; NOT REPRODUCED only on the extension seeds"
        own = float(bimodal.far_margins) * float(margin) if margin and margin > 0 else far
        if far_values(values, own) < bimodal.part_far_values:
            return (f"{head}; this part's paired values are all in one mode (fewer than "
                    f"{bimodal.part_far_values} more than {bimodal.far_margins:g} margins "
                    f"from their median): NOT REPRODUCED only where they show both")
        return None
    return hold


def extend(evaluation, results: dict):
    """``evaluation`` (``planning.Evaluation``) with every claim on a problem that
    :func:`trigger` s extended to the extension seeds (module docstring), or None when
    none is. Claims decided once per check (C11, C12) and extras are never extended."""
    from stepsim.checks.registry import get_claim

    families = {}
    for (claim, key), jobs in evaluation.jobs.items():
        budget = evaluation.budget(claim, key)
        rules = getattr(budget, "rules", None)
        if (rules is None or rules.divergence.extension_seeds is None
                or budget.mode != "full" or get_claim(claim).extra):
            continue
        families.setdefault((claim, budget.problem), []).append(key)
    jobs, budgets, notes = dict(evaluation.jobs), dict(evaluation.claim_budgets), []
    for (claim, problem), keys in families.items():
        every = [j for key in keys for j in evaluation.jobs[(claim, key)]]
        first = evaluation.budget(claim, keys[0])
        why = needs_more_seeds(every, results, first.rules, first.margin)
        if why is None:
            continue
        # the family's own rules: a loop variable of the loop above would be the last
        # budget's, which may be the rule-less budget of C11 and C12 (the registered run of
        # 2026-11-28 stopped there)
        more = tuple(first.rules.divergence.extension_seeds)
        for key in keys:
            b = evaluation.budget(claim, key)
            wider = dataclasses.replace(b, seeds=(*b.seeds, *more), needed=set())
            budgets[(claim, key)] = wider
            jobs[(claim, key)] = get_claim(claim).jobs(wider)
        notes.append(f"{claim} on {problem}: extended to seeds {list(more)} ({why})")
    if not notes:
        return None
    return dataclasses.replace(evaluation, jobs=jobs, claim_budgets=budgets,
                               extensions=(*evaluation.extensions, *notes))


__all__ = ["bimodal_hold", "extend", "far_runs", "far_values", "needs_more_seeds",
           "run_groups", "trigger"]
