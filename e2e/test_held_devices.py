"""A held device stays published, its counters consumed, through an operator crash (issue 13,
item 1): in every window where only kubedra keeps it published — dropped from the report,
pool withdrawn, inventory deleted, and the drain grace of a device leaving its pool — the
operator is SIGKILLed and started again, and kube-scheduler (v1.37.2) must still refuse the
whole GPU while a MIG partition of it is held; the device is released when its claim is.

Each test has its own kwok node with an H200 capture in MIG mode; ``part`` holds partition
``gpu-0-mig-3g71gb-s0``, ``whole`` asks for ``gpu-0``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.invariants import cluster_state, converged, safety_violations
from e2e.kube_objects import condition, create_gpu_pod, pod_claim, read_inventory
from e2e.test_mig import allocated_device, profile, stays_pending

pytestmark = pytest.mark.cluster

HELD = "gpu-0-mig-3g71gb-s0"
MIG = ("kubedra.io", "v1alpha1", "deviceinventories")
DRAINING = {"key": "kubedra.io/draining", "operator": "Exists", "effect": "NoSchedule"}
"""A device toleration of kubedra's draining taint (KEP-5055)."""


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
    """The inventory is deleted while the operator is down (it goes at once: no finalizer);
    its agent recreates it without MIG partitions. The slices are owned by the CRD, not by
    the inventory, so they outlive it: the held partition stays published, tainted, until
    the claim is released; then the agent's new inventory publishes the GPU."""
    node = "hold-d"
    cleanup_node.append(node)
    name = await _mig_node(kubedra, admin_api, node)
    obj = await read_inventory(admin_api, name) or {}
    assert "finalizers" not in obj["metadata"]
    crd = await client.ApiextensionsV1Api(admin_api).read_custom_resource_definition(
        "deviceinventories.kubedra.io")
    slices = await _slices(admin_api, node)
    assert {(o["kind"], o["name"], o["uid"]) for s in slices
            for o in s["metadata"]["ownerReferences"]} == {
        ("CustomResourceDefinition", "deviceinventories.kubedra.io", crd.metadata.uid)}
    await _holds_partition(kubedra, admin_api, namespace, node)
    kubedra.kill_operator()
    await client.CustomObjectsApi(admin_api).delete_cluster_custom_object(*MIG, name)

    async def recreated() -> dict[str, Any] | None:
        found = await read_inventory(admin_api, name)
        return found if found and found["metadata"]["uid"] != obj["metadata"]["uid"] else None
    await eventually(recreated, timeout=90, what=f"{name} recreated by its agent")
    kubedra.restart_operator()
    await _published_message(admin_api, name, f"{HELD} (gone)")
    await _crash_and_restart(kubedra)
    await create_gpu_pod(admin_api, namespace, "whole", "true", node=node)
    await stays_pending(admin_api, namespace, "whole")
    await _release_and_whole_gpu_runs(admin_api, namespace)
    await converged(admin_api)


async def test_a_deleted_inventorys_held_partition_stays_until_released(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, cleanup_node: list[str]
) -> None:
    """With no agent to recreate it, a deleted inventory's slices keep only the held
    partition (``draining=deleted``), its counter set with it, and go once it is released."""
    node = "hold-o"
    cleanup_node.append(node)
    name = await _mig_node(kubedra, admin_api, node)
    await _holds_partition(kubedra, admin_api, namespace, node)
    kubedra.stop_agent(node)
    await client.CustomObjectsApi(admin_api).delete_cluster_custom_object(*MIG, name)

    # first the withdrawal (the agent gave its Lease up) keeps it, tainted draining=withdrawn;
    # then the deleted inventory's slices keep it, tainted draining=deleted
    async def only_held() -> list[tuple[str, list[str]]] | None:
        published = [(d["name"], [f"{t['key']}={t['value']}" for t in d.get("taints") or []])
                     for s in await _slices(admin_api, node) for d in s["spec"].get("devices")
                     or []]
        return published if published == [(HELD, ["kubedra.io/draining=deleted"])] else None
    await eventually(only_held, timeout=90, what="only the held partition, as deleted")
    assert [c["name"] for s in await _slices(admin_api, node)
            for c in s["spec"].get("sharedCounters") or []] == ["gpu-0-counters"]
    await converged(admin_api)
    await _crash_and_restart(kubedra)
    await client.CoreV1Api(admin_api).delete_namespaced_pod("part", namespace,
                                                            grace_period_seconds=0)

    async def gone() -> bool:
        return not await _slices(admin_api, node)
    await eventually(gone, timeout=90, what="the deleted inventory's slices gone")
    await converged(admin_api)


async def _slices(api: ApiClient, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices of pool ``node`` (as plain dicts)."""
    listed = await client.ResourceV1Api(api).list_resource_slice(
        label_selector=f"kubedra.io/inventory={node}-gpu.kubedra.io")
    return [api.sanitize_for_serialization(s) for s in listed.items]


async def _draining_taints(api: ApiClient, node: str) -> dict[str, dict[str, Any]]:
    """Device name → its ``kubedra.io/draining`` taint, of every device of pool ``node``
    that has one."""
    return {d["name"]: t for s in await _slices(api, node) for d in s["spec"].get("devices")
            or [] for t in d.get("taints") or [] if t["key"] == "kubedra.io/draining"}


async def _published(api: ApiClient, node: str) -> set[str]:
    return {d["name"] for s in await _slices(api, node) for d in s["spec"].get("devices") or []}


def _time(value: str) -> float:
    """A ``metav1.Time`` as seconds since the epoch."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp()


async def test_a_leaving_partition_is_dropped_on_time_across_a_crash_unless_allocated_meanwhile(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, cleanup_node: list[str]
) -> None:
    """Two partitions no claim holds are disabled: they stay published, tainted
    ``draining=disabled``, for the drain grace. The operator is SIGKILLed inside the grace and
    kube-scheduler allocates one of them meanwhile (to a claim that tolerates the taint: what a
    scheduler whose view lagged would do). The other is still dropped when the grace since its
    taint's ``timeAdded`` is over — not earlier, and not a grace after the restart; the
    allocated one stays published, its counters consumed (the whole GPU stays pending), until
    its claim is released. On the code before the drain grace, both partitions were dropped at
    once, and the scheduler could allocate one from a stale view with its counters free."""
    grace = 45.0  # outlasts the new operator's wait for the crashed one's Lease (15 s)
    options = dict(kubedra.operator_options)
    kubedra.stop_operator()
    kubedra.start_operator(**{**options, "drain_grace": grace})
    node = "hold-l"
    cleanup_node.append(node)
    leaving = "gpu-0-mig-1g18gb-s6"
    try:
        name = await _mig_node(kubedra, admin_api, node)
        await client.CustomObjectsApi(admin_api).patch_cluster_custom_object(
            *MIG, name, {"spec": {"overrides": [{"device": HELD, "disabled": True},
                                                {"device": leaving, "disabled": True}]}},
            _content_type="application/merge-patch+json")

        async def tainted() -> dict[str, dict[str, Any]] | None:
            taints = await _draining_taints(admin_api, node)
            return taints if {HELD, leaving} <= set(taints) else None
        taints = await eventually(tainted, timeout=60, what="both partitions tainted draining")
        assert {d: (t["value"], t["effect"]) for d, t in taints.items()} == {
            HELD: ("disabled", "NoSchedule"), leaving: ("disabled", "NoSchedule")}
        added = taints[leaving]["timeAdded"]
        kubedra.kill_operator()
        # allocated while the operator is down, from the tainted (tolerated) partition
        await create_gpu_pod(admin_api, namespace, "part", profile("3g.71gb"),
                             device_class="mig.gpu.kubedra.io", node=node,
                             tolerations=[DRAINING])
        assert await allocated_device(admin_api, namespace, "part") == HELD
        kubedra.restart_operator()

        async def reported() -> bool:  # by the new operator: the old one was gone
            claim = await pod_claim(admin_api, namespace, "part") or {}
            return any(c["type"] == "Ready" and c["reason"] == "DeviceDisabled"
                       for d in (claim.get("status") or {}).get("devices") or []
                       for c in d.get("conditions") or [])
        await eventually(reported, timeout=90, what="the new operator reporting the claim")
        assert time.time() < _time(added) + grace, "the restart took longer than the grace"
        assert (await _draining_taints(admin_api, node))[leaving]["timeAdded"] == added

        async def dropped() -> float | None:
            return None if leaving in await _published(admin_api, node) else time.time()
        gone = await eventually(dropped, timeout=grace + 60, interval=0.5,
                                what=f"{leaving} dropped")
        assert _time(added) + grace <= gone <= _time(added) + grace + 20
        assert HELD in await _draining_taints(admin_api, node)
        await create_gpu_pod(admin_api, namespace, "whole", "true", node=node)
        await stays_pending(admin_api, namespace, "whole")
        await _release_and_whole_gpu_runs(admin_api, namespace)

        async def held_dropped() -> bool:  # a released claim queues its inventory within
            return HELD not in await _published(admin_api, node)  # allocationsDelay (1 s)
        await eventually(held_dropped, timeout=30, interval=0.2, what=f"{HELD} dropped")
        await converged(admin_api)
    finally:
        kubedra.stop_operator()
        kubedra.start_operator(**options)
