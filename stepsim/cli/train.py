"""stepsim train: run one recipe on one registered problem and summarise it.

The problem comes from the registry (``--problem``: every name of
``stepsim.problems.registry.PROBLEMS``, listed by ``--help``); its
options are its constructor's keyword options, given as repeatable ``-p KEY=VALUE``.
``--problem-options``, ``--recipe-options`` and ``--criterion-options`` list the chosen
problem's, recipe's (with its optimizer's) and criterion's options with their defaults
and one line of help each, from the one declaration of each (:mod:`stepsim._ground.options`).
The synthetic regression flags of earlier versions (``--d-in``, ``--d-hidden``, ...) still
work, for the regression problem; ``--nm``, ``--batch-size``, ``--dtype``, ``--data-seed``,
``--teacher-nm``, ``--noise`` apply to every problem that takes the matching option.

The options become one :class:`~stepsim.experiments.run.RunSpec` (:func:`run_spec`), which
holds the defaults (criterion, lr, N:M) and builds and runs the run; ``--json`` saves it
(``provenance.params.run``) so ``RunSpec.from_dict`` repeats the run bit for bit.

A run that diverges (a non-finite loss, gradient or weight) is an outcome, not an error:
``fit`` stops it there and ``status`` says, on one line, the step, the parameter and the
lr; the command still prints the rest of the summary and exits 0.

``--json PATH`` writes two files, PATH and the trace and weights in an .npz beside it:
the .npz first, the JSON last, and the JSON records the digest of the arrays it commits
(``stepsim._ground.atomic``), so a kill between the two writes can never leave a pair that
passes for one run; readers (``stepsim compress``, ``Trace.load_npz``) refuse a mismatch.
"""

from __future__ import annotations

from stepsim.cli.args import (
    add_quiet,
    choices_text,
    integer,
    key_values,
    nm,
    number,
    output_path,
    positive_int,
    registry_names,
    run_params,
    seed,
)
from stepsim.cli.args import value as _value

HELP = ("train one recipe (" + ", ".join(registry_names("stepsim.recipes.registry", "RECIPES")[:5])
        + ", ...) on a problem (" + choices_text("stepsim.problems.registry", "PROBLEMS") + ")")

# flag dest -> the problem option it sets (None values mean "not given")
_PROBLEM_FLAGS = {
    "nm": "nm", "batch_size": "batch_size", "dtype": "dtype", "data_seed": "seed",
    "teacher_nm": "teacher_nm", "noise": "noise", "d_in": "d_in", "d_hidden": "d_hidden",
    "d_out": "d_out", "grad_noise": "grad_noise", "scale": "scale", "condition": "condition",
}


def add_arguments(parser) -> None:
    parser.add_argument("--problem", default="regression",
                        help="problem name: " + choices_text("stepsim.problems.registry",
                                                             "PROBLEMS")
                             + " (default regression)")
    parser.add_argument("-p", "--problem-option", action="append", metavar="KEY=VALUE",
                        help="problem option, repeatable (e.g. -p hidden=128,128 "
                             "-p sparsify=all-but-last); see --problem-options")
    parser.add_argument("--problem-options", action="store_true",
                        help="list the chosen problem's options and defaults, then exit")
    parser.add_argument("--recipe", default="step",
                        help="recipe name: " + choices_text("stepsim.recipes.registry",
                                                            "RECIPES") + " (default step)")
    parser.add_argument("--criterion", default=None,
                        help="switch criterion: " + choices_text("stepsim.recipes.criteria",
                                                                 "CRITERIA")
                             + " ('none' for none); default for recipes that need one: AutoSwitch "
                             "clipped to [0.1T, 0.5T] (stepsim.experiments.run.DEFAULT_CRITERION)")
    parser.add_argument("-c", "--criterion-option", action="append", metavar="KEY=VALUE",
                        help="criterion option, repeatable (e.g. fraction=0.2, k0=500); see "
                             "--criterion-options")
    parser.add_argument("--criterion-options", action="store_true",
                        help="list the chosen criterion's options and defaults, then exit")
    parser.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                        help="recipe/optimizer option, repeatable (e.g. lam=2e-4, "
                             "v_star=bias-corrected, prune_at=0.5, weight_decay=0.01); see "
                             "--recipe-options")
    parser.add_argument("--recipe-options", action="store_true",
                        help="list the chosen recipe's and optimizer's options and defaults, "
                             "then exit")
    parser.add_argument("--optimizer", default="adam",
                        help=choices_text("stepsim.recipes.registry", "OPTIMIZERS")
                             + " (default adam)")
    parser.add_argument("--nm", type=nm, default=None, metavar="N:M",
                        help="N:M of the sparse layers (default: the problem's nm)")
    parser.add_argument("--steps", type=positive_int, default=None,
                        help="training steps (default 2000)")
    parser.add_argument("--lr", type=number, default=None,
                        help="learning rate (default: the optimizer's declared lr; see "
                             "--recipe-options)")
    parser.add_argument("--seed", type=seed, default=None,
                        help="seed of init and batches (default 0)")
    parser.add_argument("--eval-every", type=positive_int, default=None, metavar="K",
                        help="record the problem's evaluate() metrics every K steps "
                             "(learning curves in the result)")
    parser.add_argument("--json", metavar="PATH",
                        help="save the summary (JSON with provenance) and trace and weights "
                             "(.npz beside it, written first; the JSON records its digest)")
    add_quiet(parser)
    common = parser.add_argument_group("options of several problems (when the problem has them)")
    common.add_argument("--batch-size", type=integer, default=None, help="minibatch size")
    common.add_argument("--dtype", choices=("float32", "float64"), default=None,
                        help="data and parameter dtype (default: the problem's)")
    common.add_argument("--data-seed", type=seed, default=None,
                        help="seed of the problem's data (default 0)")
    common.add_argument("--teacher-nm", type=nm, default=None, metavar="N:M",
                        help="make the teacher N:M sparse (regression, teacher)")
    common.add_argument("--noise", type=number, default=None, help="label noise std")
    prob = parser.add_argument_group(
        "synthetic regression problem (--problem regression)",
        "each flag is an option of the problem: its default and constraint are the "
        "problem's declaration (--problem-options)")
    prob.add_argument("--d-in", type=integer, default=None, help="input size")
    prob.add_argument("--d-hidden", type=integer, default=None, help="hidden size")
    prob.add_argument("--d-out", type=integer, default=None, help="output size")
    prob.add_argument("--grad-noise", type=number, default=None,
                      help="std of Gaussian noise added to every gradient entry")
    prob.add_argument("--scale", type=number, default=None, help="input (hence gradient) scale")
    prob.add_argument("--condition", type=number, default=None,
                      help="ratio of largest to smallest feature scale")


def problem_options_from(args) -> dict:
    """The problem's keyword options from the flags that were given and ``-p KEY=VALUE``.

    A flag's value goes through the problem's declared constraint of its option, under the
    flag's name (``--batch-size must be >= 1, got 0``, ``--noise must be finite, got nan``);
    ``-p`` values are checked by the problem itself, under their keys."""
    from stepsim.problems.registry import problem_declaration

    declared = problem_declaration(args.problem)
    allowed = set(declared)
    opts = key_values(args.problem_option, "--problem-option", _value)
    for dest, option in _PROBLEM_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if option not in allowed:
            raise ValueError(f"{flag} does not apply to problem {args.problem!r} (it has no "
                             f"option {option!r}); its options: {sorted(allowed)}")
        if option in opts:
            raise ValueError(f"{flag} and -p {option}=... both given; use one")
        opts[option] = declared[option].constraint.check(flag, value)
    return opts


def _print_problem_options(name: str) -> None:
    from stepsim.problems.registry import problem_class, problem_declaration

    cls = problem_class(name)
    print(f"problem {name}: {cls.__module__}.{cls.__name__}")
    print("\n".join(problem_declaration(name).help_lines("-p")))


def _print_recipe_options(name: str, optimizer: str) -> None:
    from stepsim._ground.validate import check_choice
    from stepsim.recipes.registry import (
        OPTIMIZER_OPTIONS,
        OPTIMIZERS,
        RECIPE_OPTIONS,
        RECIPES,
    )

    check_choice("recipe", name, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    print(f"recipe {name}:")
    print("\n".join(RECIPE_OPTIONS[name].help_lines("-o")))
    print(f"optimizer {optimizer} (--optimizer):")
    print("\n".join(OPTIMIZER_OPTIONS[optimizer].help_lines("-o")))


def _print_criterion_options(name: str | None) -> None:
    from stepsim._ground.validate import check_choice
    from stepsim.experiments.run import DEFAULT_CRITERION
    from stepsim.recipes.criteria import CRITERIA, CRITERION_OPTIONS

    if name is None:
        default, options = DEFAULT_CRITERION
        shown = ", ".join(f"{k}={v}" for k, v in options)
        print(f"(no --criterion: the default, {default} with {shown}, for recipes that need one)")
        name = default
    elif name.lower() == "none":
        print("--criterion none: no criterion, so no options")
        return
    check_choice("criterion", name, CRITERIA)
    print(f"criterion {name}: {CRITERIA[name].__module__}.{CRITERIA[name].__name__}")
    print("\n".join(CRITERION_OPTIONS[name].help_lines("-c")))
    print("  -c per_module=false  run the criterion on each module's own v (a RunSpec field)")


def run_spec(args):
    """The :class:`~stepsim.experiments.run.RunSpec` of the parsed options (checked)."""
    from stepsim.experiments.run import AUTO, RunSpec

    problem_opts = problem_options_from(args)
    nm = problem_opts.pop("nm", None)  # --nm and -p nm=N:M: the run's N:M (one door)
    recipe_opts = key_values(args.option, "--option", _value)
    if args.lr is not None:
        from stepsim._ground.validate import check_choice
        from stepsim.recipes.registry import OPTIMIZER_OPTIONS, OPTIMIZERS

        if "lr" in recipe_opts:
            raise ValueError("--lr and -o lr=... both given; use one")
        check_choice("optimizer", args.optimizer, OPTIMIZERS)  # whose declared lr
        recipe_opts["lr"] = OPTIMIZER_OPTIONS[args.optimizer]["lr"].constraint.check(
            "--lr", args.lr)
    crit_opts = key_values(args.criterion_option, "--criterion-option", _value)
    name = args.criterion
    if name is not None and name.lower() == "none":
        if crit_opts:
            raise ValueError("--criterion none takes no --criterion-option")
        name = None
    elif name is None:
        name = AUTO
    per_module = crit_opts.pop("per_module", False)
    fields = {k: v for k, v in (("steps", args.steps), ("seed", args.seed)) if v is not None}
    return RunSpec(problem=args.problem, problem_options=problem_opts, recipe=args.recipe,
                   optimizer=args.optimizer, recipe_options=recipe_opts, criterion=name,
                   criterion_options=crit_opts, per_module=per_module, nm=nm,
                   eval_every=args.eval_every, **fields)


def run(args) -> int:
    import numpy as np

    if args.problem_options:
        _print_problem_options(args.problem)
        return 0
    if args.recipe_options:
        _print_recipe_options(args.recipe, args.optimizer)
        return 0
    if args.criterion_options:
        _print_criterion_options(args.criterion)
        return 0
    # checked before any work; the trace .npz goes beside the JSON, so it must differ from it
    json_path = output_path(args.json, option="--json", sidecars=(".npz",))
    spec = run_spec(args)
    spec.check()
    result = spec.run(progress=not args.quiet)
    recipe, problem = result.recipe, spec.build_problem()

    trace = result.trace
    tail = max(1, min(50, len(trace) // 10))
    print(f"recipe     {recipe!r}")
    print(f"criterion  {result.criterion}")
    print(f"problem    {problem!r}")
    print(f"steps      {spec.steps}  seed {spec.seed}")
    if result.switch_step is not None:
        print(f"switch     {result.switch_step}")
    elif not result.success:
        print(f"switch     none before the run stopped at step {result.stopped_at}")
    elif recipe.schedule.dense_phase:
        print("switch     never (the criterion did not fire: the run stayed dense and its "
              "result is a one-shot N:M prune of w_T)")
    elif result.criterion is not None:
        print("switch     never (the observed criterion did not fire)")
    else:
        print("switch     none (single-phase recipe, no criterion)")
    if len(set(result.module_switch_steps.values())) > 1:  # per-module switching
        steps = ", ".join(f"{k} {v}" for k, v in result.module_switch_steps.items())
        print(f"modules    switched at: {steps}")
    if not result.success:  # diverged: an outcome (rc 0), said once, on one line
        print(f"status     {result.message}")
    elif result.message:
        print(f"status     {result.status}: {result.message}")
    print(f"N:M        {', '.join(f'{k} {n}:{m}' for k, (n, m) in result.nm.items())}")
    print(f"loss       minibatch mean of last {tail}: {np.mean(trace.loss[-tail:]):.6g}  "
          f"(first step {trace.loss[0]:.6g})")
    which = "inference weights Pi_T * w_T" if recipe.sparse else "dense weights w_T"
    for key, value in result.metrics.items():
        initial = result.initial_metrics.get(key, float("nan"))
        print(f"{key:<10} {value:.6g}  (initial {initial:.6g})  [{which}]")
    score = _table1(result)
    print(f"table1     {score}")
    if json_path is not None:
        params = {"args": run_params(args), "problem_name": args.problem,
                  "problem_config": problem.config(), "run": spec.to_dict(),
                  "run_digest": spec.digest}
        jpath, npz = result.save(json_path, params=params)
        print(f"saved      {jpath} and {npz}")
    return 0


def _table1(result) -> str:
    """The paper's Table 1 score of the switch step, from this run's ||v_k - v_{k-1}||_1."""
    import numpy as np

    from stepsim.recipes.analysis import table1_score

    k0 = result.switch_step
    if k0 is None or k0 == 0:
        return "n/a (no switch step)"
    if result.recipe.sparse and np.any(result.trace.phase == 1):
        # the paper scores k0 on a dense profiling run; after this run's switch v is frozen
        # or fed masked gradients, which is not what Table 1 measures
        return ("n/a (the run went sparse after k0; profile v with --recipe dense and the "
                "same --criterion)")
    try:
        score = table1_score(result.trace.dv_l1, k0)
    except ValueError as exc:
        return f"n/a ({exc})"
    note = f" (trace ends: {score.steps_available} steps averaged)" if score.truncated else ""
    return f"{score.score:.6g} at k0 = {score.k0}, horizon {score.horizon}{note}"


def interrupted(args) -> str:
    """The line Ctrl-C prints (``stepsim.cli``): one run does not resume; its --json pair is
    committed only by its JSON, written last, so an interrupted run leaves none."""
    return ("interrupted; no result was committed (a single run does not resume: the same "
            "command runs it again)")
