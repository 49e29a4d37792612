"""Problems by name, for the CLI, sweeps and checks: ``make_problem("digits", hidden=(128,))``.

The registry maps a short name to the class that implements it (imported on first use, so
listing names costs nothing). A problem's options are its constructor's keyword arguments;
an option the problem does not take is a ``ValueError`` naming it and the valid ones.
"""

from __future__ import annotations

import importlib
import inspect

from stepsim._validate import check_choice, check_options

# name -> "module:Class"; add a problem here and every front end (train, sweep, check) has it
PROBLEMS = {
    "regression": "stepsim.problems.synthetic:SyntheticRegression",
    "digits": "stepsim.problems.digits:Digits",
    "teacher": "stepsim.problems.teacher:TeacherStudent",
    "nqm": "stepsim.problems.nqm:NoisyQuadratic",
    "lm": "stepsim.problems.lm:LanguageModel",
}


def problem_class(name: str):
    """The class registered as ``name``."""
    check_choice("problem", name, PROBLEMS)
    module, cls = PROBLEMS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def problem_options(name: str) -> list[str]:
    """The keyword options problem ``name`` takes."""
    params = inspect.signature(problem_class(name)).parameters
    return [p for p, spec in params.items() if spec.kind is inspect.Parameter.KEYWORD_ONLY]


def make_problem(name: str, **options):
    """Build problem ``name`` with ``options``; unknown options raise UnknownOptionError
    (a ValueError) naming them."""
    check_options(f"problem {name!r}", options, problem_options(name))
    return problem_class(name)(**options)
