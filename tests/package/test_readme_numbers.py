"""The numbers README.md states, each beside its source: a test fails when a stated number
drifts from where it comes from, and a guarded section states no number without one.

To add a number: a :class:`Stated` row in ``STATED`` — the README's words as a regex with
one group around the number, and a function returning the source's value written as the
README writes it. To guard a section (every number in its prose needs a row, or a reason
in ``UNSOURCED``): add its heading to ``GUARDED``. Sources must be cheap to read (a file of
the repository, a report.json), never a run of the suite or of the check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def section(heading: str) -> str:
    """The README's text under ``## heading`` (or ``###``), up to the next heading of the
    same or a higher level."""
    text = README.read_text()
    match = re.search(rf"^(#+) {re.escape(heading)}\n", text, flags=re.MULTILINE)
    assert match, f"README has no section {heading!r}"
    level = len(match.group(1))
    rest = text[match.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[:end.start()] if end else rest


# --------------------------------------------------------------------------- sources
def requires_python() -> str:
    """pyproject.toml's lowest Python ("3.10" of requires-python = ">=3.10")."""
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^requires-python = ">=([\d.]+)"', text, flags=re.MULTILINE).group(1)


def torch_peer_version() -> str:
    """The PyTorch version CI installs as the test peer (.ci/run's wheel)."""
    return re.search(r"torch-([\d.]+)\+cpu", (ROOT / ".ci" / "run").read_text()).group(1)


def progress_interval() -> str:
    """The default seconds between two progress lines (stepsim._ground.progress)."""
    from stepsim._ground.progress import DEFAULT_INTERVAL_S

    return f"{DEFAULT_INTERVAL_S:g}"


def report_confidence() -> str:
    """`stepsim report`'s default confidence level, in percent ("95")."""
    from stepsim.cli import build_parser

    report = build_parser()._subparsers._group_actions[0].choices["report"]
    return f"{100 * report.get_default('confidence'):g}"


@dataclass(frozen=True)
class Stated:
    """A number the README states: in ``heading``'s section, ``pattern``'s group 1 must
    equal ``source()``; ``where`` names the source for the failure message."""

    heading: str
    pattern: str
    source: Callable[[], str]
    where: str


def resumed_check_minutes() -> str:
    """The committed report's last ledger entry, in minutes ("20.5"): the check that wrote
    figures/check/report.json (README names the command before it, which has no entry)."""
    import json

    doc = json.loads((ROOT / "figures" / "check" / "report.json").read_text())["result"]
    return f"{doc['compute']['checks'][-1]['wall_s'] / 60:.1f}"


STATED = [
    Stated("Set up and run", r"Python (\d+\.\d+) or later", requires_python,
           "pyproject.toml requires-python"),
    Stated("Set up and run", r"pip install torch==([\d.]+)", torch_peer_version,
           ".ci/run's torch wheel"),
    Stated("Set up and run", r"mean and (\d+)% CI over seeds", report_confidence,
           "stepsim report --confidence's default"),
    Stated("Set up and run", r"a line\s+every (\d+) s\b", progress_interval,
           "stepsim._ground.progress.DEFAULT_INTERVAL_S"),
    Stated("What the check does", r"then (\d+\.\d) min for the\s+same command resumed",
           resumed_check_minutes, "figures/check/report.json's ledger"),
]

# numbers a guarded section may state without a source: (regex, why)
UNSOURCED = {
    "Set up and run": [
        (r"x86-64", "an architecture's name"),
        (r"\b\d+:\d+\b", "an N:M ratio's name"),
        (r"\b(?:Theorem|Table) \d+\b", "the name of a theorem or table of the paper"),
        (r"a few minutes on 2 cores", "the machine PROTOCOL.md's quick budget is stated for"),
    ],
}
GUARDED = list(UNSOURCED)


@pytest.mark.parametrize("stated", STATED, ids=[s.pattern for s in STATED])
def test_a_stated_number_equals_its_source(stated):
    found = re.findall(stated.pattern, section(stated.heading))
    assert found, f"README's {stated.heading!r} no longer says {stated.pattern!r}"
    want = stated.source()
    assert all(value == want for value in found), (
        f"README's {stated.heading!r} states {found} where {stated.where} says {want}")


@pytest.mark.parametrize("heading", GUARDED)
def test_a_guarded_section_states_no_number_without_a_source(heading):
    """Every number in the section's prose (code blocks aside: commands, not claims) is a
    Stated row's or has its reason in UNSOURCED; e.g. "1,755 tests in 9 minutes" had
    neither and drifted (1,812 tests)."""
    from stepsim.checks.readme_section import BEGIN, END

    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    text = re.sub(r"```.*?```", blank, section(heading), flags=re.DOTALL)
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), blank, text, flags=re.DOTALL)
    covered = [False] * len(text)
    patterns = [s.pattern for s in STATED if s.heading == heading]
    patterns += [regex for regex, _ in UNSOURCED.get(heading, ())]
    for pattern in patterns:
        for match in re.finditer(pattern, text):
            covered[match.start():match.end()] = [True] * (match.end() - match.start())
    loose = [m.group(0) + f" (in {text[max(0, m.start() - 30):m.end() + 30]!r})"
             for m in re.finditer(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)", text)
             if not all(covered[m.start():m.end()])]
    assert not loose, f"{heading!r} states numbers without a source: {loose}"


def test_the_guard_sees_a_number_added_without_a_source(monkeypatch, tmp_path):
    """The guard can fail: the old test count, put back, is found."""
    old = README.read_text().replace("(pytest-xdist; a first run",
                                     "(pytest-xdist; 1,755 tests in 9 minutes; a first run")
    assert old != README.read_text()
    fake = tmp_path / "README.md"
    fake.write_text(old)
    monkeypatch.setitem(globals(), "README", fake)
    with pytest.raises(AssertionError, match=r'without a source: \["1,755 .*"9 \(in'):
        test_a_guarded_section_states_no_number_without_a_source("Set up and run")


def test_the_verdict_section_is_the_committed_reports():
    """README's verdict block is what figures/check/report.json gives (regenerate it with
    ``python -m stepsim.checks.readme_section README.md figures/check/report.json``)."""
    import json

    from stepsim.checks.readme_section import BEGIN, END, section

    text = README.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    doc = json.loads((ROOT / "figures" / "check" / "report.json").read_text())["result"]
    assert text[start:end] == section(doc), "README's verdicts drifted from report.json"


def test_the_verdict_section_follows_a_changed_report(tmp_path):
    """update() rewrites the block from a report whose verdict and run count changed, and
    only the block; a README without the markers is refused."""
    import json

    from stepsim.checks.readme_section import BEGIN, update

    report = json.loads((ROOT / "figures" / "check" / "report.json").read_text())
    report["result"]["claims"][0]["verdict"] = "REPRODUCED"  # C1 digits
    report["result"]["compute"]["runs"] = 12345
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text())
    assert update(readme, path) is True
    new = readme.read_text()
    assert "| C1 | **REPRODUCED** |" in new and "12,345 runs" in new
    assert new.split(BEGIN)[0] == README.read_text().split(BEGIN)[0]
    assert update(readme, path) is False
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="must hold the markers"):
        update(readme, path)
