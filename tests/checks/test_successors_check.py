"""S1, the successors comparison in ``stepsim check`` (PROTOCOL "S1", issue 24 item 6):
its job list (shared with C5's runs by digest), its decision on synthetic run views (the
real decide code), its rules block, its table and the merge of S1 into a C-claims report."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from stepsim.checks import budget as budget_module
from stepsim.checks import c05_step_vs_baselines as c05
from stepsim.checks import protocol
from stepsim.checks import s01_successors as s1
from stepsim.checks.verdict import INCONCLUSIVE, REPRODUCED

SEEDS = protocol.RULES.seeds.full


def all_lrs(problem: str, timescale: str) -> dict:
    """Every config key S1 and C5 (with its own-lr point) need on a setting, at one lr."""
    b = budget_module.Budget("full", problem, timescale, SEEDS)
    s1.jobs(b)
    c05.jobs(b)
    for point in budget_module.operating_points(b, ["C5"]):
        c05.jobs(dataclasses.replace(point, needed=b.needed))
    return {key: 1e-3 * (1 + i) for i, key in enumerate(sorted(b.needed))}


@pytest.mark.parametrize("problem, timescale, nms", [("digits", "main", 2), ("lm", "fast", 1)])
def test_s1_jobs_count_and_digests_shared_with_c5(problem, timescale, nms):
    b = budget_module.Budget("full", problem, timescale, SEEDS, lrs=all_lrs(problem, timescale))
    assert b.applies("S1") and not any(
        p.applies("S1") for p in budget_module.operating_points(b, ["C5"]))
    jobs = s1.jobs(b)
    per_nm = 1 + 2 + len(protocol.RULES_S1["recipes"])  # SR-STE, STEP x2, the new ones
    assert len(jobs) == len(SEEDS) * (1 + nms * per_nm)
    assert len({j.digest for j in jobs}) == len(jobs)
    own = next(p for p in budget_module.operating_points(b, ["C5"]) if p.tag == "own-lr"
               and p.schedule == "constant")
    shared = {j.digest for j in c05.jobs(b)} | {j.digest for j in c05.jobs(own)}
    groups = s1.groups(b)
    reused = [r for (key, _), runs in groups.items() if key in ("dense", "sr-ste", "step-a1",
                                                                  "step-sr") for r in runs]
    assert len(reused) == len(SEEDS) * (1 + 3 * nms)
    assert {r.digest for r in reused} <= shared  # the store serves them: nothing re-runs
    new = {j.digest for j in jobs} - shared
    assert len(new) == len(SEEDS) * nms * len(protocol.RULES_S1["recipes"])
    # STEP at its own tuned lr (§D4.1), the new recipes at theirs
    for (key, nm), runs in groups.items():
        if key in ("step-a1", "step-sr"):
            assert dict(runs[0].recipe_options)["lr"] == b.lrs[protocol.config_key(
                "adam", key, nm, own=True)]
        elif key in protocol.RULES_S1["recipes"]:
            assert dict(runs[0].recipe_options)["lr"] == b.lrs[protocol.config_key("adam", key, nm)]


def test_s1_rules_block_and_draft_4_unchanged():
    assert protocol.document_extra("S1") == protocol.RULES_S1
    assert protocol.document_rules() == protocol.RULES.to_dict()  # draft 4's block stays
    assert protocol.RULES_S1 not in protocol.DRAFTS.values()
    rec = protocol.extra_record("S1")
    assert rec["rules_sha256"] == protocol.rules_digest(protocol.RULES_S1)
    assert protocol.EXTRAS["S1"].to_dict() == protocol.RULES_S1
    for key, (name, options) in protocol.RULES_S1["recipes"].items():
        assert budget_module.RECIPES[key] == (name, options)


def _views(budget, rng, shift: dict, lost: dict, items: int = 300) -> dict:
    """Synthetic run views for S1's runs: per recipe key an error probability shift and
    the seeds whose runs diverged (by N:M label)."""
    out = {}
    for (key, nm), runs in s1.groups(budget).items():
        label = None if nm is None else protocol.nm_label(nm)
        p = 0.05 + shift.get(key, 0.0)
        for i, r in enumerate(runs):
            x = 100.0 * (rng.random(items) < p)
            gone = i in lost.get((key, label), ())
            if gone:
                x = np.full(items, 100.0)
            blocks = [0.01] * 90 + [0.002] * 10
            out[r.digest] = {"items": x, "error": float(np.mean(x)), "diverged": gone,
                             "nm": {"w1": [1, 1] if key == "dense" else list(nm)},
                             "flip_blocks": {"block": 50, "rate": blocks}}
    return out


def test_s1_decides_synthetic_views():
    b = budget_module.Budget("full", "digits", "main", SEEDS, lrs=all_lrs("digits", "main"))
    rng = np.random.default_rng(24)
    everywhere = tuple(range(len(SEEDS)))
    views = _views(b, rng, {"dense": -0.02, "s-ste": -0.03, "t-sr-ste": 0.15},
                   {("sr-ste", "1:16"): everywhere, ("md-nm", "1:16"): everywhere})
    result = s1.decide_claim(b, views)
    table = result.numbers["table"]
    assert list(table) == ["1:8", "1:16"]
    row = table["1:8"]["s-ste"]
    assert row["vs_baseline"]["reads"] == "better" and row["diverged"] == 0
    assert row["gap"][0] < 0 and row["gap"][1] < row["gap"][0] < row["gap"][2]
    assert row["flip_tail"] == pytest.approx(0.002)
    assert table["1:8"]["t-sr-ste"]["vs_baseline"]["reads"] == "worse"
    assert "vs_baseline" not in table["1:8"]["sr-ste"]
    # SR-STE lost every seed at 1:16: each finite recipe is better by divergence (McNemar)
    assert table["1:16"]["s-ste"]["vs_baseline"]["verdict"] == REPRODUCED
    assert "diverged more often" in table["1:16"]["s-ste"]["vs_baseline"]["reason"]
    both = table["1:16"]["md-nm"]
    assert both["diverged"] == 8 and both["diverged_ci"][0] > 0.6
    assert both["vs_baseline"]["verdict"] == INCONCLUSIVE and both["vs_baseline"]["n"] == 0
    assert both["vs_baseline"]["reason"].startswith("both diverged")
    assert np.isnan(both["vs_baseline"]["estimate"])  # never 0 [0, 0]
    assert table["1:8"]["md-dense"]["nm_result"] == "1:8"  # from the synthetic final N:M
    assert result.verdict == REPRODUCED  # S-STE better at 1:8 and at 1:16
    lines = s1.markdown_table(result)
    assert len(lines) == 4 + 2 * len(s1.recipes())
    assert "(DENSE model)" in "\n".join(lines) and "**worse**" in "\n".join(lines)
    # 14 parts, one Holm family per N:M
    assert len(result.parts) == 2 * (len(s1.recipes()) - 1)


def _merged(tmp_path, first_claim: str):
    from stepsim.checks import run_checks

    q = budget_module.Budget("quick", "digits", "fast", protocol.RULES.seeds.quick)
    s1.jobs(q)
    c05.jobs(q)
    lrs = {"digits/fast": {k: 1e-3 for k in q.needed}}
    out = tmp_path / "check"
    first = run_checks([first_claim], mode="quick", out=out, steps=200, lrs=lrs, jobs=1,
                       progress=False, problems=["digits"])
    stored = set((out / "runs").glob("*.json"))
    second = run_checks(["S1"], mode="quick", out=out, steps=200, lrs=lrs, jobs=1,
                        progress=False, problems=["digits"])
    new = set((out / "runs").glob("*.json")) - stored
    return q, lrs, out, first, second, new


def test_s1_merges_into_a_c_claims_report(tmp_path):
    """A report holding a C-claim (C12: no training, cheap), then S1 merged into it (quick
    mode, short runs): the C-claim keeps its verdict and figures, the protocol record
    names S1's rules digest, report.md holds S1's table, the README table renders."""
    _, lrs, out, first, second, _ = _merged(tmp_path, "C12")
    kept = [c for c in second.claims if c.claim == "C12"]
    assert [(c.setting, c.verdict, c.reason) for c in kept] == [
        (c.setting, c.verdict, c.reason) for c in first.claims]
    assert all((out / f).is_file() for c in kept for f in c.figures)
    _check_s1_report(out, second, lrs)


@pytest.mark.slow
def test_s1_merges_into_c5_and_reuses_its_runs(tmp_path):
    """C5, then S1 into the same report: C5 keeps its verdicts, and S1 runs only its new
    recipes (dense, SR-STE and STEP at its own lr come from C5's store)."""
    q, lrs, out, first, second, new = _merged(tmp_path, "C5")
    assert len(new) == len(q.seeds) * len(protocol.RULES_S1["recipes"])
    before = {(c.claim, c.setting): c.verdict for c in first.claims}
    after = {(c.claim, c.setting): c.verdict for c in second.claims}
    assert {k: v for k, v in after.items() if k[0] == "C5"} == before
    _check_s1_report(out, second, lrs)


def _check_s1_report(out, report, lrs):
    after = {(c.claim, c.setting): c.verdict for c in report.claims}
    assert [k for k in after if k[0] == "S1"] == [("S1", "digits/fast")]
    doc = json.loads((out / "report.json").read_text())["result"]
    assert doc["protocol"]["extras"]["S1"]["rules_sha256"] == protocol.rules_digest(
        protocol.RULES_S1)
    assert doc["lrs"]["digits/fast"] == lrs["digits/fast"]
    text = (out / "report.md").read_text()
    assert "S1 by its own registered rules" in text and "| N:M | recipe |" in text
    assert "successors-digits-fast.png" in text
    assert (out / "figures" / "successors-digits-fast.png").is_file()
    assert s1.readme_table(out / "report.json").startswith("S1 on digits/fast")
