"""Paper checks: one module per claim C1-C12 of the STEP paper, one verdict record for all.

``run_checks(["C1", "C11"], mode="quick", out="report")`` runs the claims' jobs (training
runs as :class:`~stepsim.experiments.RunSpec`, Theorem 1 simulations and memory counts as
:class:`~stepsim.experiments.tasks.Task`) through :mod:`stepsim.experiments` (its executors
and a run store that makes a killed check resume), decides every claim by
the rule in its module's docstring, and writes ``report.json``, ``report.md`` and the
figures to ``out``; ``stepsim check`` is its command line. The shared vocabulary
(REPRODUCED / NOT REPRODUCED / INCONCLUSIVE, :class:`~stepsim.checks.verdict.ClaimResult`)
is in :mod:`stepsim.checks.verdict`.

A claim module defines ``CLAIM``, ``TITLE``, ``RULE`` (the "Rule" paragraph of its
docstring), ``jobs(budget) -> [RunSpec | Task]``, ``decide_claim(budget, results) ->
ClaimResult`` (``results``: digest -> what the claim reads of each job:
``stepsim.experiments.traces.summary`` of a run, a task's output)
and ``figure(result, path)`` or ``figures(result, out_dir)``. Importing this package
imports neither numba nor matplotlib.
"""

from __future__ import annotations

import importlib

#: claim -> module under stepsim.checks (the order of the report)
CLAIMS = {
    "C1": "c01_srste_adam",
    "C2": "c02_v_norm",
    "C3": "c03_variance_change",
    "C4": "c04_switch_criteria",
    "C5": "c05_step_vs_baselines",
    "C6": "c06_high_sparsity",
    "C7": "c07_switch_fraction",
    "C8": "c08_frozen_v",
    "C9": "c09_layerwise",
    "C10": "c10_decaying_mask",
    "C11": "c11_theorem1",
    "C12": "c12_memory",
}


def claim_module(claim: str):
    """The module of ``claim`` ("C1".."C12", case-insensitive)."""
    key = str(claim).upper()
    if key not in CLAIMS:
        raise ValueError(f"unknown claim {claim!r}; choose from {list(CLAIMS)} or 'all'")
    return importlib.import_module(f"stepsim.checks.{CLAIMS[key]}")


def parse_claims(names) -> list[str]:
    """["all"] or claim names -> the claims in report order (duplicates removed)."""
    names = [str(n).upper() for n in (names or ["all"])]
    for n in names:  # every name is checked, "all C99" included
        if n != "ALL":
            claim_module(n)
    if "ALL" in names:
        return list(CLAIMS)
    return [c for c in CLAIMS if c in names]


def __getattr__(name):  # lazy: the driver imports numpy and the claim modules
    if name in ("run_checks", "Report"):
        from stepsim.checks import report

        return getattr(report, name)
    raise AttributeError(name)


__all__ = ["CLAIMS", "Report", "claim_module", "parse_claims", "run_checks"]
