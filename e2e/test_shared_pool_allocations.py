"""Allocations in a pool that several inventories name: the operator's own allocations-only
status write is a quiet echo (its watch event reconciles nothing,
``StatusOverlay.is_quiet_echo``) only while the pool has that one inventory; an inventory that
joins the pool — even while that write is in flight — reconciles every inventory of it from
its own event, and the one that lost the pool conflict lists no allocations; deleted, the first
keeps the held device published and the second waits for its release, then takes the pool
over and lists the allocations made there exactly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, gpu_claim_spec, read_inventory, slices_of
from kubedra.api import inventory as inv

pytestmark = pytest.mark.cluster

DRIVER = "pci.kubedra.io"
POOL = "shared-alloc"


def declared(name: str) -> dict[str, Any]:
    """A DeviceInventory of pool :data:`POOL` declaring devices ``dev-0`` and ``dev-1``."""
    return {"apiVersion": f"{inv.GROUP}/{inv.VERSION}", "kind": "DeviceInventory",
            "metadata": {"name": name},
            "spec": {"driver": DRIVER, "allNodes": True, "pool": POOL,
                     "devices": [{"name": f"dev-{i}", "attributes": {"index": {"int": i}}}
                                 for i in range(2)]}}


async def inventory_state(api: ApiClient, name: str) -> tuple[str, str, list[str], int]:
    """(Published's status, Published's reason, the claims of ``status.allocations`` as
    ``namespace/name device``, ``status.allocatedCount``) of inventory ``name``."""
    obj = await read_inventory(api, name) or {}
    status = obj.get("status") or {}
    ready = condition(obj, "Published") or {}
    held = sorted(f"{a['claim']} {a['device']}" for a in status.get("allocations") or [])
    return ready.get("status", ""), ready.get("reason", ""), held, status.get("allocatedCount", 0)


async def claim_ready(api: ApiClient, namespace: str, claim: str) -> list[tuple[str, str, str]]:
    """(pool, device, Ready's status) of each entry of the claim's ``status.devices``."""
    obj = await client.ResourceV1Api(api).read_namespaced_resource_claim_status(claim, namespace)
    return [(d.pool, d.device, next((c.status for c in d.conditions or [] if c.type == "Ready"),
                                    ""))
            for d in obj.status.devices or []]


async def test_a_claim_in_a_shared_pool_is_listed_by_its_publisher_only(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(admin_api)
    resource = client.ResourceV1Api(admin_api)
    await custom.create_cluster_custom_object(inv.GROUP, inv.VERSION, inv.PLURAL,
                                              declared("shared-alloc-a"))

    async def published(name: str) -> bool:
        return (await inventory_state(admin_api, name))[:2] == ("True", "SlicesPublished")
    await eventually(lambda: published("shared-alloc-a"), timeout=60, what="a publishes")
    await resource.create_namespaced_resource_claim(namespace, {
        "metadata": {"name": "held"}, "spec": gpu_claim_spec(device_class=DRIVER)})
    # the allocation (a quiet allocations-only write of a, alone in its pool) and a second
    # inventory of the pool at once: b's own event must reconcile both
    await asyncio.gather(
        resource.patch_namespaced_resource_claim_status("held", namespace, {"status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": POOL, "device": "dev-1"}]}}}}),
        custom.create_cluster_custom_object(inv.GROUP, inv.VERSION, inv.PLURAL,
                                            declared("shared-alloc-b")))
    holder = f"{namespace}/held dev-1"

    async def settled() -> bool:
        return (await inventory_state(admin_api, "shared-alloc-a") == (
            "True", "SlicesPublished", [holder], 1)
            and (await inventory_state(admin_api, "shared-alloc-b"))[1] == "PoolConflict")
    await eventually(settled, timeout=60, what="a lists the claim, b is in conflict")
    assert await inventory_state(admin_api, "shared-alloc-b") == (
        "False", "PoolConflict", [], 0)
    assert await slices_of(admin_api, "shared-alloc-b") == []
    await eventually(lambda: _equal(claim_ready(admin_api, namespace, "held"),
                                    [(POOL, "dev-1", "True")]),
                     timeout=60, what="the claim Ready")

    # a goes: its slice keeps the held device published and b waits, listing nothing
    await custom.delete_cluster_custom_object(inv.GROUP, inv.VERSION, inv.PLURAL,
                                              "shared-alloc-a")

    async def waiting() -> bool:
        obj = await read_inventory(admin_api, "shared-alloc-b")
        return "deleted DeviceInventory shared-alloc-a" in (
            condition(obj, "Published") or {}).get("message", "")
    await eventually(waiting, timeout=60, what="b waiting for a's held device")
    assert await inventory_state(admin_api, "shared-alloc-b") == (
        "False", "PoolConflict", [], 0)
    # released, a's slice goes and b publishes the pool; a claim allocated there is listed
    # by b (alone in the pool now: its allocations-only write is a quiet one)
    await resource.delete_namespaced_resource_claim("held", namespace)
    await eventually(lambda: _equal(inventory_state(admin_api, "shared-alloc-b"),
                                    ("True", "SlicesPublished", [], 0)),
                     timeout=60, what="b publishes the pool")
    [taken] = await slices_of(admin_api, "shared-alloc-b")
    assert (taken["spec"]["pool"]["name"], [d["name"] for d in taken["spec"]["devices"]]) == (
        POOL, ["dev-0", "dev-1"])
    await resource.create_namespaced_resource_claim(namespace, {
        "metadata": {"name": "after"}, "spec": gpu_claim_spec(device_class=DRIVER)})
    await resource.patch_namespaced_resource_claim_status("after", namespace, {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": POOL, "device": "dev-0"}]}}}})
    await eventually(lambda: _equal(inventory_state(admin_api, "shared-alloc-b"), (
        "True", "SlicesPublished", [f"{namespace}/after dev-0"], 1)),
        timeout=60, what="b lists the new claim")
    await eventually(lambda: _equal(claim_ready(admin_api, namespace, "after"),
                                    [(POOL, "dev-0", "True")]),
                     timeout=60, what="the new claim Ready")
    await resource.delete_namespaced_resource_claim("after", namespace)
    await custom.delete_cluster_custom_object(inv.GROUP, inv.VERSION, inv.PLURAL,
                                              "shared-alloc-b")


async def _equal(found: Any, expected: Any) -> bool:
    return bool(await found == expected)
