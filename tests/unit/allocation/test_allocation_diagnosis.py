"""Why a claim does not fit: failure reasons and the per-request funnel (for kubedra explain)."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.allocation import AllocationFailed, Allocator
from kubedra.allocation.scenario import load_snapshot, node_info
from kubedra.api.resource import ResourceClaim
from tests.support.edge_cases import CASES
from tests.support.scenario_builders import (
    CLASSES,
    GPU,
    NIC,
    allocated,
    attrs,
    claim,
    device,
    exact,
    resource_slice,
    result,
    scenario,
)


def failure(case: dict[str, Any]) -> AllocationFailed:
    snapshot, state = load_snapshot(case)
    claims = [ResourceClaim.from_api(c) for c in case["claims"]]
    with pytest.raises(AllocationFailed) as failed:
        Allocator(snapshot, state).allocate(node_info(case["node"]), claims)
    return failed.value


def test_device_with_too_little_memory() -> None:
    # the demo: an H200 has 143771Mi = 150754820096 bytes, the claim asks 141Gi = 151397597184
    case = scenario("demo", [resource_slice("s", [device("gpu-0", memory="143771Mi")])],
                    [claim("big", exact("gpu", capacity={"requests": {"memory": "141Gi"}}))])
    failed = failure(case)
    assert failed.reason == "claim default/big, request gpu: no device fits"
    assert (failed.claim, failed.request, failed.invalid_pools) == ("default/big", "gpu", False)
    [diagnosis] = failed.diagnose()
    assert diagnosis.counts == {"devices": 1, "in_class": 1, "match_request": 1, "free": 1,
                                "capacity": 0, "counters": 0, "untainted": 0}
    assert diagnosis.verdicts == {"gpu.example.com/node-a/gpu-0": "capacity"}
    assert (diagnosis.node, diagnosis.needed, diagnosis.fitting) == ("node-a", 1, 0)


def test_funnel_names_the_first_failed_check_of_every_device() -> None:
    counters = resource_slice("counters", count=2, sharedCounters=[
        {"name": "gpu-3", "counters": {"memory": {"value": "10Gi"}}}])
    big = attrs(model="big")
    devices = resource_slice("gpus", [
        device("gpu-0", attributes=attrs(model="small"), memory="80Gi"),
        device("gpu-1", attributes=big, memory="80Gi"),
        device("gpu-2", attributes=big, memory="10Gi"),
        device("gpu-3", attributes=big, memory="80Gi", consumesCounters=[
            {"counterSet": "gpu-3", "counters": {"memory": {"value": "20Gi"}}}]),
        device("gpu-4", attributes=big, memory="80Gi", taints=[
            {"key": "hot", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]),
        device("gpu-5", attributes=big, memory="80Gi")], count=2)
    nics = resource_slice("nics", [device("nic-0")], pool="nics", driver=NIC)
    case = scenario("funnel", [counters, devices, nics],
                    [claim("c", exact("r", "any", f'device.driver == "{NIC}" || '
                                      f'device.attributes["{GPU}"].model == "big"', count=2,
                                      capacity={"requests": {"memory": "20Gi"}}))],
                    classes=[*CLASSES[:2], {"metadata": {"name": "any"}, "spec": {"selectors": [
                        {"cel": {"expression": f'device.driver == "{GPU}"'}}]}}],
                    allocated_claims=[allocated("a", result("gpu-1"))])
    failed = failure(case)
    assert failed.reason == "claim default/c, request r: only 1 of 2 devices fit together"
    [diagnosis] = failed.diagnose()
    assert diagnosis.verdicts == {
        "gpu.example.com/node-a/gpu-0": "match_request",
        "gpu.example.com/node-a/gpu-1": "free",
        "gpu.example.com/node-a/gpu-2": "capacity",
        "gpu.example.com/node-a/gpu-3": "counters",
        "gpu.example.com/node-a/gpu-4": "untainted",
        "gpu.example.com/node-a/gpu-5": "fits",
        "nic.example.com/nics/nic-0": "in_class"}
    assert diagnosis.counts == {"devices": 7, "in_class": 6, "match_request": 5, "free": 4,
                                "capacity": 3, "counters": 2, "untainted": 1}


def test_constraint_that_failed() -> None:
    case = scenario("roots", [resource_slice("s", [
        device(f"d{i}", attributes=attrs(pcieRoot=f"r{i // 2}")) for i in range(4)])],
        [claim("c", exact("r", count=3),
               constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])])
    failed = failure(case)
    assert failed.reason == "claim default/c, request r: cannot find 3 devices that fit together"
    [diagnosis] = failed.diagnose()
    assert diagnosis.fitting == 4
    assert diagnosis.constraints == {"matchAttribute resource.kubernetes.io/pcieRoot": 2}


def test_invalid_and_incomplete_pools() -> None:
    case = scenario("pools", [
        resource_slice("a-0", [device("x")], pool="a", count=2),
        resource_slice("a-1", [device("x")], pool="a", count=2),
        resource_slice("b-0", [device("y")], pool="b", count=2)], [claim("c", exact("r"))])
    failed = failure(case)
    assert failed.invalid_pools
    assert failed.reason == "invalid resource pools were encountered"
    [diagnosis] = failed.diagnose()
    assert diagnosis.unusable_pools == {"gpu.example.com/a": "invalid: duplicate device name x",
                                        "gpu.example.com/b": "incomplete (1 of 2 slices published)"}
    assert diagnosis.counts["devices"] == 0


def test_diagnose_a_claim_directly() -> None:
    case = scenario("ok", [resource_slice("s", [device("gpu-0")])], [claim("c", exact("r"))])
    snapshot, state = load_snapshot(case)
    [diagnosis] = Allocator(snapshot, state).diagnose(node_info(case["node"]),
                                                       ResourceClaim.from_api(case["claims"][0]))
    assert diagnosis.verdicts == {"gpu.example.com/node-a/gpu-0": "fits"}


def test_later_claim_that_cannot_fit_even_alone() -> None:
    [case] = [c.scenario for c in CASES if c.scenario["name"] == "later-claim-impossible-alone"]
    failed = failure(case)
    assert failed.reason == "claim default/c3, request r: cannot find 2 devices that fit together"
    assert (failed.claim, failed.request) == ("default/c3", "r")
    [diagnosis] = failed.diagnose()
    assert diagnosis.constraints == {"matchAttribute gpu.example.com/model": 1}
