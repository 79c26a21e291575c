"""Counters and shares explained right: a further share of a shared device consumes no more
counters, devices of one request that compete for counters are named, an ``All`` request with
no matching device fails at the class or selector check."""

from __future__ import annotations

from typing import Any

from tests.support.explain_builders import explain_on_node_a as _explain
from tests.support.scenario_builders import (
    claim,
    device,
    exact,
    first_available,
    resource_slice,
    sub,
)

NO_MODEL_X = 'device.attributes["gpu.example.com"].?model.orValue("") == "x"'


def _counters(name: str, **amounts: int) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": str(v)} for k, v in amounts.items()}}


def _uses(**amounts: int) -> list[dict[str, Any]]:
    return [{"counterSet": "cs", "counters": {k: {"value": str(v)} for k, v in amounts.items()}}]


def test_a_further_share_of_a_shared_device_consumes_no_more_counters() -> None:
    parts = [device(f"p{i}", allowMultipleAllocations=True, consumesCounters=_uses(c=1))
             for i in (1, 2)]
    slices = [resource_slice("s", parts, count=2),
              resource_slice("t", None, count=2, sharedCounters=[_counters("cs", c=1)])]
    share = {"metadata": {"name": "a", "namespace": "default"},
             "spec": {"devices": {"requests": [exact("r", "gpu")]}},
             "status": {"allocation": {"devices": {"results": [{
                 "request": "r", "driver": "gpu.example.com", "pool": "node-a", "device": "p1",
                 "shareID": "11111111-1111-1111-1111-111111111111"}]}}}}
    data, _ = _explain(slices, claim("b", exact("r", "gpu", count=2)), (share,))
    [request] = data["candidates"][0]["requests"]
    assert (request["failedAt"], request["funnel"]["counters"]) == ("counters", 1)
    assert [(d["device"], d["reason"]) for d in request["devices"]] == [
        ("p2", "p2 on node-a needs more of counter set cs than is left: c (needs 1, 0 left); in "
               "use by p1 of claim default/a (request r)")]


def test_devices_of_one_request_competing_for_counters_are_named() -> None:
    devices = [device("whole", consumesCounters=_uses(mem=2)),
               device("half-0", consumesCounters=_uses(mem=1)),
               device("half-1", consumesCounters=_uses(mem=1))]
    slices = [resource_slice("s", devices, count=2),
              resource_slice("t", None, count=2, sharedCounters=[_counters("cs", mem=2)])]
    data, text = _explain(slices, claim("b", exact("r", "gpu", allocationMode="All")))
    reason = ("request r: 3 devices fit on their own, but together they need more shared "
              "counters than are left: counter set cs: mem (needs 4, 2 left) for whole (2), "
              "half-0 (1), half-1 (1)")
    assert data["message"] == f"cannot be allocated: node-a: {reason}"
    [request] = data["candidates"][0]["requests"]
    assert (request["failedAt"], request["message"], request["allocationMode"]) == (
        "counters", reason, "All")
    assert text.split("\n\n")[1].splitlines()[1] == (
        "node-a  r        all     3        3         3         3     3         3         3   "
        "       fails at counters")


def test_all_with_no_matching_device_fails_at_the_selectors() -> None:
    slices = [resource_slice("s", [device("g0")])]
    data, _ = _explain(slices, claim("b", exact("r", "gpu", NO_MODEL_X, allocationMode="All")))
    [request] = data["candidates"][0]["requests"]
    assert (request["failedAt"], request["needed"], request["message"]) == (
        "matchRequest", 0, "request r: 0 of 1 devices of class gpu match the request's "
        "selectors (allocationMode All needs at least one)")


def test_first_available_all_alternative_with_no_match_fails() -> None:
    slices = [resource_slice("s", [device("g0")])]
    wants = claim("b", first_available("r", sub("every-x", "gpu", NO_MODEL_X,
                                                allocationMode="All"), sub("one", "gpu")))
    data, text = _explain(slices, wants)
    [candidate] = data["candidates"]
    assert [(r["request"], r["failedAt"], r["chosen"]) for r in candidate["requests"]] == [
        ("r/every-x", "matchRequest", False), ("r/one", None, True)]
    assert text.split("\n\n")[1] == """\
NODE    REQUEST    NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
node-a  r/every-x  all     1        1         0         0     0         0         0          fails at matchRequest
node-a  r/one      1       1        1         1         1     1         1         1          fits: g0 (chosen)
"""  # noqa: E501
