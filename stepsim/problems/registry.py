"""Problems by name, for the CLI, sweeps and checks: ``make_problem("digits", hidden=(128,))``.

The registry maps a short name to the class that implements it (imported on first use, so
listing names costs nothing). A problem's options are its constructor's keyword arguments,
declared once in the class's ``OPTIONS`` table (:mod:`stepsim._ground.options`: name ->
(constraint, default, help)); an option the problem does not take is an
``UnknownOptionError`` (a ``ValueError``) naming it and listing the valid ones.
"""

from __future__ import annotations

import importlib

from stepsim._ground.validate import check_choice

# name -> "module:Class"; add a problem here and every front end (train, sweep, check) has it
PROBLEMS = {
    "regression": "stepsim.problems.synthetic:SyntheticRegression",
    "digits": "stepsim.problems.digits:Digits",
    "teacher": "stepsim.problems.teacher:TeacherStudent",
    "nqm": "stepsim.problems.nqm:NoisyQuadratic",
    "lm": "stepsim.problems.lm:LanguageModel",
    "mnist1d": "stepsim.problems.mnist1d:MNIST1D",
}


def problem_class(name: str):
    """The class registered as ``name``."""
    check_choice("problem", name, PROBLEMS)
    module, cls = PROBLEMS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def problem_declaration(name: str):
    """The :class:`~stepsim._ground.options.Options` table of problem ``name`` (its ``OPTIONS``)."""
    cls = problem_class(name)
    declared = getattr(cls, "OPTIONS", None)
    if declared is None:
        raise TypeError(f"problem {name!r} ({cls.__module__}.{cls.__name__}) declares no "
                        "OPTIONS (stepsim._ground.options.Options: name -> (constraint, default, "
                        "help) of its keyword options)")
    return declared


def problem_options(name: str) -> list[str]:
    """The keyword options problem ``name`` takes, in declaration order."""
    return problem_declaration(name).names()


def make_problem(name: str, **options):
    """Build problem ``name`` with ``options``; unknown options raise UnknownOptionError
    (a ValueError) naming them; a bad value, a TypeError/ValueError from its declared
    constraint (the problem's ``OPTIONS``, applied by its constructor) naming it."""
    declared = problem_declaration(name)
    declared.check_known(options, lambda unknown, valid: (
        f"unknown option(s) {unknown} for problem {name!r}; choose from {valid}"))
    return problem_class(name)(**options)
