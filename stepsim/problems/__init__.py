"""Problems that :func:`stepsim.training.fit` trains on, and the protocol they follow.

See :class:`stepsim.problems.base.Problem`. Problems know nothing of recipes. Registered
by name (:data:`PROBLEMS`, :func:`make_problem`): ``regression``
(:class:`SyntheticRegression`), ``digits`` (:class:`~stepsim.problems.digits.Digits`),
``teacher`` (:class:`~stepsim.problems.teacher.TeacherStudent`) and ``nqm``
(:class:`~stepsim.problems.nqm.NoisyQuadratic`); those three are imported on first use.
"""

from __future__ import annotations

from stepsim.problems.base import Problem
from stepsim.problems.registry import PROBLEMS, make_problem, problem_options
from stepsim.problems.synthetic import SyntheticRegression

__all__ = ["PROBLEMS", "Problem", "SyntheticRegression", "make_problem", "problem_options"]
