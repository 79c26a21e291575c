"""Nothing of a deleted Node stays behind, and an inventory of a Node that does not exist is
reported, not published silently (issue 13, item 2)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.kubedra import NAMESPACE, Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, posted_events, read_inventory, slices_of

pytestmark = pytest.mark.cluster

INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")


async def test_the_inventory_and_lease_of_a_deleted_node_are_garbage_collected(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    node = "gone-node"
    name = f"{node}-gpu.kubedra.io"
    kubedra.add_node(node)
    kubedra.start_agent(node)

    async def published() -> dict[str, Any] | None:
        obj = await read_inventory(admin_api, name)
        return obj if (condition(obj, "Ready") or {}).get("status") == "True" else None
    obj = await eventually(published, timeout=90, what=f"{name} published")
    core = client.CoreV1Api(admin_api)
    uid = (await core.read_node(node)).metadata.uid
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
    assert obj["metadata"]["ownerReferences"] == [owner]
    lease = await client.CoordinationV1Api(admin_api).read_namespaced_lease(
        f"kubedra-agent-{node}", NAMESPACE)
    assert [(r.kind, r.name, r.uid) for r in lease.metadata.owner_references] == [
        ("Node", node, uid)]
    kubedra.stop_agent(node)
    await core.delete_node(node)

    async def collected() -> bool:
        try:
            await client.CoordinationV1Api(admin_api).read_namespaced_lease(
                f"kubedra-agent-{node}", NAMESPACE)
            return False
        except ApiException as err:
            return err.status == 404 and await read_inventory(admin_api, name) is None
    await eventually(collected, timeout=90, what="Lease and inventory garbage-collected")

    async def unpublished() -> bool:  # once the drain grace of its devices is over
        return await slices_of(admin_api, name) == []
    await eventually(unpublished, timeout=60, what=f"the slices of {name} deleted")


async def test_an_inventory_of_a_node_that_does_not_exist_is_reported(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    name = "typo-node-pci"
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(*INVENTORIES, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name},
        "spec": {"driver": "pci.kubedra.io", "nodeName": "no-such-node",
                 "devices": [{"name": "dev-0"}]}})

    async def reported() -> dict[str, Any] | None:
        ready = condition(await read_inventory(admin_api, name), "Ready") or {}
        return ready if ready.get("reason") == "NodeNotFound" else None
    ready = await eventually(reported, timeout=60, what="Ready=False NodeNotFound")
    assert (ready["status"], ready["message"]) == (
        "False", "node no-such-node does not exist; pool no-such-node is not published until "
                 "it does")
    assert await slices_of(admin_api, name) == []
    events = await posted_events(admin_api, "default", f"involvedObject.name={name}")
    assert [(e.type, e.reason) for e in events] == [("Warning", "NodeNotFound")]

    kubedra.add_node("no-such-node")  # it joins: published

    async def published() -> bool:
        return (condition(await read_inventory(admin_api, name), "Ready") or {}).get(
            "status") == "True"
    await eventually(published, timeout=60, what=f"{name} published once the node exists")
    assert [s["spec"]["nodeName"] for s in await slices_of(admin_api, name)] == ["no-such-node"]
    await custom.delete_cluster_custom_object(*INVENTORIES, name)
