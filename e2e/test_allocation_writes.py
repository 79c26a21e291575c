"""A burst of claims allocated on one node costs the operator one write of the inventory's
``status.allocations``, not one per claim (``allocationsDelay``, 1 s), and the inventory shows
every allocation within seconds; each claim still gets its own ``Ready`` status."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from bench.scale import h200_node
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import gpu_claim_spec, read_inventory
from e2e.test_compact_inventory import published, report_as_agent
from kubedra.api import inventory as inv

pytestmark = pytest.mark.cluster

GPUS = 8


async def writes_since(api: ApiClient, name: str, version: str) -> list[dict[str, Any]]:
    """The ``status.allocations`` of each write of DeviceInventory ``name`` after
    resourceVersion ``version``, oldest first: a watch from that version, which replays every
    change since (the API server's watch cache) and ends after a second with none. Counted
    per object, so the writes of other tests' inventories in the same cluster do not count
    (the API server's request metrics are per resource)."""
    stream = watch.Watch().stream(
        client.CustomObjectsApi(api).list_cluster_custom_object, inv.GROUP, inv.VERSION,
        inv.PLURAL, field_selector=f"metadata.name={name}", resource_version=version,
        timeout_seconds=1)
    writes = []
    async with stream:
        async for event in stream:
            assert event["type"] == "MODIFIED", event["type"]
            writes.append((event["object"].get("status") or {}).get("allocations") or [])
    return writes


def allocation(node: str, device: str) -> dict[str, Any]:
    """The ``status`` of a claim given ``device`` of ``node``'s pool, as kube-scheduler writes
    its allocation."""
    return {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.kubedra.io", "pool": node, "device": device}]}}}


async def test_a_burst_of_claims_on_one_node_costs_one_inventory_write(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    node = "burst-h200"
    kubedra.add_node(node)
    name = await report_as_agent(admin_api, node, h200_node(2, False))
    await published(admin_api, name, GPUS)
    resource = client.ResourceV1Api(admin_api)
    claims = [f"burst-{i}" for i in range(GPUS)]
    for claim in claims:  # unallocated claims touch no inventory
        await resource.create_namespaced_resource_claim(namespace, {
            "metadata": {"name": claim}, "spec": gpu_claim_spec()})
    before = (await read_inventory(admin_api, name) or {})["metadata"]["resourceVersion"]
    started = time.monotonic()
    await asyncio.gather(*(resource.patch_namespaced_resource_claim_status(
        claim, namespace, {"status": allocation(node, f"gpu-{i}")})
        for i, claim in enumerate(claims)))
    first = await resource.read_namespaced_resource_claim_status(claims[0], namespace)
    assert admin_api.sanitize_for_serialization(first.status)["allocation"] == allocation(
        node, "gpu-0")["allocation"]

    async def shown() -> list[str] | None:
        status = (await read_inventory(admin_api, name) or {}).get("status") or {}
        held = sorted(a["claim"] for a in status.get("allocations") or [])
        return held if held == sorted(f"{namespace}/{c}" for c in claims) else None
    await eventually(shown, timeout=30, interval=0.1, what="every allocation in the inventory")
    shown_s = time.monotonic() - started

    async def ready() -> bool:
        for claim in claims:
            obj = await resource.read_namespaced_resource_claim_status(claim, namespace)
            devices = obj.status.devices or []
            if not any(c.type == "Ready" and c.status == "True"
                       for d in devices for c in d.conditions or []):
                return False
        return True
    await eventually(ready, timeout=30, what="every claim Ready")
    writes = await writes_since(admin_api, name, before)
    assert [sorted(a["claim"] for a in w) for w in writes] == [
        sorted(f"{namespace}/{c}" for c in claims)]
    assert shown_s < 5, shown_s
