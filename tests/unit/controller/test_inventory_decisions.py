"""Decisions about one DeviceInventory, one per condition reason, with the status and Event
that follow (pure functions: no cluster, milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubedra.api.resource import OwnerReference, ResourcePool, ResourceSlice
from kubedra.controller.inventories import (
    Event,
    InventoryDecision,
    InventoryInputs,
    decide_deleted,
    decide_inventory,
    inventory_event,
    inventory_status,
    status_changed,
)
from kubedra.controller.state import ClaimUse
from kubedra.publishing.features import TAINTS_OFF, ServedFeatures
from kubedra.publishing.sync import SliceWrite

NOW = "2026-11-30T12:00:00Z"
GRACE = 30.0
"""Seconds of drain grace (the shipped default)."""
EARLIER = "2026-11-30T11:00:00Z"


def raw_inventory(name: str = "node-1-gpu", *, devices: int = 2, reported: bool = True,
                  declared: list[dict[str, Any]] | None = None, created: str = "2026-01-01",
                  overrides: list[dict[str, Any]] | None = None,
                  status: dict[str, Any] | None = None, node: str | None = "node-1",
                  unhealthy: tuple[str, ...] = (),
                  extra_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A raw inventory of node-1 (or a network pool ``pool-a`` with ``node=None``)."""
    found = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}},
              **({"health": "Unhealthy", "healthMessage": "ECC errors"}
                 if f"gpu-{i}" in unhealthy else {})} for i in range(devices)]
    spec: dict[str, Any] = {"driver": "gpu.kubedra.io", "devices": declared,
                            "overrides": overrides}
    spec.update({"nodeName": node} if node else {"allNodes": True, "pool": "pool-a"})
    spec.update(extra_spec or {})
    body: dict[str, Any] = {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 3,
                     "creationTimestamp": created},
        "spec": spec, "status": dict(status or {})}
    if reported:
        body["status"]["discovered"] = {"devices": found}
    return body


def use(device: str, claim: str = "c1") -> ClaimUse:
    return ClaimUse(namespace="ns", name=claim, uid=f"uid-{claim}", request="gpu",
                    driver="gpu.kubedra.io", pool="node-1", device=device)


def slices_of(decision: InventoryDecision, rv: str = "7") -> list[ResourceSlice]:
    """The slices a publish decision creates, as the API server would return them."""
    assert decision.plan is not None
    return [ResourceSlice.from_api({**w.body, "metadata": {**w.body["metadata"],
                                                            "resourceVersion": rv}})
            for w in decision.plan.writes if w.body is not None]


CRD = OwnerReference(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                     name="deviceinventories.kubedra.io", uid="uid-crd")


def inputs(raw: dict[str, Any], **kwargs: Any) -> InventoryInputs:
    return InventoryInputs(raw=raw, existing=kwargs.pop("existing", []),
                           lease=kwargs.pop("lease", "live"), namespace="kubedra-system",
                           owner=CRD, drain_grace=kwargs.pop("drain_grace", GRACE), **kwargs)


PUBLISHED = inputs(raw_inventory())
EXISTING = slices_of(decide_inventory(PUBLISHED))
LATER = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""A moment long after the drain taints of :func:`tainted` were added (``EARLIER``)."""


def tainted(slices: list[ResourceSlice], why: dict[str, str], added: str = EARLIER
            ) -> list[ResourceSlice]:
    """``slices`` with devices tainted ``kubedra.io/draining`` (device name → value) at
    ``added``, as the API server stores the first step of a drain."""
    result = []
    for s in slices:
        data = s.to_api()
        for device in data["spec"].get("devices") or []:
            if device["name"] in why:
                device["taints"] = [{"key": "kubedra.io/draining", "value": why[device["name"]],
                                     "effect": "NoSchedule", "timeAdded": added}]
        result.append(ResourceSlice.from_api(data))
    return result


DRAINED = tainted(EXISTING, {"gpu-0": "withdrawn", "gpu-1": "withdrawn"})
"""The slices of a pool withdrawn with nothing held, once the drain grace has begun."""

CASES: list[tuple[str, InventoryInputs, str, str]] = [
    ("published", PUBLISHED, "SlicesPublished",
     "2 devices in 1 ResourceSlice (pool node-1, generation 1)"),
    ("unhealthy devices are named", inputs(raw_inventory(unhealthy=("gpu-1",))),
     "SlicesPublished", "2 devices in 1 ResourceSlice (pool node-1, generation 1); unhealthy, "
                        "tainted NoSchedule: gpu-1"),
    ("held device dropped by an override stays", inputs(
        raw_inventory(overrides=[{"device": "gpu-1", "disabled": True}]), uses=[use("gpu-1")]),
     "SlicesPublished", "2 devices in 1 ResourceSlice (pool node-1, generation 1); still "
                        "allocated, so kept published with a NoSchedule taint until released: "
                        "gpu-1 (disabled)"),
    ("schema error names the field", inputs(raw_inventory(declared=[{"name": "Not_A_Label"}])),
     "InvalidInventory", "spec.devices[0].name: String should match pattern "
                         "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"),
    ("duplicate device: the declared one wins",
     inputs(raw_inventory(declared=[{"name": "gpu-0"}])),
     "DevicesLeftOut", "2 devices in 1 ResourceSlice (pool node-1, generation 1); left out, as "
                       "the API server would refuse them: gpu-0 (status.discovered.devices[0]."
                       "name: device 'gpu-0' is listed twice)"),
    ("what the agent left out is named", inputs(raw_inventory(reported=False, status={
        "discovered": {"devices": [{"name": "gpu-0"}], "backend": "snapshot", "rejected": [
            {"name": "gpu-1", "field": "devices[gpu-1].attributes[productName].string",
             "message": "70 bytes (70 characters); the API server allows at most 64 bytes"}]}})),
     "DevicesLeftOut", "1 device in 1 ResourceSlice (pool node-1, generation 1); left out, as "
                       "the API server would refuse them: gpu-1 (devices[gpu-1].attributes["
                       "productName].string: 70 bytes (70 characters); the API server allows at "
                       "most 64 bytes)"),
    ("a value in bytes, declared", inputs(raw_inventory(declared=[
        {"name": "dev-0", "attributes": {"model": {"string": "ok"}}},
        {"name": "dev-1", "attributes": {"model": {"string": "é" * 33}}}])),
     "DevicesLeftOut", "3 devices in 1 ResourceSlice (pool node-1, generation 1); left out, as "
                       "the API server would refuse them: dev-1 (spec.devices[1].attributes["
                       "model].string: 66 bytes (33 characters); the API server allows at most "
                       "64 bytes)"),
    ("every device disabled is not an empty pool", inputs(raw_inventory(
        devices=1, overrides=[{"device": "gpu-0", "disabled": True}])),
     "SlicesPublished", "0 devices in 1 ResourceSlice (pool node-1, generation 1); disabled by "
                        "an override, not published: gpu-0"),
    ("disabled devices are named, the first ten", inputs(raw_inventory(
        devices=13, overrides=[{"device": f"gpu-{i}", "disabled": True} for i in range(12)])),
     "SlicesPublished", "1 device in 1 ResourceSlice (pool node-1, generation 1); disabled by "
                        "an override, not published: gpu-0, gpu-1, gpu-10, gpu-11, gpu-2, gpu-3, "
                        "gpu-4, gpu-5, gpu-6, gpu-7, and 2 more"),
    ("no devices: which backend found none, with what settings", inputs(raw_inventory(
        reported=False, status={"discovered": {"devices": [], "backend": "pci"}},
        extra_spec={"discovery": {"pci": {"vendors": ["0x10de"], "classes": ["0x0302"]}}})),
     "EmptyPool", "0 devices in 1 ResourceSlice (pool node-1, generation 1): the node agent's "
                  "discovery backend pci found no devices (discovery.mig: none; "
                  "discovery.pci.vendors: 0x10de; discovery.pci.classes: 0x0302), and "
                  "spec.devices declares none"),
    ("agent lease expired", inputs(raw_inventory(), lease="expired", existing=EXISTING),
     "AgentLeaseExpired", "agent Lease kubedra-system/kubedra-agent-node-1 of node node-1 is "
                          "not renewed; pool node-1 withdrawn until the agent returns; leaving "
                          "the pool, so published with a NoSchedule taint until the drain grace "
                          "ends: gpu-0 (withdrawn), gpu-1 (withdrawn)"),
    ("leaving devices are named, the first ten", inputs(
        raw_inventory(devices=12), lease="expired",
        existing=slices_of(decide_inventory(inputs(raw_inventory(devices=12))))),
     "AgentLeaseExpired", "agent Lease kubedra-system/kubedra-agent-node-1 of node node-1 is "
                          "not renewed; pool node-1 withdrawn until the agent returns; leaving "
                          "the pool, so published with a NoSchedule taint until the drain grace "
                          "ends: gpu-0 (withdrawn), gpu-1 (withdrawn), gpu-10 (withdrawn), "
                          "gpu-11 (withdrawn), gpu-2 (withdrawn), gpu-3 (withdrawn), gpu-4 "
                          "(withdrawn), gpu-5 (withdrawn), gpu-6 (withdrawn), gpu-7 (withdrawn), "
                          "and 2 more"),
    ("agent lease expired, drain grace over", inputs(
        raw_inventory(), lease="expired", existing=DRAINED, now=LATER),
     "AgentLeaseExpired", "agent Lease kubedra-system/kubedra-agent-node-1 of node node-1 is "
                          "not renewed; pool node-1 withdrawn until the agent returns"),
    ("agent lease missing", inputs(raw_inventory(), lease="missing"), "AgentLeaseExpired",
     "agent Lease kubedra-system/kubedra-agent-node-1 of node node-1 is not renewed; pool "
     "node-1 withdrawn until the agent returns"),
    ("waiting for the agent", inputs(raw_inventory(reported=False), lease="missing"),
     "WaitingForAgent", "no devices declared and the node agent of node-1 has not reported "
                        "yet; nothing is published"),
    ("pool conflict", inputs(raw_inventory("b-gpu", created="2026-02-01"), existing=EXISTING,
                             rivals=[raw_inventory("a-gpu", created="2026-02-01")]),
     "PoolConflict", "pool node-1 of driver gpu.kubedra.io is published by DeviceInventory "
                     "a-gpu, created earlier; this inventory publishes nothing while that one "
                     "exists"),
    ("network pool without agent", inputs(raw_inventory(
        node=None, reported=False, declared=[{"name": "fpga-0"}]), lease=None),
     "SlicesPublished", "1 device in 1 ResourceSlice (pool pool-a, generation 1)"),
]


@pytest.mark.parametrize(("inputs_", "reason", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_each_reason(inputs_: InventoryInputs, reason: str, message: str) -> None:
    decision = decide_inventory(inputs_)
    assert (decision.reason, decision.message) == (reason, message)
    assert decision.ok is (reason in ("SlicesPublished", "DevicesLeftOut", "EmptyPool"))


def test_a_recovered_device_is_held_down_and_named() -> None:
    raw = raw_inventory()
    raw["status"]["discovered"]["devices"][1]["healthTransitionTime"] = "2026-11-30T11:58:00Z"
    decision = decide_inventory(inputs(raw, now=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
                                       hold_down=300))
    assert decision.message == (
        "2 devices in 1 ResourceSlice (pool node-1, generation 1); healthy again, kept tainted "
        "NoSchedule for the hold-down time (the first until 2026-11-30T12:03:00Z): gpu-1")
    assert decision.pool is not None
    assert decision.pool.held_until == datetime(2026, 11, 30, 12, 3, tzinfo=UTC)
    later = decide_inventory(inputs(raw, now=datetime(2026, 11, 30, 12, 3, tzinfo=UTC),
                                    hold_down=300))
    assert later.message == "2 devices in 1 ResourceSlice (pool node-1, generation 1)"
    assert later.pool is not None
    assert later.pool.held_until is None


def test_publish_plans_one_create_per_slice() -> None:
    decision = decide_inventory(PUBLISHED)
    assert decision.plan is not None
    assert decision.pool is not None
    assert [(w.verb, w.name) for w in decision.plan.writes] == [("create", "node-1-gpu-00000")]
    assert decision.plan.pool == ResourcePool(name="node-1", generation=1,
                                              resource_slice_count=1)
    assert [d.name for d in decision.pool.devices] == ["gpu-0", "gpu-1"]
    assert decision.health == {"gpu-0": ("Healthy", None), "gpu-1": ("Healthy", None)}
    assert decision.delete == ()


def test_nothing_to_write_when_the_slices_match() -> None:
    decision = decide_inventory(inputs(raw_inventory(), existing=EXISTING))
    assert decision.plan is not None
    assert decision.plan.writes == []


def test_withdrawal_deletes_every_slice_and_remembers_the_pool() -> None:
    decision = decide_inventory(inputs(raw_inventory(), lease="expired", existing=DRAINED,
                                       now=LATER))
    assert [s.metadata.name for s in decision.delete] == ["node-1-gpu-00000"]
    assert decision.withdrawn
    assert not decision.forget
    assert decision.plan is None
    assert decision.pool is not None
    assert [d.name for d in decision.pool.devices] == [
        "gpu-0", "gpu-1"]


def test_the_loser_of_a_pool_conflict_forgets_its_pool() -> None:
    decision = decide_inventory(inputs(raw_inventory("b-gpu"), existing=EXISTING,
                                       rivals=[raw_inventory("a-gpu")]))
    assert decision.forget
    assert decision.withdrawn
    assert decision.pool is None
    assert [s.metadata.name for s in decision.delete] == ["node-1-gpu-00000"]


def test_the_earliest_inventory_wins_whatever_its_name() -> None:
    decision = decide_inventory(inputs(raw_inventory("b-gpu", created="2026-01-01"),
                                       rivals=[raw_inventory("a-gpu", created="2026-03-01")]))
    assert decision.reason == "SlicesPublished"


def test_the_publish_result_of_each_decision() -> None:
    published = decide_inventory(PUBLISHED)
    assert [d.publish_result for d in (
        published, decide_inventory(inputs(raw_inventory(), existing=EXISTING)),
        decide_inventory(inputs(raw_inventory(), lease="expired", existing=DRAINED, now=LATER)),
        decide_inventory(inputs(raw_inventory(devices=0, reported=False))),
        published.publish_failed(SliceWrite("create", "node-1-gpu-00000"), "forbidden",
                                 retry=False))] == [
        "written", "unchanged", "written", "unchanged", "failed"]


def test_publish_failed_keeps_the_plan_and_says_which_write() -> None:
    decision = decide_inventory(PUBLISHED).publish_failed(
        SliceWrite("create", "node-1-gpu-00000"), "forbidden", retry=False)
    assert (decision.reason, decision.message, decision.retry) == (
        "PublishFailed", "create ResourceSlice node-1-gpu-00000: forbidden", False)
    assert not decision.ok
    assert decision.plan is not None


def test_status_of_a_publication() -> None:
    raw = raw_inventory()
    given = inputs(raw, uses=[use("gpu-1", "c2"), use("gpu-0"), use("gpu-1", "c1")])
    status = inventory_status(given, decide_inventory(given), NOW).to_api()
    message = "2 devices in 1 ResourceSlice (pool node-1, generation 1)"
    assert status == {
        "conditions": [
            {"type": "Published", "status": "True", "reason": "SlicesPublished",
             "message": message, "lastTransitionTime": NOW, "observedGeneration": 3},
            {"type": "Ready", "status": "True", "reason": "Published", "message": message,
             "lastTransitionTime": NOW, "observedGeneration": 3}],
        "observedGeneration": 3,
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "slices": ["node-1-gpu-00000"], "deviceCount": 2, "allocatedCount": 2,
        "allocations": [
            {"device": "gpu-0", "claim": "ns/c1", "claimUID": "uid-c1", "request": "gpu"},
            {"device": "gpu-1", "claim": "ns/c1", "claimUID": "uid-c1", "request": "gpu"},
            {"device": "gpu-1", "claim": "ns/c2", "claimUID": "uid-c2", "request": "gpu"}]}
    assert status_changed(raw, inventory_status(given, decide_inventory(given), NOW))
    raw["status"].update(status)  # applied; the next reconcile sees it and the slice
    again = inputs(raw, existing=EXISTING, uses=given.uses)
    assert not status_changed(raw, inventory_status(again, decide_inventory(again), NOW))


def test_status_keeps_the_transition_time_while_the_status_holds() -> None:
    before = {"conditions": [
        {"type": "Published", "status": "False", "reason": "PublishFailed", "message": "x",
         "lastTransitionTime": EARLIER},
        {"type": "Ready", "status": "False", "reason": "PublishFailed", "message": "x",
         "lastTransitionTime": EARLIER}]}
    given = inputs(raw_inventory(status=before), lease="expired")
    conditions = inventory_status(given, decide_inventory(given), NOW).conditions or []
    assert [(c.type, c.reason, c.last_transition_time) for c in conditions] == [
        ("Published", "AgentLeaseExpired", EARLIER), ("Ready", "AgentLeaseExpired", EARLIER)]


def test_status_of_a_withdrawn_pool_and_of_a_conflict() -> None:
    expired = inputs(raw_inventory(), lease="expired", existing=DRAINED, now=LATER)
    status = inventory_status(expired, decide_inventory(expired), NOW)
    assert (status.slices, status.device_count, status.allocated_count) == ([], 0, 0)
    # a held device stays published: the status names its slice
    expired = inputs(raw_inventory(), lease="expired", existing=DRAINED, now=LATER,
                     uses=[use("gpu-0")])
    status = inventory_status(expired, decide_inventory(expired), NOW)
    assert (status.slices, status.device_count, status.allocated_count) == (
        ["node-1-gpu-00000"], 1, 1)
    # and so does, during its drain grace, a device no claim holds
    expired = inputs(raw_inventory(), lease="expired", existing=EXISTING, uses=[use("gpu-0")])
    status = inventory_status(expired, decide_inventory(expired), NOW)
    assert (status.slices, status.device_count, status.allocated_count) == (
        ["node-1-gpu-00000"], 2, 1)
    conflict = inputs(raw_inventory("b-gpu"), rivals=[raw_inventory("a-gpu")],
                      uses=[use("gpu-0")])
    status = inventory_status(conflict, decide_inventory(conflict), NOW)
    assert (status.slices, status.device_count, status.allocations) == ([], 0, [])


def test_an_invalid_inventory_reports_the_slices_that_exist() -> None:
    pool = {"name": "node-1", "generation": 4, "resourceSliceCount": 1}
    given = inputs(raw_inventory(declared=[{"name": "Not_A_Label"}], status={"pool": pool}))
    existing = [{"metadata": {"name": "node-1-gpu-00000"}, "spec": {"devices": [{}, {}, {}]}}]
    status = inventory_status(given, decide_inventory(given), NOW, existing)
    assert (status.slices, status.device_count, status.pool) == (
        ["node-1-gpu-00000"], 3, ResourcePool(name="node-1", generation=4,
                                           resource_slice_count=1))


def test_events_mark_transitions_only() -> None:
    decision = decide_inventory(PUBLISHED)
    announced, event = inventory_event(PUBLISHED, decision, None)
    message = "2 devices in 1 ResourceSlice (pool node-1, generation 1)"
    assert announced == f"SlicesPublished: {message}"
    assert event == Event("Normal", "Published", f"{message}: 1 created")
    same = decide_inventory(inputs(raw_inventory(), existing=EXISTING))
    assert inventory_event(PUBLISHED, same, announced) == (None, None)


@pytest.mark.parametrize(("given", "event"), [
    (inputs(raw_inventory(), lease="expired", existing=EXISTING), Event(
        "Warning", "PoolWithdrawn", "agent Lease kubedra-system/kubedra-agent-node-1 of node "
        "node-1 is not renewed; pool node-1 withdrawn until the agent returns; leaving the "
        "pool, so published with a NoSchedule taint until the drain grace ends: gpu-0 "
        "(withdrawn), gpu-1 (withdrawn)")),
    (inputs(raw_inventory(), lease="missing"), None),
    (inputs(raw_inventory(), lease="expired"), None),
    (inputs(raw_inventory(reported=False), lease="missing"), None),
    (inputs(raw_inventory("b-gpu"), rivals=[raw_inventory("a-gpu")]), Event(
        "Warning", "PoolConflict", "pool node-1 of driver gpu.kubedra.io is published by "
        "DeviceInventory a-gpu, created earlier; this inventory publishes nothing while that "
        "one exists")),
    (inputs(raw_inventory(reported=False, status={"discovered": {"devices": []}})), Event(
        "Warning", "EmptyPool", "0 devices in 1 ResourceSlice (pool node-1, generation 1): the "
        "node agent's discovery backend unknown found no devices (discovery.mig: none), and "
        "spec.devices declares none: 1 created")),
    (inputs(raw_inventory(declared=[{"name": "gpu-0"}])), Event(
        "Warning", "DevicesLeftOut", "2 devices in 1 ResourceSlice (pool node-1, generation 1); "
        "left out, as the API server would refuse them: gpu-0 (status.discovered.devices[0]."
        "name: device 'gpu-0' is listed twice): 1 created")),
], ids=["PoolWithdrawn", "no PoolWithdrawn at the agent's first start (no Lease yet)",
        "no PoolWithdrawn when nothing was published", "no Event while waiting for the agent",
        "PoolConflict", "EmptyPool",
        "DevicesLeftOut"])
def test_event_per_reason(given: InventoryInputs, event: Event | None) -> None:
    decision = decide_inventory(given)
    assert inventory_event(given, decision, None) == (
        f"{decision.reason}: {decision.message}", event)


def test_no_event_when_the_condition_already_says_it() -> None:
    given = inputs(raw_inventory(), lease="expired")
    decision = decide_inventory(given)
    said = {"conditions": [{"type": "Published", "status": "False", "reason": decision.reason,
                            "message": decision.message, "lastTransitionTime": EARLIER}]}
    again = inputs(raw_inventory(status=said), lease="expired")
    assert inventory_event(again, decide_inventory(again), None) == (
        f"{decision.reason}: {decision.message}", None)


def test_publish_failed_event_is_a_warning() -> None:
    decision = decide_inventory(PUBLISHED).publish_failed(
        SliceWrite("create", "node-1-gpu-00000"), "the server is busy", retry=True)
    assert inventory_event(PUBLISHED, decision, None)[1] == Event(
        "Warning", "PublishFailed", "create ResourceSlice node-1-gpu-00000: the server is busy")


def test_a_withdrawal_keeps_the_held_devices_in_the_status() -> None:
    """What keeps a held device published through a withdrawal is written to the API."""
    withdrawn = inputs(raw_inventory(), lease="expired", existing=EXISTING, uses=[use("gpu-1")])
    decision = decide_inventory(withdrawn)
    assert decision.retained is not None
    assert [d.name for d in decision.retained.devices] == ["gpu-1"]
    status = inventory_status(withdrawn, decision, NOW)
    assert status.to_api()["retained"] == {"devices": [
        {"name": "gpu-1", "attributes": {"index": {"int": 1}}}], "sharedCounters": []}
    # the slices are gone (deleted by hand, or by the kubelet) and the agent returns without
    # gpu-1: kept from status.retained
    back = inputs(raw_inventory(devices=1, status={"retained": status.to_api()["retained"]}),
                  uses=[use("gpu-1")])
    published = decide_inventory(back)
    assert published.draining == {"gpu-1": "gone"}
    assert "retained" not in inventory_status(back, published, NOW).to_api()


def test_a_withdrawal_with_nothing_held_keeps_nothing() -> None:
    decision = decide_inventory(inputs(raw_inventory(), lease="expired", existing=EXISTING))
    assert decision.retained is None


def test_a_failed_or_invalid_decision_leaves_the_retained_devices() -> None:
    kept = {"devices": [{"name": "gpu-1"}], "sharedCounters": []}
    raw = raw_inventory(declared=[{"name": "Not_A_Label"}], status={"retained": kept})
    given = inputs(raw)
    assert inventory_status(given, decide_inventory(given), NOW).to_api()["retained"] == kept


def test_a_deleted_inventorys_slices_are_deleted_when_nothing_is_held() -> None:
    decision = decide_deleted("node-1-gpu", DRAINED, [use("gpu-9")], CRD, now=LATER,
                              drain_grace=GRACE)
    assert (decision.reason, decision.plan, decision.forget) == ("Released", None, True)
    assert [s.metadata.name for s in decision.delete] == ["node-1-gpu-00000"]


def test_a_deleted_inventorys_slices_keep_only_its_held_devices() -> None:
    decision = decide_deleted("node-1-gpu", tainted(EXISTING, {"gpu-0": "deleted"}),
                              [use("gpu-1")], CRD, now=LATER, drain_grace=GRACE)
    assert (decision.reason, decision.delete) == ("SlicesPublished", ())
    assert decision.message == (
        "DeviceInventory node-1-gpu is deleted; still allocated, so kept published with a "
        "NoSchedule taint until released: gpu-1 (deleted)")
    assert decision.draining == {"gpu-1": "deleted"}
    assert decision.plan is not None
    [write] = decision.plan.writes
    assert (write.verb, write.name) == ("update", "node-1-gpu-00000")
    assert write.body is not None
    assert write.body["metadata"]["ownerReferences"] == [CRD.to_api()]
    [device] = write.body["spec"]["devices"]
    assert device["name"] == "gpu-1"
    assert device["taints"] == [{"key": "kubedra.io/draining", "value": "deleted",
                                 "effect": "NoSchedule"}]
    # one slice changed: the generation stays, so consumers never mix old and new slices
    assert write.body["spec"]["pool"] == {"name": "node-1", "generation": 1,
                                          "resourceSliceCount": 1}


def test_another_inventory_of_the_pool_waits_for_a_deleted_ones_held_devices() -> None:
    decision = decide_inventory(inputs(raw_inventory("node-1-gpu-2"), deleted=["node-1-gpu"]))
    assert (decision.reason, decision.forget, decision.plan) == ("PoolConflict", True, None)
    assert decision.message == (
        "pool node-1 of driver gpu.kubedra.io still has devices of deleted DeviceInventory "
        "node-1-gpu that claims hold or whose drain grace is not over; this inventory publishes "
        "nothing until they are gone")


def test_slices_owned_by_the_inventory_are_given_to_the_crd() -> None:
    """Slices published before slices were owned by the CRD are updated (same generation)."""
    old = [s.model_copy(update={"metadata": s.metadata.model_copy(update={
        "owner_references": [OwnerReference(api_version="kubedra.io/v1alpha1",
                                            kind="DeviceInventory", name="node-1-gpu",
                                            uid="uid-node-1-gpu", controller=True)]})})
           for s in EXISTING]
    decision = decide_inventory(inputs(raw_inventory(), existing=old))
    assert decision.plan is not None
    assert [(w.verb, w.body["metadata"]["ownerReferences"], w.body["spec"]["pool"]["generation"])
            for w in decision.plan.writes if w.body] == [("update", [CRD.to_api()], 1)]
    assert decide_inventory(inputs(raw_inventory(), existing=EXISTING)).plan.writes == []


def test_an_inventory_of_a_missing_node_is_withdrawn_and_keeps_its_held_devices() -> None:
    decision = decide_inventory(inputs(raw_inventory(), node_exists=False, uses=[use("gpu-0")],
                                       existing=tainted(EXISTING, {"gpu-1": "withdrawn"}),
                                       now=LATER))
    assert (decision.reason, decision.message) == (
        "NodeNotFound", "node node-1 does not exist; pool node-1 is not published until it "
                        "does; still allocated, so kept published with a NoSchedule taint until "
                        "released: gpu-0 (withdrawn)")
    assert decision.withdrawn
    assert decision.delete == ()
    assert decision.plan is not None
    [write] = decision.plan.writes
    assert write.body is not None
    assert [(d["name"], d["taints"]) for d in write.body["spec"]["devices"]] == [
        ("gpu-0", [{"key": "kubedra.io/draining", "value": "withdrawn", "effect": "NoSchedule"}])]
    assert decision.retained is not None
    assert [d.name for d in decision.retained.devices] == ["gpu-0"]


# A device never leaves a published pool in one step (issue 13: kube-scheduler allocated a
# device dropped while its view still showed it, and an overlapping partition as well): it is
# first published tainted kubedra.io/draining, and taken out only when the drain grace
# (GRACE) since that taint's timeAdded is over — whichever way it leaves.
T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WAYS = {
    "disabled": ("disabled", {"gpu-1"}),
    "no longer reported": ("gone", {"gpu-1"}),
    "pool withdrawn": ("withdrawn", {"gpu-0", "gpu-1"}),
    "node missing": ("withdrawn", {"gpu-0", "gpu-1"}),
    "inventory deleted": ("deleted", {"gpu-0", "gpu-1"}),
}
"""How gpu-1 leaves the pool → (the taint's value, the devices that leave with it)."""


def leave(way: str, existing: list[ResourceSlice], now: datetime,
          uses: tuple[ClaimUse, ...] = (), served: ServedFeatures | None = None
          ) -> InventoryDecision:
    """The decision when gpu-1 has left the pool ``way``, with ``existing`` slices, on a
    cluster that keeps what ``served`` says (None: everything)."""
    served = served or ServedFeatures()
    if way == "inventory deleted":
        return decide_deleted("node-1-gpu", existing, uses, CRD, now=now, drain_grace=GRACE,
                              served=served)
    raw, options = {
        "disabled": (raw_inventory(overrides=[{"device": "gpu-1", "disabled": True}]), {}),
        "no longer reported": (raw_inventory(devices=1), {}),
        "pool withdrawn": (raw_inventory(), {"lease": "expired"}),
        "node missing": (raw_inventory(), {"node_exists": False}),
    }[way]
    return decide_inventory(inputs(raw, existing=existing, now=now, uses=list(uses),
                                   served=served, **options))


def published_after(decision: InventoryDecision, existing: list[ResourceSlice]
                    ) -> dict[str, list[tuple[str, str | None, str | None]]]:
    """Device name → its taints (key, value, timeAdded) once the decision's writes are made
    (taints just written have no time yet: the API server adds it)."""
    return {d["name"]: [(t["key"], t.get("value"), t.get("timeAdded"))
                        for t in d.get("taints") or []]
            for s in _bodies_after(decision, existing) for d in s["spec"].get("devices") or []}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_leaving_device_is_first_published_tainted(way: str) -> None:
    why, leaving = WAYS[way]
    decision = leave(way, EXISTING, T)
    assert published_after(decision, EXISTING)["gpu-1"] == [("kubedra.io/draining", why, None)]
    assert decision.leaving == dict.fromkeys(leaving, T + timedelta(seconds=GRACE))
    assert decision.drain_until == T + timedelta(seconds=GRACE)
    assert decision.draining == dict.fromkeys(leaving, why)
    assert decision.message.endswith(
        "; leaving the pool, so published with a NoSchedule taint until the drain grace ends: "
        + ", ".join(f"{d} ({why})" for d in sorted(leaving)))


@pytest.mark.parametrize("way", list(WAYS))
def test_a_leaving_device_stays_tainted_until_the_grace_since_its_taint_is_over(
        way: str) -> None:
    """The grace counts from the taint's ``timeAdded`` in the slices, so an operator that
    restarted (or a new leader) keeps the same deadline."""
    why, leaving = WAYS[way]
    existing = tainted(EXISTING, dict.fromkeys(leaving, why), added="2026-11-30T11:59:50Z")
    decision = leave(way, existing, T)
    assert published_after(decision, existing)["gpu-1"] == [
        ("kubedra.io/draining", why, "2026-11-30T11:59:50Z")]
    assert decision.drain_until == T + timedelta(seconds=GRACE - 10)


@pytest.mark.parametrize("way", list(WAYS))
def test_a_leaving_device_no_claim_holds_goes_once_the_grace_is_over(way: str) -> None:
    why, leaving = WAYS[way]
    existing = tainted(EXISTING, dict.fromkeys(leaving, why), added="2026-11-30T11:59:30Z")
    decision = leave(way, existing, T)
    assert "gpu-1" not in published_after(decision, existing)
    assert (dict(decision.leaving), decision.drain_until) == ({}, None)


@pytest.mark.parametrize("way", list(WAYS))
def test_a_held_leaving_device_stays_until_released_whatever_the_grace(way: str) -> None:
    why, leaving = WAYS[way]
    existing = tainted(EXISTING, dict.fromkeys(leaving, why))
    decision = leave(way, existing, LATER, uses=(use("gpu-1"),))
    assert published_after(decision, existing)["gpu-1"] == [
        ("kubedra.io/draining", why, EARLIER)]
    assert "gpu-1" not in decision.leaving
    assert "still allocated, so kept published with a NoSchedule taint until released: " \
           f"gpu-1 ({why})" in decision.message


TAINTLESS = ServedFeatures(device_taints=False, partitionable_devices=False,
                           device_taint_rules=False, server_version="v1.34.4")
"""A cluster with Kubernetes 1.34's defaults: it drops device taints from a written slice."""


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("held", [False, True], ids=["free", "held"])
def test_a_leaving_device_goes_at_once_where_the_cluster_drops_taints(way: str,
                                                                      held: bool) -> None:
    """It cannot be kept tainted: the server would store it without the taint, and
    allocatable. Before, a deleted inventory's or a withdrawn pool's slices were written again
    with the taint on every reconcile, never seeing it stored, so the drain grace never began
    (v1.34.4: 670 slice generations in a minute, the slices never deleted)."""
    _, leaving = WAYS[way]
    decision = leave(way, EXISTING, T, uses=(use("gpu-1"),) if held else (), served=TAINTLESS)
    after = published_after(decision, EXISTING)
    assert "gpu-1" not in after
    assert all(taints == [] for taints in after.values())
    assert (dict(decision.draining), dict(decision.leaving)) == ({}, {})
    assert decision.message.endswith(
        "left out, as the API server would refuse them: "
        + "; ".join(f"{d} (devices[{d}].taints: {TAINTS_OFF})" for d in sorted(leaving)))
    # what the server stores is what the next decision wants: nothing more to write
    stored = [ResourceSlice.from_api({**body, "metadata": {**body["metadata"],
                                                           "resourceVersion": "8"}})
              for body in _bodies_after(decision, EXISTING)]
    if stored:
        again = leave(way, stored, T, uses=(use("gpu-1"),) if held else (), served=TAINTLESS)
        assert again.plan is not None
        assert again.plan.writes == []
        assert again.delete == ()


def _bodies_after(decision: InventoryDecision, existing: list[ResourceSlice]
                  ) -> list[dict[str, Any]]:
    """The slices once the decision's writes are made."""
    slices = {s.metadata.name: s.to_api() for s in existing}
    for gone in decision.delete:
        slices.pop(gone.metadata.name, None)
    for write in decision.plan.writes if decision.plan else []:
        if write.verb == "delete":
            slices.pop(write.name, None)
        else:
            slices[write.name] = write.body or {}
    return list(slices.values())


@pytest.mark.parametrize(("way", "back"), [
    ("disabled", raw_inventory()),
    ("no longer reported", raw_inventory()),
    ("pool withdrawn", raw_inventory()),  # the agent's Lease is renewed
])
def test_a_device_back_in_the_pool_during_its_grace_loses_its_taint(
        way: str, back: dict[str, Any]) -> None:
    why, leaving = WAYS[way]
    existing = tainted(EXISTING, dict.fromkeys(leaving, why), added="2026-11-30T11:59:50Z")
    decision = decide_inventory(inputs(back, existing=existing, now=T))
    assert published_after(decision, existing) == {"gpu-0": [], "gpu-1": []}
    assert (decision.reason, dict(decision.leaving)) == ("SlicesPublished", {})


def test_one_decision_writes_the_report_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's report is expanded once per decision, however many parts of the decision
    read its devices (the pool, health, the Published message, the EmptyPool check): four
    expansions per reconcile were 47 % of the operator's publish CPU at 1,000 MIG nodes
    (bench/RESULTS.md, scale, round 16). Published and withdrawn alike."""
    import kubedra.publishing.pool as pool_module
    calls: list[int] = []
    expand = pool_module.expand

    def counted(discovered: Any) -> Any:
        calls.append(1)
        return expand(discovered)

    monkeypatch.setattr(pool_module, "expand", counted)
    published = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",))))
    assert (published.reason, len(calls)) == ("SlicesPublished", 1)
    assert published.message.endswith("unhealthy, tainted NoSchedule: gpu-1")
    calls.clear()
    withdrawn = decide_inventory(inputs(raw_inventory(), lease="expired"))
    assert (withdrawn.reason, len(calls)) == ("AgentLeaseExpired", 1)
