"""A quick report beside the committed full run (stepsim.checks.beside_full): the lines
whose claim verdict differs are found, marked in the printed table and in report.md."""

from __future__ import annotations

import json
from types import SimpleNamespace

from stepsim.checks import beside_full, protocol
from stepsim.checks.outputs import Report


def _line(claim, setting, verdict):
    return SimpleNamespace(claim=claim, setting=setting, verdict=verdict, headline="",
                           reason="why")


def test_committed_reads_the_claims_own_verdicts_of_the_committed_report():
    full = beside_full.committed()
    doc = json.loads(beside_full.COMMITTED_REPORT.read_text())["result"]
    main = [c for c in doc["claims"] if c["setting"] == "digits/main"]
    assert main and all(full[(c["claim"], "digits")] == c["verdict"] for c in main)
    assert full[("C12", "no training")] == "REPRODUCED"
    assert beside_full.committed("/no/such/report.json") == {}


def test_differences_pairs_a_line_with_its_claim_on_its_problem():
    full = {("C1", "digits"): "NOT REPRODUCED", ("C2", "digits"): "REPRODUCED",
            ("C12", "no training"): "REPRODUCED"}
    lines = [_line("C1", "digits/fast", "INCONCLUSIVE"), _line("C2", "digits/fast",
                                                                "REPRODUCED"),
             _line("C5", "lm/fast", "INCONCLUSIVE"), _line("C12", "none", "NOT REPRODUCED")]
    assert beside_full.differences(lines, full) == {0: "NOT REPRODUCED", 3: "REPRODUCED"}


def test_the_printed_quick_table_marks_a_differing_line_and_full_mode_never():
    full = beside_full.committed()
    (claim, problem), verdict = next(iter(full.items()))
    other = next(v for v in ("REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE") if v != verdict)
    setting = "none" if problem == "no training" else f"{problem}/fast"
    lines = (_line(claim, setting, other), _line(claim, setting, verdict))
    quick = Report("quick", lines, 1.0, None).table().splitlines()
    assert quick[1].split()[2].endswith("*") and "*" not in quick[2].split()[2]
    assert quick[-1].startswith("* differs from the committed full run (1 line(s)")
    assert "*" not in Report("full", lines, 1.0, None).table()


def test_why_quick_differs_states_the_rules_numbers():
    text = beside_full.why_quick_differs(protocol.RULES)
    assert f"{len(protocol.RULES.seeds.quick)} seeds instead of " \
           f"{len(protocol.RULES.seeds.full)}" in text
