"""Replay: every recipe and criterion gives the recorded bits, on any CPU.

The digests in tests/data/replay_recipes.json were first recorded on the old core before the
issue-11 rebuild (the few defaults issue 11 changed on purpose are replayed through their
new options, ``new_options``), and re-recorded once when issue 16 made results independent
of the CPU (``python tests/replay_cases.py``). They pass on AVX2 and AVX-512 machines alike;
``test_cpu_portability.py`` emulates the other kinds.
"""

from __future__ import annotations

import json

import pytest
import replay_cases as rc

FIXTURE = json.loads(rc.FIXTURE.read_text())


@pytest.mark.parametrize("case", rc.CASES, ids=[c[0] for c in rc.CASES])
def test_recipe_replays_bit_for_bit(case):
    expected = FIXTURE["runs"][case[0]]
    got = rc.digest(rc.run_case(case))
    assert {k: got[k] for k in expected} == expected


def test_criteria_replay_on_a_hand_made_trajectory():
    assert rc.old_criteria_on_v() == FIXTURE["criteria_on_v"]
