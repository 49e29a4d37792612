"""Nothing is overwritten silently (issue 28): check merges into or refuses another report,
a selection with no verdict is an error, sweep refuses another sweep's folder, and an
unreachable scheduler leaves nothing behind. Every test runs the real commands."""

from __future__ import annotations

import json
import os

import pytest

from stepsim.cli import main


def _report(out):
    return json.loads((out / "report.json").read_text())["result"]


def test_a_check_with_no_verdict_is_an_error_and_keeps_the_report(tmp_path, capsys):
    out = tmp_path / "q"
    assert main(["check", "C12", "--quick", "--out", str(out)]) == 0
    before = (out / "report.json").read_bytes(), sorted(p.name for p in (out / "figures").iterdir())
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "figures").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700
    capsys.readouterr()
    assert main(["check", "C3", "--problem", "lm", "--extended", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no verdict to make" in err and len(err.strip().splitlines()) == 1
    assert main(["check", "C1", "--quick", "--problem", "lm", "--out", str(out)]) == 2
    assert "no verdict to make" in capsys.readouterr().err  # quick mode: only C5 on the LM
    assert before == ((out / "report.json").read_bytes(),
                      sorted(p.name for p in (out / "figures").iterdir()))
    # a full-mode check of another claim would mix modes: refused before any work
    assert main(["check", "C11", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds a quick-mode report with claims C12" in err and "Traceback" not in err
    assert before[0] == (out / "report.json").read_bytes()


def test_a_check_never_replaces_a_figures_folder_it_did_not_write(tmp_path, capsys):
    """`check --out DIR` swaps DIR/figures whole: a figures/ folder that no check wrote (no
    report.json beside it, no figures/RUN_ID) is refused before any work, never replaced."""
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "mine.png").write_bytes(b"not stepsim's")
    assert main(["check", "C12", "--quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds a figures/ folder that no stepsim check wrote" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures"]
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["mine.png"]


@pytest.mark.slow
def test_a_check_of_another_claim_merges_into_the_report_and_keeps_its_figures(tmp_path,
                                                                             monkeypatch):
    # C11 at a smaller sample than quick mode's (the paths, not the evidence: its Chernoff
    # bounds, a bound a lag, were most of this test): 20 trials x 4 coordinates, 1 lag a
    # decade
    from stepsim.checks import c11_theorem1

    monkeypatch.setattr(c11_theorem1, "_size", lambda mode: {"trials": 20, "dim": 4,
                                                             "per_decade": 1})
    out = tmp_path / "q"  # --jobs 1: no pool's start-up and compiles (the merge is the point)
    assert main(["check", "C12", "--quick", "--out", str(out), "--jobs", "1"]) == 0
    c12 = {c["claim"]: c for c in _report(out)["claims"]}["C12"]
    assert main(["check", "C11", "--quick", "--out", str(out), "--jobs", "1"]) == 0
    claims = {c["claim"]: c for c in _report(out)["claims"]}
    assert set(claims) == {"C11", "C12"} and claims["C12"]["verdict"] == c12["verdict"]
    for c in claims.values():
        assert c["figures"] and all((out / f).is_file() for f in c["figures"])
    assert "C11" in (out / "report.md").read_text() and "C12" in (out / "report.md").read_text()


def _sweep(out, *extra):
    return main(["sweep", "--recipes", "dense", "--steps", "5", "--jobs", "1", "--out",
                 str(out), *extra])


def test_sweep_refuses_another_sweeps_folder_unless_forced_and_resumes_its_own(tmp_path,
                                                                             capsys):
    out = tmp_path / "sw"
    assert _sweep(out, "--seeds", "2") == 0
    table = (out / "table.csv").read_text()
    assert _sweep(out, "--seeds", "2") == 0  # the same spec: resumes (nothing to run)
    assert (out / "table.csv").read_text() == table
    plan = (out / "sweep.json").read_bytes()
    capsys.readouterr()
    assert _sweep(out, "--seeds", "1", "--nm", "1:4") == 2
    err = capsys.readouterr().err
    assert "holds another sweep (2 planned runs, 2 finished)" in err and "--force" in err
    assert (out / "sweep.json").read_bytes() == plan and (out / "table.csv").read_text() == table
    assert _sweep(out, "--seeds", "1", "--force") == 0  # its one run is already finished
    assert len((out / "table.csv").read_text().splitlines()) == 2


def test_an_unreachable_scheduler_leaves_no_folder_or_claim(tmp_path, capsys):
    dask = pytest.importorskip("dask")
    # distributed registers its config defaults on import: import it before the override,
    # or leaving the `with` deletes the whole "distributed" section it created (a later
    # LocalCluster in this process then fails with KeyError: 'distributed')
    pytest.importorskip("distributed")
    out = tmp_path / "sw"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        rc = _sweep(out, "--scheduler", "tcp://127.0.0.1:9")
        assert rc == 1 and not out.exists()
        assert "cannot connect to the Dask scheduler" in capsys.readouterr().err
        rc = main(["check", "C12", "--quick", "--out", str(tmp_path / "c"), "--scheduler",
                   "tcp://127.0.0.1:9"])
        assert rc == 1 and not (tmp_path / "c").exists()


def test_checking_one_claim_into_the_committed_draft_3_report_is_refused(tmp_path, capsys):
    """The reproduction of issue 28 on the committed full report (copied, declared draft 3
    as the report before it was): draft-3 evidence while this code runs protocol draft 4,
    so `check C12 --out DIR` would mix the evidence of two drafts: refused in one line
    before any work, the report and its figures untouched. (A check of another claim under the same rules merges: the slow test above.)"""
    import shutil
    from pathlib import Path

    import json

    from stepsim._ground.atomic import write_text
    from stepsim.checks import protocol

    committed = Path(__file__).resolve().parents[2] / "figures" / "check"
    out = tmp_path / "full"
    shutil.copytree(committed, out)
    # the committed report is draft-4 evidence now: declare the copy draft 3's (its exact
    # digest), as the draft-3 report committed before it was
    doc = json.loads((out / "report.json").read_text())
    doc["result"]["protocol"].update(rules_version=3,
                                     rules_sha256=protocol.rules_digest(protocol.DRAFTS[3]))
    write_text(out / "report.json", json.dumps(doc))
    before = (out / "report.json").read_bytes()
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert main(["check", "C12", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "made under protocol draft 3 (this check runs draft 5)" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (out / "report.json").read_bytes() == before
    assert sorted(p.name for p in (out / "figures").iterdir()) == figures
    assert main(["check", "C12", "--quick", "--out", str(out)]) == 2  # modes never mix
