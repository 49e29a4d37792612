"""Figures: the committed ones record their command, and re-running it gives the same
result; every paper check draws its figure from a report's ClaimResult, also one read back
from report.json (``outputs.redraw_figures``)."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "figures"))

import regenerate

from tests.checks.fake_views import base, budget_for, decided
from tests.checks.test_rules_c1_c6 import c1_scenario, c2_scenario, c4_scenario, gap_scenario
from tests.checks.test_rules_c7_c12 import c7_scenario, c8_scenario, c9_scenario

PNG = b"\x89PNG\r\n\x1a\n"
GAPS = {"asp": 100, "sr-ste": 100, "step-a1": 250, "step-sr": 5}
#: claim -> (problem, timescale, only, scenario) of a fake check (tests/checks/test_rules_*.py)
FAKE = {
    "C1": ("digits", "main", None, c1_scenario(90, 10)),
    "C2": ("digits", "main", None, c2_scenario(0.01, 0.5)),
    "C3": ("digits", "main", None, lambda job, i: {"wrong": base(i), "z_min": 1e-9}),
    "C4": ("digits", "main", None, c4_scenario({"A1": 90, "SR": -90})),
    "C5": ("digits", "fast", ("C5",), gap_scenario(GAPS, switch_step=300)),
    "C6": ("lm", "fast", None, lambda job, i: {"gap": 0.05 + GAPS.get(job["key"], 0) / 1000,
                                               "switch_step": 300}),
    "C7": ("digits", "main", None, c7_scenario(slope=100, readings=("SR",))),
    "C8": ("digits", "main", None, c8_scenario(0, 0)),  # every part premise absent
    "C9": ("digits", "main", None, c9_scenario(100, 10, 200)),
    "C10": ("digits", "main", None, lambda job, i: {"wrong": base(i) + {
        "decay-nodense": 100, "decay-dense": 10}.get(job["key"], 0)}),
}


def fake_claims() -> list:
    """A ClaimResult of every claim: C1-C10 decided on fake views, C11 on a tiny real
    simulation of each process, C12 on the real counts."""
    from stepsim.checks.budget import NoProblem
    from tests.checks.fake_views import claim_module

    out = []
    for claim, (problem, timescale, only, scenario) in FAKE.items():
        module = claim_module(claim)
        budget = budget_for(module, problem, timescale, only=only)
        out.append(dataclasses.replace(decided(module, budget, scenario), setting=budget.key))
    plain = NoProblem("full")
    c11 = claim_module("C11")
    results = {job.digest: c11.process_job(**{**job.kwargs, "trials": 20, "dim": 4,
                                              "per_decade": 1, "horizon": 100})
               for job in c11.jobs(plain)}
    c12 = claim_module("C12")
    results.update({job.digest: c12.memory_job() for job in c12.jobs(plain)})
    for module in (c11, c12):
        out.append(dataclasses.replace(module.decide_claim(plain, results), setting="none"))
    return out


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every claim's figures drawn into out/figures, and the report written beside them."""
    from stepsim.checks.drawing import draw_one
    from stepsim.checks.outputs import Report, write_report

    out = tmp_path_factory.mktemp("report")
    staging = out / ".figures-test"
    staging.mkdir()
    claims = []
    for result in fake_claims():
        figures, _ = draw_one(result, staging)
        claims.append(dataclasses.replace(result, figures=figures))
    report = Report("full", tuple(claims), 1.0, str(out))
    write_report(report, out, params={"test": True}, figures=staging, run_id="fake")
    return out, report


def test_every_claim_draws_its_figures_from_its_result(drawn):
    out, report = drawn
    names = {c.claim: [Path(f).name for f in c.figures] for c in report.claims}
    assert names == {"C1": ["c1-digits-main.png"], "C2": ["c2-digits-main.png"],
                     "C3": ["c3-digits-main.png"], "C4": ["c4-digits-main.png"],
                     "C5": ["c5-digits-fast.png"], "C6": ["c6-lm-fast.png"],
                     "C7": ["c7-digits-main.png"], "C8": ["c8-digits-main.png"],
                     "C9": ["c9-digits-main.png"], "C10": ["c10-digits-main.png"],
                     "C11": ["c11_inflation.png", "c11_bounds.png"], "C12": ["c12.png"]}
    for c in report.claims:
        for f in c.figures:
            assert (out / f).read_bytes()[:8] == PNG, f
    assert (out / "figures" / "RUN_ID").read_text().strip() == "fake"
    md = (out / "report.md").read_text()
    assert "- figure: ![C7](figures/c7-digits-main.png)" in md
    assert "premise absent" in md  # C8's parts, named as such


def test_redraw_figures_draws_them_again_from_report_json(drawn):
    from stepsim.checks.outputs import load_report, redraw_figures

    out, report = drawn
    figures = out / "figures"
    for png in figures.glob("*.png"):
        png.unlink()
    paths = redraw_figures(out)
    assert sorted(Path(p).name for p in paths) == sorted(
        Path(f).name for c in report.claims for f in c.figures)
    for p in paths:
        assert Path(p).parent == figures and Path(p).read_bytes()[:8] == PNG
    loaded = load_report(out / "report.json")
    assert [c.claim for c in loaded.claims] == [c.claim for c in report.claims]
    assert [c.verdict for c in loaded.claims] == [c.verdict for c in report.claims]
    c7 = loaded.claims[6]
    assert c7.parts and isinstance(c7.parts[0], dict) and c7.setting == "digits/main"
    assert c7.parts[0]["verdict"] == report.claims[6].parts[0].verdict


def test_every_committed_result_records_a_stepsim_command():
    commands = regenerate.recorded_commands()
    assert len(commands) >= 10
    for path, command in commands:
        assert command and command[0] in {"theorem1", "check"}, (path, command)
        if command[0] == "theorem1":
            assert str(path.relative_to(ROOT)) in command, "the command writes this very file"
            assert path.with_suffix(".png").exists()
        else:  # stepsim check --out DIR writes DIR/report.json and DIR/figures/*.png
            out = command[command.index("--out") + 1]
            assert path.parent == ROOT / out and path.name == "report.json"
            figures = json.loads(path.read_text())["result"]["claims"]
            for claim in figures:
                for figure in claim["figures"]:
                    assert (path.parent / figure).exists(), figure


def test_a_recorded_command_reproduces_its_committed_result(tmp_path):
    (path, command), = regenerate.recorded_commands("uniform_k0_1")
    out = tmp_path / "again.json"
    command = [str(out) if arg == str(path.relative_to(ROOT)) else arg for arg in command]
    command = [arg for arg in command if not arg.endswith(".png")]
    if "--plot" in command:
        command.remove("--plot")
    subprocess.run([sys.executable, "-m", "stepsim", *command], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    committed = json.loads(path.read_text())["result"]
    again = json.loads(out.read_text())["result"]
    # everything but the wall time must match to the bit (same seed, same bits): the
    # Monte-Carlo counts are counter-based and the analytic columns use scalar pow in a
    # fixed order (stepsim.theorem1.closed_forms._pow), so this holds on any x86-64 CPU
    assert committed.pop("seconds") > 0 and again.pop("seconds") > 0
    differences = list(leaf_differences(committed, again))
    assert not differences, short_summary(differences)


def leaf_differences(a, b, where="result"):
    """(path, a, b) for every leaf where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from leaf_differences(a.get(key), b.get(key), f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from leaf_differences(x, y, f"{where}[{i}]")
    elif a != b:
        yield where, a, b


def short_summary(differences, shown: int = 5) -> str:
    """A few lines: how many leaves differ, the first few with their distance in ulps."""
    lines = [f"{len(differences)} value(s) differ from the committed result; first {shown}:"]
    for path, a, b in differences[:shown]:
        ulps = ""
        if isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and a != 0:
            ulps = f" ({abs(a - b) / math.ulp(a):.3g} ulp)"
        lines.append(f"  {path}: committed {a!r}, again {b!r}{ulps}")
    return "\n".join(lines)


def test_short_summary_names_the_first_differences_only():
    a = {"rows": [{"x": 1.0}, {"x": 2.0}], "y": "HOLDS"}
    b = {"rows": [{"x": 1.0 + 2**-52}, {"x": 3.0}], "y": "VIOLATED"}
    differences = list(leaf_differences(a, b))
    assert [d[0] for d in differences] == ["result.rows[0].x", "result.rows[1].x", "result.y"]
    text = short_summary(differences, shown=2)
    assert text.count("\n") == 2 and "(1 ulp)" in text and "3 value(s) differ" in text


def test_dry_run_lists_without_running(capsys):
    assert regenerate.main(["--dry-run", "twopoint"]) == 0
    printed = capsys.readouterr().out
    assert "stepsim theorem1 --process twopoint" in printed
    assert regenerate.main(["--dry-run", "no-such-figure"]) == 2


def test_the_committed_report_md_is_its_report_json_rendered():
    """figures/check/report.md is what ``markdown.markdown`` makes of the committed
    report.json (``outputs.rewrite_markdown`` regenerates it after a rendering change, no
    re-run)."""
    from stepsim.checks.markdown import markdown
    from stepsim.checks.outputs import load_report

    out = ROOT / "figures" / "check"
    assert (out / "report.md").read_text() == markdown(load_report(out / "report.json"))


def test_figure_workers_draw_the_bytes_drawn_in_this_process(drawn, tmp_path):
    """A check with >= 8 verdicts draws its figures on spawned processes (drawing.draw_all):
    the same files, in the same order, as drawing them here (the drawn fixture)."""
    from stepsim.checks import drawing

    out, report = drawn
    assert len(report.claims) >= drawing.POOL_MIN  # the pool path is taken
    staging = tmp_path / ".figures-pool"
    staging.mkdir()
    drawn_there = drawing.draw_all(list(report.claims), staging, workers=2)
    assert [paths for paths, _ in drawn_there] == [c.figures for c in report.claims]
    for c in report.claims:
        for f in c.figures:
            name = Path(f).relative_to(drawing.FIGURES_DIR)
            assert (staging / name).read_bytes() == (out / f).read_bytes(), f
    assert all(seconds > 0 for _, seconds in drawn_there)
