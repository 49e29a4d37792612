"""The registered protocol, its code and its evidence agree (PROTOCOL.md, issues 19 and 23).

* the rules in code equal PROTOCOL.md for every draft (``protocol.DRAFTS``: draft 3's JSON
  block, and each later draft's block of changes over it); the code runs the current draft;
* the committed full report (``figures/check/report.json``) declares its draft and was made
  under exactly that draft's rules (same digest), from a committed protocol, not altered
  for testing, with that draft's seeds; quick mode's learning rates
  (``stepsim/checks/tuned_lrs.json``) are that report's, tuned under the same draft;
* in a git checkout: the protocol commit the report names precedes the commit of the
  evidence, and PROTOCOL.md has only grown since — the file at that commit is a byte
  prefix of today's (later drafts are appended), so the report's draft reads the same;
* claims.md names the committed report's draft.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stepsim.checks import protocol, tuning

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "figures" / "check" / "report.json"


def _report() -> dict:
    return json.loads(REPORT.read_text())["result"]


def test_rules_in_code_equal_the_registered_block():
    assert protocol.CURRENT == 5 and protocol.RULES.to_dict() == protocol.DRAFTS[protocol.CURRENT]
    assert protocol.RULES.version == protocol.CURRENT
    for draft, rules in protocol.DRAFTS.items():
        assert rules["version"] == draft
        assert protocol.document_rules(draft=draft) == rules, draft
    assert protocol.document_rules() == protocol.RULES.to_dict()
    assert len(protocol.rules_digest()) == 64


def test_draft_3_is_kept_unchanged_inside_draft_4():
    # the committed report's digest is draft 3's, and draft 4 only adds or replaces keys
    draft3, draft4 = protocol.DRAFTS[3], protocol.DRAFTS[4]
    assert protocol.rules_digest(draft3) == (
        "38ecae303b6df465015d6998201d6da995cb6bf272ffbd8159ebbc831cbe1c5f")
    assert protocol.rules_digest(draft4) != protocol.rules_digest(draft3)
    changed = {k for k in draft4 if draft3.get(k) != draft4[k]}
    assert changed == set(protocol.CHANGES_4)
    assert {k: draft4[k] for k in draft3 if k not in changed} == {
        k: v for k, v in draft3.items() if k not in changed}


def test_a_report_is_checked_against_exactly_its_declared_draft():
    good3 = {"rules_version": 3, "rules_sha256": protocol.rules_digest(protocol.DRAFTS[3])}
    good4 = {"rules_version": 4, "rules_sha256": protocol.rules_digest(protocol.DRAFTS[4])}
    assert protocol.draft_of(good3) == 3 and protocol.draft_of(good4) == 4
    with pytest.raises(ValueError, match="not draft 4's"):  # draft-3 digest, says draft 4
        protocol.draft_of({"rules_version": 4, "rules_sha256": good3["rules_sha256"]})
    with pytest.raises(ValueError, match="not draft 3's"):
        protocol.draft_of({"rules_version": 3, "rules_sha256": good4["rules_sha256"]})
    with pytest.raises(ValueError, match="known drafts"):
        protocol.draft_of({"rules_sha256": good3["rules_sha256"]})  # no draft declared


def test_a_changed_rule_changes_the_digest_and_breaks_the_match(tmp_path):
    text = protocol.PROTOCOL_PATH.read_text().replace('"alpha": 0.05', '"alpha": 0.1')
    changed = tmp_path / "PROTOCOL.md"
    changed.write_text(text)
    rules = protocol.document_rules(changed)
    assert rules != protocol.RULES.to_dict()
    assert protocol.rules_digest(rules) != protocol.rules_digest()
    # a change inside draft 4's block moves draft 4 only; draft 3 reads as before
    text = protocol.PROTOCOL_PATH.read_text().replace('"max_ratio": 0.9', '"max_ratio": 0.8')
    changed.write_text(text)
    assert protocol.document_rules(changed, draft=3) == protocol.DRAFTS[3]
    assert protocol.document_rules(changed, draft=4) != protocol.DRAFTS[4]
    with pytest.raises(ValueError, match="draft must be one of"):
        protocol.document_rules(changed, draft=6)


def test_committed_report_was_made_under_these_rules():
    report = _report()
    record = report["protocol"]
    assert report["mode"] == "full"
    draft = protocol.draft_of(record)  # its digest is exactly its declared draft's
    rules = protocol.DRAFTS[draft]
    assert record["rules_sha256"] == protocol.rules_digest(rules)
    assert record["commit"] and not record["altered_for_testing"]
    tuning_seeds = set(rules["seeds"]["tuning"])
    settings = {c["setting"] for c in report["claims"]}
    base = {"digits/main", "digits/fast", "lm/fast", "none"}
    if draft == 3:
        assert settings == base
    elif draft == 4:  # operating points ("digits/main@own-lr", "digits/main-cosine", ...)
        assert base <= settings and {s.split("@")[0] for s in settings} <= base | {
            "digits/main-cosine"}
    else:  # draft 5's full run (D5.11): digits and MNIST-1D at the primary readings
        assert {s.split("@")[0] for s in settings} == {"digits/main", "mnist1d/cnn", "none"}
    extension = (rules.get("divergence") or {}).get("extension_seeds") or []
    for claim in report["claims"]:
        if claim["setting"] == "none":
            continue
        # the evaluation seeds, and (draft 5, D5.6/D5.8) the extension seeds after them
        assert list(claim["seeds"]) in (rules["seeds"]["full"],
                                        rules["seeds"]["full"] + extension)
        assert not tuning_seeds & set(claim["seeds"])  # tuning seeds never reported
        # draft 5: a claim's own line combines its readings (D5.5), whose lines hold the parts
        combined = draft >= 5 and "@" not in claim["setting"] and claim["reason"].startswith(
            ("REPRODUCED at ", "NOT REPRODUCED at every primary reading",
             "mixed readings", "no primary reading decides it"))
        assert claim["parts"] or combined, claim["claim"]
        for part in claim["parts"]:
            assert part["verdict"] in ("REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE")
    # every config a claim used has a tuned choice shown with its grid
    for setting, configs in report["lrs"].items():
        for key, lr in configs.items():
            row = report["tuning"][setting][key]
            lr_value = lr["lr"] if isinstance(lr, dict) else lr  # draft 5: {"lr", "lam"}
            assert row["choice"] == lr and lr_value in row["grid"]


def test_quick_mode_reuses_the_committed_full_runs_learning_rates():
    committed = json.loads(tuning.COMMITTED.read_text())
    record = _report()["protocol"]
    assert committed["lrs"] == _report()["lrs"]
    # tuned under the committed report's draft (draft 3 until the draft-4 run is committed)
    assert committed["rules_sha256"] == record["rules_sha256"]
    assert committed["rules_sha256"] == protocol.rules_digest(
        protocol.DRAFTS[protocol.draft_of(record)])


def test_claims_md_names_the_committed_reports_draft():
    draft = protocol.draft_of(_report()["protocol"])
    claims = (ROOT / "paper_checks" / "claims.md").read_text()
    assert f"[`PROTOCOL.md`](PROTOCOL.md) draft {draft} " in claims[:1000]


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None,
                    reason="not a git checkout")
def test_protocol_commit_precedes_the_evidence_and_is_unchanged():
    commit = _report()["protocol"]["commit"]
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode:
        pytest.skip("shallow clone: the protocol commit is not in this history")
    assert _git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0
    then = _git("show", f"{commit}:paper_checks/PROTOCOL.md")
    assert then.returncode == 0
    now = protocol.PROTOCOL_PATH.read_text()
    # later drafts are appended: the text the evidence was registered under is unchanged
    assert now.startswith(then.stdout), (
        "PROTOCOL.md changed (not only appended to) after the evidence's protocol commit")
    if now != then.stdout:  # a later draft was appended: it must be a new RULES block
        later = now[len(then.stdout):]
        draft = protocol.draft_of(_report()["protocol"])
        # (or an extra comparison's own block, e.g. S1, which leaves the draft unchanged)
        assert protocol.markers(draft + 1)[0] in later or any(
            protocol.markers(name)[0] in later for name in protocol.EXTRAS)
    evidence = _git("log", "-1", "--format=%H", "--", "figures/check/report.json").stdout.strip()
    if evidence:  # committed: strictly after the protocol
        assert evidence != commit
        assert _git("merge-base", "--is-ancestor", commit, evidence).returncode == 0


# --- the typed rules ----------------------------------------------------------------------

def test_typed_rules_are_the_registered_dict_with_its_digest():
    from stepsim.checks.rules import Rules, SuccessorRules

    rules = protocol.RULES
    assert isinstance(rules, Rules)
    assert rules.to_dict() == protocol.DRAFTS[protocol.CURRENT]
    assert rules.digest == protocol.rules_digest() == protocol.rules_digest(
        protocol.DRAFTS[protocol.CURRENT])
    # the digest the committed learning rates (quick mode's: draft 5's full run) and the
    # draft-4 record kept beside it (paper_checks/draft4/) name
    assert rules.digest == json.loads(tuning.COMMITTED.read_text())["rules_sha256"]
    assert protocol.rules_digest(protocol.DRAFTS[4]) == protocol.TYPED[4].digest == json.loads(
        (ROOT / "paper_checks" / "draft4" / "tuned_lrs.json").read_text())["rules_sha256"]
    assert protocol.TYPED[5] is rules
    s1 = protocol.EXTRAS["S1"]
    assert isinstance(s1, SuccessorRules) and s1.digest == protocol.rules_digest(
        protocol.RULES_S1)
    assert rules.seeds.quick == (0, 1, 2) and rules.problems["digits"].margin == 0.5
    assert rules.operating_points.tie.readings["lm"] == ("SR",)


def test_typed_rules_are_read_only_and_refuse_bad_rules_in_one_line():
    from stepsim.checks.rules import Rules

    rules = protocol.RULES
    with pytest.raises(dataclasses.FrozenInstanceError):
        rules.alpha = 0.1
    with pytest.raises(TypeError, match="read-only"):
        rules.problems["digits"].options["hidden"] = [128]
    data = protocol.RULES.to_dict()
    del data["alpha"]
    with pytest.raises(ValueError, match=r"missing key\(s\) \['alpha'\]"):
        Rules.parse(data)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['alfa'\]"):
        Rules.parse({**protocol.RULES.to_dict(), "alfa": 0.05})
    with pytest.raises(TypeError, match="seeds.quick must be a list"):
        rules.with_value("seeds.quick", 3)
    with pytest.raises(ValueError, match="tuning seed is also an evaluation seed"):
        rules.with_value("seeds.quick", [0, 1000])
    with pytest.raises(ValueError, match="quick mode's problems"):
        rules.with_value("quick.problems", ["mnist"])
    changed = rules.with_value("grids.digits.adam", [1e-3, 1e-2])
    assert changed.grid("digits", "adam") == [1e-3, 1e-2] and changed.digest != rules.digest


def test_draft_5_in_code_equals_its_registered_block_and_types_round_trip():
    # registered before its evidence: the code's draft 5 is the document's, key for key
    assert protocol.document_rules(draft=5) == protocol.DRAFTS[5]
    for draft in (4, 5):
        typed = protocol.TYPED[draft]
        assert typed.to_dict() == protocol.DRAFTS[draft]  # an earlier draft: its keys only
        assert typed.digest == protocol.rules_digest(protocol.DRAFTS[draft])
    five = protocol.TYPED[5]
    assert five.divergence.blowup.multiple == 10.0 and five.intervals.bootstrap.resamples
    assert protocol.TYPED[4].readings is None and five.readings.step_claims


def test_draft5_halving_is_registered_as_the_amendment_says():
    """D5.2's amendment: SH-3/2 for dense and SR-STE, rungs at T/4 and T/2, the third of a
    grid (rounded up: 2 of 6, 2 of 5, 2 of 4) past the first rung, two finalists; a bad
    record is refused under its key."""
    from stepsim.checks.rules import Halving

    halving = protocol.TYPED[5].tuning.halving
    assert (halving.rule, halving.recipes, halving.rungs) == ("SH-3/2", ("dense", "sr-ste"),
                                                              (0.25, 0.5))
    assert [halving.kept(n) for n in (4, 5, 6, 7, 9)] == [2, 2, 2, 3, 3]
    assert protocol.TYPED[4].to_dict() == protocol.DRAFTS[4]  # draft 4 has no tuning block
    good = halving.to_dict()
    for key, bad, message in (("rungs", [0.5, 0.25], "halving.rungs must rise"),
                              ("keep_after_first", "most", "halving.keep_after_first"),
                              ("finalists", 0, "halving.finalists must be >= 1")):
        with pytest.raises(ValueError, match=message):
            Halving.parse({**good, key: bad})
    with pytest.raises(TypeError, match="from_scratch must be true or false"):
        Halving.parse({**good, "from_scratch": 1})
