"""Options declared once (stepsim._ground.options): every recipe, optimizer, criterion and problem
has one declaration covering exactly the options it accepts; names, the unknown-option
error, validation and the help text come from it; N:M is checked once per run."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from stepsim._ground.options import Described, Option, Options
from stepsim._ground.validate import UnknownOptionError
from stepsim.problems.registry import PROBLEMS, problem_class, problem_declaration
from stepsim.recipes import transforms as T
from stepsim.recipes.criteria import CRITERIA, CRITERION_OPTIONS, make_criterion
from stepsim.recipes.domino import DominoSearch
from stepsim.recipes.optimizers import SGDM, Adam
from stepsim.recipes.registry import (
    _DOMINO_KEYS,
    OPTIMIZER_OPTIONS,
    RECIPE_OPTIONS,
    RECIPES,
    make_optimizer,
    make_recipe,
    recipe_options,
)

# what _layerwise reads from a builder's **lw (besides the domino_* options)
LAYERWISE_KEYS = {"layerwise_rule", "layerwise_target", "layerwise_m", "layerwise_allocation"}


def _builder_accepts(name: str) -> set:
    """The options recipe ``name``'s builder takes, read from its signature (the preset's
    fixed ones excluded)."""
    build = RECIPES[name]
    inner = getattr(build, "builder", build)
    params = list(inspect.signature(inner).parameters.values())[3:]  # (name, opt, given, ...)
    accepted = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        accepted |= LAYERWISE_KEYS | set(_DOMINO_KEYS)
    return accepted - set(getattr(build, "fixed", {}))


def test_every_declaration_is_a_table_of_options():
    tables = [*RECIPE_OPTIONS.values(), *OPTIMIZER_OPTIONS.values(),
              *CRITERION_OPTIONS.values(), *(problem_declaration(p) for p in PROBLEMS)]
    for table in tables:
        assert isinstance(table, Options)
        for name, option in table.items():
            assert isinstance(option, Option) and option.help and str(option.constraint), name


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_declares_exactly_the_options_its_builder_takes(name):
    assert set(RECIPE_OPTIONS) == set(RECIPES)
    assert set(recipe_options(name)) == _builder_accepts(name)
    assert recipe_options(name) == RECIPE_OPTIONS[name].names()


def test_recipe_options_keep_their_order():
    assert recipe_options("sr-ste")[:3] == ["lam", "placement", "layerwise"]
    # freeze_scope sits with the frozen-v options it qualifies (FREEZE_V_OPTIONS)
    assert recipe_options("step")[:9] == ["freeze_v", "v_star", "denominator", "freeze_scope",
                                          "srste_lam", "srste_placement", "switch_at",
                                          "per_module", "layerwise"]
    assert recipe_options("step-v-updated")[0] == "v_star"
    assert recipe_options("decaying-mask") == ["dense_fraction", "decay_rate", "alpha_clock",
                                               "srste_lam", "srste_placement", "transposable"]
    assert recipe_options("masked-decay") == ["decay", "mask_every", "dense_tail",
                                              "transposable"]
    assert recipe_options("dense") == []


def test_dominosearch_checks_its_fields_by_the_domino_options_declaration():
    """DominoSearch's fields read DOMINO_OPTIONS (the recipes' domino_* options): a bad
    value is refused under the option's name, directly and through make_recipe."""
    from stepsim.recipes.domino import DOMINO_FIELDS, DOMINO_OPTIONS

    assert {k: RECIPE_OPTIONS["ste"][k] for k in DOMINO_OPTIONS} == DOMINO_OPTIONS.options
    assert set(_DOMINO_KEYS) == set(DOMINO_OPTIONS)
    for field, option in DOMINO_FIELDS.items():
        with pytest.raises((TypeError, ValueError)) as err:
            DominoSearch(**{field: object()})
        assert str(err.value).startswith(f"{option} "), str(err.value)
        if not str(DOMINO_OPTIONS[option].constraint).startswith("int"):
            with pytest.raises(ValueError, match=rf"^{option} must be finite, got nan$"):
                make_recipe("ste", layerwise=True, **{option: float("nan")})
    assert DominoSearch(deadline=None).deadline is None  # the API may search to the end


DECLARED = [Adam, SGDM, *CRITERIA.values()]


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_a_declared_dataclass_checks_every_field_by_its_declared_constraint(cls):
    """The declaration is the validator: each field's bad value is refused by the
    constructor under the option's name (no separate check_* copy in __post_init__)."""
    assert cls.OPTIONS in [*OPTIMIZER_OPTIONS.values(), *CRITERION_OPTIONS.values()]
    for name in cls.OPTIONS.names():
        with pytest.raises((TypeError, ValueError)) as err:
            cls(**{name: object()})
        assert str(err.value).startswith(f"{name} "), str(err.value)


def test_declared_gives_defaults_refuses_other_fields_and_runs_the_class_check_after():
    from stepsim._ground.options import Int, Real, declared

    table = Options({"a": Option(Real(minimum=0.0), 1.5, "a"), "b": Option(Int(), 2, "b")})
    seen = []

    @dataclasses.dataclass(frozen=True)
    @declared(table)
    class Right:
        a: float
        b: int

        def __post_init__(self):  # runs after the declared checks
            seen.append((self.a, self.b))

    assert Right() == Right(1.5, 2) and seen == [(1.5, 2), (1.5, 2)]
    with pytest.raises(ValueError, match=r"^a must be in \[0\.0, inf\), got -1\.0$"):
        Right(a=-1.0)
    with pytest.raises(ValueError, match=r"^a must be finite, got nan$"):
        Right(a=float("nan"))
    assert len(seen) == 2  # the class's own check never saw the bad values
    with pytest.raises(TypeError, match=r"fields \['b', 'a'\] must be its declared options"):
        @dataclasses.dataclass(frozen=True)
        @declared(table)
        class Reordered:
            b: int
            a: float
    with pytest.raises(TypeError, match=r"Repeated\.a: the default is the declaration's"):
        @dataclasses.dataclass(frozen=True)
        @declared(table)
        class Repeated:
            a: float = 1.5
            b: int


def test_the_recipe_pieces_check_their_fields_by_the_declarations_the_recipes_take():
    """The maskers and FreezeV read the tables the registry composes the recipes from
    (the masking pieces, the decaying mask, STEP's precondition settings): a bad field is
    refused under the recipe option's name, and the recipes' tables hold those very
    declarations."""
    from stepsim.recipes.maskers import (
        DECAYING_OPTIONS,
        MASKING_OPTIONS,
        TRANSPOSABLE_OPTIONS,
        DecayingMask,
        EveryStepMask,
        SoftThresholdMask,
    )
    from stepsim.recipes.recipe import ALLOCATION_OPTIONS, FREEZE_V_OPTIONS, AllocateGreedy, FreezeV

    for recipe, table in (("ste", MASKING_OPTIONS | TRANSPOSABLE_OPTIONS),
                          ("decaying-mask", DECAYING_OPTIONS), ("step", FREEZE_V_OPTIONS),
                          ("s-ste-step", FREEZE_V_OPTIONS), ("ste", ALLOCATION_OPTIONS)):
        assert all(RECIPE_OPTIONS[recipe][k] is table[k] for k in table), recipe
    cases = [(EveryStepMask, "every", "mask_every"), (EveryStepMask, "dense_tail", None),
             (SoftThresholdMask, "every", "mask_every"), (EveryStepMask, "transposable", None),
             (DecayingMask, "decay_rate", None), (DecayingMask, "alpha_clock", None),
             (lambda **kw: FreezeV(0.999, 1e-8, "inside", **kw), "v_star", None),
             (lambda **kw: FreezeV(0.999, 1e-8, "inside", **kw), "denominator", None),
             (AllocateGreedy, "target", "layerwise_target"), (AllocateGreedy, "m", "layerwise_m")]
    for build, field, option in cases:
        with pytest.raises((TypeError, ValueError)) as err:
            build(**{field: object()})
        assert str(err.value).startswith(f"{option or field} "), str(err.value)
    with pytest.raises(ValueError, match=r"^dense_tail must be finite, got nan$"):
        EveryStepMask(dense_tail=float("nan"))
    # the masked-decay recipe keeps the masking constraints with Hu et al.'s defaults
    for key in ("mask_every", "dense_tail"):
        assert RECIPE_OPTIONS["masked-decay"][key].constraint is MASKING_OPTIONS[key].constraint


def test_declared_keywords_gives_defaults_checks_and_refuses_a_repeated_default():
    from stepsim._ground.options import NM, Int, OrNone, Real, declared_keywords
    from stepsim._ground.validate import NMRatio

    table = Options({"a": Option(Real(minimum=0.0), 1.5, "a"), "nm": Option(NM(), (2, 4), "n"),
                     "k": Option(OrNone(Int(minimum=1)), None, "k")}, none_is_default=False)
    seen = []

    class Right:
        @declared_keywords(table)
        def __init__(self, *, a, nm, k):
            seen.append((a, nm, k))

    Right()
    Right(a=2, nm=[1, 4], k=3)
    assert seen == [(1.5, (2, 4), None), (2.0, (1, 4), 3)]
    assert type(seen[1][0]) is float and type(seen[1][1]) is NMRatio  # normalised
    assert str(inspect.signature(Right)) == "(*, a=1.5, nm=(2, 4), k=None)"
    with pytest.raises(ValueError, match=r"^a must be finite, got inf$"):
        Right(a=float("inf"))
    with pytest.raises(TypeError, match=r"^k must be an integer, got 'x'"):
        Right(k="x")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'b'"):
        Right(b=1)
    assert len(seen) == 2  # the body never saw a bad value
    with pytest.raises(TypeError, match=r"keyword-only parameters \['nm', 'a', 'k'\] must be"):
        declared_keywords(table)(lambda *, nm, a, k: None)
    with pytest.raises(TypeError, match=r"a's default is the declaration's \(1\.5\); do not"):
        declared_keywords(table)(lambda *, a=1.5, nm, k: None)


def test_resolve_and_check_values_apply_the_declared_constraints():
    from stepsim._ground.options import Int, Real

    table = Options({"a": Option(Real(minimum=0.0), 1.5, "a"),
                     "m": Option(Int(minimum=1), None, "m (none: absent)")})
    assert table.resolve({}) == {"a": 1.5, "m": None}
    assert table.resolve({"a": None, "m": 2, "other": 0}) == {"a": 1.5, "m": 2}
    with pytest.raises(ValueError, match=r"^m must be >= 1, got 0$"):
        table.resolve({"m": 0})
    table.check_values(a=0.0, m=None)
    with pytest.raises(ValueError, match=r"^a must be finite, got nan$"):
        table.check_values(a=float("nan"))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_problem_checks_every_option_by_its_declared_constraint(name):
    """The declaration is the problem's validator (stepsim._ground.options.declared_keywords):
    each option's bad value is refused under its name, directly and through make_problem,
    and a non-finite real is refused in one line; the constructor's signature shows the
    declared defaults."""
    from stepsim import make_problem

    cls, declared = problem_class(name), problem_declaration(name)
    assert cls.__init__.OPTIONS is declared
    params = inspect.signature(cls).parameters
    assert {k: p.default for k, p in params.items()} == declared.defaults()
    for option, decl in declared.items():
        if isinstance(decl.constraint, Described):  # checked by the body (dtype, kinds)
            continue
        for build in (cls, lambda **kw: make_problem(name, **kw)):
            with pytest.raises((TypeError, ValueError)) as err:
                build(**{option: object()})
            assert str(err.value).startswith(f"{option} "), str(err.value)
        if "real" in str(decl.constraint):
            with pytest.raises(ValueError, match=rf"^{option} must be finite, got nan$"):
                make_problem(name, **{option: float("nan")})


def test_a_problem_option_is_normalised_by_its_declaration():
    from stepsim import make_problem
    from stepsim._ground.validate import NMRatio

    problem = make_problem("nqm", dim=8, alpha=np.int64(2), nm=[1, 4], seed=np.int64(3))
    assert type(problem.alpha) is float and problem.alpha == 2.0
    assert type(problem.nm) is NMRatio and problem.nm == (1, 4)
    assert type(problem.seed) is int and problem.config()["seed"] == 3
    with pytest.raises(TypeError, match=r"^seed must be an integer, got -1\.5"):
        make_problem("regression", seed=-1.5)  # the seed of the regression was unchecked


def _bad_value_cases():
    for name in sorted(RECIPES):
        for option, declared in RECIPE_OPTIONS[name].items():
            if not isinstance(declared.constraint, Described):
                yield name, option


@pytest.mark.parametrize("recipe, option", list(_bad_value_cases()))
def test_a_bad_recipe_option_value_is_named_as_typed(recipe, option):
    """One name per option: the error names the option the user typed (sr-ste's ``lam``,
    never STEP's ``srste_lam``), whatever piece would have checked it."""
    with pytest.raises((TypeError, ValueError)) as err:
        make_recipe(recipe, **{option: object()})
    assert str(err.value).startswith(f"{option} "), str(err.value)


def test_the_renamed_options_errors_say_what_the_user_typed():
    for recipe in ("sr-ste", "layerwise-sr-ste"):
        with pytest.raises(ValueError, match=r"^lam must be in \[0\.0, inf\), got -1\.0$"):
            make_recipe(recipe, lam=-1)
        with pytest.raises(ValueError, match=r"^unknown placement 'middle'"):
            make_recipe(recipe, placement="middle")
    for recipe in ("step", "step-v-updated", "layerwise-step", "decaying-mask"):
        with pytest.raises(ValueError, match=r"^srste_lam must be in"):
            make_recipe(recipe, srste_lam=-1)
        with pytest.raises(ValueError, match=r"^unknown srste_placement 'middle'"):
            make_recipe(recipe, srste_lam=1e-3, srste_placement="middle")
    with pytest.raises(TypeError, match=r"^layerwise must be True or False, got 'yes'"):
        make_recipe("ste", layerwise="yes")  # was silently truthy


def test_an_unknown_option_is_named_as_typed_with_the_valid_ones():
    with pytest.raises(UnknownOptionError) as err:
        make_recipe("step", srste_lamb=1e-3)
    text = str(err.value)
    assert "['srste_lamb']" in text and "'srste_lam'" in text and "'lr'" in text
    with pytest.raises(UnknownOptionError, match=r"\['lam'\].*'srste_lam'"):
        make_recipe("step", lam=1e-3)  # sr-ste's name on STEP: refused, pointing at STEP's
    with pytest.raises(UnknownOptionError, match=r"\['thresh'\]; its options are \[.*'threshold'"):
        make_criterion("agarwal", thresh=0.5)
    with pytest.raises(UnknownOptionError, match=r"\['momentum'\].*choose from \[.*'lr'"):
        make_optimizer("adam", momentum=0.9)


def _printed(capsys, *argv) -> str:
    from stepsim.cli import main

    assert main(["train", *argv]) == 0
    return capsys.readouterr().out


def test_help_text_comes_from_the_declarations(capsys, monkeypatch):
    out = _printed(capsys, "--recipe", "step", "--recipe-options")
    for name, option in [*RECIPE_OPTIONS["step"].items(), *OPTIMIZER_OPTIONS["adam"].items()]:
        assert f"-o {name}=" in out and option.help in out, name
    out = _printed(capsys, "--criterion", "tang", "--criterion-options")
    for name, option in CRITERION_OPTIONS["tang"].items():
        assert f"-c {name}=" in out and option.help in out, name
    out = _printed(capsys, "--problem", "nqm", "--problem-options")
    for name, option in problem_declaration("nqm").items():
        assert f"-p {name}=" in out and option.help in out, name
    assert "-p nm=2:4" in out and "-p dtype=float64" in out

    # change the declaration: the help follows
    table = RECIPE_OPTIONS["asp"]
    edited = Options({"prune_at": table["prune_at"]._replace(help="HELP FROM THE TABLE")})
    monkeypatch.setitem(RECIPE_OPTIONS, "asp", edited)
    assert "-o prune_at=0.5  HELP FROM THE TABLE" in _printed(capsys, "--recipe", "asp",
                                                              "--recipe-options")
    assert recipe_options("asp") == ["prune_at"]


def test_fit_checks_nm_once_and_not_per_step(monkeypatch):
    """Masks in the training loop go through the trusted entry; the public nm_mask still
    validates."""
    from stepsim import make_problem
    from stepsim.core import masks
    from stepsim.training import fit

    calls = []

    def counting(n, m, **kw):
        calls.append((n, m))
        return (n, m)

    monkeypatch.setattr(masks, "check_nm", counting)
    fit(make_problem("regression"), make_recipe("sr-ste"), 20, rng=0, nm=(2, 4), progress=False)
    assert calls == []
    monkeypatch.undo()
    with pytest.raises(ValueError, match="n must be <= m"):
        masks.nm_mask(np.ones((2, 4)), 3, 2)
    with pytest.raises(TypeError, match="nm must be an"):
        fit(make_problem("regression"), make_recipe("ste"), 2, nm="2:4", progress=False)
    from stepsim.recipes.recipe import RunContext

    with pytest.raises(TypeError, match=r"parameter 'w1' must have dtype in"):
        RunContext.make({"w1": np.ones((1, 4), dtype=np.int64)}, {"w1": T.ParamSpec(2, 4)}, 10)


def test_trusted_masks_are_the_public_masks():
    from stepsim.core.masks import nm_mask, nm_mask_trusted

    rng = np.random.default_rng(0)
    for shape, n, m, axis in [((8, 16), 2, 4, -1), ((4, 8, 3), 1, 8, 1), ((6, 12), 5, 6, -1)]:
        w = rng.standard_normal(shape).astype(np.float32)
        assert np.array_equal(nm_mask_trusted(w, n, m, axis), nm_mask(w, n, m, axis))
