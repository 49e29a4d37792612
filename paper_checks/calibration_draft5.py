"""Calibration of draft 5's verdict rules at the claim, in both directions (PROTOCOL.md D5.8,
its last bullet "Calibration").

    python paper_checks/calibration_draft5.py [--sims 2000] [--jobs 2] [--case NAME]...
        [--rule registered] [--out paper_checks/calibration_draft5_amended.json]
    python paper_checks/calibration_draft5.py --quick --out /tmp/cal.json
    python paper_checks/calibration_draft5.py --combine out.json a.json b.json

Each case simulates the runs of one claim on digits (8 seeds, margin delta = 0.5 points)
at both primary lr readings ("in place": STEP at SR-STE's lr; "own": STEP at its own lr;
K = 4 for a claim about STEP) and decides the claim as the check does:

* **Views**: per-item 0/100 errors on one test set shared by every seed and recipe
  (``stepsim.checks.simulated_views``, the model of the draft-4 calibration,
  tests/checks/test_verdict_calibration.py), one view per RunSpec of the claim's own
  ``jobs`` (shared RunSpecs share their view, as in the store), each run's truth set by the
  case from what the RunSpec is (recipe, reading of STEP, lr reading, criterion, switch
  fraction, N:M).
* **Decision**: ``claim_decisions.decide_on_problem`` (the claim's ``gather`` with the
  production estimate ``budget.effect``, ``part_decisions.decide_both_ways``, the reading
  and claim rules); the claim's verdict is its own line's.
* **Extension** (D5.6, and D5.8's amendment for bimodal seeds): the production trigger
  ``extension.needs_more_seeds`` reads the claim's runs on seeds 0-7 (divergence alone
  differs, or a run far from its run group's median); when it fires, the claim is
  decided by ``decide_on_problem`` on its budgets widened to seeds 0-15 (the same
  RunSpecs on seeds 0-7, the extension seeds' views drawn with the rest of the
  simulation), as the extension stage (``extension.extend``) widens them.
* **Rules** (``--rule``): "registered" (draft 5 with its amendments, the default);
  "draft5-as-measured" (without D5.8's amendment on bimodal seeds: the rules the first
  table measured); "collapse-as-divergence" (candidate (b) of the amendment: without it,
  and every far run counted as diverged, so collapses get the divergence tests and the
  interval reads the pairs without a collapse).

A verdict is **wrong** (D5.8's hypotheses): REPRODUCED where no primary reading's parts are
all truly above 0 (the null, the bimodal case at 0, the blow-up at 0, a divergence-only
case at 0, and C7 where a flatness deviation is exactly delta: the band's claim is false);
NOT REPRODUCED where every primary part's truth is at least delta (and divergence does
not favour the claim's side: the cases at delta). Rates are counts over simulations with
95% Clopper-Pearson intervals. Every case draws from its own stream,
``np.random.default_rng([SEED, crc32(case)])``: the numbers are the same on every machine
and do not depend on which other cases run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import zlib
from pathlib import Path

import numpy as np

SEED = 20261128
SIMS = 2000
QUICK_SIMS = 1
DELTA = 0.5  # the digits margin (RULES 5), checked against the rules below
TARGET = 0.05
OWN_LR, IN_PLACE_LR = 3e-4, 1e-3
CLIP_K0 = 1200  # an AutoSwitch switch step that fired (clipped or not) at T = 5000
HERE = Path(__file__).resolve().parent


# ----------------------------------------------------------------------- what a run is
@dataclasses.dataclass(frozen=True)
class Run:
    """What a case needs to know of a RunSpec: recipe ("dense", "asp", "sr-ste", "step"),
    reading of STEP ("A1" / "SR", None), lr reading ("in place" / "own"), criterion
    ("AutoSwitch", "Eq. 10", "Eq. 10 bc", "Eq. 11", "fixed"), fixed switch fraction,
    loss scale, N:M."""

    recipe: str
    step: str | None
    lr: str
    criterion: str | None
    fraction: float | None
    scale: float
    nm: tuple | None


def describe(spec) -> Run:
    options = dict(spec.recipe_options)
    step = None
    criterion = fraction = None
    if spec.recipe == "step":
        step = "SR" if "srste_lam" in options else "A1"
        copts = dict(spec.criterion_options)
        criterion = {"agarwal": "Eq. 10", "tang": "Eq. 11",
                     "fixed-fraction": "fixed"}.get(spec.criterion, "AutoSwitch")
        if criterion == "Eq. 10" and options.get("v_star") == "bias-corrected":
            criterion = "Eq. 10 bc"
        fraction = copts.get("fraction")
    lr = "own" if spec.recipe == "step" and options["lr"] == OWN_LR else "in place"
    return Run(spec.recipe, step, lr, criterion, fraction, float(spec.loss_scale),
               None if spec.nm is None else tuple(spec.nm))


def switch_step(run: Run, seed: int, steps: int):
    """The switch step a view reports (only C4's and C7's landing read it)."""
    if run.recipe != "step":
        return None
    if run.criterion == "fixed":
        return round(run.fraction * steps)
    return {"Eq. 10": 3, "Eq. 10 bc": 3, "Eq. 11": 1100}.get(run.criterion, CLIP_K0 + 20 * seed)


# ----------------------------------------------------------------------- the cases
def _c5_truths(step_gap: float, baseline_gap: float = 3.0, dense: float = -4.0, **kw):
    """C5-shaped: dense at ``dense`` points of shift, both baselines ``baseline_gap``
    above it, every STEP ``step_gap`` above it: E = gap(B) - 2 gap(STEP)."""
    from stepsim.checks.simulated_views import Recipe

    def truth(run: Run) -> Recipe:
        if run.recipe == "dense":
            return Recipe(dense)
        if run.recipe == "step":
            return Recipe(dense + step_gap, diverge=kw.get("step_diverge", 0.0))
        return Recipe(dense + baseline_gap, diverge=kw.get("baseline_diverge", 0.0))
    return truth


def _c4_truths(effect: float, diverge: float = 0.0):
    """C4-shaped: every Eq. 10 / Eq. 11 run ``effect`` points worse than AutoSwitch's
    (E = e(Eq.) - e(AutoSwitch)); every STEP run diverges with rate ``diverge``."""
    from stepsim.checks.simulated_views import Recipe

    def truth(run: Run) -> Recipe:
        return Recipe(0.0 if run.criterion == "AutoSwitch" else effect, diverge=diverge)
    return truth


def _c7_truths():
    """C7-shaped: in every reading of STEP (and lr reading) the run switched at f = 0.1 is
    off by delta / (1 - 1/5): its deviation from the mean over the five fractions is
    exactly delta; the other four are at 0 and AutoSwitch lands (fired, ~0.25 T)."""
    from stepsim.checks.simulated_views import Recipe

    def truth(run: Run) -> Recipe:
        off = run.criterion == "fixed" and abs(run.fraction - 0.1) < 1e-12
        return Recipe(DELTA / (1 - 1 / 5) if off else 0.0)
    return truth


def _bimodal(truth_e: float, exact: bool, p: float = 3 / 8, side: str | None = None):
    """C6-shaped (E = gap(B) - gap(STEP) = e(B) - e(STEP)) with bimodal seeds: in exactly
    p x 8 of the 8 seeds of each run group of the collapsing side (``exact``; else each run
    independently with probability ``p``) the run collapses to an extra 30% of items wrong
    (~+30 points). ``side``: whose runs collapse, "step" or "baselines"; by default at a
    true mean effect of 0 the STEP runs (E's far seeds below: the side where a t interval
    says REPRODUCED too easily), at delta the baselines' (far seeds above: NOT
    REPRODUCED's side). The other recipes carry a fixed extra error rate that makes the
    mean E exact."""
    from stepsim.checks.simulated_views import MU, Recipe, expected_error

    far, dense = 0.3, Recipe(-4.0)
    side = side or ("step" if truth_e == 0.0 else "baselines")
    if side == "step":
        step = Recipe(-4.0, collapse=p, far=far, exact=exact)
        target = expected_error(step) + truth_e  # e(B)
        base = Recipe(0.0, extra=(target - 100 * MU) / (100 - 100 * MU))
    else:
        base = Recipe(0.0, collapse=p, far=far, exact=exact)
        target = expected_error(base) - truth_e  # e(STEP)
        step = Recipe(0.0, extra=(target - 100 * MU) / (100 - 100 * MU))
    assert abs(expected_error(base) - expected_error(step) - truth_e) < 1e-12

    def truth(run: Run) -> Recipe:
        return {"dense": dense, "step": step}.get(run.recipe, base)
    return truth


def _c6_plain(truth_e: float):
    """C6-shaped without collapses: every baseline at 0 points of shift, every STEP at
    -``truth_e``: E = e(B) - e(STEP) = ``truth_e`` at every part."""
    from stepsim.checks.simulated_views import Recipe

    dense, base, step = Recipe(-4.0), Recipe(0.0), Recipe(-truth_e)

    def truth(run: Run) -> Recipe:
        return {"dense": dense, "step": step}.get(run.recipe, base)
    return truth


@dataclasses.dataclass(frozen=True)
class Case:
    """claim, the truth of each run, which verdict is wrong, a sentence for the table."""

    claim: str
    truth: object
    wrong: str  # "REPRODUCED" or "NOT REPRODUCED"
    what: str


def cases() -> dict:
    R, NR = "REPRODUCED", "NOT REPRODUCED"
    return {
        "C4 every part at delta": Case(
            "C4", _c4_truths(DELTA), NR,
            "every Eq. 10 / Eq. 11 part E = delta, both lr readings x both readings of STEP x "
            "3 loss scales (24 parts, 12 primary a reading)"),
        "C5 every part at delta": Case(
            "C5", _c5_truths(1.25), NR,
            "gap(B) = 3, gap(STEP) = 1.25: E = gap(B) - 2 gap(STEP) = delta at every part "
            "(2 baselines x 2 N:M x 2 readings of STEP x 2 lr readings)"),
        "C7 one fraction per reading delta off": Case(
            "C7", _c7_truths(), R,
            "in each of the 4 readings the deviation at f = 0.1 is exactly delta (the others "
            "-delta/4); AutoSwitch lands at ~0.25 T, fired"),
        "null: C5 every part at 0": Case(
            "C5", _c5_truths(1.5), R,
            "gap(B) = 3, gap(STEP) = 1.5: E = 0 at every part"),
        "null: C4 every part at 0": Case(
            "C4", _c4_truths(0.0), R, "every criterion's error equal to AutoSwitch's"),
        "bimodal at 0 (C6, STEP collapses in 3 of 8 seeds)": Case(
            "C6", _bimodal(0.0, True), R,
            "each STEP run group collapses (+30% of items wrong) in exactly 3 of its 8 seeds "
            "(which 3 at random); mean E = 0 (the far seeds below)"),
        "bimodal at delta (C6, baselines collapse in 3 of 8 seeds)": Case(
            "C6", _bimodal(DELTA, True), NR,
            "each baseline run group collapses in exactly 3 of its 8 seeds; mean E = delta "
            "(the far seeds above)"),
        "bimodal at 0 (C6, STEP collapses with p = 3/8)": Case(
            "C6", _bimodal(0.0, False), R,
            "each STEP run collapses independently with p = 3/8 (0 to 8 of 8 seeds); "
            "mean E = 0"),
        "bimodal at delta (C6, baselines collapse with p = 3/8)": Case(
            "C6", _bimodal(DELTA, False), NR,
            "each baseline run collapses independently with p = 3/8; mean E = delta"),
        "bimodal at delta (C6, baselines collapse with p = 1/4)": Case(
            "C6", _bimodal(DELTA, False, 1 / 4), NR,
            "each baseline run collapses independently with p = 1/4; mean E = delta"),
        "bimodal at delta (C6, baselines collapse with p = 0.3)": Case(
            "C6", _bimodal(DELTA, False, 0.3), NR,
            "each baseline run collapses independently with p = 0.3; mean E = delta"),
        "bimodal at delta (C6, baselines collapse with p = 1/2)": Case(
            "C6", _bimodal(DELTA, False, 1 / 2), NR,
            "each baseline run collapses independently with p = 1/2; mean E = delta"),
        "bimodal at delta (C6, STEP collapses with p = 3/8)": Case(
            "C6", _bimodal(DELTA, False, 3 / 8, "step"), NR,
            "each STEP run collapses independently with p = 3/8; mean E = delta (the far "
            "seeds below: NOT REPRODUCED's side when many collapse)"),
        "power: C6 at -2 delta, no collapse": Case(
            "C6", _c6_plain(-2 * DELTA), R,
            "every part E = -2 delta (STEP 1 point worse than each baseline), no collapse: "
            "NOT REPRODUCED is the right verdict (its rate is the power)"),
        "power: C6 at -2 delta, baselines collapse with p = 3/8": Case(
            "C6", _bimodal(-2 * DELTA, False, 3 / 8, "baselines"), R,
            "each baseline run collapses independently with p = 3/8; mean E = -2 delta: NOT "
            "REPRODUCED is the right verdict (its rate is the power)"),
        "blow-up at 0 (C5, STEP diverges 30%)": Case(
            "C5", _c5_truths(1.5, step_diverge=0.3), R,
            "E = 0 on finite pairs; every STEP run diverges with p = 0.3 (the better-claimed "
            "side: divergence does not favour the claim)"),
        "blow-up at delta (C5, baselines diverge 30%)": Case(
            "C5", _c5_truths(1.25, baseline_diverge=0.3), NR,
            "E = delta on finite pairs; every baseline run diverges with p = 0.3 (the "
            "worse-claimed side)"),
        "divergence-only at 0 (C4, both sides 80%)": Case(
            "C4", _c4_truths(0.0, diverge=0.8), R,
            "every STEP run diverges with p = 0.8 on both sides (a fair coin per discordant "
            "seed): < 3 finite pairs, the extension triggers"),
        "divergence-only at delta (C4, both sides 80%)": Case(
            "C4", _c4_truths(DELTA, diverge=0.8), NR,
            "as above with E = delta on the finite pairs"),
    }


# ----------------------------------------------------------------------- budgets and views
def _remembering():
    """``budget.Budget`` whose ``run`` makes each RunSpec once and gives it back after: the
    claims' ``gather`` asks for the same RunSpecs in every simulation (the same RunSpecs,
    so the same numbers; about a third of a simulation's CPU saved)."""
    from stepsim.checks.budget import Budget

    class Remembering(Budget):
        def run(self, recipe: str, seed: int, **kw):
            memo = self.__dict__.setdefault("_made", {})  # not a field: replace() drops it
            key = (recipe, seed, repr(sorted(kw.items())))
            if key not in memo:
                memo[key] = super().run(recipe, seed, **kw)
            return memo[key]
    return Remembering


def budgets(claim: str, seeds: tuple, rules) -> list:
    """The claim's primary budgets on digits: in place, and (a claim about STEP) STEP at its
    own lr; lr 1e-3 for every config, 3e-4 for STEP's own."""
    from stepsim.checks.registry import get_claim

    made = [_remembering()("full", "digits", "main", seeds, rules=rules)]
    if claim in rules.readings.step_claims:
        made.append(dataclasses.replace(made[0], step_lr="own", only=(claim,), tag="own-lr",
                                        needed=set()))
    for b in made:
        get_claim(claim).jobs(b)
    lrs = {k: OWN_LR if b.step_lr == "own" and "step" in k.split("|")[1] else IN_PLACE_LR
           for b in made for k in b.needed}
    return [dataclasses.replace(b, lrs=lrs, needed=set()) for b in made]


class Simulation:
    """One claim's runs, grouped by RunSpec without its seed; ``draw`` makes one
    simulation's views of every run on ``seeds`` seeds."""

    def __init__(self, case: Case, seeds: tuple, rules):
        from stepsim.checks.registry import get_claim

        self.case, self.seeds = case, seeds
        self.claim = get_claim(case.claim)
        self.members = {}
        self.groups = {}  # group digest -> (Run, {seed position: digest})
        self._add(8, rules)
        self.recipes = {key: case.truth(run) for key, (run, _) in self.groups.items()}
        self.steps = self.members[8][0].budget.steps
        #: only a case with divergence or collapses can trigger the extension: the others
        #: draw 8 seeds (their streams as before the amendment)
        self.extend = len(seeds) > 8 and any(r.diverge > 0 or r.collapse > 0
                                             for r in self.recipes.values())
        if self.extend:
            self._add(len(seeds), rules)
            self.recipes = {key: case.truth(run) for key, (run, _) in self.groups.items()}

    def _add(self, size: int, rules) -> None:
        from stepsim.checks.claim_decisions import Member

        made = budgets(self.case.claim, self.seeds[:size], rules)
        self.members[size] = [Member(b, tuple(self.claim.jobs(b))) for b in made]
        for m in self.members[size]:
            for spec in m.jobs:
                key = spec.replace(seed=0).digest
                _, at = self.groups.setdefault(key, (describe(spec), {}))
                at[self.seeds.index(spec.seed)] = spec.digest

    def draw(self, world) -> dict:
        n = len(self.seeds) if self.extend else 8
        views, runs = world(self.recipes, seeds=n)
        out = {}
        for key, (run, at) in self.groups.items():
            for i, digest in at.items():
                if i >= n:
                    continue
                view = dict(views[runs[key][i].digest])
                view.update(switch_step=switch_step(run, i, self.steps),
                            table1={"k0": None, "score": 1.0}, seconds=0.0)
                out[digest] = view
        return out


# ----------------------------------------------------------------------- deciding
#: the rules a measurement runs under (module docstring, "Rules")
RULE_NAMES = ("registered", "draft5-as-measured", "collapse-as-divergence")


def rules_named(name: str):
    """The typed rules of ``name`` (:data:`RULE_NAMES`)."""
    from stepsim.checks import protocol
    from stepsim.checks.rules import Rules

    registered = protocol.TYPED[5]
    if name == "registered":
        return registered
    if name not in RULE_NAMES:
        raise ValueError(f"rule must be one of {list(RULE_NAMES)}, got {name!r}")
    data = {k: v for k, v in registered.to_dict().items() if k != "bimodal"}
    return Rules.parse(data, f"draft 5 without bimodal ({name})")


def collapses_as_divergence(sim: "Simulation", results: dict, far: float) -> dict:
    """``results`` with every far run (``extension.far_runs``' rule, per run group) counted
    as diverged: candidate (b), collapses counted like divergence."""
    import statistics

    out = dict(results)
    for run, at in sim.groups.values():
        finite = [d for d in at.values() if d in out and not out[d]["diverged"]]
        if len(finite) < 2:
            continue
        middle = statistics.median(out[d]["error"] for d in finite)
        for d in finite:
            if abs(out[d]["error"] - middle) > far:
                out[d] = dict(out[d], diverged=True, items=np.full_like(out[d]["items"], 100.0),
                              error=100.0)
    return out


def decide(sim: Simulation, results: dict, *, extend: bool,
           rule: str = "registered") -> tuple[str, bool]:
    """(the claim's verdict, whether the extension ran) on one simulation's views: the
    production trigger on seeds 0-7, then ``decide_on_problem`` on seeds 0-7 or (extended)
    0-15."""
    from stepsim.checks import extension
    from stepsim.checks.claim_decisions import decide_on_problem

    members = sim.members[8]
    budget = members[0].budget
    if rule == "collapse-as-divergence":
        far = float(rules_named("registered").bimodal.far_margins) * budget.margin
        results = collapses_as_divergence(sim, results, far)
    more = extend and extension.needs_more_seeds(
        [j for m in members for j in m.jobs], results, budget.rules, budget.margin)
    if more:
        members = sim.members[16]
    return decide_on_problem(sim.claim.id, members, results)[-1].verdict, bool(more)


# ----------------------------------------------------------------------- a case
def run_case(name: str, case: Case, sims: int, rules, progress=None,
             rule: str = "registered") -> dict:
    from stepsim import stats
    from stepsim.checks.simulated_views import world

    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    sim = Simulation(case, tuple(range(8)) + tuple(rules.divergence.extension_seeds), rules)
    extend = sim.extend
    draw = world(rng)
    counts = {"REPRODUCED": 0, "NOT REPRODUCED": 0, "INCONCLUSIVE": 0}
    extended = 0
    t0 = time.process_time()
    for i in range(sims):
        verdict, ext = decide(sim, sim.draw(draw), extend=extend, rule=rule)
        counts[verdict] += 1
        extended += ext
        if progress is not None:
            progress(name, i + 1, sims)
    wrong = counts[case.wrong]
    low, high = stats.clopper_pearson(wrong, sims, 0.95)
    return {"claim": case.claim, "what": case.what, "wrong_verdict": case.wrong,
            "sims": sims, "wrong": wrong, "rate": wrong / sims,
            "ci95": [float(low), float(high)], "verdicts": counts, "extended": extended,
            "over_target": bool(low > TARGET), "cpu_s": round(time.process_time() - t0, 1),
            "parts": _part_count(sim)}


def _part_count(sim: Simulation) -> int:
    return sum(len(sim.claim.parts(m.budget)) for m in sim.members[8])


_LAST = {}


def progress(name: str, i: int, n: int) -> None:
    """A line on stderr every 30 s of a case, and at its end."""
    now = time.monotonic()
    if i == n or now - _LAST.get(name, 0.0) > 30:
        _LAST[name] = now
        print(f"{time.strftime('%H:%M:%S')} {name}: {i}/{n}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------- outputs
def markdown(result: dict) -> str:
    """The table of measured rates (result: the JSON's "result")."""
    p = result["params"]
    counts = sorted({c["sims"] for c in result["cases"].values()})
    sims = " or ".join(f"{n:,}" for n in counts)
    fewer = ("" if p["quick"] or counts[0] >= SIMS else
             f" Fewer simulations than the protocol's {SIMS:,} where a row says so (the CPU "
             f"budget: {result['cpu_s'] / 60:.0f} CPU-minutes for these): the intervals' "
             f"widths are as shown.")
    rule = p.get("rule", "registered")
    ruled = "" if rule == "registered" else f"; rules: **{rule}** (not the registered ones)"
    lines = [
        "# Draft 5: calibration of the verdict rules at the claim (PROTOCOL.md D5.8)",
        "",
        (f"Made by `paper_checks/calibration_draft5.py` ({sims} simulations a case"
         f"{', --quick: not evidence' if p['quick'] else ''}{ruled}; seed {p['seed']}; "
         "rules draft "
         f"{p['rules_version']}: alpha = {p['alpha']}, K = 4 for a claim about STEP, "
         f"delta = {p['delta']} points, n = 8 seeds, bootstrap {p['resamples']} resamples). "
         "Per-item 0/100 errors on one test set of 899 items shared by the seeds and "
         "recipes (`stepsim.checks.simulated_views`); every case decided by the claim's "
         "`gather`, `budget.effect` and `claim_decisions.decide_on_problem`; the "
         "extension: the production trigger `extension.needs_more_seeds` on seeds 0-7, then "
         f"the claim decided on seeds 0-15).{fewer}"),
        "",
        ("A wrong REPRODUCED: the claim REPRODUCED where no reading's parts are all truly "
         "above 0 (for C7's band: where a deviation is delta). A wrong NOT REPRODUCED: the "
         "claim NOT REPRODUCED where every primary part's truth is at least delta. 95% "
         "Clopper-Pearson intervals; 'over 5%' when the interval's lower end is above 5%. "
         "R / NR / I: the claim's verdicts; extended: simulations where the extension ran."),
        "",
        ("| case | claim | wrong verdict | wrong / sims | rate | 95% CI | R / NR / I | "
         "extended | over 5% |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in result["cases"].items():
        v = c["verdicts"]
        lines.append(
            f"| {name} | {c['claim']} | {c['wrong_verdict']} | {c['wrong']} / {c['sims']} | "
            f"{100 * c['rate']:.2f}% | [{100 * c['ci95'][0]:.2f}%, {100 * c['ci95'][1]:.2f}%] | "
            f"{v['REPRODUCED']} / {v['NOT REPRODUCED']} / {v['INCONCLUSIVE']} | "
            f"{c['extended']} | {'**yes**' if c['over_target'] else 'no'} |")
    lines += ["", "What each case simulates:", ""]
    lines += [f"- **{name}**: {c['what']}." for name, c in result["cases"].items()]
    lines += ["", f"CPU: {result['cpu_s']:.0f} s in all."]
    return "\n".join(lines) + "\n"


def _one(args) -> dict:
    name, sims, progress, rule = args
    rules = rules_named("draft5-as-measured" if rule == "collapse-as-divergence" else rule)
    return run_case(name, cases()[name], sims, rules, progress, rule)


def measure(sims: int, names=None, progress=None, jobs: int = 1,
            rule: str = "registered") -> dict:
    """Every case (or those ``names``) at ``sims`` simulations under ``rule``
    (:data:`RULE_NAMES`), on ``jobs`` processes (a case per task: each case has its own
    stream, so the numbers do not depend on jobs)."""
    rules = rules_named(rule)
    if float(rules.problem("digits").margin) != DELTA:
        raise ValueError(f"the digits margin is {rules.problem('digits').margin}, this "
                         f"calibration is written for {DELTA}")
    chosen = cases()
    if names:
        unknown = [n for n in names if n not in chosen]
        if unknown:
            raise ValueError(f"cases must be among {list(chosen)}, got {unknown}")
        chosen = {n: chosen[n] for n in names}
    todo = [(n, sims, progress, rule) for n in chosen]
    if jobs > 1:
        import concurrent.futures
        import multiprocessing

        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            done = list(pool.map(_one, todo))
    else:
        done = [_one(t) for t in todo]
    out = dict(zip(chosen, done))
    return {"cases": out, "cpu_s": sum(c["cpu_s"] for c in out.values())}


def combine(results: list) -> dict:
    """One result from several of the same rule and seed (each case from the last result
    that has it; params: the first's, with every sims count and case)."""
    rules = {r["params"].get("rule", "registered") for r in results}
    seeds = {r["params"]["seed"] for r in results}
    if len(rules) != 1 or len(seeds) != 1 or any(r["params"]["quick"] for r in results):
        raise ValueError(f"--combine needs results of one rule and seed, none quick; got "
                         f"rules {sorted(rules)}, seeds {sorted(seeds)}")
    cases_ = {}
    for r in results:
        cases_.update(r["cases"])
    params = dict(results[0]["params"], sims=sorted({c["sims"] for c in cases_.values()}),
                  cases=list(cases_), jobs=None)
    return {"params": params, "cases": cases_,
            "cpu_s": sum(c["cpu_s"] for c in cases_.values())}


def main(argv=None) -> int:
    import stepsim  # noqa: F401  (portable BLAS before NumPy)
    from stepsim._ground.atomic import write_text
    from stepsim._ground.provenance import save_json
    from stepsim.checks import protocol

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=SIMS, help="simulations a case")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_SIMS} simulations a case: the code path, not evidence")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    parser.add_argument("--table-only", action="store_true",
                        help="write the .md table again from the .json of --out (no simulation)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes (a case each; the numbers do not depend on it)")
    parser.add_argument("--rule", default="registered", choices=RULE_NAMES,
                        help="the rules the cases are decided under (module docstring)")
    # (calibration_draft5.json: the first table's, before D5.8's amendment: history)
    parser.add_argument("--out", default=str(HERE / "calibration_draft5_amended.json"),
                        help="the JSON result; the markdown table beside it (.md)")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="no simulation: write --out from these results' cases (one "
                             "rule, cases in the order given)")
    args = parser.parse_args(argv)
    sims = QUICK_SIMS if args.quick else args.sims
    if sims < 1:
        raise ValueError(f"--sims must be >= 1, got {sims}")
    out = Path(args.out)
    if out.suffix != ".json":
        raise ValueError(f"--out must end in .json, got {str(out)!r}")

    if args.table_only:
        write_text(out.with_suffix(".md"), markdown(json.loads(out.read_text())["result"]))
        return 0
    if args.combine:
        result = combine([json.loads(Path(f).read_text())["result"] for f in args.combine])
        result["params"]["combined"] = [str(f) for f in args.combine]
        save_json(out, result, params=result["params"], seed=SEED)
        write_text(out.with_suffix(".md"), markdown(result))
        return 0
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    measured = measure(sims, args.case, progress, args.jobs, args.rule)
    rules = protocol.TYPED[5]
    params = {"sims": sims, "quick": bool(args.quick), "rule": args.rule, "seed": SEED,
              "delta": DELTA,
              "alpha": float(rules.alpha), "rules_version": rules.version,
              "resamples": int(rules.intervals.bootstrap.resamples),
              "bootstrap_seed": int(rules.intervals.bootstrap.seed),
              "jobs": args.jobs, "cases": list(measured["cases"])}
    result = {"params": params, **measured}
    save_json(out, result, params=params, seed=SEED)
    write_text(out.with_suffix(".md"), markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
