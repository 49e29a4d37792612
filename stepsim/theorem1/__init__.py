"""Theorem 1 of STEP (precondition error), checked by Monte-Carlo simulation.

``check_theorem1(process, ...) -> Theorem1Result`` simulates Adam's bias-corrected second
moment under a gradient process and tests the bound at log-spaced lags, with exact
confidence intervals and verdicts; ``stepsim theorem1`` is its command line. Modules:
``processes`` (gradient processes and the plug-in protocol), ``engine`` (numba engine and
NumPy reference), ``closed_forms`` (the paper's bound, the worst case, Hoeffding's),
``check`` (intervals, verdicts, result), ``scoring`` (a bound against simulated
statistics), ``plot`` (the figure), ``bounds`` (the corrected bounds: Chebyshev,
Statement A for Gaussian g, Statement B for Markov chains with a spectral gap, a heuristic
plug-in; ``chernoff``: exact Chernoff bounds A+ for Gaussian g and B+ for finite-state
Markov modulation; ``check_theorem1(..., bound=KIND)`` and ``stepsim theorem1 --bound
KIND`` score one), ``chains`` (Gaussian, sticky and two-state processes), ``verify`` (the
verification behind ``paper_checks/theorem1_bounds.py``).
Importing this package imports neither numba nor matplotlib.

What is tested: ||vhat_k - vhat_k0||_inf < sqrt(4 G^2 (1 - b2)^2 (k - k0) log(2/delta)) at
log-spaced lags 1..10^4, per coordinate and for the inf-norm over d coordinates, with exact
Clopper-Pearson intervals, the tightness of the bound and a HOLDS / VIOLATED /
INCONCLUSIVE verdict per lag and overall. The same seed gives the same bits for any thread
count or chunking. The memory a run needs is estimated before it starts: ``--trials
100000000 --dim 100000000`` says how much it would need and how much there is::

    stepsim theorem1 --list-processes          # i.i.d., stationary Markov, nonstationary controls
    stepsim theorem1                           # uniform, 1000 trials x 100 coords (1.1e9 steps)
    stepsim theorem1 --process ar1 --param rho=0.99 --json ar1.json --plot ar1.png
    stepsim theorem1 --process twopoint --k0 proof --delta 0.1 --dim 1000 --trials 200

Your own process: any object with ``G``, ``start(seed, shape)`` and
``sample(state, k_first, n_steps)`` (the protocol in :mod:`.processes`); one that also has
``autocovariance(max_lag)`` gets the corrected bounds
(:func:`stepsim.theorem1.corrected.corrected_bounds`: a Chebyshev bound proved for every
stationary process, and a heuristic sub-Gaussian one). The write-up is
``paper_checks/theorem1.md``; the committed figures and their JSON (with provenance) are in
``figures/theorem1/``, and ``python figures/regenerate.py`` remakes every committed figure
from the command recorded in its JSON (``--dry-run`` lists them).
"""

from stepsim.stats import clopper_pearson
from stepsim.theorem1.check import (
    HOLDS,
    INCONCLUSIVE,
    VIOLATED,
    Estimate,
    LagRow,
    Theorem1Result,
    analyse,
    check_theorem1,
)
from stepsim.theorem1.closed_forms import hoeffding_bound, theorem1_bound, worst_case
from stepsim.theorem1.engine import k0_proof, k0_statement, lag_grid, simulate, vhat_reference
from stepsim.theorem1.processes import PROCESSES, BuiltinProcess, make_process

__all__ = [
    "HOLDS", "INCONCLUSIVE", "PROCESSES", "VIOLATED", "BuiltinProcess", "Estimate", "LagRow",
    "Theorem1Result",
    "analyse", "check_theorem1", "clopper_pearson", "hoeffding_bound", "k0_proof",
    "k0_statement", "lag_grid", "make_process", "simulate", "theorem1_bound",
    "vhat_reference", "worst_case",
]
