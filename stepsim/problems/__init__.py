"""Problems that :func:`stepsim.training.fit` trains on, and the protocol they follow.

See :class:`stepsim.problems.base.Problem`. Problems know nothing of recipes.
"""

from __future__ import annotations

from stepsim.problems.base import Problem
from stepsim.problems.registry import PROBLEMS, make_problem, problem_options
from stepsim.problems.synthetic import SyntheticRegression

__all__ = ["PROBLEMS", "Problem", "SyntheticRegression", "make_problem", "problem_options"]
