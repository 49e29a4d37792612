"""`stepsim check` on the command line: its help names the registered protocol, bad input is
one line before any work, and a small check writes a well-formed report.json, report.md and
figures.

Quick mode reads the learning rates of the committed full run
(``stepsim/checks/tuned_lrs.json``); these tests point it at a file of their own instead.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from stepsim.checks import tuning
from stepsim.checks.verdict import VERDICTS
from stepsim.cli import main


def _error_lines(err: str) -> list[str]:
    """stderr without argparse's usage block (``usage:`` and its indented continuation)."""
    return [line for line in err.splitlines()
            if line.strip() and not line.startswith(("usage:", " "))]


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if any run or task starts."""
    from stepsim.experiments import executors

    monkeypatch.setattr(executors, "execute", lambda task: pytest.fail("a run started"))


@pytest.fixture
def committed_lrs(monkeypatch, tmp_path):
    """Quick mode's learning rates from a file of this test's own (dense Adam on digits at the
    fast timescale: what C3 needs)."""
    path = tmp_path / "tuned_lrs.json"
    tuning.write_committed({"digits/fast": {"adam|dense|-": 0.01}}, path, source="a test")
    monkeypatch.setattr(tuning, "COMMITTED", path)
    return path


def test_help_names_the_registered_protocol(capsys):
    assert main(["check", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "registered protocol (paper_checks/PROTOCOL.md)" in text
    assert "lrs and regularisers tuned on a validation split, 8 seeds, digits, the " \
        "transformer LM and MNIST-1D" in text
    assert "--problem NAME" in text and "(digits | lm | mnist1d)" in text
    assert "learning rates of the committed full run" in text  # --quick
    assert "--problem-option" not in text and "--steps" not in text


@pytest.mark.parametrize("argv, pattern", [
    (["C13"], r"unknown claim 'C13'"),
    (["all", "C99"], r"unknown claim 'C99'"),
    (["C1", "--problem", "regression"], r"argument --problem: invalid choice: 'regression'"),
    (["C12", "--jobs", "0"], r"--jobs"),
    (["C1", "--problem-option", "nm=1:8"], r"unrecognized arguments: --problem-option"),
    (["C1", "--steps", "200"], r"unrecognized arguments: --steps"),
    # the extended set (PROTOCOL.md D5.11) named in a full check without --extended
    (["C1", "--problem", "lm"], r"problem 'lm' belongs to the extended set .* --extended$"),
    (["all", "S1"], r"claim S1 belongs to the extended set .* --extended$"),
    (["C9"], r"claim C9 belongs to the extended set .* --extended$"),
])
def test_bad_arguments_are_one_line_before_any_work(argv, pattern, tmp_path, capsys, no_work):
    out = tmp_path / "x"
    assert main(["check", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = _error_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.search(pattern, lines[0]), lines[0]
    assert not out.exists()


def test_an_unwritable_out_is_one_line_before_any_work(tmp_path, capsys, no_work):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["check", "C12", "--out", str(a_file)]) == 2
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "--out must be a directory" in lines[0], lines
    assert main(["check", "C3", "--out", str(a_file / "below")]) == 2
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "is not writable" in lines[0], lines
    assert a_file.read_text() == "x"


def test_quick_mode_without_the_committed_learning_rates_says_so(tmp_path, capsys,
                                                                 monkeypatch, no_work):
    monkeypatch.setattr(tuning, "COMMITTED", tmp_path / "missing.json")
    assert main(["check", "C3", "--quick", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(_error_lines(err)) == 1, err
    assert err.startswith("stepsim check: error: ") and "missing.json is missing: quick mode " \
        "reuses the learning rates of the committed full run" in err
    assert not (tmp_path / "r" / "report.json").exists()


def test_full_mode_claims_without_training_write_a_report(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["check", "C12", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("C12  no training") and "REPRODUCED" in printed
    doc = json.loads((out / "report.json").read_text())
    result = doc["result"]
    assert result["mode"] == "full" and result["tuning"] == {} and result["lrs"] == {}
    assert result["protocol"]["rules_sha256"] and not result["protocol"]["altered_for_testing"]
    (c12,) = result["claims"]
    assert c12["verdict"] == "REPRODUCED" and c12["setting"] == "none"
    assert c12["rule"].startswith("Rule (PROTOCOL")
    assert (out / c12["figures"][0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert md.startswith("# stepsim check — full mode\n") and "indicative" not in md
    assert "## no training" in md and "| C12 | **REPRODUCED** |" in md


def test_quick_subset_writes_a_well_formed_report(tmp_path, capsys, committed_lrs):
    out = tmp_path / "report"
    assert main(["check", "C3", "C12", "--quick", "--out", str(out), "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("[quick: indicative, not evidence]")
    assert "C3   digits/fast" in printed and "C12  no training" in printed
    assert "report.json" in printed
    doc = json.loads((out / "report.json").read_text())
    result, provenance = doc["result"], doc["provenance"]
    assert result["mode"] == "quick" and provenance["params"]["claims"] == ["C3", "C12"]
    # this test's own lr; configs the committed run did not tune come labelled provisional
    assert result["lrs"]["digits/fast"] == {"adam|dense|-": 0.01} and result["tuning"] == {}
    assert set(result["lrs"]) <= {"digits/fast", "digits/main"}
    assert provenance["versions"]["numpy"]
    claims = {c["claim"]: c for c in result["claims"]}
    assert list(claims) == ["C3", "C12"]
    for c in claims.values():
        assert c["verdict"] in VERDICTS and c["rule"].startswith("Rule (PROTOCOL")
        assert c["runtime_s"] > 0 and c["versions"]["python"] and c["reason"]
        assert c["mode"] == "quick"
        for figure in c["figures"]:
            assert (out / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    c3 = claims["C3"]
    assert c3["setting"] == "digits/fast" and c3["seeds"] == [0, 1, 2]
    assert len(c3["effect"]["values"]) == 3 and len(c3["parts"]) == 3  # loss scales: parts
    assert c3["effect"]["ci_low"] <= c3["effect"]["estimate"] <= c3["effect"]["ci_high"]
    assert c3["numbers"]["steps"] == 2000 and c3["numbers"]["window"] == 100
    assert claims["C12"]["verdict"] == "REPRODUCED"  # exact counts: no noise here
    runs = [p for p in (out / "runs").glob("*.json")]
    assert len(runs) == 9 + 1  # 3 seeds x 3 loss scales, and C12's count
    md = (out / "report.md").read_text()
    assert md.startswith("# stepsim check — quick mode (indicative, not evidence)")
    assert "## digits/fast" in md and "| C3 | **" in md and "## C12 on none" in md
    # the first screen: the verdict matrix, as a table and a figure
    assert md.index("## Verdict matrix") < md.index("## digits/fast")
    assert "| C3 | **" in md.split("## Verdict matrix")[1].split("##")[0]
    assert (out / "figures" / "verdict_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # beside the committed full run: C12 is REPRODUCED there too
    assert "line(s) differ from the committed full run's verdict" in md
    assert re.search(r"\| C12 \| \*\*REPRODUCED\*\* \|.* \| same \|", md)
    assert "rule: Rule (PROTOCOL" in md and "## Learning rates" in md
    assert "from the committed full run" in md


def test_dry_run_prints_the_plan_and_runs_or_writes_nothing(tmp_path, capsys, no_work):
    from stepsim.checks.planning import plan

    out = tmp_path / "quick"
    assert main(["check", "--dry-run", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "the plan; nothing is run" in printed and "committed full run" in printed
    made = plan(["all"], "quick")
    for claim, key in made.evaluation.jobs:  # a row per claim and setting
        assert f"evaluation {key} {claim} " in printed, (claim, key)
    distinct = {j.digest for jobs in made.evaluation.jobs.values() for j in jobs}
    assert f"{len(distinct)} distinct evaluation job(s)" in printed
    assert "0 stored" in printed and "built-in model" in printed  # an empty store
    assert not out.exists()  # not even the folder
    # full mode: the tuning first, the evaluation and the tie set after it
    assert main(["check", "C5", "--dry-run", "--problem", "digits", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tuning digits/main (" in printed and "learning rates: tuned first" in printed
    assert "after tuning" in printed and not out.exists()
    # the tie set's readings are secondary: the extended set's on digits (PROTOCOL.md D5.11)
    assert "tie set" not in printed
    assert main(["check", "C5", "--dry-run", "--extended", "--problem", "digits", "--out",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    assert "on digits SR-STE's tie set's readings" in printed and not out.exists()
    # bad input is still one line
    assert main(["check", "--dry-run", "--quick", "--extended"]) == 2


def test_dry_run_counts_what_the_store_holds_and_its_recorded_time(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["check", "C12", "--out", str(out)]) == 0  # a count: no training
    capsys.readouterr()
    assert main(["check", "C12", "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "its store holds 1 finished run(s) and task(s)" in printed
    (row,) = [line for line in printed.splitlines() if "evaluation none C12" in line]
    assert "1 tasks" in row and "1 stored" in row and "all stored" in row


def test_help_imports_nothing_heavy():
    code = ("import sys; from stepsim.cli import build_parser; build_parser(); "
            "import stepsim.checks, stepsim.checks.protocol; "
            "print('numpy' in sys.modules, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_same_results_in_process_in_a_pool_and_on_dask():
    """Every executor gives the same numbers for the same runs (runtime aside)."""
    from dask.distributed import LocalCluster

    from stepsim.checks.budget import Budget
    from stepsim.experiments import executors, traces

    b = Budget("full", "digits", "main", (0, 1), lrs={"adam|dense|-": 1e-3}, steps=60)
    specs = b.runs("dense")

    def collect(run, *args):
        out = {}
        run(specs, lambda spec, output: out.setdefault(spec.digest,
                                                       traces.summary(output.result)), *args)
        return out

    serial = collect(executors.run_serial)
    assert len(serial) == 2 and serial[specs[0].digest] != serial[specs[1].digest]
    assert collect(executors.run_pool, 2) == serial
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        assert collect(executors.run_dask, cluster.scheduler_address) == serial


def test_report_json_records_the_wall_time_of_every_check_that_made_it(tmp_path, capsys):
    """The run as a whole: each check that writes the report adds an entry (its claims, wall
    time, runs made and found); a check that replaces every verdict of a report of its kind
    keeps the earlier entries (their runs are the ones it finds in the store); the total is
    their sum and report.md says it. (C12: the one full-mode claim that trains nothing and
    takes seconds.)"""
    out = tmp_path / "report"
    for _ in range(2):
        assert main(["check", "C12", "--out", str(out), "--quiet"]) == 0
    compute = json.loads((out / "report.json").read_text())["result"]["compute"]
    checks = compute["checks"]
    assert [c["claims"] for c in checks] == [["C12"], ["C12"]]
    assert all(c["wall_s"] > 0 and c["mode"] == "full" for c in checks)
    assert compute["wall_s"] == pytest.approx(sum(c["wall_s"] for c in checks))
    assert [(c["runs_made"], c["found_in_store"]) for c in checks] == [(1, 0), (0, 1)]
    md = (out / "report.md").read_text()
    assert f"Wall time: {compute['wall_s'] / 60:.1f} min over 2 check(s)" in md
    # a report of another kind is not carried: a quick check starts its own ledger
    assert main(["check", "C12", "--quick", "--out", str(tmp_path / "q"), "--quiet"]) == 0
    quick = json.loads((tmp_path / "q" / "report.json").read_text())["result"]["compute"]
    assert len(quick["checks"]) == 1 and quick["wall_s"] == quick["checks"][0]["wall_s"]


def test_the_ledger_adds_a_merge_to_the_report_it_merges_into():
    """merging.check_ledger / close_ledger: an old report's entries first, this check last,
    the total their sum; a report from before the ledger adds none."""
    from stepsim.checks import merging

    old = {"runs": 5, "checks": [{"claims": ["C1"], "wall_s": 60.0}], "wall_s": 60.0}
    ledger = merging.check_ledger(old, {"claims": ["C3"], "wall_s": None})
    closed = merging.close_ledger({"runs": 7, **ledger}, 30.0)
    assert [c["claims"] for c in closed["checks"]] == [["C1"], ["C3"]]
    assert closed["wall_s"] == 90.0 and closed["runs"] == 7
    assert merging.check_ledger({"runs": 5}, {"wall_s": 2.0}) == {
        "checks": [{"wall_s": 2.0}], "wall_s": 2.0}

