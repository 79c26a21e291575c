"""A device only an outdated slice of its pool has is ignored by the scheduler (``addSlice`` in
``pools_incubating.go`` keeps the highest generation); when it would have matched, explain says
which slice, which generation, and the pool's (issue 24)."""

from __future__ import annotations

from tests.support.explain_builders import explain_on_node_a
from tests.support.scenario_builders import (
    GPU,
    attrs,
    claim,
    device,
    exact,
    resource_slice,
)

WANTS_INDEX_1 = claim("c", exact("gpu", "gpu", f'device.attributes["{GPU}"].index == 1'))
NOTE = ("gpu-1 would have matched, but only slice old of pool gpu.example.com/node-a has it, "
        "at generation 1, and the pool is at generation 2: kube-scheduler ignores an outdated "
        "slice")


def test_a_matching_device_only_in_an_outdated_slice_is_named() -> None:
    slices = [resource_slice("new", [device("gpu-0", attributes=attrs(index=0))], generation=2),
              resource_slice("old", [device("gpu-1", attributes=attrs(index=1))], generation=1)]
    data, text = explain_on_node_a(slices, WANTS_INDEX_1)
    [request] = data["candidates"][0]["requests"]
    assert request["failedAt"] == "matchRequest"
    assert request["outdatedSlices"] == [{"pool": "gpu.example.com/node-a", "slice": "old",
                                          "generation": 1, "poolGeneration": 2,
                                          "devices": ["gpu-1"]}]
    assert data["message"].endswith(NOTE)
    assert "    " + NOTE[:60] in text


def test_an_outdated_slice_whose_devices_would_not_match_is_not_named() -> None:
    slices = [resource_slice("new", [device("gpu-0", attributes=attrs(index=0))], generation=2),
              resource_slice("old", [device("gpu-2", attributes=attrs(index=2))], generation=1)]
    data, text = explain_on_node_a(slices, WANTS_INDEX_1)
    assert "outdatedSlices" not in data["candidates"][0]["requests"][0]
    assert "outdated" not in text
