"""The first stage of a check: what it will run, decided before anything runs.

:func:`plan` turns the claims, the mode and the rules into a :class:`Plan`: the settings
and their fixed operating points (``budget.operating_points``) as budgets, every run and
task of the tuning stage (full mode: each config the claims need, at every grid value on
the tuning seeds), and the evaluation stage — complete when the learning rates are known
up front (quick mode: the committed full run's; a test's own), described when they come
from the tuning: :func:`evaluation` fills it in from the tuning's choices and table,
adding the tie set's operating points (``tuning.tie_budgets``), whose number depends on
which learning rates tie. Nothing here runs, reads the store or writes a file; every
RunSpec is checked (bad names, options or N:M are an error before any work).
"""

from __future__ import annotations

import dataclasses

from stepsim.checks import tuning
from stepsim.checks.budget import Budget, MissingRate, NoProblem, operating_points
from stepsim.checks.registry import get_claim, parse_claims
from stepsim.checks.rules import MODES, Rules


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The evaluation stage: chosen (setting -> config -> lr), table (the tuning table,
    empty when the learning rates were not tuned), budgets (key -> Budget, learning rates
    set; the tie set's and "none" included), jobs ((claim, setting key) -> [RunSpec |
    Task], report order), skipped (operating points or extras without a learning rate:
    one note each); claim_budgets ((claim, setting key) -> Budget: a claim extended to
    more seeds by the extension stage, ``extension.extend``) and extensions (one note
    each)."""

    chosen: dict
    table: dict
    budgets: dict
    jobs: dict
    skipped: tuple = ()
    claim_budgets: dict = dataclasses.field(default_factory=dict)
    extensions: tuple = ()

    @property
    def tasks(self) -> list:
        return [t for ts in self.jobs.values() for t in ts]

    def budget(self, claim: str, key: str):
        """The budget claim ``claim`` is decided on at setting ``key``: the setting's, or
        the claim's own when the extension stage gave it more seeds."""
        return self.claim_budgets.get((claim, key), self.budgets[key])


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a check will do, nothing run.

    mode, claims (report order), rules, problems (None: every problem of the mode),
    extended, steps / lrs (a test's shorter runs or own learning rates; None: the
    protocol's). budgets: the settings and their fixed operating points that some claim
    applies to (learning rates not yet set: ``lrs`` None); plain: the budget of the claims
    that train nothing; covered: every (claim, setting key) the check decides (the tie
    set's points belong to their setting's). recorded: setting key -> the jobs of every
    claim on it before the learning rates are known (their number is final; their lr is a
    placeholder). tuning: (setting, config) -> {"grid", "tasks", "seeds", ...}
    (``tuning.jobs``, halved configs included; empty unless full mode tunes); stability: the
    same on ``--extended``'s extra seeds.
    evaluation: the evaluation stage when it does not wait for the tuning, else None
    (:func:`evaluation` makes it from the tuning's result). choices: how the choices quick
    mode reuses are labelled when they are not the committed full run's under these rules
    ("provisional: ...", ``tuning.quick_choices``), else None. provisional: problem -> the
    configs whose choices are provisional when only some are
    (``tuning.quick_choices_marked``), else None."""

    mode: str
    claims: tuple
    rules: Rules
    problems: tuple | None
    extended: bool
    steps: int | None
    lrs: dict | None
    budgets: tuple
    plain: NoProblem
    covered: frozenset
    recorded: dict
    tuning: dict
    stability: dict
    evaluation: Evaluation | None
    choices: str | None = None
    provisional: dict | None = None

    @property
    def altered(self) -> bool:
        """Made with a test's run lengths or learning rates (labelled so in the report)."""
        return self.steps is not None or self.lrs is not None

    @property
    def tuning_tasks(self) -> list:
        """The tuning's first round: every config's runs that wait for nothing (under
        successive halving the first rung's; later rungs follow from their results,
        ``tuning.pending``)."""
        return tuning.pending(self.tuning, {})

    @property
    def stability_tasks(self) -> list:
        return [t for group in self.stability.values() for t in group["tasks"]]


def plan(claims=("all",), mode: str = "quick", rules: Rules | None = None, *,
         problems=None, extended: bool = False, steps: int | None = None,
         lrs: dict | None = None) -> Plan:
    """The :class:`Plan` of checking ``claims`` in ``mode`` by ``rules`` (default the
    protocol's). ValueError before any work for bad arguments and for a selection that
    gives no verdict at all."""
    from stepsim.checks import protocol

    rules = protocol.RULES if rules is None else rules
    names = tuple(parse_claims(claims))
    if mode not in MODES:
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    if steps is not None and (not isinstance(steps, int) or steps < 200):
        raise ValueError(f"steps must be an integer >= 200, got {steps!r}")
    if extended not in (True, False) or (extended and mode != "full"):
        raise ValueError(f"extended must be True or False and needs mode 'full', got "
                         f"extended={extended!r} with mode={mode!r}")
    names = _outside_extended_set(rules, names, claims, mode, extended)
    budgets = _budgets(rules, mode, problems, names, steps or 0, extended)
    plain = NoProblem(mode)
    free = [c for c in names if c in rules.claims_on("none")]
    covered = frozenset({(c, b.key) for b in budgets for c in names if b.applies(c)}
                        | {(c, plain.key) for c in free})
    if not covered:
        where = ", ".join(f"{p} ({ts})" for p, ts, _ in rules.settings(mode, None, extended)
                          ) or "none"
        raise ValueError(f"no verdict to make: claim(s) {', '.join(names)} on problem(s) "
                         f"{', '.join(problems or ['every'])} have no setting in {mode} mode "
                         f"(its settings: {where}); nothing was run or written")
    # the recording pass: which configs need a learning rate (``Budget.needed``), and a
    # check of every run before any work
    recorded = {b.key: [j for c in names if b.applies(c) for j in get_claim(c).jobs(b)]
                for b in budgets}
    recorded[plain.key] = [j for c in free for j in get_claim(c).jobs(plain)]
    for job in [j for jobs in recorded.values() for j in jobs]:
        if hasattr(job, "check"):  # a RunSpec; a Task has nothing to check
            job.check()
    tune, more, known, label, marked = {}, {}, None, None, None
    if lrs is not None:
        known = {k: dict(v) for k, v in lrs.items()}
    elif mode == "quick":
        needed = {}  # problem -> the config keys its runs read (the recording pass's)
        for b in budgets:
            needed.setdefault(b.problem, set()).update(b.needed)
        known, label, marked = (tuning.quick_choices_marked(
            rules, problems={b.problem for b in budgets}, needed=needed)
            if budgets else ({}, None, None))
    else:
        needs = _tuning_needs(rules, budgets, problems, names, steps or 0)
        tune = tuning.jobs(needs)
        if extended:  # more tuning seeds, for the stability map only
            adam = {s: (b, {k for k in keys if k.startswith("adam|")})
                    for s, (b, keys) in needs.items()}
            more = tuning.jobs(adam, seeds=rules.extended.stability_seeds, halve=False)
    made = Plan(mode, names, rules, None if problems is None else tuple(problems),
                bool(extended), steps, lrs, tuple(budgets), plain, covered, recorded, tune,
                more, None, label, marked)
    if known is None and tune:
        return made  # the evaluation waits for the tuning
    if known is None:  # nothing to tune (claims that train nothing)
        known = {}
    return dataclasses.replace(made, evaluation=evaluation(made, known, {}))


def _outside_extended_set(rules, names: tuple, claims, mode: str, extended: bool) -> tuple:
    """The claims a check of ``mode`` runs among ``names``: a full check without
    ``extended`` leaves the extended set's claims (``extended.claims``) out of "all", and
    naming one is a ValueError (it would run nothing)."""
    aside = set(rules.extended.claims or ()) if mode == "full" and not extended else set()
    named = aside & {str(c).upper() for c in (claims or ["all"])}
    if named:
        raise ValueError(f"claim {min(named)} belongs to the extended set of the protocol "
                         "(PROTOCOL.md \"Budget, quick mode, the extended set\"): check it "
                         "with --extended")
    return tuple(c for c in names if c not in aside)


def extended_set_left_out(made: Plan) -> list[str]:
    """What the registered rules run only with ``--extended`` and a full check of
    ``made`` without it left out (PROTOCOL.md "Budget, quick mode, the extended set"), one
    line each, for the report; [] in quick mode, with ``--extended`` and under rules whose
    extended set moves no claim, problem or reading out of the full run (draft 4)."""
    ext = made.rules.extended
    if made.mode != "full" or made.extended or made.rules.readings is None:
        return []
    lines = [f"problem {p}: every claim" for p in ext.problems or ()]
    lines += [f"claim {c}" for c in ext.claims or ()]
    secondary = ", ".join(k for k in made.rules.readings.secondary if k != "cosine-warmup")
    lines += [f"the secondary readings on {p} ({secondary})"
              for p in ext.secondary_problems or ()]
    lines += [f"cosine with warm-up on {p}" for p in ext.schedule_problems
              if p not in made.rules.readings.secondary["cosine-warmup"]["problems"]]
    if ext.agreement is not None:
        lines.append(f"the agreement check of {ext.agreement.claim} on "
                     f"{ext.agreement.problem} at the {ext.agreement.timescales[-1]} timescale")
    lines.append(f"the stability map's tuning seeds {list(ext.stability_seeds)}")
    return lines


def _budgets(rules, mode, problems, names, steps, extended) -> list:
    """The settings of ``mode`` and their fixed operating points that some claim applies to."""
    seeds = tuple(getattr(rules.seeds, mode))
    settings = rules.settings(mode, problems, extended)
    agreement = rules.extended.agreement
    if extended and agreement is not None and agreement.problem in (problems or rules.problems):
        # draft 5: the agreement check at its second timescale is the extended set's
        settings += [(agreement.problem, ts, (agreement.claim,))
                     for ts in agreement.timescales[1:]]
    budgets = [Budget(mode, p, ts, seeds, only=only, steps=steps, rules=rules)
               for p, ts, only in settings]
    budgets += [o for b in budgets for o in operating_points(b, names, extended=extended)]
    return [b for b in budgets if any(b.applies(c) for c in names)]


def _tuning_needs(rules, budgets, problems, names, steps) -> dict:
    """setting -> (a budget of it, the configs to tune): the full check's settings and
    quick mode's (a full run's choices are what quick mode reuses; draft 5's quick mode
    takes those of each problem's main setting), one tuning per setting (its operating
    points share it)."""
    if problems is not None:  # quick mode's problems among the chosen ones (maybe none)
        problems = [p for p in problems if p in rules.quick.problems]
    quick = [Budget("quick", p, ts, tuple(rules.seeds.quick), steps=steps, rules=rules)
             for p, ts, _ in rules.settings("quick", problems)]
    if rules.readings is not None:  # draft 5: quick mode takes the main settings' choices
        quick = []
    quick += [o for q in quick for o in operating_points(q, names)]
    for q in quick:  # recording: fills q.needed
        for c in names:
            if q.applies(c):
                get_claim(c).jobs(q)
    needs = {}
    for b in [*budgets, *quick]:
        base, keys = needs.get(b.setting, (b, set()))
        needs[b.setting] = (base, keys | b.needed)
    return needs


def evaluation(made: Plan, chosen: dict, table: dict) -> Evaluation:
    """The evaluation stage of ``made`` once its learning rates are known: ``chosen``
    (setting -> config -> lr) and the tuning ``table`` (empty when not tuned: no tie set).
    A registered setting without a learning rate is an error; an operating point or, in
    quick mode, an extra without one is skipped with a note."""
    final = [dataclasses.replace(b, lrs=chosen.get(b.setting, {})) for b in made.budgets]
    final += [t for b in final for t in tuning.tie_budgets(b, table, made.claims,
                                                     extended=made.extended)]
    jobs, skipped, budgets = {}, [], {}
    for b in final:
        point = bool(b.tag) or b.schedule != "constant"
        try:
            jobs_of = {}
            for c in made.claims:
                if not b.applies(c):
                    continue
                try:
                    jobs_of[c] = get_claim(c).jobs(b)
                except MissingRate as exc:
                    if point and b.rules.readings is not None:  # draft 5: per claim
                        skipped.append(f"{c} on {b.key}: {exc.args[0]}")
                        continue
                    if not get_claim(c).extra or made.mode != "quick":
                        raise
                    skipped.append(f"{c} on {b.key}: {exc.args[0]} (quick mode reuses "
                                   f"the committed full run's learning rates)")
        except MissingRate as exc:
            if not point:
                raise  # a registered setting needs every learning rate
            skipped.append(f"{b.key}: {exc.args[0]}")  # an operating point, quick mode
            continue
        if not jobs_of:
            continue
        budgets[b.key] = b
        jobs.update({(c, b.key): j for c, j in jobs_of.items()})
    for c in made.claims:  # the claims that train nothing, decided once
        if c in made.rules.claims_on("none"):
            budgets[made.plain.key] = made.plain
            jobs[(c, made.plain.key)] = get_claim(c).jobs(made.plain)
    if not jobs:
        raise ValueError("no verdict to make: " + "; ".join(skipped))
    return Evaluation(chosen, table, budgets, jobs, tuple(skipped))


__all__ = ["Evaluation", "Plan", "evaluation", "plan"]
