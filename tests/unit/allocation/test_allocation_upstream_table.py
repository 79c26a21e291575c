"""kubedra decides as upstream on upstream's own allocator test table.

``tests/allocation_corpus/upstream-table.jsonl`` holds every Allocate call of the table in
``k8s.io/dynamic-resource-allocation`` ``structured/internal/allocatortesting`` (v0.37.2: its
``TestAllocator`` and ``TestLexicographicalAllocator`` cases) as recorded by
``hack/allocator-table/record.sh``: the inputs and, under ``upstream``, what upstream's allocator
decided, with its steps. Each case ran the variant the scheduler would pick for its features
(``allocator``): incubating, which kubedra implements, or experimental where a case turns on an
alpha feature only experimental has; kubedra refuses those scenarios and says so. The recorded
outcome is upstream's own, so this test needs no Go binary.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.allocation import UnsupportedFeaturesError
from kubedra.allocation.scenario import comparable, run_scenario, scenario_search_time
from tests.support.scenario_strategies import upstream_table

SCENARIOS = upstream_table()
INCUBATING = [s for s in SCENARIOS
              if s["allocator"] == "incubating" and "notRepresentable" not in s]
EXPERIMENTAL = [s for s in SCENARIOS if s["allocator"] == "experimental"]


def test_the_table_is_recorded_whole() -> None:
    """Every case of the table that calls Allocate once, by variant; a regeneration that
    loses or gains cases changes these numbers."""
    assert (len(SCENARIOS), len(INCUBATING), len(EXPERIMENTAL)) == (280, 234, 45)
    assert len({s["name"] for s in SCENARIOS}) == len(SCENARIOS)


def test_cases_a_scenario_cannot_state() -> None:
    """Two cases give upstream's allocator what a scenario cannot hold: a quantity (1e21) that
    ``resource.Quantity`` marshals as "1" (an API server would store "1" too), and a node with
    declared features (a scenario's node has a name and labels). The recorder says so in the
    scenario and kubedra is not compared on them."""
    quantity = ("is 1000000000000000000000.000000000, its JSON \"1\" (resource.Quantity does "
                "not keep it)")
    assert {s["name"]: s["notRepresentable"] for s in SCENARIOS if "notRepresentable" in s} == {
        "table/consumable-capacity-requests-are-not-modified":
            f"slices[0].spec.devices[0].capacity[capacity-0].requestPolicy.default {quantity}; "
            f"claims[0].spec.devices.requests[1].exactly.capacity.requests[capacity-0] "
            f"{quantity}",
        "table/optional-node-operations":
            'the node has more than a name and labels: '
            '{"status":{"declaredFeatures":["DRAOptionalNodeOperations"]}}'}


@pytest.mark.parametrize("scenario", INCUBATING, ids=[s["name"] for s in INCUBATING])
def test_kubedra_decides_as_upstream(scenario: dict[str, Any]) -> None:
    """Outcome and devices (share IDs numbered, quantities canonical) equal upstream's, and so
    does the count of search steps."""
    assert comparable(run_scenario(scenario)) == comparable(scenario["upstream"])
    assert scenario_search_time(scenario)[1].steps == scenario["upstream"]["steps"]


def test_cases_of_experimental_only_features_are_refused() -> None:
    """Cases that turn on an alpha feature only upstream's experimental allocator implements
    (compatibility groups, derived attributes, list-type attributes, optional node operations)
    are not kubedra's to decide: it refuses each, naming the variant."""
    for scenario in EXPERIMENTAL:
        with pytest.raises(UnsupportedFeaturesError, match="'experimental' allocator"):
            run_scenario(scenario)
    alpha = {"CompatibilityGroups", "DerivedAttributes", "ListTypeAttributes",
             "OptionalNodeOperations"}
    assert all(any(s["features"][name] for name in alpha) for s in EXPERIMENTAL)
