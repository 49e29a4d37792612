"""Paper checks: one module per claim C1-C12 of the STEP paper, decided by a registered protocol.

``run_checks(["C1", "C5"], mode="full", out="report")`` runs the claims by the protocol of
``paper_checks/PROTOCOL.md`` (its numbers are :data:`stepsim.checks.protocol.RULES`):

1. **Settings** (:func:`protocol.settings`): every problem of the protocol at its
   timescale(s) — digits (main: beta2 0.999, T 5000; fast: beta2 0.99, T 2000, the
   agreement check of C5) and the transformer LM (fast). Quick mode: digits, fast, 3 seeds.
2. **Tuning** (:mod:`stepsim.checks.tuning`, full mode): every config the claims need
   (optimizer, recipe, N:M) is run at each grid value on the tuning seeds; the lowest mean
   error wins. Quick mode reuses the committed full run's choices (``tuned_lrs.json``).
3. **Evaluation**: each claim's runs (:class:`~stepsim.experiments.RunSpec`, built by
   :class:`~stepsim.checks._setup.Budget`) on the 8 evaluation seeds, and the tasks of
   C11 (Theorem 1 simulations) and C12 (memory counts), all through
   :mod:`stepsim.experiments` (in-process, a process pool or Dask) and one run store under
   ``OUT/runs/``, so a killed check resumes and runs shared by claims run once.
4. **Verdicts** (:mod:`stepsim.checks.verdict`): each claim's parts — an effect per seed
   from the runs' per-item test errors, its premise, its margin — are decided with the
   test set's sampling error in the interval, Holm across the parts, a premise gate
   ("premise absent: ..." makes a part INCONCLUSIVE), TOST for C7's flatness; a claim
   about STEP is REPRODUCED if either reading of STEP (Algorithm 1, STEP on SR-STE) is.
5. **Report**: ``report.md``, ``figures/`` and ``report.json`` last, recording the protocol
   commit, the rules' draft and SHA-256, every grid, tuning mean and choice, and each STEP
   run's switch step and cause (:mod:`stepsim.checks.report_files`).
6. **Operating points** (draft 4, :mod:`stepsim.checks.operating`): C5 and C6 are also
   decided at STEP's own tuned lr, at fixed switch fractions, under cosine with warm-up
   and at every lr tied with SR-STE's choice (the registered verdict is then "robust" or
   "fragile"); a part whose STEP switched on the initial loss plateau is INCONCLUSIVE; the
   report adds the stability map (error and divergence rate against the lr) and the
   switch findings.

7. **Beyond the paper** (:data:`EXTRAS`, run only when named): S1, STEP among its
   successors (:mod:`stepsim.checks.s01_successors`, PROTOCOL.md section S1, its own
   rules block and digest, recorded in the report's ``protocol.extras``), merged into a
   report that holds the claims.

A claim module defines ``CLAIM``, ``TITLE``, ``RULE`` (the "Rule" paragraph of its
docstring), ``jobs(budget) -> [RunSpec | Task]``, ``decide_claim(budget, results) ->
ClaimResult`` (``results``: digest -> the run's view, ``report._view``) and
``figure(result, path)`` or ``figures(result, out_dir)``. Importing this package imports
neither numba nor matplotlib.
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
#: beyond the paper: comparisons registered in PROTOCOL.md sections of their own (their own
#: rules block and digest), run only when named ("stepsim check S1"), reported after the
#: claims. "all" stays the paper's claims C1-C12.
EXTRAS = {
    "S1": "s01_successors",
}
#: the report's order: the paper's claims, then the extras
ORDER = [*CLAIMS, *EXTRAS]


def claim_module(claim: str):
    """The module of ``claim`` ("C1".."C12", an extra such as "S1"; case-insensitive)."""
    key = str(claim).upper()
    modules = {**CLAIMS, **EXTRAS}
    if key not in modules:
        raise ValueError(f"unknown claim {claim!r}; choose from {ORDER} or 'all'")
    return importlib.import_module(f"stepsim.checks.{modules[key]}")


def parse_claims(names) -> list[str]:
    """["all"] or claim names -> the claims in report order (duplicates removed; "all" is
    the paper's claims, an extra such as "S1" joins only when named)."""
    names = [str(n).upper() for n in (names or ["all"])]
    for n in names:  # every name is checked, "all C99" included
        if n != "ALL":
            claim_module(n)
    if "ALL" in names:
        return list(CLAIMS) + [c for c in EXTRAS if c in names]
    return [c for c in ORDER if c in names]


def __getattr__(name):  # lazy: the driver imports numpy and the claim modules
    if name in ("run_checks", "Report"):
        from stepsim.checks import report

        return getattr(report, name)
    raise AttributeError(name)


__all__ = ["CLAIMS", "EXTRAS", "ORDER", "Report", "claim_module", "parse_claims", "run_checks"]
