"""Theorem 1 of STEP (precondition error), checked by Monte-Carlo simulation.

``check_theorem1(process, ...) -> Theorem1Result`` simulates Adam's bias-corrected second
moment under a gradient process and tests the bound at log-spaced lags, with exact
confidence intervals and verdicts; ``stepsim theorem1`` is its command line. Modules:
``processes`` (gradient processes and the plug-in protocol), ``engine`` (numba engine and
NumPy reference), ``check`` (bounds, intervals, verdicts, result), ``plot`` (the figure).
Importing this package imports neither numba nor matplotlib.
"""

from stepsim.theorem1.check import (
    HOLDS,
    INCONCLUSIVE,
    VIOLATED,
    Estimate,
    LagRow,
    Theorem1Result,
    analyse,
    check_theorem1,
    clopper_pearson,
    hoeffding_bound,
    theorem1_bound,
    worst_case,
)
from stepsim.theorem1.engine import k0_proof, k0_statement, lag_grid, simulate, vhat_reference
from stepsim.theorem1.processes import PROCESSES, BuiltinProcess, make_process

__all__ = [
    "HOLDS", "INCONCLUSIVE", "PROCESSES", "VIOLATED", "BuiltinProcess", "Estimate", "LagRow",
    "Theorem1Result",
    "analyse", "check_theorem1", "clopper_pearson", "hoeffding_bound", "k0_proof",
    "k0_statement", "lag_grid", "make_process", "simulate", "theorem1_bound",
    "vhat_reference", "worst_case",
]
