"""Quantities print in the units the claim used, next to the exact number: a selector's
literal, a request's capacity, and (for counters) the device's ``consumesCounters`` — in the
text of explain and simulate, and as ``…Quantity`` fields beside the numbers in the JSON."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubedra.allocation import KubeVersion, features_for
from kubedra.api.resource import ResourceClaim
from kubedra.explain import ClusterSnapshot, simulate_claim
from kubedra.explain.render import render_simulation
from tests.support.explain_builders import explain_on_node_a, node
from tests.support.scenario_builders import (
    CLASSES,
    allocated,
    claim,
    device,
    exact,
    resource_slice,
    result,
)

SHARE = "11111111-1111-1111-1111-111111111111"


def _why_not(text: str) -> list[str]:
    return text.split("Why not:\n")[1].splitlines()


def _counters(name: str, **amounts: str) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in amounts.items()}}


def _uses(**amounts: str) -> list[dict[str, Any]]:
    return [{"counterSet": "cs", "counters": {k: {"value": v} for k, v in amounts.items()}}]


def test_a_selector_shows_the_device_in_the_literals_units() -> None:
    # the slice publishes bytes; the selector asks in Gi
    slices = [resource_slice("s", [device("gpu-0", memory="150754820096")])]
    wants = claim("big", exact("r", "gpu", 'device.capacity["gpu.example.com"].memory'
                                            '.compareTo(quantity("141Gi")) >= 0'))
    data, text = explain_on_node_a(slices, wants)
    [finding] = data["candidates"][0]["requests"][0]["devices"]
    assert finding["comparison"] == {
        "name": "gpu.example.com/memory", "relation": ">=", "device": "150754820096",
        "asked": "151397597184", "deviceQuantity": "143771Mi", "askedQuantity": "141Gi"}
    assert _why_not(text)[2:4] == [
        "    gpu-0 on node-a has 150754820096 bytes, less than the 151397597184 asked",
        "      (gpu.example.com/memory: 143771Mi < 141Gi)"]


def test_capacity_left_is_shown_in_the_requests_units() -> None:
    shared = device("gpu-0", memory="80Gi", allowMultipleAllocations=True)
    share = allocated("a", result("gpu-0", shareID=SHARE, consumedCapacity={"memory": "60Gi"}))
    # decimal units asked of a device published in binary ones
    wants = claim("b", exact("r", "gpu", capacity={"requests": {"memory": "30G"}}))
    data, text = explain_on_node_a([resource_slice("s", [shared])], wants, (share,))
    [finding] = data["candidates"][0]["requests"][0]["devices"]
    assert (finding["check"], finding["capacity"]) == ("capacity", [{
        "capacity": "memory", "needed": "30000000000", "left": "21474836480",
        "total": "85899345920", "neededQuantity": "30G", "leftQuantity": "21474836480",
        "totalQuantity": "85899345920"}])
    assert finding["reason"] == (
        "gpu-0 on node-a needs memory 30000000000 (30G), 21474836480 of 85899345920 left "
        "(shared with claim default/a (request r))")
    assert _why_not(text)[2:] == [
        "    gpu-0 on node-a needs memory 30000000000 (30G), 21474836480 of 85899345920 left "
        "(shared with",
        "      claim default/a (request r))"]


def test_capacity_left_counts_shares_whatever_their_spelling_as_1_38() -> None:
    """From 1.38 (CAPACITY_NAMES_QUALIFIED) a share that names the capacity with the driver's
    domain uses the device's ``memory`` too: 20Gi left of 80Gi, not 80Gi (as before, which
    found nothing short and said so in no words)."""
    shared = device("gpu-0", memory="80Gi", allowMultipleAllocations=True)
    share = allocated("a", result("gpu-0", shareID=SHARE,
                                  consumedCapacity={"gpu.example.com/memory": "60Gi"}))
    wants = claim("b", exact("r", "gpu", capacity={"requests": {"memory": "30G"}}))
    data, _ = explain_on_node_a([resource_slice("s", [shared])], wants, (share,),
                                features_for(KubeVersion(1, 38)))
    [finding] = data["candidates"][0]["requests"][0]["devices"]
    assert (finding["check"], finding["capacity"][0]["left"]) == ("capacity", "21474836480")
    assert finding["reason"].startswith(
        "gpu-0 on node-a needs memory 30000000000 (30G), 21474836480 of 85899345920 left")


def test_a_device_skipping_node_operations_does_not_match_as_1_38() -> None:
    """From 1.38 (SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE, DRAOptionalNodeOperations off), where
    the incubating variant runs, the funnel stops a device of a slice with skipNodeOperations
    where the allocator does, at matchRequest, and says why; as 1.37 it fits."""
    slices = [resource_slice("s", [device("gpu-0")],
                             skipNodeOperations=["NodePrepareResources", "NodeUnprepareResources"])]
    wants = claim("b", exact("r", "gpu"))
    as_1_37, _ = explain_on_node_a(slices, wants, (), features_for(KubeVersion(1, 37)))
    assert as_1_37["verdict"] == "Fits"
    incubating = replace(features_for(KubeVersion(1, 38)), variant="incubating")
    data, _ = explain_on_node_a(slices, wants, (), incubating)
    [finding] = data["candidates"][0]["requests"][0]["devices"]
    assert (finding["check"], finding["reason"]) == (
        "matchRequest", "gpu-0 on node-a is in a slice with skipNodeOperations, which the "
        "scheduler does not allocate with DRAOptionalNodeOperations off")


def test_counters_are_shown_in_the_devices_units() -> None:
    parts = [device("half-0", consumesCounters=_uses(memory="40Gi", slices="1")),
             device("half-1", consumesCounters=_uses(memory="40Gi", slices="1"))]
    slices = [resource_slice("s", parts, count=2),
              resource_slice("t", None, count=2,
                             sharedCounters=[_counters("cs", memory="60Gi", slices="2")])]
    taken = allocated("a", result("half-0"))
    data, text = explain_on_node_a(slices, claim("b", exact("r", "gpu")), (taken,))
    [finding] = data["candidates"][0]["requests"][0]["devices"]
    assert finding["counters"] == [{
        "counterSet": "cs", "counter": "memory", "needed": "42949672960",
        "left": "21474836480", "heldBy": ["half-0 of claim default/a (request r)"],
        "neededQuantity": "40Gi", "leftQuantity": "20Gi"}]
    assert finding["reason"] == (
        "half-1 on node-a needs more of counter set cs than is left: memory (needs "
        "42949672960 (40Gi), 21474836480 (20Gi) left); in use by half-0 of claim default/a "
        "(request r)")
    assert _why_not(text)[2:] == [
        "    half-1 on node-a needs more of counter set cs than is left: memory (needs "
        "42949672960 (40Gi),",
        "      21474836480 (20Gi) left); in use by half-0 of claim default/a (request r)"]


def test_devices_competing_for_counters_are_shown_in_their_units() -> None:
    devices = [device("whole", consumesCounters=_uses(memory="80Gi")),
               device("half-0", consumesCounters=_uses(memory="40Gi")),
               device("half-1", consumesCounters=_uses(memory="40Gi"))]
    slices = [resource_slice("s", devices, count=2),
              resource_slice("t", None, count=2, sharedCounters=[_counters("cs", memory="80Gi")])]
    data, _ = explain_on_node_a(slices, claim("b", exact("r", "gpu", allocationMode="All")))
    assert data["candidates"][0]["requests"][0]["message"] == (
        "request r: 3 devices fit on their own, but together they need more shared counters "
        "than are left: counter set cs: memory (needs 171798691840 (160Gi), 85899345920 "
        "(80Gi) left) for whole (85899345920 (80Gi)), half-0 (42949672960 (40Gi)), half-1 "
        "(42949672960 (40Gi))")


def test_simulate_shows_the_same_units() -> None:
    slices = [resource_slice("s", [device("gpu-0", memory="143771Mi")])]
    wants = ResourceClaim.from_api(claim("big", exact(
        "r", "gpu", 'device.capacity["gpu.example.com"].memory.compareTo(quantity("141Gi")) '
                    '>= 0')))
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [], [node("node-a")])
    text = render_simulation(simulate_claim(snapshot, wants))
    assert "      (gpu.example.com/memory: 143771Mi < 141Gi)" in text.splitlines()
