"""Successive halving in draft 5's tuning (PROTOCOL.md, D5.2's amendment "Successive halving,
SH-3/2"): the rung selection (a third kept, ties to the smaller lr, a diverged run +infinity,
two finalists, each regulariser value's lr grid on its own, only dense and SR-STE at a
constant lr), a full check on digits at a short T that stores the rung runs, chooses among
the finalists, shows the rung in the tuning table and finds every run again on a resume,
and the dry-run's count of the runs the execution makes."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import numpy as np
import pytest

from stepsim.checks import candidates, halving, planning, protocol, tuning
from stepsim.checks.budget import Budget

R5 = protocol.TYPED[5]
SH = R5.tuning.halving


# --- the rung selection ----------------------------------------------------------------

def test_the_rungs_are_a_quarter_and_a_half_of_t_rounded_down():
    assert halving.ladder(SH, 2000) == (500, 1000, 2000)
    assert halving.ladder(SH, 201) == (50, 100, 201)
    with pytest.raises(ValueError, match="first rung has no step"):
        halving.ladder(SH, 3)


def test_promotion_keeps_the_best_ties_to_the_smaller_lr_and_a_diverged_run_last():
    lrs = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    assert halving.promote([5, 4, 3, 2, 1, 0], lrs, 2) == [4, 5]
    assert halving.promote([5, 1, 1, 1, 9, 9], lrs, 2) == [1, 2]  # ties: the smaller lrs
    inf = math.inf
    assert halving.promote([inf, inf, 7, inf, inf, inf], lrs, 2) == [0, 2]  # +inf, then lr
    # the kept third of a grid, rounded up (at least the two finalists)
    assert [SH.kept(n) for n in (2, 4, 5, 6, 7)] == [2, 2, 2, 2, 3]
    assert halving.keep_after(SH, 0, 2, 6) == 2 and halving.keep_after(SH, 1, 2, 6) == 2
    assert halving.keep_after(SH, 0, 2, 7) == 3 and halving.keep_after(SH, 1, 2, 7) == 2


def test_only_dense_and_sr_ste_at_a_constant_lr_are_halved():
    assert halving.applies(SH, "dense") and halving.applies(SH, "sr-ste")
    for recipe in ("lw-sr-ste", "asp", "step-sr", "decay-dense", "t-sr-ste", "md-nm"):
        assert not halving.applies(SH, recipe)
    assert not halving.applies(SH, "sr-ste", "cosine-warmup")  # a schedule over T
    assert not halving.applies(None, "dense")  # draft 4: no halving
    made = planning.plan(["C5"], "full", R5, problems=["digits"], steps=200)
    halved = {k for (s, k), g in made.tuning.items() if g["halving"] is not None}
    assert halved == {"adam|dense|-", "adam|sr-ste|1:8", "adam|sr-ste|1:16"}
    g = made.tuning[("digits/main", "adam|asp|1:8")]  # the full grid, every lr to T
    assert g["rungs"] == {} and {t.steps for t in g["tasks"]} == {200}
    assert {t.digest for t in tuning.pending({("s", "k"): g}, {})} == {
        t.digest for t in g["tasks"]}
    assert all(made.tuning[(s, k)]["halving"] is None for s, k in made.tuning
               if s == "digits/main-cosine")


def _view(error, diverged=False):
    items = np.full(8, float(error))
    return {"validation_items": items, "validation_error": float(error), "items": items,
            "error": float(error), "diverged": diverged}


def _climb(g, error):
    """Run ``g``'s tuning to its end round by round as the execution does
    (``tuning.pending``), each run's view from error(candidate, steps, seed) (None:
    diverged). Returns (results, [Counter of the steps of each round's runs])."""
    results, rounds = {}, []
    where = {(t.digest): (i, steps, s) for i, _ in enumerate(g["candidates"])
             for steps in [*g["rungs"], candidates.steps_of(g)]
             for s, t in enumerate(candidates.runs_at(g, i, steps))}
    while True:
        todo = tuning.pending({("s", g["key"]): g}, results)
        if not todo:
            return results, rounds
        rounds.append(Counter(t.steps for t in todo))
        for t in todo:
            i, steps, s = where[t.digest]
            e = error(g["candidates"][i], steps, s)
            results[t.digest] = _view(0.0 if e is None else e, diverged=e is None)


def _srste(grid=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1), lams=(2e-4, 2e-2)):
    tuner = Budget("full", "digits", "main", R5.seeds.tuning, rules=R5, steps=200)
    return candidates.group(tuner, "adam|sr-ste|1:8", "sr-ste", "adam", (1, 8), None,
                            list(grid), {"lam": tuple(lams)}, halving=SH)


def test_each_regulariser_values_grid_is_halved_on_its_own_to_two_finalists():
    g = _srste()  # 7 lrs: a third is 3 at T/2, then the two finalists at T
    seeds = len(R5.seeds.tuning)

    def error(c, steps, seed):
        if c["lr"] == 1e-1:
            return None  # diverged by the first rung: +infinity
        if c["lam"] == 2e-4:  # T/4: 1e-4, 3e-4, 1e-3 best; T/2: 1e-4 drops; T: a tie
            return {50: {1e-4: 1, 3e-4: 2, 1e-3: 3}, 100: {1e-4: 9, 3e-4: 3, 1e-3: 3},
                    200: {3e-4: 5, 1e-3: 5}}[steps].get(c["lr"], 20)
        # lambda 2e-2: every lr equal at T/4 and T/2 (ties to the smaller lrs)
        return 10 if steps < 200 else 7

    results, rounds = _climb(g, error)
    # every lr of both lambdas at T/4, a third of each (3 of 7) at T/2, two of each at T
    assert rounds == [Counter({50: 14 * seeds}), Counter({100: 6 * seeds}),
                      Counter({200: 4 * seeds})]
    row = candidates.choose(g, results, R5, margin=0.5, units="points")
    at = {(c["lam"], c["lr"]): (m, s) for c, m, s in zip(row["candidates"], row["means"],
                                                           row["reached"])}
    assert sorted(k for k, (_, s) in at.items() if s == 200) == [
        (2e-4, 3e-4), (2e-4, 1e-3), (2e-2, 1e-4), (2e-2, 3e-4)]
    assert at[(2e-4, 1e-4)] == (9.0, 100) and at[(2e-2, 1e-3)] == (10.0, 100)
    assert at[(2e-4, 3e-3)] == (20.0, 50) and at[(2e-4, 1e-1)] == (math.inf, 50)
    # the choice among the finalists: 5 at lambda 2e-4, the tie to the smaller lr
    assert row["choice"] == {"lr": 3e-4, "lam": 2e-4} and row["edge"] == "lam low"
    assert all(at[(c["lam"], c["lr"])][1] == 200 for c in row["tie"])  # run to T only
    assert {"lr": 1e-3, "lam": 2e-4} in row["tie"]  # d = 0 exactly
    # the stability map reads each lr at the rung it reached: lr 1e-1 diverged there
    assert row["errors"][-1] == [None] * seeds and row["errors"][1] == [5.0] * seeds


def test_an_lr_added_at_the_grids_edge_runs_to_t_as_a_finalist():
    g = _srste(grid=(1e-3, 3e-3, 1e-2, 3e-2), lams=(2e-4,))

    def error(c, steps, seed):  # the smaller the lr the better: the low edge
        return 1e3 * c["lr"] + seed

    results, _ = _climb(g, error)
    more = candidates.extend(g, results)
    assert more["grid"][0] == 3e-4 and more["finalist_lrs"] == (3e-4,)
    todo = tuning.pending({("s", "k"): more}, results)
    assert {(t.steps, dict(t.recipe_options)["lr"]) for t in todo} == {(200, 3e-4)}
    assert len(todo) == len(R5.seeds.tuning)  # only the new lr, to T at once
    for t in todo:
        results[t.digest] = _view(0.3 + R5.seeds.tuning.index(t.seed))
    row = candidates.choose(more, results, R5, margin=0.5, units="points")
    assert row["choice"] == {"lr": 3e-4, "lam": 2e-4} and row["edge"] == "lr low"
    assert row["reached"][more["candidates"].index({"lr": 3e-4, "lam": 2e-4})] == 200


def test_a_group_made_without_halving_runs_every_candidate_to_t():
    tuner = Budget("full", "digits", "main", R5.seeds.tuning, rules=R5, steps=200)
    g = candidates.group(tuner, "adam|asp|1:8", "asp", "adam", (1, 8), None,
                         [1e-3, 3e-3, 1e-2], {})
    results, rounds = _climb(g, lambda c, steps, seed: 1e3 * c["lr"])
    assert rounds == [Counter({200: 3 * len(R5.seeds.tuning)})]
    row = candidates.choose(g, results, R5, margin=0.5, units="points")
    assert row["reached"] == [200] * 3 and row["choice"] == {"lr": 1e-3}


# --- a full check through the production path ------------------------------------------

def _small_rules():
    """Draft 5 cut for a test: digits 1:8 only, two tuning and two evaluation seeds, two
    lambdas; Adam's six-lr grid as registered (a third of it is two)."""
    rules = R5.with_value("problems.digits.nms", [[1, 8]])
    rules = rules.with_value("seeds.tuning", list(R5.seeds.tuning[:2]))
    rules = rules.with_value("seeds.full", list(R5.seeds.full[:2]))
    return rules.with_value("regularisers.sr-ste.lam", [2e-4, 2e-2])


def _stored(root):
    """Every stored training run: (recipe, lr, lam, steps) -> count."""
    out = Counter()
    for path in sorted(root.glob("[!.]*.json")):
        run = json.loads(path.read_text())["provenance"]["params"].get("run")
        if run is not None and run["seed"] in R5.seeds.tuning:
            o = run["recipe"]["options"]
            out[(run["recipe"]["name"], o["lr"], o.get("lam"), run["steps"])] += 1
    return out


@pytest.mark.slow
def test_a_full_check_halves_stores_the_rungs_and_resumes_without_running_them_again(
        tmp_path, monkeypatch, capsys):
    from stepsim.checks import dry_run, run_checks

    rules = _small_rules()
    monkeypatch.setattr(protocol, "RULES", rules)
    made = planning.plan(["C2"], "full", rules, problems=["digits"], steps=200)
    planned = Counter(t.steps for t in tuning.planned(made.tuning))
    out = tmp_path / "r"
    printed = dry_run.describe(made, out, 1)
    first = re.search(r"tuning digits/main \(2 configs\) +(\d+) runs", printed)
    later = re.search(r"tuning digits/main, later rungs +(\d+) runs +after a rung", printed)
    # sr-ste: 2 lambdas x 6 lrs, dense 6 lrs, 2 seeds each, at T/4; then per lane 2 at T/2
    # and 2 at T (3 lanes, 2 seeds)
    assert int(first.group(1)) == planned[50] == (12 + 6) * 2
    assert int(later.group(1)) == planned[100] + planned[200] == 2 * 3 * 2 * 2
    assert set(planned) == {50, 100, 200}

    report = run_checks(["C2"], mode="full", problems=["digits"], steps=200, out=out,
                        progress=False, jobs=1)
    row = report.tuning["digits/main"]["adam|sr-ste|1:8"]
    # a six-lr grid keeps two at T/2, the two finalists: a candidate stops at T/4 or not
    assert row["steps"] == 200 and set(row["reached"]) == {50, 200}
    stored = _stored(out / "runs")
    assert {s for (_, _, _, s) in stored} == {50, 100, 200}  # rung RunSpecs in the store
    original = {(c["lr"], c["lam"]) for c in row["candidates"]
                if c["lr"] in rules.grid("digits", "adam") and c["lam"] in (2e-4, 2e-2)}
    for lam in (2e-4, 2e-2):  # per lambda: 6 lrs at T/4, 2 at T/2, 2 at T (2 seeds each)
        lane = Counter(s for (r, lr, la, s), n in stored.items() for _ in range(n)
                       if r == "sr-ste" and la == lam and (lr, la) in original)
        assert lane == Counter({50: 12, 100: 4, 200: 4}), (lam, lane)
    # the dry-run counted what the execution made (before any grid-edge extension)
    made_runs = Counter(s for (r, lr, la, s), n in stored.items() for _ in range(n)
                        if (r == "dense" and lr in rules.grid("digits", "adam"))
                        or (lr, la) in original)
    assert made_runs == planned
    # the choice among the candidates run to T, by the choice rule
    full = [(m, c["lam"], c["lr"]) for c, m, s in zip(row["candidates"], row["means"],
                                                      row["reached"]) if s == 200]
    assert row["choice"] == {"lr": min(full)[2], "lam": min(full)[1]}
    assert report.lrs["digits/main"]["adam|sr-ste|1:8"] == row["choice"]
    md = (out / "report.md").read_text()
    assert "Successive halving:" in md and re.search(r"lr [\d.e-]+, lam [\d.e-]+: [\d.]+ at 50",
                                                     md)
    doc = json.loads((out / "report.json").read_text())["result"]
    assert doc["tuning"]["digits/main"]["adam|sr-ste|1:8"]["reached"] == row["reached"]

    # a resume: every rung run (and every other) is found in the store, none made again
    again = run_checks(["C2"], mode="full", problems=["digits"], steps=200, out=out,
                       progress=False, jobs=1)
    last = again.compute["checks"][-1]
    assert last["runs_made"] == 0 and last["found_in_store"] > 0
    assert again.lrs == report.lrs and _stored(out / "runs") == stored
