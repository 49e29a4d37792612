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
        rules = evaluation.budget(claim, keys[0]).rules
        found = trigger(every, results, rules.divergence.min_finite_pairs)
        if found is None:
            continue
        more = tuple(rules.divergence.extension_seeds)
        for key in keys:
            b = evaluation.budget(claim, key)
            wider = dataclasses.replace(b, seeds=(*b.seeds, *more), needed=set())
            budgets[(claim, key)] = wider
            jobs[(claim, key)] = get_claim(claim).jobs(wider)
        notes.append(f"{claim} on {problem}: extended to seeds {list(more)} (a pair of its "
                     f"run groups had {found[0]} seed(s) with both runs finite and "
                     f"{found[1]} with one of them diverged)")
    if not notes:
        return None
    return dataclasses.replace(evaluation, jobs=jobs, claim_budgets=budgets,
                               extensions=(*evaluation.extensions, *notes))


__all__ = ["extend", "run_groups", "trigger"]
