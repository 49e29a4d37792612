"""Options declared once: name -> (constraint, default, one-line help).

Every recipe, optimizer, criterion and problem states its keyword options in one
:class:`Options` table (as scikit-learn's ``_parameter_constraints``); everything else is
derived from it:

* the option names, in order (``recipe_options``, ``problem_options``, ...);
* the unknown-option error (:class:`~stepsim._ground.validate.UnknownOptionError`), naming the
  option as the user typed it and listing the valid ones (:meth:`Options.check_known`);
* the defaults and the checks: the declaration *is* the validator. A frozen dataclass reads
  it with :func:`declared` (optimizers, criteria), a problem's ``__init__`` with
  :func:`declared_keywords`, a registry with :meth:`Options.resolve` (the recipes); each
  value is checked by its declared constraint under the name the user typed, so no
  ``check_*`` copy and no default is written anywhere else;
* the help text ``stepsim train --recipe-options`` / ``--criterion-options`` /
  ``--problem-options`` print (:meth:`Options.help_lines`).

A declaration::

    LAM = Option(Real(minimum=0.0), 2e-4, "SR-STE decay lambda on the pruned weights")
    SRSTE = Options({"lam": LAM, "placement": Option(Choice("before", "after"), "before",
                                                     "SR-STE term on the gradient or after")})

A constraint checks a value with the :mod:`stepsim._ground.validate` functions, under the name the
user typed, and describes itself for the help text. ``None`` given for an option means "not
given" (its default) wherever the owner says so (``none_is_default=True``).

A frozen dataclass whose fields are the options reads its declaration with
:func:`declared`: the fields are only annotated, the decorator gives them the declared
defaults, and every instance checks each field against its declared constraint before
the class's own ``__post_init__`` (which keeps only checks across fields and
normalisations)::

    @dataclasses.dataclass(frozen=True)
    @declared(SGDM_OPTIONS)
    class SGDM:
        lr: float
        momentum: float
"""

from __future__ import annotations

import functools
import inspect
from typing import NamedTuple

from stepsim._ground import validate as V


# ------------------------------------------------------------------------ constraints
class Constraint:
    """A kind of value: ``check(name, value)`` returns the value normalised (a float as
    ``float``, an N:M as :class:`~stepsim._ground.validate.NMRatio`, ...) or raises
    TypeError/ValueError naming ``name``; ``str(constraint)`` describes it for help text."""

    text = "any"

    def check(self, name: str, value):
        return value

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"


class Real(Constraint):
    def __init__(self, minimum=None, maximum=None, *, min_open=False, max_open=False):
        self.kw = {"minimum": minimum, "maximum": maximum, "min_open": min_open,
                   "max_open": max_open}
        if minimum is None and maximum is None:
            self.text = "real"
        else:
            lo = "-inf" if minimum is None else minimum
            hi = "inf" if maximum is None else maximum
            self.text = (f"real in {'(' if min_open or minimum is None else '['}{lo}, "
                         f"{hi}{')' if max_open or maximum is None else ']'}")

    def check(self, name, value):
        return V.check_real(name, value, **self.kw)


class Int(Constraint):
    def __init__(self, minimum=None, maximum=None):
        self.kw = {"minimum": minimum, "maximum": maximum}
        self.text = "int" + (f" >= {minimum}" if minimum is not None else "") + (
            f" <= {maximum}" if maximum is not None else "")

    def check(self, name, value):
        return V.check_int(name, value, **self.kw)


class Bool(Constraint):
    text = "true|false"

    def check(self, name, value):
        return V.check_bool(name, value)


class Choice(Constraint):
    def __init__(self, *choices):
        self.choices = choices
        self.text = "|".join(choices)

    def check(self, name, value):
        return V.check_choice(name, value, self.choices)


class StepOrFraction(Constraint):
    text = "step (int >= 0) or fraction of the run (float in [0, 1])"

    def check(self, name, value):
        return V.check_step_or_fraction(name, value)


class Fraction(Constraint):
    text = "fraction in [0, 1]"

    def check(self, name, value):
        return V.check_fraction(name, value)


class NM(Constraint):
    text = "N:M"

    def check(self, name, value):
        return V.check_nm_pair(name, value)


class Widths(Constraint):
    text = "int or ints (e.g. 256,256)"

    def check(self, name, value):
        return V.check_widths(name, value)


class IntOrInts(Constraint):
    """One int for every layer or a tuple of ints, one per layer (its length is the
    owner's to check, against the number of layers), each ``>= minimum``."""

    def __init__(self, minimum: int = 1):
        self.minimum = minimum
        self.text = f"int or ints >= {minimum} (e.g. 5,3,3)"

    def check(self, name, value):
        if isinstance(value, (str, bytes)):
            raise TypeError(f"{name} must be an int or a tuple of ints, got {value!r}")
        if isinstance(value, (list, tuple)):
            return tuple(V.check_int(f"{name}[{i}]", v, minimum=self.minimum)
                         for i, v in enumerate(value))
        return V.check_int(name, value, minimum=self.minimum)


class Described(Constraint):
    """A value the owner's constructor checks; only described here (a dtype, a table)."""

    def __init__(self, text: str):
        self.text = text


class OrNone(Constraint):
    """``inner`` or None."""

    def __init__(self, inner: Constraint):
        self.inner = inner
        self.text = f"{inner} or none"

    def check(self, name, value):
        return None if value is None else self.inner.check(name, value)


# ------------------------------------------------------------------------ declarations
class Option(NamedTuple):
    """One option: what values it takes, its default, and one line of help."""

    constraint: Constraint
    default: object
    help: str


def _show_default(name: str, value) -> str:
    """A default as ``-o/-p KEY=VALUE`` accepts it (an N:M as N:M, a tuple as a,b)."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, tuple):
        return (":" if name.endswith("nm") else ",").join(str(v) for v in value)
    return str(getattr(value, "__name__", value))


class Options:
    """An ordered table name -> :class:`Option` (module docstring).

    none_is_default: a value of None means "not given": :meth:`resolve` gives the default.
    """

    def __init__(self, options: dict, *, none_is_default: bool = True):
        for name, option in options.items():
            if not isinstance(option, Option):
                raise TypeError(f"option {name!r} must be declared as an Option, got {option!r}")
        self.options = dict(options)
        self.none_is_default = none_is_default

    # mapping-like
    def __iter__(self):
        return iter(self.options)

    def __len__(self):
        return len(self.options)

    def __contains__(self, name):
        return name in self.options

    def __getitem__(self, name) -> Option:
        return self.options[name]

    def items(self):
        return self.options.items()

    def names(self) -> list[str]:
        return list(self.options)

    def defaults(self) -> dict:
        return {name: option.default for name, option in self.options.items()}

    def __or__(self, other: Options) -> Options:
        """Both tables (``other`` after ``self``); the first table's flags."""
        return Options({**self.options, **other.options},
                       none_is_default=self.none_is_default)

    def without(self, *names) -> Options:
        """The table without ``names`` (e.g. an option a preset fixes)."""
        return Options({k: v for k, v in self.options.items() if k not in names},
                       none_is_default=self.none_is_default)

    # derived
    def unknown(self, given) -> list[str]:
        return sorted(set(given) - set(self.options))

    def check_known(self, given, message) -> None:
        """Raise UnknownOptionError for names of ``given`` not declared here.

        message: a callable (unknown names, sorted valid names) -> the error's text, so
        each owner keeps its wording; it names each option exactly as given.
        """
        unknown = self.unknown(given)
        if unknown:
            raise V.UnknownOptionError(message(unknown, sorted(self.options)))

    def resolve(self, given) -> dict:
        """Every declared option's value: the given one, else the default (also for a given
        None when ``none_is_default``), checked and normalised by its constraint under its
        own name. A None whose declared default is None means "absent" and is kept unchecked.
        Names ``given`` holds beyond the table are left out (:meth:`check_known`'s)."""
        out = {}
        for name, option in self.options.items():
            value = given.get(name, option.default)
            if value is None and self.none_is_default:
                value = option.default
            absent = value is None and option.default is None
            out[name] = None if absent else option.constraint.check(name, value)
        return out

    def check_values(self, **values) -> None:
        """Check ``values`` (option name -> value) by their declared constraints, each under
        its name: for a piece whose fields are some of the table's options. A None whose
        declared default is None means "absent" and passes."""
        for name, value in values.items():
            option = self.options[name]
            if not (value is None and option.default is None):
                option.constraint.check(name, value)

    def check_fields(self, obj) -> None:
        """Check every declared option's value on ``obj`` (its attribute of that name)
        against the declared constraint: the one check of a :func:`declared` dataclass."""
        for name, option in self.options.items():
            option.constraint.check(name, getattr(obj, name))

    def help_lines(self, flag: str = "-o") -> list[str]:
        """One line per option: ``flag name=default  (constraint)  help``."""
        if not self.options:
            return ["  (no options)"]
        rows = [(f"{flag} {name}={_show_default(name, o.default)}", str(o.constraint), o.help)
                for name, o in self.options.items()]
        width = max(len(r[0]) for r in rows)
        return [f"  {left:<{width}}  {help_}  [{kind}]" for left, kind, help_ in rows]


def declared(table: Options):
    """Class decorator (under ``@dataclasses.dataclass``): the class's annotated fields are
    exactly ``table``'s options, in its order (a TypeError at import otherwise); each gets
    the declared default, and ``__post_init__`` first checks every field against its
    declared constraint (:meth:`Options.check_fields`), then runs the class's own.
    An option declared with default None whose constraint does not take None (``Int()``,
    not ``OrNone(Int())``) is required: its field gets no default (e.g. FixedStep's k0)."""

    def decorate(cls):
        fields = list(inspect.get_annotations(cls))
        if fields != table.names():
            raise TypeError(f"{cls.__name__}'s fields {fields} must be its declared options "
                            f"{table.names()}, in that order")
        for name, option in table.items():
            if name in cls.__dict__:
                raise TypeError(f"{cls.__name__}.{name}: the default is the declaration's "
                                f"({option.default!r}); do not repeat it")
            if option.default is not None or isinstance(option.constraint, OrNone):
                setattr(cls, name, option.default)
        own = cls.__dict__.get("__post_init__")

        def __post_init__(self):
            table.check_fields(self)
            if own is not None:
                own(self)

        cls.__post_init__ = __post_init__
        cls.OPTIONS = table
        return cls

    return decorate


def declared_keywords(table: Options):
    """Function decorator (a problem's ``__init__``): its keyword-only parameters are exactly
    ``table``'s options, in its order, written without defaults (a TypeError at import
    otherwise). They get the declared defaults (``__kwdefaults__``: ``help()`` and
    ``inspect.signature`` show them), and every call passes the body each option's value
    checked and normalised by its declared constraint (:meth:`Options.resolve`), so the
    body keeps only checks across options. A keyword the table does not declare reaches
    the body unchanged (Python's own "unexpected keyword argument" TypeError)."""

    def decorate(function):
        params = [p for p in inspect.signature(function).parameters.values()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY]
        if [p.name for p in params] != table.names():
            raise TypeError(f"{function.__qualname__}'s keyword-only parameters "
                            f"{[p.name for p in params]} must be its declared options "
                            f"{table.names()}, in that order")
        for p in params:
            if p.default is not inspect.Parameter.empty:
                raise TypeError(f"{function.__qualname__}: {p.name}'s default is the "
                                f"declaration's ({table[p.name].default!r}); do not repeat it")
        function.__kwdefaults__ = table.defaults()

        @functools.wraps(function)
        def checked(*args, **given):
            values = table.resolve(given)
            extra = {k: v for k, v in given.items() if k not in values}
            return function(*args, **values, **extra)

        checked.OPTIONS = table
        return checked

    return decorate


__all__ = [
    "NM",
    "Bool",
    "Choice",
    "Constraint",
    "Described",
    "Fraction",
    "Int",
    "Option",
    "Options",
    "OrNone",
    "Real",
    "StepOrFraction",
    "Widths",
    "declared",
    "declared_keywords",
]
