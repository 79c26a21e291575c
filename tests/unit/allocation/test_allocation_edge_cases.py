"""kubedra's allocator on the hand-written edge cases (expected decisions in edge_cases.py)."""

from __future__ import annotations

import itertools

import pytest

from kubedra.allocation.scenario import run_scenario
from tests.support.edge_cases import CASES, EdgeCase, picks


@pytest.mark.parametrize("case", CASES, ids=[c.scenario["name"] for c in CASES])
def test_edge_case(case: EdgeCase) -> None:
    counter = itertools.count()
    outcome = run_scenario(case.scenario, new_share_id=lambda: f"share-{next(counter)}")
    assert picks(outcome) == case.expected, outcome.get("message")


def test_case_names_are_unique() -> None:
    names = [c.scenario["name"] for c in CASES]
    assert len(names) == len(set(names))
