"""``status.publishedFrom``: an unchanged pool is verified from the raw objects, and whatever a
decision reads, when changed, makes it a full reconcile again (pure functions, milliseconds)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.scale import h200_node
from kubedra.api.resource import OwnerReference, ResourceSlice
from kubedra.controller.fingerprint import Unchanged, inputs_digest, record, unchanged_pool
from kubedra.controller.inventories import (
    InventoryInputs,
    decide_inventory,
    inventory_status,
    status_changed,
)
from kubedra.controller.state import ClaimUse

NOW = "2026-11-30T12:00:00Z"
OWNER = OwnerReference(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                       name="deviceinventories.kubedra.io", uid="uid-crd")
NAME = "node-1-gpu"


def raw_inventory(devices: int = 3, unhealthy: tuple[str, ...] = ()) -> dict[str, Any]:
    found = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}},
              **({"health": "Unhealthy", "healthMessage": "ECC errors"}
                 if f"gpu-{i}" in unhealthy else {})} for i in range(devices)]
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": NAME, "uid": "uid-inv", "generation": 3,
                         "resourceVersion": "10", "creationTimestamp": "2026-01-01"},
            "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-1"},
            "status": {"discovered": {"devices": found, "backend": "snapshot",
                                      "observedTime": "2026-11-30T11:00:00Z"}}}


def use(device: str, claim: str = "c1") -> ClaimUse:
    return ClaimUse(namespace="ns", name=claim, uid=f"uid-{claim}", request="gpu",
                    driver="gpu.kubedra.io", pool="node-1", device=device)


def inputs(raw: dict[str, Any], existing: list[dict[str, Any]],
           uses: tuple[ClaimUse, ...] = ()) -> InventoryInputs:
    return InventoryInputs(raw=raw, existing=[ResourceSlice.from_api(s) for s in existing],
                           lease="live", namespace="kubedra-system", owner=OWNER, uses=uses,
                           drain_grace=30.0)


def publish(raw: dict[str, Any], existing: list[dict[str, Any]] | None = None,
            uses: tuple[ClaimUse, ...] = ()) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Carry out a full reconcile as the executor does: the slices after its writes (each
    write a new resourceVersion) and the inventory with the status it applies."""
    existing = existing or []
    given = inputs(raw, existing, uses)
    decision = decide_inventory(given)
    assert decision.plan is not None
    slices = {s["metadata"]["name"]: s for s in existing}
    for i, write in enumerate(decision.plan.writes):
        if write.verb == "delete":
            slices.pop(write.name)
        else:
            assert write.body is not None
            slices[write.name] = {**write.body, "metadata": {
                **write.body["metadata"], "resourceVersion": str(100 + i)}}
    after = list(slices.values())
    status = inventory_status(given, decision, NOW)
    status.published_from = record(raw, decision, uses, after, OWNER.uid, 0.0)
    published = copy.deepcopy(raw)
    published["status"].update(status.to_api())
    return published, after


def check(raw: dict[str, Any], slices: list[dict[str, Any]], **kwargs: Any) -> Unchanged | None:
    given: dict[str, Any] = {"lease": "live", "node_exists": True, "pool_inventories": [NAME],
                             "deleted": [], "uses": (), "owner_uid": OWNER.uid,
                             "hold_down": 0.0}
    return unchanged_pool(raw, slices, **{**given, **kwargs})


PUBLISHED, SLICES = publish(raw_inventory())


def test_a_published_pool_is_found_unchanged_with_what_to_remember() -> None:
    found = check(PUBLISHED, SLICES)
    assert found == Unchanged(devices=frozenset({"gpu-0", "gpu-1", "gpu-2"}),
                              health={f"gpu-{i}": ("Healthy", None) for i in range(3)},
                              allocations=None)
    assert PUBLISHED["status"]["publishedFrom"] == {
        "inputs": inputs_digest(raw_inventory(), OWNER.uid, 0.0),
        "slices": {"node-1-gpu-00000": "100"}}


def test_the_full_reconcile_agrees_that_nothing_is_to_write() -> None:
    """What the fingerprint skips is what a full reconcile would have found: no slice write,
    no status change."""
    given = inputs(PUBLISHED, SLICES)
    decision = decide_inventory(given)
    assert decision.plan is not None
    assert decision.plan.writes == []
    status = inventory_status(given, decision, "2026-12-01T00:00:00Z")
    status.published_from = record(PUBLISHED, decision, (), SLICES, OWNER.uid, 0.0)
    assert not status_changed(PUBLISHED, status)


def test_the_agents_scan_time_alone_changes_nothing() -> None:
    raw = copy.deepcopy(PUBLISHED)
    raw["status"]["discovered"]["observedTime"] = "2026-11-30T11:59:00Z"
    raw["metadata"]["resourceVersion"] = "11"
    assert check(raw, SLICES) is not None


def _changed(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(PUBLISHED)
    target = raw
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[last] = value
    return raw


@pytest.mark.parametrize("raw", [
    _changed("status.discovered.devices.0.attributes", {"index": {"int": 7}}),
    _changed("status.discovered.devices.0.health", "Unhealthy"),
    _changed("status.discovered.backend", "nvml"),
    _changed("spec.overrides", [{"device": "gpu-1", "disabled": True}]),
    _changed("metadata.generation", 4),
    _changed("status.retained", {"devices": [], "sharedCounters": []}),
], ids=["attribute", "health", "backend", "spec", "generation", "retained"])
def test_a_changed_inventory_is_reconciled_fully(raw: dict[str, Any]) -> None:
    assert check(raw, SLICES) is None


def test_changed_slices_are_reconciled_fully() -> None:
    touched = [{**SLICES[0], "metadata": {**SLICES[0]["metadata"], "resourceVersion": "555"}}]
    extra = [*SLICES, {**SLICES[0], "metadata": {**SLICES[0]["metadata"],
                                                  "name": "node-1-gpu-00001"}}]
    assert check(PUBLISHED, touched) is None
    assert check(PUBLISHED, []) is None
    assert check(PUBLISHED, extra) is None


@pytest.mark.parametrize("change", [
    {"lease": "expired"}, {"lease": "missing"}, {"node_exists": False},
    {"pool_inventories": [NAME, "another"]}, {"deleted": ["old-inventory"]},
    {"owner_uid": "uid-another-crd"}, {"hold_down": 300.0},
    {"uses": (use("gpu-9"),)},
], ids=["lease-expired", "lease-missing", "node-gone", "rival", "deleted-rival", "owner",
        "hold-down", "held-device-not-published"])
def test_what_the_decision_reads_beside_the_inventory_counts(change: dict[str, Any]) -> None:
    assert check(PUBLISHED, SLICES, **change) is None


def test_claims_change_only_the_allocations() -> None:
    found = check(PUBLISHED, SLICES, uses=(use("gpu-1"), use("gpu-0", "c2")))
    assert found is not None
    assert found.allocations is not None
    assert [a.to_api() for a in found.allocations] == [
        {"device": "gpu-0", "claim": "ns/c2", "claimUID": "uid-c2", "request": "gpu"},
        {"device": "gpu-1", "claim": "ns/c1", "claimUID": "uid-c1", "request": "gpu"}]
    # and the full reconcile of the same inputs writes no slice, only those allocations
    given = inputs(PUBLISHED, SLICES, (use("gpu-1"), use("gpu-0", "c2")))
    decision = decide_inventory(given)
    assert decision.plan is not None
    assert decision.plan.writes == []
    assert inventory_status(given, decision, NOW).to_api()["allocations"] == [
        a.to_api() for a in found.allocations]


def test_allocations_as_written_are_not_written_again() -> None:
    held, slices = publish(raw_inventory(), SLICES, (use("gpu-1"),))
    assert slices == SLICES  # no slice write
    found = check(held, slices, uses=(use("gpu-1"),))
    assert found is not None
    assert found.allocations is None


@pytest.mark.parametrize("raw", [raw_inventory(unhealthy=("gpu-1",))], ids=["tainted"])
def test_a_pool_with_tainted_devices_records_nothing(raw: dict[str, Any]) -> None:
    published, slices = publish(raw)
    assert "publishedFrom" not in published["status"]
    assert check(published, slices) is None


def test_a_withdrawn_pool_records_nothing() -> None:
    given = InventoryInputs(raw=PUBLISHED, existing=[ResourceSlice.from_api(s) for s in SLICES],
                            lease="expired", namespace="kubedra-system", owner=OWNER,
                            drain_grace=30.0)
    decision = decide_inventory(given)
    assert decision.withdrawn
    assert record(PUBLISHED, decision, (), [], OWNER.uid, 0.0) is None


def test_a_draining_pool_records_nothing() -> None:
    """A device leaving the pool is published tainted until its drain grace ends; a restart
    must reconcile it fully so that the grace's wake-up is set again."""
    published, slices = publish(raw_inventory(devices=2), existing=SLICES)
    taints = {d["name"]: [t["key"] for t in d.get("taints") or []]
              for s in slices for d in s["spec"]["devices"]}
    assert taints == {"gpu-0": [], "gpu-1": [], "gpu-2": ["kubedra.io/draining"]}
    assert "publishedFrom" not in published["status"]
    assert check(published, slices) is None


def test_a_compact_mig_inventory_is_verified_with_every_partitions_health() -> None:
    """The partitions of a GPU in the compact form are not listed in the raw report; a claim's
    device missing from ``health`` would read as ``Missing``."""
    raw = raw_inventory(0)
    raw["status"]["discovered"] = h200_node(0, True, "compact")
    published, slices = publish(raw)
    found = check(published, slices)
    assert found is not None
    assert len(found.devices) == 208
    assert found.health == dict.fromkeys(found.devices, ("Healthy", None))
