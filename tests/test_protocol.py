"""The registered protocol, its code and its evidence agree (PROTOCOL.md, issue 19 item 1).

* the rules in code (``stepsim.checks.protocol.RULES``) equal the JSON block of
  ``paper_checks/PROTOCOL.md``;
* the committed full report (``figures/check/report.json``) was made under these rules
  (same digest), from a committed protocol, not altered for testing, with the protocol's
  seeds; quick mode's learning rates (``stepsim/checks/tuned_lrs.json``) are that report's;
* in a git checkout: the protocol commit the report names precedes the commit of the
  evidence, and PROTOCOL.md has not changed since.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stepsim.checks import protocol, tuning

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "figures" / "check" / "report.json"


def _report() -> dict:
    return json.loads(REPORT.read_text())["result"]


def test_rules_in_code_equal_the_registered_block():
    assert protocol.document_rules() == protocol.RULES
    assert len(protocol.rules_digest()) == 64


def test_a_changed_rule_changes_the_digest_and_breaks_the_match(tmp_path):
    text = protocol.PROTOCOL_PATH.read_text().replace('"alpha": 0.05', '"alpha": 0.1')
    changed = tmp_path / "PROTOCOL.md"
    changed.write_text(text)
    rules = protocol.document_rules(changed)
    assert rules != protocol.RULES
    assert protocol.rules_digest(rules) != protocol.rules_digest()


def test_committed_report_was_made_under_these_rules():
    report = _report()
    record = report["protocol"]
    assert report["mode"] == "full"
    assert record["rules_sha256"] == protocol.rules_digest()
    assert record["commit"] and not record["altered_for_testing"]
    tuning_seeds = set(protocol.RULES["seeds"]["tuning"])
    settings = {c["setting"] for c in report["claims"]}
    assert settings == {"digits/main", "digits/fast", "lm/fast", "none"}
    for claim in report["claims"]:
        if claim["setting"] == "none":
            continue
        assert list(claim["seeds"]) == protocol.RULES["seeds"]["full"]
        assert not tuning_seeds & set(claim["seeds"])  # tuning seeds never reported
        assert claim["parts"], claim["claim"]
        for part in claim["parts"]:
            assert part["verdict"] in ("REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE")
    # every config a claim used has a tuned choice shown with its grid
    for setting, configs in report["lrs"].items():
        for key, lr in configs.items():
            row = report["tuning"][setting][key]
            assert row["choice"] == lr and lr in row["grid"]


def test_quick_mode_reuses_the_committed_full_runs_learning_rates():
    committed = json.loads(tuning.COMMITTED.read_text())
    assert committed["lrs"] == _report()["lrs"]
    assert committed["rules_sha256"] == protocol.rules_digest()


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None,
                    reason="not a git checkout")
def test_protocol_commit_precedes_the_evidence_and_is_unchanged():
    commit = _report()["protocol"]["commit"]
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode:
        pytest.skip("shallow clone: the protocol commit is not in this history")
    assert _git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0
    diff = _git("diff", "--quiet", commit, "--", "paper_checks/PROTOCOL.md")
    assert diff.returncode == 0, "PROTOCOL.md changed after the evidence's protocol commit"
    evidence = _git("log", "-1", "--format=%H", "--", "figures/check/report.json").stdout.strip()
    if evidence:  # committed: strictly after the protocol
        assert evidence != commit
        assert _git("merge-base", "--is-ancestor", commit, evidence).returncode == 0
