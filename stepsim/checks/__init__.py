"""Paper checks: one module per claim C1-C12 of the STEP paper, decided by a registered protocol.

``run_checks(["C1", "C5"], mode="full", out="report")`` runs the claims by the protocol of
``paper_checks/PROTOCOL.md`` (its numbers: :data:`stepsim.checks.protocol.RULES`, a typed
:class:`~stepsim.checks.rules.Rules`) as a pipeline of stages
(:mod:`stepsim.checks.pipeline`):

1. **Plan** (:mod:`~stepsim.checks.planning`): the settings of the mode
   (``Rules.settings``: every problem at its timescale(s) — digits (main: beta2 0.999,
   T 5000; fast: beta2 0.99, T 2000, the agreement check of C5) and the transformer LM
   (fast); quick mode: digits, fast, 3 seeds) and their operating points (C5 and C6 at
   STEP's own tuned lr, at fixed switch fractions, under cosine with warm-up), each a
   :class:`~stepsim.checks.budget.Budget`; the tuning stage (full mode: every config the
   claims need, at each grid value on the tuning seeds; the lowest mean error wins,
   :mod:`~stepsim.checks.tuning`; quick mode reuses the committed full run's choices,
   ``tuned_lrs.json``) and the evaluation stage: each claim's runs on the evaluation
   seeds, and the tasks of C11 (Theorem 1 simulations) and C12 (memory counts); after
   the tuning, every lr tied with SR-STE's choice joins as an operating point of its own.
   ``stepsim check --dry-run`` prints the plan.
2. **Execute** (:mod:`~stepsim.checks.execution`): every job through
   :mod:`stepsim.experiments` (in-process, a process pool or Dask) and one run store under
   ``OUT/runs/``, so a killed check resumes and runs shared by claims run once.
3. **Decide** (:mod:`~stepsim.checks.decisions`, :mod:`~stepsim.checks.verdict`): each
   claim's parts — an effect per seed from the runs' per-item test errors, its premise,
   its margin — are decided with the test set's sampling error in the interval, Holm
   across the parts, a premise gate ("premise absent: ..." makes a part INCONCLUSIVE),
   TOST for C7's flatness; a claim about STEP is REPRODUCED if either reading of STEP
   (Algorithm 1, STEP on SR-STE) is; a part whose STEP switched on the initial loss
   plateau is INCONCLUSIVE; each in-place verdict is robust or fragile across its tie
   set. The figures are drawn aside (:mod:`~stepsim.checks.drawing`).
4. **Merge** (:mod:`~stepsim.checks.merging`) into the report already in ``OUT``.
5. **Write** (:mod:`~stepsim.checks.outputs`, :mod:`~stepsim.checks.markdown`):
   ``report.md``, ``figures/`` and ``report.json`` last, recording the protocol commit,
   the rules' draft and SHA-256, every grid, tuning mean and choice, each STEP run's
   switch step and cause, the stability map (error and divergence rate against the lr)
   and the switch findings.

**Beyond the paper** (:data:`EXTRAS`, run only when named): S1, STEP among its successors
(:mod:`stepsim.checks.s01_successors`, PROTOCOL.md section S1, its own rules block and
digest, recorded in the report's ``protocol.extras``), merged into a report that holds the
claims.

A claim module ends by registering its :class:`~stepsim.checks.registry.Claim`: id, title,
rule (the "Rule" paragraph of its docstring), ``jobs(budget) -> [RunSpec | Task]``,
``decide(budget, results) -> ClaimResult`` (``results``: digest -> the job's view,
``execution.view``), its parts, and its figure(s). Importing this package imports neither
numba nor matplotlib, nor the claim modules.
"""

from __future__ import annotations

from stepsim.checks.registry import CLAIMS, EXTRAS, ORDER, Claim, get_claim, parse_claims


def __getattr__(name):  # lazy: the pipeline imports the stages (and NumPy when it runs)
    if name == "run_checks":
        from stepsim.checks.pipeline import run_checks

        return run_checks
    if name == "Report":
        from stepsim.checks.outputs import Report

        return Report
    raise AttributeError(name)


__all__ = ["CLAIMS", "EXTRAS", "ORDER", "Claim", "Report", "get_claim", "parse_claims",
           "run_checks"]
