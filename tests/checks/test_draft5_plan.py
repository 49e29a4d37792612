"""Draft 5's planning (PROTOCOL.md D5.1-D5.3, D5.6, D5.7, D5.9, D5.11, D5.12): quick mode's
three problems and primary readings, the provisional choices, the blow-up rule and STEP's
freeze scope in every RunSpec, the full plan's readings, validation-split views, and
tuning by candidates (lr x regulariser, validation, ties, grid edges)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from stepsim.checks import candidates, planning, protocol, tuning
from stepsim.checks.budget import Budget, regulariser_options

R5 = protocol.TYPED[5]
ROOT = Path(__file__).resolve().parents[2]


def _runs(jobs):
    return [j for j in jobs if hasattr(j, "steps")]


def test_quick_mode_runs_three_problems_at_their_primary_readings():
    made = planning.plan(["all"], "quick", R5)
    ev = made.evaluation
    keys = {key for _, key in ev.jobs}
    assert keys == {"digits/fast", "digits/fast@own-lr", "lm/fast", "lm/fast@own-lr",
                    "mnist1d/fast", "mnist1d/fast@own-lr", "none"}  # in place and own
    assert {(ev.budgets[k].reading, ev.budgets[k].primary) for k in keys - {"none"}} == {
        ("in place", True), ("own", True)}
    assert {c for c, key in ev.jobs if key == "lm/fast"} == {"C5"}
    assert {c for c, key in ev.jobs if key == "mnist1d/fast"} == {"C1", "C5"}
    # STEP's own choices on MNIST-1D come from draft 5's committed run (the pilot had none)
    assert not any("mnist1d" in s for s in ev.skipped)
    runs = _runs(ev.tasks)
    assert {(r.problem, r.steps) for r in runs} == {("digits", 2000), ("lm", 500),
                                                    ("mnist1d", 1000)}
    assert {r.nm for r in runs if r.problem == "lm"} == {None, (2, 4)}
    assert {r.nm for r in runs if r.problem == "mnist1d"} == {None, (1, 4)}
    assert all(r.blowup == (20, 10.0) for r in runs)  # divergence.blowup
    step = [r for r in runs if r.recipe in ("step", "layerwise-step")]
    assert step and all(dict(r.recipe_options)["freeze_scope"] == "all" for r in step)
    assert all(dict(r.recipe_options)["beta2"] == 0.99 for r in runs
               if dict(r.recipe_options).get("beta2") is not None)


def test_quick_choices_are_provisional_until_a_draft_5_run_is_committed(monkeypatch):
    """Before draft 5's run was committed quick mode read draft 4's choices (kept in
    paper_checks/draft4/), labelled provisional; the committed draft-5 choices are final
    for the problems its run tuned, and the LM (the extended set's) stays provisional."""
    kept = ROOT / "paper_checks" / "draft4" / "tuned_lrs.json"
    draft4 = json.loads(kept.read_text())
    assert draft4["rules_sha256"] == protocol.TYPED[4].digest  # draft 4's full run
    final, final_label = tuning.quick_choices(R5)
    committed = json.loads(tuning.COMMITTED.read_text())
    assert committed["rules_sha256"] == R5.digest  # draft 5's full run
    assert all(final["digits/fast"][k] == v for k, v in committed["lrs"]["digits/main"].items())
    assert final["mnist1d/fast"] == committed["lrs"]["mnist1d/cnn"]
    assert final_label.startswith("provisional, settings or configs the committed full run "
                                  "did not tune: ") and "; lm/fast: " in final_label
    assert final["digits/fast"]["adam|lw-sr-ste|M8"] == draft4["lrs"]["digits/main"][
        "adam|lw-sr-ste|M8"]  # C9 (the extended set's): a config draft 5's run did not tune
    chosen, label = tuning.quick_choices(R5, draft4)
    committed = draft4
    assert label.startswith("provisional: the committed full run's learning rates under "
                            "draft 4") and "mnist1d_pilot.json" in label
    assert chosen["digits/fast"] == committed["lrs"]["digits/fast"]  # draft 4's lrs as they are
    assert chosen["mnist1d/fast"] == chosen["mnist1d/cnn"]  # the pilot tuned at T 3000
    monkeypatch.setattr(tuning, "COMMITTED", kept)  # the plan as it was before draft 5's run
    made = planning.plan(["C5"], "quick", R5, problems=["mnist1d"])
    assert made.choices == label
    runs = {(r.recipe, dict(r.recipe_options).get("srste_lam") is not None): r
            for r in _runs(made.evaluation.tasks) if r.nm == (1, 4)}
    sr = dict(runs[("sr-ste", False)].recipe_options)
    assert (sr["lr"], sr["lam"]) == (0.03, 0.02)  # the pilot's SR-STE 1:4 (lr, lambda)
    in_place = dict(runs[("step", True)].recipe_options)  # STEP-SR reuses both
    assert (in_place["lr"], in_place["srste_lam"]) == (0.03, 0.02)
    assert "srste_lam" not in dict(runs[("step", False)].recipe_options)  # STEP-A1: lr only
    # draft 4's quick mode reads the same file as its own committed run's: no label
    assert tuning.quick_choices(protocol.TYPED[4])[1] is None


def test_provisional_choices_are_the_pilots_tuned_choices():
    pilot = json.loads((ROOT / "paper_checks" / "mnist1d_pilot.json").read_text())["result"]
    doc = json.loads(tuning.PROVISIONAL.read_text())
    chosen = doc["choices"]["mnist1d/cnn"]
    nms = {tuple(nm) for nm in R5.problems["mnist1d"].nms}
    seen = set()
    for c in pilot["chosen"]:
        recipe, optimizer, nm = c["config"]
        if nm is not None and tuple(nm) not in nms:
            continue
        key = protocol.config_key(optimizer, recipe, nm)
        expected = {"lr": c["lr"], **({} if c["lam"] is None else {"lam": c["lam"]})}
        assert chosen[key] == expected, key
        seen.add(key)
    # ASP, which the pilot did not tune, takes dense Adam's lr; nothing else is added
    assert set(chosen) - seen == {"adam|asp|1:4", "adam|asp|1:8"}
    assert all(chosen[k] == chosen["adam|dense|-"] for k in set(chosen) - seen)
    assert doc["label"] == "provisional"


def test_regularisers_follow_the_recipe_that_reuses_them():
    assert regulariser_options("sr-ste", {"lam": 0.02}) == {"lam": 0.02}
    assert regulariser_options("step-sr", {"lam": 0.02}) == {"srste_lam": 0.02}
    assert regulariser_options("step-sr-vupd", {"lam": 0.02}) == {"srste_lam": 0.02}
    assert regulariser_options("step-a1", {"lam": 0.02}) == {}
    assert regulariser_options("lw-step-sr", {"lam": 0.2, "domino_decay": 2e-3}) == {
        "srste_lam": 0.2, "domino_decay": 2e-3}
    assert regulariser_options("md-nm", {"decay": 6e-5}) == {"decay": 6e-5}
    b = Budget("full", "digits", "main", (0,), rules=R5, step_lr="own",
               lrs={"adam|step-a1|1:8": {"lr": 3e-4}, "adam|sr-ste|1:8": {"lr": 1e-3, "lam": 0.02}})
    # at STEP's own, every STEP variant takes its reading's own choice (C8's v-updated)
    assert dict(b.run("step-a1-vupd", 0, nm=(1, 8)).recipe_options)["lr"] == 3e-4
    assert dict(b.run("sr-ste", 0, nm=(1, 8)).recipe_options)["lr"] == 1e-3


def test_the_full_plan_reads_every_step_claim_at_its_readings():
    # the registered full run (PROTOCOL.md D5.11's budget): digits and MNIST-1D at the
    # primary readings; C9, S1, the LM and every secondary reading are --extended's
    core = planning.plan(["all"], "full", R5)
    assert {b.key for b in core.budgets} == {"digits/main", "digits/main@own-lr",
                                             "mnist1d/cnn", "mnist1d/cnn@own-lr"}
    assert "C9" not in core.claims and {s for s, _ in core.tuning} == {"digits/main",
                                                                       "mnist1d/cnn"}
    assert all(b.primary for b in core.budgets)
    made = planning.plan(["all"], "full", R5, extended=True)
    assert made.evaluation is None  # waits for the tuning
    keys = {b.key: b for b in made.budgets}
    assert "digits/fast@own-lr" not in keys  # the agreement: in place only
    assert {k for k in keys if k.startswith("digits")} == {"digits/fast",
        "digits/main", "digits/main@own-lr", "digits/main@freeze-sparse",
        "digits/main@k0=0.3T", "digits/main@k0=0.5T", "digits/main-cosine",
        "digits/main-cosine@own-lr"}
    assert {k for k in keys if k.startswith("mnist1d")} >= {"mnist1d/cnn",
                                                           "mnist1d/cnn@own-lr"}
    readings = {k: (b.reading, b.primary) for k, b in keys.items()}
    assert readings["digits/main"] == ("in place", True)
    assert readings["digits/main@own-lr"] == ("own", True)
    assert readings["digits/main@freeze-sparse"] == ("freeze sparse", False)
    assert readings["digits/main-cosine@own-lr"] == ("cosine own", False)
    assert keys["digits/main@own-lr"].only == ("C4", "C5", "C6", "C7", "C8", "C9")
    assert keys["digits/main@freeze-sparse"].only == ("C5", "C6", "C8")
    frozen = [r for c in ("C5", "C8") for r in _runs(made.recorded["digits/main@freeze-sparse"])
              if r.recipe == "step"]
    assert frozen and all(dict(r.recipe_options)["freeze_scope"] == "sparse" for r in frozen)
    tuned = {k for s, k in made.tuning if s == "digits/main-cosine"}
    assert tuned == {"adam|dense|-", "adam|asp|1:8", "adam|asp|1:16", "adam|sr-ste|1:8",
                     "adam|sr-ste|1:16", "adam|step-a1|1:8", "adam|step-a1|1:16",
                     "adam|step-sr|1:8", "adam|step-sr|1:16"}  # only what C5, C6 need
    group = made.tuning[("digits/main", "adam|sr-ste|1:8")]
    assert len(group["candidates"]) == 6 * 4 and group["candidates"][1] == {"lr": 1e-4,
                                                                            "lam": 0.002}
    assert len(group["tasks"]) == 24 * 3 and all(
        t.seed in R5.seeds.tuning and t.eval_every is None for t in group["tasks"])
    assert len(made.tuning[("digits/main", "adam|dense|-")]["candidates"]) == 6


# --- tuning by candidates --------------------------------------------------------------

N_ITEMS = 100


def _view(errors_wrong: int, seed: int, *, test_wrong: int | None = None,
          diverged: bool = False):
    """A tuning run's view: ``errors_wrong`` of 100 validation items wrong (shifted by the
    seed so the seeds differ), its test error another number."""
    val = np.zeros(N_ITEMS)
    val[:errors_wrong + seed] = 100.0
    test = np.zeros(N_ITEMS)
    test[:(test_wrong if test_wrong is not None else errors_wrong)] = 100.0
    return {"validation_items": val, "validation_error": float(val.mean()),
            "items": test, "error": float(test.mean()), "diverged": diverged}


def _group(grid=(1e-3, 3e-3, 1e-2), lams=(2e-4, 2e-3)):
    tuner = Budget("full", "digits", "main", R5.seeds.tuning, rules=R5, steps=200)
    return candidates.group(tuner, "adam|sr-ste|1:8", "sr-ste", "adam", (1, 8), None,
                            list(grid), {"lam": tuple(lams)})


def _results(g, wrong):
    """wrong(candidate) -> (validation wrong, test wrong | None, diverged)."""
    out = {}
    per = g["seeds"]
    for i, c in enumerate(g["candidates"]):
        w, t, d = wrong(c)
        for s, task in enumerate(g["tasks"][i * per:(i + 1) * per]):
            out[task.digest] = _view(w, s, test_wrong=t, diverged=d)
    return out


def test_a_config_chooses_its_candidate_on_validation():
    g = _group()

    def wrong(c):  # best on validation: lr 3e-3, lam 2e-3; best on test: lr 1e-3
        if c["lr"] == 1e-2:
            return 0, 0, True  # diverged: +inf, whatever its errors
        if c == {"lr": 3e-3, "lam": 2e-3}:
            return 5, 40, False
        return 20, 1 if c["lr"] == 1e-3 else 30, False

    row = candidates.choose(g, _results(g, wrong), R5, margin=0.5, units="points")
    assert row["choice"] == {"lr": 3e-3, "lam": 2e-3}
    assert row["means"][g["candidates"].index({"lr": 1e-2, "lam": 2e-4})] == math.inf
    assert row["edge"] == "lam high"  # the lambda grid's end
    assert row["tie"] == [{"lr": 3e-3, "lam": 2e-3}]  # 15 points worse is not tied
    assert row["errors"][0] == [20.0, 21.0, 22.0] and row["errors"][2] == [None] * 3


def test_equal_scores_go_to_the_smaller_regulariser_then_the_smaller_lr():
    g = _group()
    row = candidates.choose(g, _results(g, lambda c: (10, None, False)), R5, margin=0.5,
                            units="points")
    assert row["choice"] == {"lr": 1e-3, "lam": 2e-4}
    # every candidate is tied (d = 0 exactly): the tie set holds them all
    assert len(row["tie"]) == len(g["candidates"])


def test_the_tie_rule_uses_the_seeds_x_items_se_on_validation():
    g = _group(grid=(1e-3, 3e-3), lams=(2e-4,))
    per = g["seeds"]
    results = {}
    rng = np.random.default_rng(0)
    base = (rng.random((per, N_ITEMS)) < 0.2) * 100.0
    for i, c in enumerate(g["candidates"]):
        for s, task in enumerate(g["tasks"][i * per:(i + 1) * per]):
            val = base[s].copy()
            if c["lr"] == 3e-3:  # one item more wrong on every seed: d = 1 point
                val[np.flatnonzero(val == 0)[0]] = 100.0
            results[task.digest] = {"validation_items": val,
                                    "validation_error": float(val.mean()),
                                    "items": val, "error": float(val.mean()),
                                    "diverged": False}
    row = candidates.choose(g, results, R5, margin=0.5, units="points")
    assert row["choice"] == {"lr": 1e-3, "lam": 2e-4}
    # d is 1.0 on every seed: the seeds' spread is 0, but the shared validation items'
    # SE (one item flipped: sqrt(100^2 / N) / N ~ 1 point) ties it at tie.se = 1
    assert row["tie"] == [{"lr": 1e-3, "lam": 2e-4}, {"lr": 3e-3, "lam": 2e-4}]


def test_a_choice_at_a_grid_edge_extends_that_grid_once():
    assert candidates.beyond([1e-4, 3e-4, 1e-3], "low") == 3e-5
    assert candidates.beyond([3e-3, 1e-2, 3e-2], "high") == 0.1
    assert candidates.beyond([2e-4, 2e-3, 2e-2, 2e-1], "low") == 2e-5
    g = _group()
    results = _results(g, lambda c: (5 if c["lr"] == 1e-3 else 20, None, False))
    more = candidates.extend(g, results)  # the choice: lr 1e-3 (low end), lam 2e-4 (low)
    assert more["grid"][0] == 3e-4 and more["extended"] == (("lr", "low"),)
    assert len(more["candidates"]) == 4 * 2 and len(more["tasks"]) == 8 * 3
    old = {t.digest for t in g["tasks"]}
    assert old <= {t.digest for t in more["tasks"]}  # the same runs, not run again
    results.update(_results(more, lambda c: (5 if c["lr"] == 1e-3 else 20, None, False)))
    again = candidates.extend(more, results)  # now lambda's low end, once
    assert again["options"]["lam"][0] == 2e-5 and again["extended"] == (("lr", "low"),
                                                                        ("lam", "low"))
    results.update(_results(again, lambda c: (5 if c["lr"] == 1e-3 else 20, None, False)))
    assert candidates.extend(again, results) is None  # both extended once, choice inside
    row = candidates.choose(again, results, R5, margin=0.5, units="points")
    assert row["choice"] == {"lr": 1e-3, "lam": 2e-5} and row["edge"] == "lam low"


def test_tuning_choose_returns_candidates_and_tie_budgets_read_them():
    made = planning.plan(["C5"], "full", R5, problems=["lm"], steps=200, extended=True)
    groups = dict(made.tuning)
    results = {}
    for g in groups.values():
        results.update(_lm_results(g))
    chosen, table = tuning.choose(groups, results)
    assert chosen["lm/fast"]["adam|sr-ste|2:4"] == {"lr": 0.01, "lam": 0.0002}
    assert chosen["lm/fast"]["adam|dense|-"] == {"lr": 0.01}
    ev = planning.evaluation(made, chosen, table)
    step = [r for r in _runs(ev.jobs[("C5", "lm/fast")]) if r.recipe == "step"
            and dict(r.recipe_options).get("srste_lam") is not None and r.nm == (2, 4)]
    assert {dict(r.recipe_options)["srste_lam"] for r in step} == {0.0002}
    ties = [k for _, k in ev.jobs if "@sr-ste" in k]
    assert ties and all("lam=" in k and " lr=" in k for k in ties)
    tie = ev.budgets[ties[0]]
    assert tie.reading == "tie " + ties[0].split(" ", 2)[2] and not tie.primary
    assert tie.reading.startswith("tie lr=") and " lam=" in tie.reading


def _lm_results(g):
    """Every LM candidate's view at T and at every rung of successive halving (dense and
    SR-STE are halved): lr 0.01 best, lambda 2e-4 best; loss gaps in nats."""
    out = {}
    for i, c in enumerate(g["candidates"]):
        gap = 0.1 + abs(math.log10(c["lr"] / 0.01)) + 10 * c.get("lam", 0.0)
        for steps in [*g["rungs"], candidates.steps_of(g)]:
            for s, task in enumerate(candidates.runs_at(g, i, steps)):
                items = np.full(64, gap) + 0.001 * s
                out[task.digest] = {"validation_items": items,
                                    "validation_error": float(items.mean()),
                                    "items": items, "error": float(items.mean()),
                                    "diverged": False}
    return out


# --- views on the validation split ------------------------------------------------------

@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the blown-up run's overflow
def test_views_read_the_validation_split_and_a_blow_up_is_diverged(tmp_path):
    from stepsim.checks.execution import view
    from stepsim.experiments import executors
    from stepsim.experiments.store import RunStore

    b = Budget("full", "digits", "main", (0,), rules=R5, steps=200,
               lrs={"adam|dense|-": {"lr": 1e-3}})
    ok = b.run("dense", 0)
    blown = b.run("dense", 0, lr=3.0)  # Adam at lr 3: the loss explodes at once
    assert ok.blowup == (20, 10.0)
    store = RunStore(tmp_path)
    executors.run_serial([ok, blown], store.save)
    good, lost = view(store, ok), view(store, blown)
    n_val = 225  # a quarter of each class of the training half (PROTOCOL.md D5.1)
    assert good["validation_items"].shape == (n_val,) and not good["diverged"]
    assert good["validation_error"] == pytest.approx(np.mean(good["validation_items"]))
    assert good["status"] == "completed" and good["error"] < 50
    assert lost["diverged"] and lost["status"] == "blow-up" and lost["stopped_at"] < 200
    assert lost["validation_error"] == 100.0 and lost["error"] == 100.0
    draft4 = dataclasses.replace(b, rules=protocol.TYPED[4], lrs={"adam|dense|-": 1e-3})
    assert draft4.run("dense", 0).blowup is None  # draft 4's runs keep their digests


# --- the extension stage ----------------------------------------------------------------

def _evaluation(mode="full"):
    """C1 and C5 on digits under draft 5, in place and at STEP's own, every config at 1e-3
    (STEP's own 3e-4), with their jobs."""
    from stepsim.checks import c01_srste_adam as c1
    from stepsim.checks import c05_step_vs_baselines as c5

    seeds = tuple(getattr(R5.seeds, mode))
    base = Budget(mode, "digits", "main", seeds, rules=R5, steps=200)
    own = dataclasses.replace(base, step_lr="own", only=("C5",), tag="own-lr", needed=set())
    for b, claims in ((base, (c1, c5)), (own, (c5,))):
        for c in claims:
            c.jobs(b)
    lrs = {k: 3e-4 if k.split("|")[1].startswith("step") else 1e-3
           for b in (base, own) for k in b.needed}
    base, own = (dataclasses.replace(b, lrs=lrs, needed=set()) for b in (base, own))
    jobs = {("C1", base.key): c1.jobs(base), ("C5", base.key): c5.jobs(base),
            ("C5", own.key): c5.jobs(own)}
    return planning.Evaluation({}, {}, {base.key: base, own.key: own}, jobs)


def _lost(jobs, when):
    """Views whose ``diverged`` is when(run)."""
    return {j.digest: {"diverged": bool(when(j))} for j in jobs}


def test_the_extension_trigger_reads_which_seeds_diverged_not_which_side():
    from stepsim.checks import extension

    b = Budget("full", "digits", "main", R5.seeds.full, rules=R5, steps=200,
               lrs={"adam|dense|-": 1e-3, "adam|sr-ste|1:8": 1e-3})
    dense, sr = b.runs("dense"), b.runs("sr-ste", nm=(1, 8))
    assert len(extension.run_groups(dense + sr)) == 2
    for lost_seeds, expected in (({0, 1, 2, 3, 4, 5}, (2, 6)),  # 2 finite pairs, 6 one-sided
                                 ({0, 1, 2, 3, 4}, None)):  # 3 finite pairs: enough
        results = _lost(dense + sr, lambda r, s=lost_seeds: r.recipe == "sr-ste"
                        and r.seed in s)
        assert extension.trigger(dense + sr, results, 3) == expected
        swapped = _lost(dense + sr, lambda r, s=lost_seeds: r.recipe == "dense"
                        and r.seed in s)
        assert extension.trigger(dense + sr, swapped, 3) == expected  # either side
    both = _lost(dense + sr, lambda r: True)  # every seed lost on both sides: concordant
    assert extension.trigger(dense + sr, both, 3) is None


def test_a_claim_whose_divergence_alone_differs_gets_the_extension_seeds():
    from stepsim.checks import extension

    ev = _evaluation()
    every = [j for jobs in ev.jobs.values() for j in jobs]
    results = _lost(every, lambda r: r.recipe == "step" and r.seed < 6
                    and "srste_lam" not in dict(r.recipe_options))  # STEP-A1 lost 6 of 8
    more = extension.extend(ev, results)
    assert more is not None and len(more.extensions) == 1
    assert more.extensions[0].startswith("C5 on digits: extended to seeds [8, 9, 10, 11, 12, "
                                         "13, 14, 15]")
    for key in ("digits/main", "digits/main@own-lr"):  # every budget of C5 on digits
        wider = more.budget("C5", key)
        assert wider.seeds == tuple(range(16)) and wider.lrs == ev.budgets[key].lrs
        assert {j.seed for j in more.jobs[("C5", key)]} == set(range(16))
        assert {j.digest for j in ev.jobs[("C5", key)]} < {j.digest for j in more.jobs[
            ("C5", key)]}  # the first eight seeds' runs are the same RunSpecs
    assert more.budget("C1", "digits/main").seeds == R5.seeds.full  # C1: finite everywhere
    # the claims that train nothing come last in a real plan, on a budget without rules
    # (planning.NoProblem): the registered run of 2026-11-28 crashed on them here
    from stepsim.checks import c12_memory as c12
    from stepsim.checks.budget import NoProblem

    plain = NoProblem("full")
    with_plain = dataclasses.replace(ev, budgets={**ev.budgets, plain.key: plain},
                                     jobs={**ev.jobs, ("C12", plain.key): c12.jobs(plain)})
    assert getattr(plain, "rules", None) is None
    again = extension.extend(with_plain, results)
    assert again is not None and again.extensions == more.extensions
    assert again.jobs[("C12", plain.key)] == with_plain.jobs[("C12", plain.key)]
    assert more.jobs[("C1", "digits/main")] == ev.jobs[("C1", "digits/main")]
    quiet = _lost(every, lambda r: False)
    assert extension.extend(ev, quiet) is None
    quick = _evaluation("quick")
    assert extension.extend(quick, _lost([j for js in quick.jobs.values() for j in js],
                                         lambda r: r.recipe == "step" and r.seed < 2)) is None


def test_a_claim_with_a_far_run_gets_the_extension_seeds():
    """Bimodal seeds (D5.8's amendment): one SR-STE run more than 20 margins (10 points on
    digits) from its group's median (5.45) extends every claim on digits with that run
    (C1 and C5: the same RunSpec); 9.95 points does not; a diverged run is divergence's,
    not a far run."""
    from stepsim.checks import extension

    ev = _evaluation()
    every = [j for jobs in ev.jobs.values() for j in jobs]
    quiet = {j.digest: {"diverged": False, "error": 5.0 + 0.1 * j.seed} for j in every}
    far = next(j for j in every if j.recipe == "sr-ste" and j.seed == 3)
    for error, extended in ((15.5, True), (15.4, False)):
        more = extension.extend(ev, dict(quiet, **{far.digest: {"diverged": False,
                                                                "error": error}}))
        assert (more is not None) == extended
        if extended:
            assert [n.split(":")[0] for n in more.extensions] == ["C1 on digits",
                                                                   "C5 on digits"]
            assert all("bimodal seeds: 1 of 8 finite run(s) of " in n
                       for n in more.extensions)
            assert more.budget("C5", "digits/main@own-lr").seeds == tuple(range(16))
    assert extension.extend(ev, dict(quiet, **{far.digest: {"diverged": True,
                                                            "error": 100.0}})) is None


def test_s1_runs_masked_decay_transposable_and_tunes_each_successors_options():
    from stepsim.checks import s01_successors as s1

    with pytest.raises(ValueError, match="claim S1 belongs to the extended set"):
        planning.plan(["S1"], "full", R5, problems=["digits"])  # D5.11: --extended's
    made = planning.plan(["S1"], "full", R5, problems=["digits"], extended=True)
    runs = _runs(made.recorded["digits/main"])
    decay = [r for r in runs if r.recipe == "masked-decay"]
    assert decay and all(dict(r.recipe_options)["transposable"] is True for r in decay)
    configs = {k: g for (s, k), g in made.tuning.items() if s == "digits/main"}
    assert configs["adam|md-nm|1:8"]["options"] == {"decay": (6e-06, 6e-05, 0.0006)}
    assert configs["adam|t-sr-ste|1:16"]["options"] == {"lam": (2e-4, 2e-3, 2e-2, 2e-1)}
    assert configs["adam|s-ste|1:8"]["options"] == {}  # S-STE has none: lr only
    tuned = configs["adam|md-dense|1:8"]["tasks"]
    assert {dict(t.recipe_options)["decay"] for t in tuned} == {6e-06, 6e-05, 0.0006}
    assert s1.RULES.recipes["md-nm"][0] == "masked-decay"  # S1's own rules unchanged


def test_the_agreement_check_is_the_extended_sets():
    from stepsim.checks import c05_step_vs_baselines as c5

    plain = {b.key for b in planning.plan(["C5"], "full", R5, problems=["digits"]).budgets}
    made = planning.plan(["C5"], "full", R5, problems=["digits"], extended=True)
    keys = {b.key: b for b in made.budgets}
    assert set(keys) - plain == {"digits/fast", "digits/main@freeze-sparse",
                                 "digits/main@k0=0.3T", "digits/main@k0=0.5T",
                                 "digits/main-cosine", "digits/main-cosine@own-lr"}
    agreement = keys["digits/fast"]
    assert agreement.reading == "agreement" and not agreement.primary
    assert c5.nms(agreement) == ((1, 8),) and agreement.steps == 2000
    assert "digits/fast" in {s for s, _ in made.tuning}  # its own choices, at its timescale


def test_an_extended_claim_is_decided_on_all_its_seeds():
    """decisions.decide reads the extended claim's own budgets: C5's lines on 16 seeds,
    its divergence counted over them; C1 on the same setting keeps its 8."""
    from stepsim.checks import extension
    from stepsim.checks.decisions import decide
    from tests.checks.fake_views import base, claim_module, views

    ev = _evaluation()

    def scenario(job, i):  # STEP-A1 lost on the first six evaluation seeds only
        lost = job["key"] == "step-a1" and job["seed"] < 6
        gaps = {"asp": 100, "sr-ste": 100, "step-a1": 5, "step-sr": 5}
        return {"wrong": 899 if lost else base(i) + gaps.get(job["key"], 0),
                "switch_step": 300 if job["key"].startswith("step") else None,
                "diverged": lost}

    def all_views(evaluation):
        out = {}
        for claim, key in evaluation.jobs:
            out.update(views(claim_module(claim), evaluation.budget(claim, key), scenario))
        return out

    more = extension.extend(ev, all_views(ev))
    assert more is not None
    decided = {(d.result.claim, d.result.setting): d.result for d in decide(more,
                                                                            all_views(more))}
    c5 = decided[("C5", "digits/main@in-place")]
    assert c5.seeds == tuple(range(16))
    part = next(p for p in c5.parts if p.name == "STEP-A1 vs sr-ste 1:8")
    assert part.effect.divergence["seeds"] == 16 and part.effect.divergence["only_minus"] == 6
    assert decided[("C1", "digits/main")].seeds == R5.seeds.full


def test_a_draft_5_full_runs_choices_serve_quick_mode_as_they_are(tmp_path, monkeypatch):
    """Once a draft-5 full run's choices are committed, quick mode takes them unlabelled,
    each quick setting those of its problem's main setting (the same configs); a problem
    the full run did not tune (the LM: the extended set's, PROTOCOL.md D5.11) keeps the
    provisional choices, labelled."""
    path = tmp_path / "tuned_lrs.json"
    chosen = {"digits/main": {"adam|dense|-": {"lr": 0.003}},
              "mnist1d/cnn": {"adam|sr-ste|1:4": {"lr": 0.01, "lam": 0.02}}}
    tuning.write_committed(chosen, path, source="a test")
    monkeypatch.setattr(tuning, "COMMITTED", path)
    got, label = tuning.quick_choices(R5)
    provisional = json.loads(tuning.PROVISIONAL.read_text())
    assert got["digits/fast"]["adam|dense|-"] == chosen["digits/main"]["adam|dense|-"]
    # the run's, not the pilot's; a config the run did not tune takes the provisional one
    assert got["mnist1d/fast"]["adam|sr-ste|1:4"] == chosen["mnist1d/cnn"]["adam|sr-ste|1:4"]
    assert got["mnist1d/fast"]["adam|dense|-"] == provisional["choices"]["mnist1d/cnn"][
        "adam|dense|-"]
    assert got["lm/fast"] == provisional["choices"]["lm/fast"]
    assert label.startswith("provisional, settings or configs the committed full run did "
                            "not tune: ") and "lm/fast: draft 4's committed" in label
    every = {s: {**provisional["choices"].get(s, {}), **c} for s, c in chosen.items()}
    every["lm/fast"] = {"adam|sr-ste|2:4": {"lr": 0.01, "lam": 0.02}}
    got, label = tuning.quick_choices(R5, {"lrs": every, "rules_sha256": R5.digest})
    assert label == ("provisional, settings or configs the committed full run did not tune: "
                     "lm/fast: " + provisional["sources"]["lm/fast"])  # its other configs
    every["lm/fast"] = dict(provisional["choices"]["lm/fast"], **every["lm/fast"])
    got, label = tuning.quick_choices(R5, {"lrs": every, "rules_sha256": R5.digest})
    assert label is None and got["lm/fast"] == every["lm/fast"]
    # this test's file lacks C9's layer-wise configs: a check that runs them says so, a
    # check that runs none of them (C3) has no caveat to state
    made = planning.plan(["C3"], "quick", R5)
    assert made.choices is None  # its rows still say which choices are provisional
    assert made.provisional == {"digits": ["adam|lw-sr-ste|M16", "adam|lw-sr-ste|M8"]}
    assert {dict(r.recipe_options)["lr"] for r in _runs(made.evaluation.tasks)} == {0.003}
    made = planning.plan(["C9"], "quick", R5, problems=["digits"])
    assert made.choices.startswith("provisional, settings or configs the committed full run "
                                   "did not tune: digits/main: ")
    assert made.provisional == {"digits": ["adam|lw-sr-ste|M16", "adam|lw-sr-ste|M8"]}
    got, label = tuning.quick_choices(R5, needed={"digits": {"adam|dense|-"}})
    assert label is None  # no run reads a provisional choice
    assert got["digits/main"]["adam|lw-sr-ste|M8"]  # taken all the same
    got, label = tuning.quick_choices(R5, needed={"digits": {"adam|lw-sr-ste|M8"}})
    assert "digits/main: " in label


def test_only_the_provisional_configs_are_marked_and_a_merge_keeps_the_label():
    """report.md marks provisional the rows of the configs the label is about (every row
    when every choice is provisional); a merged report keeps the earlier check's label
    beside this one's, for the verdicts it kept."""
    from stepsim.checks.markdown import markdown
    from stepsim.checks.merging import merged_record
    from stepsim.checks.outputs import load_report

    full = load_report(ROOT / "figures" / "check" / "report.json")
    label = "provisional, settings or configs the committed full run did not tune: x"
    marked = {"digits": ["adam|sr-ste|1:8"]}
    some = dataclasses.replace(full, mode="quick", tuning={}, protocol={
        **full.protocol, "choices": label, "provisional_configs": marked})

    def lr_rows(report):  # the learning-rate table's rows of digits
        text = markdown(report).split("## Learning rates")[1].split("\n## ")[0]
        return [line for line in text.splitlines() if line.startswith("| digits/")]

    rows = lr_rows(some)
    flagged = {line.split(" | ")[1] for line in rows if "**provisional**" in line}
    assert flagged == {r"adam\|sr-ste\|1:8"} and len(rows) > 1
    every = dataclasses.replace(some, protocol={**full.protocol, "choices": label})
    rows = lr_rows(every)
    assert rows and all("**provisional**" in line for line in rows)
    unlabelled = dataclasses.replace(some, protocol={**full.protocol,
                                                     "provisional_configs": marked})
    assert [line for line in lr_rows(unlabelled) if "**provisional**" in line] == [
        line for line in lr_rows(some) if "**provisional**" in line]  # no label, same rows
    # merges: the earlier label stays; configs joined; one side all-provisional: all
    old = {"commit": "a", "choices": label, "provisional_configs": marked}
    assert merged_record(old, {"commit": "a"})["choices"] == label
    assert merged_record(old, {"commit": "a"})["provisional_configs"] == marked
    now = {"commit": "a", "choices": "provisional, ...: y",
           "provisional_configs": {"digits": ["adam|asp|1:8"], "lm": ["adam|dense|-"]}}
    both = merged_record(old, now)
    assert both["choices"] == ("provisional, ...: y; for the verdicts kept from the earlier "
                               "check: " + label)
    assert both["provisional_configs"] == {"digits": ["adam|asp|1:8", "adam|sr-ste|1:8"],
                                           "lm": ["adam|dense|-"]}
    assert "provisional_configs" not in merged_record({"commit": "a", "choices": label}, now)
    assert "choices" not in merged_record({"commit": "a"}, {"commit": "a"})
