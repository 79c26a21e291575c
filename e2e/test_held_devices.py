"""A held device stays published, its counters consumed, through an operator crash (issue 13,
item 1): in every window where only kubedra keeps it published — dropped from the report,
pool withdrawn, inventory deleted — the operator is SIGKILLed and started again, and
kube-scheduler (v1.37.2) must still refuse the whole GPU while a MIG partition of it is held;
the device is released when its claim is.

Each test has its own kwok node with an H200 capture in MIG mode; ``part`` holds partition
``gpu-0-mig-3g71gb-s0``, ``whole`` asks for ``gpu-0``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.invariants import cluster_state, converged, safety_violations
from e2e.kube_objects import condition, create_gpu_pod, read_inventory
from e2e.test_mig import allocated_device, profile, stays_pending

pytestmark = pytest.mark.cluster

HELD = "gpu-0-mig-3g71gb-s0"
MIG = ("kubedra.io", "v1alpha1", "deviceinventories")


async def _mig_node(kubedra: Kubedra, api: ApiClient, node: str) -> str:
    """Node ``node`` with an agent (Lease 4 s) publishing the H200 in MIG mode; the
    inventory's name."""
    name = f"{node}-gpu.kubedra.io"
    await client.CustomObjectsApi(api).create_cluster_custom_object(*MIG, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": node,
                 "discovery": {"mig": "partitions"}}})
    kubedra.add_node(node)
    kubedra.start_agent(node, lease_duration=4)

    async def published() -> bool:
        status = (await read_inventory(api, name) or {}).get("status") or {}
        return bool(status.get("deviceCount") == 26)
    await eventually(published, timeout=90, what=f"{name}: 26 devices published")
    return name


async def _published_message(api: ApiClient, name: str, text: str) -> dict[str, Any]:
    async def has() -> dict[str, Any] | None:
        published = condition(await read_inventory(api, name), "Published") or {}
        return published if text in published.get("message", "") else None
    found: dict[str, Any] = await eventually(has, timeout=90, what=f"{name}: {text!r}")
    return found


async def _holds_partition(kubedra: Kubedra, api: ApiClient, ns: str, node: str) -> None:
    await create_gpu_pod(api, ns, "part", profile("3g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=node)
    assert await allocated_device(api, ns, "part") == HELD


async def _crash_and_restart(kubedra: Kubedra) -> None:
    kubedra.kill_operator()
    kubedra.restart_operator()


async def _release_and_whole_gpu_runs(api: ApiClient, ns: str) -> None:
    """Delete ``part``: its claim is released, and only then does ``whole`` get gpu-0."""
    claims, slices, _ = await cluster_state(api)
    assert safety_violations(claims, slices) == []
    await client.CoreV1Api(api).delete_namespaced_pod("part", ns, grace_period_seconds=0)
    assert await allocated_device(api, ns, "whole") == "gpu-0"


@pytest.fixture
async def cleanup_node(kubedra: Kubedra) -> AsyncIterator[list[str]]:
    """Nodes whose agents to stop after the test."""
    nodes: list[str] = []
    yield nodes
    for node in nodes:
        if node in kubedra.agents:
            kubedra.stop_agent(node)


async def test_a_partition_dropped_from_the_report_stays_held_across_a_crash(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, cleanup_node: list[str]
) -> None:
    node = "hold-g"
    cleanup_node.append(node)
    name = await _mig_node(kubedra, admin_api, node)
    await _holds_partition(kubedra, admin_api, namespace, node)
    await client.CustomObjectsApi(admin_api).patch_cluster_custom_object(
        *MIG, name, {"spec": {"discovery": {"mig": "none"}}},
        _content_type="application/merge-patch+json")
    await _published_message(admin_api, name, f"{HELD} (gone)")
    await _crash_and_restart(kubedra)
    await create_gpu_pod(admin_api, namespace, "whole", "true", node=node)
    await stays_pending(admin_api, namespace, "whole")
    await _published_message(admin_api, name, f"{HELD} (gone)")
    await _release_and_whole_gpu_runs(admin_api, namespace)
    await converged(admin_api)


async def test_a_partition_of_a_withdrawn_pool_stays_held_across_a_crash(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, cleanup_node: list[str]
) -> None:
    """The agent goes away (pool withdrawn), the operator crashes, the agent comes back
    without MIG partitions: the held one must come back too, from ``status.retained``."""
    node = "hold-w"
    cleanup_node.append(node)
    name = await _mig_node(kubedra, admin_api, node)
    await _holds_partition(kubedra, admin_api, namespace, node)
    kubedra.stop_agent(node)
    await _published_message(admin_api, name, "withdrawn until the agent returns")
    retained = (await read_inventory(admin_api, name) or {})["status"]["retained"]
    assert HELD in [d["name"] for d in retained["devices"]]
    assert [c["name"] for c in retained["sharedCounters"]] == ["gpu-0-counters"]
    await _crash_and_restart(kubedra)
    await client.CustomObjectsApi(admin_api).patch_cluster_custom_object(
        *MIG, name, {"spec": {"discovery": {"mig": "none"}}},
        _content_type="application/merge-patch+json")
    kubedra.start_agent(node, lease_duration=4)
    await _published_message(admin_api, name, f"{HELD} (gone)")
    assert "retained" not in (await read_inventory(admin_api, name) or {})["status"]
    await create_gpu_pod(admin_api, namespace, "whole", "true", node=node)
    await stays_pending(admin_api, namespace, "whole")
    await _release_and_whole_gpu_runs(admin_api, namespace)
    await converged(admin_api)


async def test_a_deleted_inventory_keeps_its_held_partition_across_a_crash(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, cleanup_node: list[str]
) -> None:
    """The inventory is deleted while the operator is down; its agent would recreate it
    without MIG partitions. It stays (finalizer) publishing only the held partition until
    the claim is released; then it goes and the agent's new inventory publishes the GPU."""
    node = "hold-d"
    cleanup_node.append(node)
    name = await _mig_node(kubedra, admin_api, node)
    obj = await read_inventory(admin_api, name) or {}
    assert obj["metadata"]["finalizers"] == ["kubedra.io/held-devices"]
    await _holds_partition(kubedra, admin_api, namespace, node)
    kubedra.kill_operator()
    await client.CustomObjectsApi(admin_api).delete_cluster_custom_object(*MIG, name)
    kubedra.restart_operator()
    published = await _published_message(admin_api, name, f"{HELD} (deleted)")
    assert published["message"].startswith("DeviceInventory is being deleted; 1 device in ")
    await _crash_and_restart(kubedra)
    await create_gpu_pod(admin_api, namespace, "whole", "true", node=node)
    await stays_pending(admin_api, namespace, "whole")
    await _release_and_whole_gpu_runs(admin_api, namespace)
    recreated = await read_inventory(admin_api, name) or {}
    assert recreated["metadata"]["uid"] != obj["metadata"]["uid"]
    await converged(admin_api)
