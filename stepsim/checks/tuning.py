"""Learning rates chosen as the paper does (PROTOCOL §3): per config, on the tuning seeds.

A config (``protocol.config_key``: optimizer, tuned recipe, N:M or layer-wise M) is run at
every value of its problem's grid for its optimizer, once per tuning seed, at the
setting's timescale, without learning curves. The choice is the grid value with the
lowest mean final error over the tuning seeds; a run that went non-finite counts as
+infinity; ties go to the smaller lr. A choice at either end of the grid is flagged
(``edge``: "low" | "high" | None). STEP's readings reuse SR-STE's choice
(``protocol.TUNED_AS``). Tuning seeds are never reported as evidence.

:func:`committed` reads the choices of the committed full run (``tuned_lrs.json`` beside
this module), which quick mode reuses; a full run writes its own into its report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from stepsim.checks import candidates, halving, protocol
from stepsim.checks.budget import candidate_of

COMMITTED = Path(__file__).with_name("tuned_lrs.json")
#: choices quick mode uses, labelled provisional, for a problem the committed full run does
#: not cover (MNIST-1D before draft 5's full run: its pilot's tuned choices)
PROVISIONAL = Path(__file__).with_name("provisional_choices.json")


def jobs(needs: dict, seeds=None, *, halve: bool = True) -> dict:
    """``needs``: setting key -> (a Budget of that setting, set of config keys). Returns
    (setting, config) -> {"grid": [lr...], "tasks": [RunSpec...] (grid-major, seeds
    inner)}; under rules that tune regularisers (draft 5) each config's candidates
    (``candidates.group``: every lr and regulariser pair), halved when the rules register
    successive halving for it (``halving.applies``: then only :func:`pending`'s runs are
    made, rung by rung; ``halve`` False: never). seeds: the tuning seeds (default the
    protocol's; ``--extended`` adds more for the stability map only, :func:`extend_errors`:
    every lr to T, not halved)."""
    from stepsim.checks.budget import Budget

    out = {}
    for setting, (budget, keys) in sorted(needs.items()):
        tuner = Budget(budget.mode, budget.problem, budget.timescale,
                              tuple(budget.rules.seeds.tuning if seeds is None else seeds),
                              steps=budget.steps, schedule=budget.schedule, rules=budget.rules)
        for key in sorted(keys):
            optimizer, recipe, nm, m = protocol.parse_key(key)
            lrs = budget.rules.grid(budget.problem, optimizer)
            if budget.rules.regularisers is not None:  # draft 5: candidates
                rule = getattr(budget.rules.tuning, "halving", None) if halve else None
                out[(setting, key)] = candidates.group(
                    tuner, key, recipe, optimizer, nm, m, lrs,
                    candidates.regularisers(budget.rules, recipe),
                    halving=rule if halving.applies(rule, recipe, budget.schedule) else None)
                continue
            # a STEP key tuned for itself (draft 4) switches by the default AutoSwitch
            tasks = [tuner.run(recipe, seed, nm=nm, m=m, optimizer=optimizer, lr=lr,
                               evaluate=False)
                     for lr in lrs for seed in tuner.seeds]
            out[(setting, key)] = {"grid": lrs, "tasks": tasks, "seeds": len(tuner.seeds)}
    return out


def choose(tune_jobs: dict, results: dict) -> tuple[dict, dict]:
    """(chosen, table): chosen = setting -> config -> lr (draft 5: its candidate,
    ``candidates.choose``: {"lr", "lam", ...} on the validation split); table = setting ->
    config -> {"grid", "means" (mean final error per grid value, inf when a run diverged),
    "choice", "edge", "errors" (per grid value, each tuning seed's error, None for a
    diverged run: the stability map's input), "tie" (the tie set, PROTOCOL.md "Tie-aware
    tuning")}."""
    from stepsim.checks.budget import error
    from stepsim.checks.operating import tie_set

    chosen, table = {}, {}
    for (setting, key), group in tune_jobs.items():
        if "candidates" in group:  # draft 5: a candidate (lr and regularisers) per config
            tuner = group["tuner"]
            row = candidates.choose(group, results, tuner.rules, margin=tuner.margin,
                                    units=tuner.units)
            chosen.setdefault(setting, {})[key] = row["choice"]
            table.setdefault(setting, {})[key] = row
            continue
        grid, per = group["grid"], group["seeds"]
        means, errors = [], []
        for i, _ in enumerate(grid):
            views = [results[t.digest] for t in group["tasks"][i * per:(i + 1) * per]]
            means.append(math.inf if any(v["diverged"] for v in views)
                         else sum(error(v) for v in views) / len(views))
            errors.append([None if v["diverged"] else error(v) for v in views])
        best = min(range(len(grid)), key=lambda i: (means[i], grid[i]))
        edge = "low" if best == 0 else ("high" if best == len(grid) - 1 else None)
        chosen.setdefault(setting, {})[key] = grid[best]
        table.setdefault(setting, {})[key] = {"grid": grid, "means": means,
                                              "choice": grid[best], "edge": edge,
                                              "errors": errors,
                                              "tie": tie_set(grid, errors, grid[best])}
    return chosen, table


def pending(tune_jobs: dict, results: dict) -> list:
    """The tuning runs whose turn has come and that ``results`` lacks (distinct): every
    candidate's run to T, or under successive halving each lane's next rung
    (``candidates.pending``). Empty when every config can be chosen."""
    out = {}
    for group in tune_jobs.values():
        todo = (candidates.pending(group, results) if "candidates" in group
                else [t for t in group["tasks"] if t.digest not in results])
        out.update((t.digest, t) for t in todo)
    return list(out.values())


def planned(tune_jobs: dict) -> list:
    """Every tuning run the configs make before any grid-edge extension, in number and
    steps (``candidates.planned``: a later rung's runs are stand-ins)."""
    return [t for group in tune_jobs.values() for t in (
        candidates.planned(group) if "candidates" in group else group["tasks"])]


def extensions(tune_jobs: dict, results: dict) -> dict:
    """(setting, config) -> its group with a grid extended past the edge its choice sits at
    (``candidates.extend``, PROTOCOL.md "Grid edges"), for the configs that need one;
    {} when none does (and for draft 4's groups, which have no such rule)."""
    out = {}
    for where, group in tune_jobs.items():
        if "candidates" in group:
            more = candidates.extend(group, results)
            if more is not None:
                out[where] = more
    return out


def extend_errors(table: dict, extra: dict) -> dict:
    """``table`` with each config's per-lr ``errors`` joined by those of ``extra`` (a
    :func:`choose` table of more seeds): the stability map's input under ``--extended``
    (PROTOCOL.md "Stability map"). Choices and tie sets stay the protocol's."""
    out = {}
    for setting, configs in table.items():
        for key, row in configs.items():
            more = extra.get(setting, {}).get(key)
            errors = row.get("errors")
            if more is not None and errors is not None:
                errors = [a + b for a, b in zip(errors, more["errors"])]
            out.setdefault(setting, {})[key] = dict(row, errors=errors)
    return out


def tie_budgets(budget, table: dict, claims, *, extended: bool = False) -> list:
    """The operating points of the tie set (PROTOCOL.md "Tie-aware tuning"; draft 5: SR-STE's
    tie set's reading, its candidates) of a finished-tuning budget: per N:M and every
    choice tied with SR-STE's (the choice included, so each N:M has a verdict of its own
    at every tied one), a budget with SR-STE's choice (and so STEP's in place) set to it,
    restricted to that N:M, the readings of ``tie.readings`` (draft 5: both) and the
    in-place claims among ``claims`` that study that N:M. Draft 5: a secondary reading, so
    none on ``extended.secondary_problems`` without ``extended``."""
    import dataclasses

    from stepsim.checks import c06_high_sparsity

    if budget.tag or budget.only is not None or budget.schedule != "constant":
        return []
    draft5 = budget.rules.readings is not None
    if draft5 and not extended and budget.problem in (budget.rules.extended
                                                           .secondary_problems or ()):
        return []
    if draft5:
        claims_of, readings = budget.rules.readings.secondary["tie"]["claims"], None
    else:
        rules = budget.rules.operating_points
        claims_of, readings = rules.claims, tuple(rules.tie.readings[budget.problem])
    rows = table.get(budget.setting, {})
    out = []
    for nm in budget.nms:
        key = protocol.config_key("adam", "sr-ste", nm)
        if key not in rows:
            continue
        wanted = [c for c in claims_of if c in claims and budget.applies(c) and (
            c != "C6" or tuple(nm) in c06_high_sparsity.HIGH[budget.problem])]
        if not wanted:
            continue
        for tie in rows[key]["tie"]:
            lr, regs = candidate_of(tie)
            words = "".join(f" {k}={v:g}" for k, v in sorted(regs.items()))
            out.append(dataclasses.replace(
                budget, lrs={**budget.lrs, key: tie}, nm_only=tuple(nm), only=tuple(wanted),
                readings=readings, tag=f"sr-ste {protocol.nm_label(nm)} lr={lr:g}{words}"))
    return out


def quick_choices(rules, doc: dict | None = None, *, problems=None,
                  needed: dict | None = None) -> tuple[dict, str | None]:
    """(choices, label) of :func:`quick_choices_marked`."""
    return quick_choices_marked(rules, doc, problems=problems, needed=needed)[:2]


def quick_choices_marked(rules, doc: dict | None = None, *, problems=None,
                         needed: dict | None = None) -> tuple[dict, str | None, dict | None]:
    """(setting -> config -> choice, label, marked) quick mode runs under ``rules``: the committed
    full run's choices (``doc``, default :func:`committed_document`; label None) when they
    were made under these rules or the rules are draft 4's; else (draft 5 before its full
    run, PROTOCOL.md "Budget, quick mode") the committed draft-4 learning rates with draft
    4's regularisers, and for a problem they do not cover the choices of
    :data:`PROVISIONAL` (MNIST-1D: its pilot's), labelled "provisional". After a draft-5
    full run, a setting or config it did not tune (the LM, C9's layer-wise configs: the
    extended set's) still takes :data:`PROVISIONAL`'s choices, labelled. A quick setting
    without choices of its own takes those of its problem's main setting (the same
    configs). ``problems``: the problems the check runs (None: every one), the only ones
    provisional choices are taken and labelled for. ``needed``: problem -> the config keys
    the check's runs read a choice for (None: all); a provisional choice no run reads is
    still taken but not named in the label (a check of C2 runs no layer-wise config, so
    C9's provisional choices are no caveat of its report). ``marked``: after a full run
    under these rules, problem -> every config whose choice is provisional, read or not
    (the report marks those rows of its table, no others); None when every choice is
    provisional (then the label says so) or none is."""
    doc = committed_document() if doc is None else doc
    chosen, label, marked = dict(doc["lrs"]), None, None
    if rules.readings is not None:
        extra = json.loads(PROVISIONAL.read_text())
        final = doc.get("rules_sha256") == rules.digest
        taken, marked = [], {}  # per config: a setting the committed run tuned keeps its own
        for s, configs in sorted(extra["choices"].items()):
            missing = {k: v for k, v in configs.items() if k not in chosen.get(s, {})}
            problem = s.split("/")[0]
            if missing and (problems is None or problem in problems):
                chosen[s] = {**chosen.get(s, {}), **missing}
                marked[problem] = sorted({*marked.get(problem, ()), *missing})
                if needed is None or set(missing) & set(needed.get(problem, ())):
                    taken.append(s)
        parts = [f"{s}: {extra['sources'][s]}" for s in taken]
        if not final:
            head = (f"provisional: the committed full run's learning rates under draft "
                    f"{_draft_of(doc)} with its regularisers ({COMMITTED.name})")
            label, marked = "; ".join([head, *parts]), None
        elif parts:
            label = ("provisional, settings or configs the committed full run did not tune: "
                     + "; ".join(parts))
    out = {k: dict(v) for k, v in chosen.items()}
    for p, ts, _ in rules.settings("quick"):
        main = f"{p}/{rules.problems[p].timescales[0]}"
        if f"{p}/{ts}" not in out and main in out:
            out[f"{p}/{ts}"] = dict(out[main])
    return out, label, marked or None


def _draft_of(doc: dict) -> str:
    found = [d for d, r in protocol.DRAFTS.items()
             if protocol.rules_digest(r) == doc.get("rules_sha256")]
    return str(found[0]) if found else "(unknown rules)"


def committed_document() -> dict:
    """The committed full run's choices file (``tuned_lrs.json``): {"lrs", "source",
    "rules_sha256"}."""
    if not COMMITTED.exists():
        raise FileNotFoundError(f"{COMMITTED} is missing: quick mode reuses the learning "
                                "rates of the committed full run (stepsim check, full mode)")
    return json.loads(COMMITTED.read_text())


def committed() -> dict:
    """setting -> config -> choice of the committed full run (quick mode's)."""
    return committed_document()["lrs"]


def write_committed(chosen: dict, path=None, *, source: str) -> Path:
    """Write ``chosen`` (setting -> config -> lr, or draft 5's candidate {"lr", "lam",
    ...}) as the committed choices, with the report they came from (``source``) and the
    rules digest they were tuned under (quick mode reads them as final only under those
    rules: :func:`quick_choices`)."""
    from stepsim._ground.atomic import write_text

    doc = {"source": source, "rules_sha256": protocol.rules_digest(), "lrs": chosen}
    return write_text(Path(path or COMMITTED), json.dumps(doc, indent=1, sort_keys=True) + "\n")
