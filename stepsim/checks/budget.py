"""What every fit-based claim shares: the budget (one protocol setting), its runs, the error.

* :class:`Budget`: one setting of the registered protocol (``budget.rules``, by default
  ``protocol.RULES``): a problem
  ("digits" | "lm"), a timescale ("main" | "fast"), the evaluation seeds of the mode and
  the learning rates chosen by tuning. ``budget.run(recipe, seed, ...)`` is the
  :class:`~stepsim.experiments.run.RunSpec` of one run of a recipe key (:data:`RECIPES`);
  its lr is the tuned one of its config (``protocol.config_key``).
* :func:`combination`: one effect per seed as a linear combination of runs' errors, with
  the shared test set's sampling variance of their mean (``stats.shared_test_variance``
  of the seeds x items contrasts), ready for ``verdict.effect_from``; :func:`effect` uses
  the seeds whose runs all stayed finite and attaches the :func:`divergence` record.
* :func:`switch_cause`: why a STEP run switched when it did: "fired", "clip", "window".

The error of a run is the mean of its per-item errors (``item_errors`` of the problem):
digits, test error in points (100 per wrong image); lm, the test loss's gap to the entropy
floor in nats (per test sequence). Lower is better; a *gap* is a difference of errors on
the same seed.
"""

from __future__ import annotations

import dataclasses

from stepsim.checks import protocol
from stepsim.checks.rules import Rules

LAM = protocol.RULES.srste_lam

#: recipe key -> (registry recipe, recipe options); STEP keys switch by the default
#: criterion (AutoSwitch clipped to [0.1 T, 0.5 T]) unless a run names another
RECIPES = {
    "dense": ("dense", {}),
    "asp": ("asp", {"prune_at": 0.5}),
    "sr-ste": ("sr-ste", {"lam": LAM}),
    "step-a1": ("step", {}),
    "step-sr": ("step", {"srste_lam": LAM}),
    "step-a1-bc": ("step", {"v_star": "bias-corrected"}),
    "step-sr-bc": ("step", {"v_star": "bias-corrected", "srste_lam": LAM}),
    "step-a1-vupd": ("step-v-updated", {}),
    "step-sr-vupd": ("step-v-updated", {"srste_lam": LAM}),
    "decay-dense": ("decaying-mask", {"dense_fraction": 0.1}),
    "decay-nodense": ("decaying-mask", {"dense_fraction": 0.0}),
    "lw-sr-ste": ("layerwise-sr-ste", {"lam": LAM}),
    "lw-step-a1": ("layerwise-step", {}),
    "lw-step-sr": ("layerwise-step", {"srste_lam": LAM}),
}
# the successors comparison (PROTOCOL.md section "S1"): its recipes as its rules state them
RECIPES.update({k: (name, dict(options))
                for k, (name, options) in protocol.EXTRAS["S1"].recipes.items()})
STEP_KEYS = {"A1": "step-a1", "SR": "step-sr"}
#: STEP's recipe keys -> the config whose choice they take at STEP's own (PROTOCOL.md
#: "Readings": each reading of STEP tuned for itself; its variants follow their reading)
OWN_AS = {"step-a1": "step-a1", "step-a1-bc": "step-a1", "step-a1-vupd": "step-a1",
          "step-sr": "step-sr", "step-sr-bc": "step-sr", "step-sr-vupd": "step-sr",
          "lw-step-a1": "lw-step-a1", "lw-step-sr": "lw-step-sr"}
#: the registry recipes that freeze Adam's v at a switch (their ``freeze_scope`` option)
FREEZING = ("step", "layerwise-step", "s-ste-step")


def regulariser_options(recipe: str, chosen: dict) -> dict:
    """The options of recipe key ``recipe`` (:data:`RECIPES`) that a config's chosen
    regularisers (``{"lam": 0.02}``, PROTOCOL.md "Tuning: each baseline's own regulariser")
    set: each option the recipe takes, under its own name; SR-STE's ``lam`` becomes
    ``srste_lam`` for a reading of STEP on SR-STE (STEP in place reuses SR-STE's lambda), and
    is dropped for one without SR-STE's term (STEP-A1 takes SR-STE's lr only)."""
    from stepsim.recipes.registry import RECIPE_OPTIONS

    name, defaults = RECIPES[recipe]
    accepted = RECIPE_OPTIONS[name].options
    out = {}
    for option, value in chosen.items():
        if option == "lam" and "lam" not in accepted:
            option = "srste_lam" if "srste_lam" in defaults else None
        if option is not None and option in accepted:
            out[option] = float(value)
    return out


def candidate_of(chosen) -> tuple[float, dict]:
    """(lr, regularisers) of a config's choice: a learning rate (draft 4's choices, the
    registered regularisers), or a candidate ``{"lr": 0.001, "lam": 0.02}``."""
    if isinstance(chosen, dict):
        return float(chosen["lr"]), {k: v for k, v in chosen.items() if k != "lr"}
    return float(chosen), {}


class MissingRate(KeyError):
    """A config has no chosen learning rate (quick mode without a committed full run)."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """One protocol setting: mode ("quick" | "full"), problem ("digits" | "lm"),
    timescale ("main" | "fast"), seeds (evaluation seeds), lrs (config key -> chosen lr;
    None while recording which configs the claims need: every lookup is then recorded in
    ``needed`` and answers the grid's first value), only (claims restricted to, or None),
    steps (T; the timescale's unless a test shortens it); rules: the draft's rules the
    budget is planned under (every number it reads)."""

    mode: str
    problem: str
    timescale: str
    seeds: tuple
    lrs: dict | None = None
    only: tuple | None = None
    steps: int = 0
    needed: set = dataclasses.field(default_factory=set, compare=False, repr=False)
    # the operating points (PROTOCOL.md "Draft 4"): the lr schedule ("constant" or a key of
    # rules.operating_points.schedules); STEP's lr reading ("sr-ste": SR-STE's
    # choice, "own": its own); STEP's switch as a fixed fraction of T (None: AutoSwitch);
    # the readings of STEP run (None: both); the one N:M run (None: the problem's); a tag
    # naming the operating point in the setting key ("own-lr", "k0=0.3T", ...)
    schedule: str = "constant"
    step_lr: str = "sr-ste"
    fraction: float | None = None
    readings: tuple | None = None
    nm_only: tuple | None = None
    tag: str = ""
    # STEP's freeze scope (PROTOCOL.md "STEP's freeze scope"): "all" (Algorithm 1, the
    # registered one) or "sparse" (v frozen only for the N:M-sparse parameters)
    freeze_scope: str = "all"
    rules: Rules = dataclasses.field(default_factory=lambda: protocol.RULES, compare=False,
                                     repr=False)

    def __post_init__(self):
        if not self.steps:
            quick = self.rules.quick.steps or {}
            steps = (quick[self.problem] if self.mode == "quick" and self.problem in quick
                     else self.rules.timescales[self.timescale].steps)
            object.__setattr__(self, "steps", steps)
        if self.freeze_scope not in ("all", "sparse"):
            raise ValueError(f"freeze_scope must be 'all' or 'sparse', got "
                             f"{self.freeze_scope!r}")
        schedules = self.rules.operating_points.schedules
        if self.schedule != "constant" and self.schedule not in schedules:
            raise ValueError(f"schedule must be 'constant' or one of {list(schedules)}, "
                             f"got {self.schedule!r}")
        if self.step_lr not in ("sr-ste", "own"):
            raise ValueError(f"step_lr must be 'sr-ste' or 'own', got {self.step_lr!r}")

    # ------------------------------------------------------------- the setting
    @property
    def problem_rules(self):
        """The rules of the budget's problem (:class:`~stepsim.checks.rules.Problem`)."""
        return self.rules.problem(self.problem)

    @property
    def beta2(self) -> float:
        return self.rules.timescales[self.timescale].beta2

    @property
    def window(self) -> int:
        from stepsim.recipes.criteria import window_length

        return window_length(self.beta2)

    @property
    def nms(self) -> tuple:
        """The N:M ratios run: the problem's (quick mode: the ones ``quick.nms`` names for
        it), or the one N:M of an operating point restricted to it."""
        every = self.problem_rules.nms
        if self.mode == "quick" and self.problem in (self.rules.quick.nms or {}):
            every = tuple(tuple(nm) for nm in self.rules.quick.nms[self.problem])
        return every if self.nm_only is None else (tuple(self.nm_only),)

    @property
    def step_keys(self) -> dict:
        """The readings of STEP this budget runs: reading -> recipe key."""
        return {r: k for r, k in STEP_KEYS.items() if self.readings is None
                or r in self.readings}

    @property
    def units(self) -> str:
        return self.problem_rules.units

    @property
    def margin(self) -> float:
        return float(self.problem_rules.margin)

    @property
    def setting(self) -> str:
        """The key of the setting whose tuned lrs this budget uses ("digits/main",
        "digits/main-cosine")."""
        suffix = "" if self.schedule == "constant" else f"-{self.schedule.split('-')[0]}"
        return f"{self.problem}/{self.timescale}{suffix}"

    @property
    def key(self) -> str:
        """The report's setting key: the setting, then "@tag" for an operating point."""
        return self.setting + (f"@{self.tag}" if self.tag else "")

    @property
    def warmup_steps(self) -> int:
        if self.schedule == "constant":
            return 0
        schedule = self.rules.operating_points.schedules[self.schedule]
        return round(schedule.warmup_fraction * self.steps)

    @property
    def label(self) -> str:
        lr = ("STEP at its own tuned lr" if self.step_lr == "own"
              else "STEP at SR-STE's tuned lr")
        switch = ("AutoSwitch (clipped)" if self.fraction is None
                  else f"STEP switched at {self.fraction:g} T")
        sched = ("constant lr" if self.schedule == "constant" else
                 f"{self.rules.operating_points.schedules[self.schedule].schedule}, "
                 f"warm-up {self.warmup_steps}")
        scope = "" if self.freeze_scope == "all" else f"; v frozen for {self.freeze_scope} " \
            "parameters only"
        point = f"; {sched}; {lr}; {switch}{scope}" + (f"; {self.tag}" if self.tag else "")
        return (f"{self.problem} ({self.timescale} timescale: beta2 = {self.beta2:g}, "
                f"T_w = {self.window}, T = {self.steps}; {self.mode}{point})")

    # ------------------------------------------------------------- readings
    @property
    def reading(self) -> str:
        """The reading this budget is (PROTOCOL.md D5.3): primary "in place" (STEP at
        SR-STE's choice) or "own" (STEP at its own); secondary "freeze sparse", "cosine in
        place", "cosine own", "k0=0.3T", "tie lr=0.01" (a tied SR-STE lr), "agreement" (the
        second timescale). A claim that involves no STEP reads "in place"."""
        if self.freeze_scope == "sparse":
            return "freeze sparse"
        if self.tag.startswith("sr-ste ") and "lr=" in self.tag:
            return "tie lr=" + self.tag.rsplit("lr=", 1)[1]
        if self.fraction is not None:
            return f"k0={self.fraction:g}T"
        lr = "own" if self.step_lr == "own" else "in place"
        if self.schedule != "constant":
            return f"cosine {lr}"
        if (self.mode == "full" and self.only is not None and not self.tag
                and self.timescale != self.problem_rules.timescales[0]):
            return "agreement"  # the claim at a second timescale (quick mode has one)
        return lr

    @property
    def primary(self) -> bool:
        """Whether the reading is primary (it decides the claim) or secondary (a line and
        a column of the verdict matrix only)."""
        return self.reading in ("in place", "own")

    def applies(self, claim: str) -> bool:
        if claim in protocol.EXTRAS:  # an extra runs on the plain settings it names
            return (self.only is None and not self.tag and self.schedule == "constant"
                    and extra_timescale(claim, self) == self.timescale)
        quick = self.rules.quick.claims or {}
        if self.mode == "quick" and self.problem in quick and claim not in quick[self.problem]:
            return False
        return claim in self.rules.claims_on(self.problem) and (
            self.only is None or claim in self.only)

    # ------------------------------------------------------------- runs
    def candidate(self, optimizer: str, recipe: str, nm=None, m=None) -> tuple[float, dict]:
        """(lr, regularisers) chosen for the config of recipe key ``recipe``
        (``protocol.config_key``; STEP at its own when the budget's ``step_lr`` is "own"):
        the regularisers as the recipe's options (:func:`regulariser_options`; {} for a
        draft-4 choice, a learning rate only)."""
        own = self.step_lr == "own" and recipe in self.own_recipes
        key = protocol.config_key(optimizer, OWN_AS[recipe] if own else recipe, nm, m,
                                  own=own)
        if self.lrs is None:
            self.needed.add(key)
            return self.rules.grid(self.problem, optimizer)[0], {}
        if key not in self.lrs:
            raise MissingRate(f"no tuned learning rate for {key} on {self.key}")
        lr, chosen = candidate_of(self.lrs[key])
        return lr, regulariser_options(recipe, chosen)

    @property
    def own_recipes(self) -> tuple:
        """The recipe keys that take their own choice at STEP's own lr reading: STEP's two
        readings (draft 4), every STEP variant (:data:`OWN_AS`, draft 5: every claim about
        STEP is read at STEP's own)."""
        return tuple(OWN_AS) if self.rules.readings is not None else tuple(STEP_KEYS.values())

    def lr(self, optimizer: str, recipe: str, nm=None, m=None) -> float:
        return self.candidate(optimizer, recipe, nm, m)[0]

    def run(self, recipe: str, seed: int, *, nm=None, optimizer: str = "adam",
            loss_scale: float = 1.0, switch=None, m: int | None = None, lr=None,
            regularisers: dict | None = None, evaluate: bool = True):
        """The RunSpec of recipe key ``recipe`` (:data:`RECIPES`) at evaluation seed
        ``seed``: the problem's options, N:M ``nm`` (None: dense), optimizer with its
        tuned lr and regularisers (``lr``, ``regularisers``: these instead, for tuning;
        {"lam": 0.02} as :func:`regulariser_options` reads it), beta2 of the timescale, loss
        multiplied by ``loss_scale``; ``switch``: (criterion, options) for a STEP recipe
        (None: the default clipped AutoSwitch); ``m``: a layer-wise recipe's M (at
        ``layerwise.target`` sparsity); evaluate: learning curves at ``eval_points``."""
        from stepsim.experiments.run import AUTO, RunSpec

        name, options = RECIPES[recipe]
        options = dict(options)
        if m is not None:
            options.update(layerwise_m=int(m),
                           layerwise_target=self.rules.layerwise.target)
        if optimizer == "sgdm":
            options["momentum"] = self.rules.momentum
        else:
            options["beta2"] = self.beta2
        if lr is None:
            lr, chosen = self.candidate(optimizer, recipe, nm, m)
        else:
            chosen = regulariser_options(recipe, regularisers or {})
        options.update(chosen)
        options["lr"] = float(lr)
        if self.rules.freeze_scope is not None and name in FREEZING:
            options["freeze_scope"] = self.freeze_scope
        if name == "masked-decay" and (self.rules.s1 or {}).get("masked_decay_transposable"):
            options["transposable"] = True  # as its reference code runs it
        blowup = self.rules.divergence.blowup
        if self.schedule != "constant":  # constant: the options as draft 3 (same digests)
            options.update(schedule=self.rules.operating_points.schedules[self.schedule].schedule,
                           warmup_steps=self.warmup_steps)
        criterion, criterion_options = AUTO, {}
        if switch is None and self.fraction is not None and recipe in STEP_KEYS.values():
            switch = ("fixed-fraction", {"fraction": float(self.fraction)})
        if switch is not None:
            criterion, criterion_options = switch
        every = self.steps // self.rules.eval_points if evaluate else None
        problem = self.problem_rules
        return RunSpec(problem=problem.registry, problem_options=problem.to_dict()["options"],
                       recipe=name, optimizer=optimizer, recipe_options=options,
                       criterion=criterion, criterion_options=criterion_options,
                       nm=None if nm is None else tuple(nm), steps=self.steps,
                       seed=int(seed), loss_scale=float(loss_scale), eval_every=every,
                       blowup=None if blowup is None else (blowup.window, blowup.multiple))

    def runs(self, recipe: str, **kw) -> list:
        """``run`` at every evaluation seed (paired by position)."""
        return [self.run(recipe, s, **kw) for s in self.seeds]


def extra_timescale(claim: str, budget) -> str | None:
    """The timescale extra comparison ``claim`` runs at on ``budget``'s problem and mode
    (its rules' "settings", or "quick" in quick mode), None where it does not run."""
    rules = protocol.EXTRAS[claim]
    if budget.mode == "quick":
        return rules.quick.timescale if budget.problem == rules.quick.problem else None
    setting = rules.settings.get(budget.problem)
    return None if setting is None else setting.timescale


@dataclasses.dataclass(frozen=True)
class NoProblem:
    """The budget of the claims that train nothing (C11, C12): only the mode."""

    mode: str
    seeds: tuple = ()
    key: str = "none"

    @property
    def label(self) -> str:
        return f"no training ({self.mode})"


def error(view: dict) -> float:
    """A run's error (module docstring): the mean of its per-item errors."""
    return float(view["error"])


def errors(results: dict, runs) -> list[float]:
    return [error(results[r.digest]) for r in runs]


def combination(results: dict, terms, seeds=None) -> tuple[list[float], float, float]:
    """Per seed: sum_j c_j e_j over ``terms`` = [(c_j, runs_j)] (runs_j: one run per seed,
    paired by position); the test-set sampling variance of their mean; its degrees of
    freedom. seeds: the positions to use (None: all; ``effect`` passes the seeds whose runs
    all stayed finite). Every seed is evaluated on the same test set, so that error is
    common to the seeds and does not average out: ``stats.shared_test_variance`` of the
    seeds x items table of per-item contrasts z[s, i] = sum_j c_j x_j[s, i] (PROTOCOL.md
    "Draft 4: statistics": the item part of a seeds x items decomposition, so the
    within-seed item noise that the seeds' spread already holds is not counted again)."""
    import numpy as np

    from stepsim import stats

    coefs = [float(c) for c, _ in terms]
    n = len(terms[0][1])
    seeds = range(n) if seeds is None else list(seeds)
    values, rows = [], []
    for i in seeds:
        views = [results[runs[i].digest] for _, runs in terms]
        values.append(sum(c * error(v) for c, v in zip(coefs, views)))
        z = coefs[0] * np.asarray(views[0]["items"], dtype=np.float64)
        for c, v in zip(coefs[1:], views[1:]):  # elementwise, fixed order: same bits anywhere
            z = z + c * np.asarray(v["items"], dtype=np.float64)
        rows.append(z)
    shared, df = stats.shared_test_variance(np.stack(rows))
    return values, shared, df


def divergence(results: dict, terms) -> dict:
    """Which seeds of a combination lost a run (PROTOCOL.md "Draft 4: statistics":
    divergence is an outcome).

    A run's *side* is the sign of its coefficient in E: "plus" runs raise E when their error
    rises (the recipe the claim says is worse), "minus" runs lower it (the one it says is
    better). Per seed, a side diverged if any of its runs did. Returns a JSON-ready dict:
    seeds (n), finite (positions where every run stayed finite), plus / minus (seeds with a
    diverged run on that side), only_plus / only_minus / both (discordant and concordant
    seeds), and runs (per side, diverged runs / runs)."""
    n = len(terms[0][1])
    side = {"plus": [False] * n, "minus": [False] * n}
    runs = {"plus": [0, 0], "minus": [0, 0]}
    for c, group in terms:
        if c == 0:
            continue
        key = "plus" if c > 0 else "minus"
        for i, r in enumerate(group):
            lost = bool(results[r.digest].get("diverged"))
            side[key][i] = side[key][i] or lost
            runs[key][0] += lost
            runs[key][1] += 1
    plus, minus = side["plus"], side["minus"]
    return {"seeds": n, "finite": [i for i in range(n) if not (plus[i] or minus[i])],
            "plus": sum(plus), "minus": sum(minus),
            "only_plus": sum(p and not m for p, m in zip(plus, minus)),
            "only_minus": sum(m and not p for p, m in zip(plus, minus)),
            "both": sum(p and m for p, m in zip(plus, minus)), "runs": runs}


def effect(results: dict, terms, *, name: str, units: str, margin: float):
    """``verdict.effect_from`` of :func:`combination` over the seeds whose runs all stayed
    finite (the CI includes the shared test set's sampling error), with the
    :func:`divergence` record attached (``Effect.divergence``). No finite seed: an Effect
    with n = 0 and NaN estimate and interval (never a number made of diverged runs)."""
    import dataclasses
    import math

    from stepsim.checks.verdict import Effect, effect_from

    record = divergence(results, terms)
    keep = record["finite"]
    if not keep:
        return Effect(name=name, estimate=math.nan, ci_low=math.nan, ci_high=math.nan,
                      ci_level=0.95, n=0, units=units, margin=float(margin),
                      divergence=record)
    values, shared, df = combination(results, terms, keep)
    e = effect_from(values, name=name, units=units, margin=margin, shared_test_var=shared,
                    test_df=df)
    return dataclasses.replace(e, divergence=record)


def switch_cause(k0, steps: int, window: int, *, clip: bool, bounds=None) -> str:
    """Why a run switched at step ``k0`` (PROTOCOL §4): "never" (no switch), "clip"
    (forced after 0.5 T), "window" (at the first step the window and the lower clip allow:
    the test was already passing, the criterion did not choose the step), else "fired".

    ``bounds``: the clip's (t_min, t_max) (default: the protocol's, ``RULES.clip``); the
    steps are the criterion's own (``stepsim._ground.switch_steps.legal_switch_steps``)."""
    from stepsim._ground.switch_steps import legal_switch_steps

    if k0 is None:
        return "never"
    lo, hi = protocol.RULES.clip if bounds is None else bounds
    first, forced = legal_switch_steps(steps, window, clip=clip, t_min=lo, t_max=hi)
    if k0 == forced:
        return "clip"
    return "window" if k0 == first else "fired"


def causes(results: dict, runs, budget: Budget, *, clip: bool, fixed: bool = False) -> list[dict]:
    """Per run: {"k0", "fraction", "cause", "loss_ratio", "plateau"}: its switch step, why
    (``switch_cause``; "fixed" for a fixed switch), the batch loss at k0 over its start and
    whether the switch fell on the initial plateau (PROTOCOL.md "Switch premises"; None
    when unknown)."""
    from stepsim.checks.operating import on_plateau

    out = []
    for r in runs:
        view = results[r.digest]
        k0 = view["switch_step"]
        ratio = (view.get("switch") or {}).get("loss_ratio")
        cause = "fixed" if fixed and k0 is not None else switch_cause(
            k0, budget.steps, budget.window, clip=clip)
        out.append({"k0": k0, "fraction": None if k0 is None else k0 / budget.steps,
                    "cause": cause, "loss_ratio": ratio, "plateau": on_plateau(ratio)})
    return out


def reading_budgets(budget: Budget, claims, *, extended: bool = False) -> list:
    """Draft 5's readings of a base budget besides "in place" (PROTOCOL.md "Readings"):
    the primary "own" (STEP at its own choices) for the claims about STEP among ``claims``
    (``readings.step_claims``); in full mode the secondary ones, each for its claims:
    freeze scope "sparse" and STEP switched at each fixed fraction of T (in place), and
    on the problems of the cosine reading (``extended``: ``extended.schedule_problems``)
    the setting under cosine with warm-up in place and at STEP's own; on the problems of
    ``extended.secondary_problems`` the secondary readings only with ``extended``. The tie
    set's readings need the tuning (``tuning.tie_budgets``). Quick mode runs the primary
    readings only, "own" only for ``quick.own_claims`` (None: every claim about STEP); a
    budget restricted to some claims or already a reading has none."""
    rules = budget.rules.readings
    if budget.only is not None or budget.tag or budget.schedule != "constant":
        return []

    def among(names):
        return tuple(c for c in claims if c in names and budget.applies(c))

    about_step = among(rules.step_claims)
    if budget.mode == "quick" and budget.rules.quick.own_claims is not None:
        about_step = tuple(c for c in about_step if c in budget.rules.quick.own_claims)
    out = [dataclasses.replace(budget, step_lr="own", only=about_step, tag="own-lr")
           ] if about_step else []
    if budget.mode == "quick" or (not extended and budget.problem in
                                  (budget.rules.extended.secondary_problems or ())):
        return out
    secondary = rules.secondary
    frozen = among(secondary["freeze-sparse"]["claims"])
    if frozen:
        out.append(dataclasses.replace(budget, freeze_scope="sparse", only=frozen,
                                       tag="freeze-sparse"))
    fixed = among(secondary["fractions"]["claims"])
    for f in secondary["fractions"]["fractions"] if fixed else ():
        out.append(dataclasses.replace(budget, fraction=float(f), only=fixed,
                                       tag=f"k0={f:g}T"))
    cosine = secondary["cosine-warmup"]
    problems = budget.rules.extended.schedule_problems if extended else cosine["problems"]
    scheduled = among(cosine["claims"])
    if scheduled and budget.problem in problems:
        # a setting of its own, tuned again: its own record of the configs it needs
        base = dataclasses.replace(budget, schedule="cosine-warmup", only=scheduled,
                                   needed=set())
        out += [base, dataclasses.replace(base, step_lr="own", tag="own-lr")]
    return out


def operating_points(budget: Budget, claims, *, extended: bool = False) -> list:
    """The fixed operating points of a base budget (PROTOCOL.md "STEP at its own tuned
    learning rate", "Schedules", "Switch premises"; draft 5: :func:`reading_budgets`), for
    the in-place claims (``rules.operating_points.claims``) among ``claims``: STEP at its own
    lr ("@own-lr"); STEP switched at each fixed fraction of T ("@k0=0.3T"; readings of
    ``switch_fractions.readings``); and, on the problems of each schedule, the same setting
    under that schedule at SR-STE's lr and at STEP's own. ``extended`` adds the readings
    and schedule problems of ``rules.extended``. The tie set's points need the tuning
    (``tuning.tie_budgets``). A budget restricted to some claims (the agreement run) or
    already an operating point has none."""
    if budget.rules.readings is not None:  # draft 5
        return reading_budgets(budget, claims, extended=extended)
    rules = budget.rules.operating_points
    wanted = tuple(c for c in rules.claims if c in claims)
    if not wanted or budget.only is not None or budget.tag or budget.schedule != "constant":
        return []
    readings = dict(rules.switch_fractions.readings)
    if extended:
        readings.update(budget.rules.extended.readings)
    out = [dataclasses.replace(budget, step_lr="own", only=wanted, tag="own-lr")]
    for f in rules.switch_fractions.fractions:
        out.append(dataclasses.replace(budget, fraction=float(f), only=wanted,
                                       readings=tuple(readings[budget.problem]),
                                       tag=f"k0={f:g}T"))
    for name, schedule in rules.schedules.items():
        problems = budget.rules.extended.schedule_problems if extended else schedule.problems
        if budget.problem in problems:
            cosine = dataclasses.replace(budget, schedule=name, only=wanted)
            out += [cosine, dataclasses.replace(cosine, step_lr="own", tag="own-lr")]
    return out
