"""kube-scheduler's own search runs past its 10 s filter timeout on kubernetes#131730's claim
(25 devices; ``r1`` any one, ``r2`` 24 with ``index < 24``): the real v1.37.2 scheduler reports
``timed out trying to allocate devices`` for the pod, and the operator's Event on the claim
says so, with the allocation that exists and the rewrite that makes the scheduler find it.

The scheduler retries the pod with back-off, each try another 10 s of its CPU, so the pod is
deleted as soon as the Event is checked. The node ``explosion`` this adds has the all-nodes
pools of other tests too; the module runs after them (modules run in name order)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.controlplane import KWOK_NODE_LABEL
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import claim_events, condition

pytestmark = pytest.mark.cluster

NODE = "explosion"
FILTER = 'running "DynamicResources" filter plugin: '


def _inventory(suite: str) -> dict[str, Any]:
    """An all-nodes pool ``suite`` of 25 pci.kubedra.io devices ``dev-000``… with ``index``."""
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": suite},
            "spec": {"driver": "pci.kubedra.io", "allNodes": True, "pool": suite, "devices": [
                {"name": f"dev-{i:03d}", "attributes": {"index": {"int": i},
                                                        "suite": {"string": suite}}}
                for i in range(25)]}}


async def test_scheduler_times_out_and_the_event_says_why(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    kubedra.add_node(NODE)
    custom = client.CustomObjectsApi(admin_api)
    resource = client.ResourceV1Api(admin_api)
    core = client.CoreV1Api(admin_api)
    await custom.create_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                              _inventory(namespace))
    parts = f"{namespace}-parts"
    await resource.create_device_class({"metadata": {"name": parts}, "spec": {"selectors": [
        {"cel": {"expression": 'device.driver == "pci.kubedra.io" && device.attributes['
                               f'"pci.kubedra.io"].?suite.orValue("") == "{namespace}"'}}]}})
    try:
        async def published() -> bool:
            slices = await resource.list_resource_slice()
            return any(s.spec.pool.name == namespace and len(s.spec.devices or ()) == 25
                       for s in slices.items)
        await eventually(published, timeout=60, what="the 25 devices published")
        await resource.create_namespaced_resource_claim(namespace, {
            "metadata": {"name": "explode"},
            "spec": {"devices": {"requests": [
                {"name": "r1", "exactly": {"deviceClassName": parts}},
                {"name": "r2", "exactly": {"deviceClassName": parts, "count": 24, "selectors": [
                    {"cel": {"expression":
                             'device.attributes["pci.kubedra.io"].index < 24'}}]}}]}}})
        await core.create_namespaced_pod(namespace, {
            "metadata": {"name": "explode"},
            "spec": {
                "nodeSelector": {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1],
                                 "kubernetes.io/hostname": NODE},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                "resourceClaims": [{"name": "gpus", "resourceClaimName": "explode"}],
                "containers": [{"name": "main", "image": "registry.invalid/cuda-app:1",
                                "resources": {"claims": [{"name": "gpus"}]}}]}})
        timed_out = f"{FILTER}node {NODE}: timed out trying to allocate devices"

        async def scheduler_gave_up() -> dict[str, Any] | None:
            pod = admin_api.sanitize_for_serialization(
                await core.read_namespaced_pod("explode", namespace))
            found = condition(pod, "PodScheduled")
            return found if found and timed_out in (found.get("message") or "") else None
        # the scheduler's 10 s filter timeout, on a busy machine more
        scheduled = await eventually(scheduler_gave_up, timeout=90,
                                     what="the scheduler's time-out on the pod")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulerError")

        async def explained() -> list[dict[str, Any]]:
            return await claim_events(admin_api, namespace, "explode", "CannotAllocate")
        events = await eventually(explained, timeout=60, what="CannotAllocate Event")
        assert [(e["type"], e["message"]) for e in events] == [("Warning", (
            f"kube-scheduler times out on node {NODE} and reports an error, not unschedulable: "
            f"{timed_out}; it retries with back-off and does not schedule the pod; an "
            "allocation exists (r1: dev-024; r2: dev-000, dev-001, dev-002, dev-003, dev-004, "
            "… (24 devices)), but its search takes 201,326,645 steps to reach it; list the "
            "requests most constrained first (r2, r1): kube-scheduler's search then takes 29 "
            "steps"))]
    finally:
        # every retry costs the scheduler another 10 s of CPU: stop it first
        with contextlib.suppress(ApiException):
            await core.delete_namespaced_pod("explode", namespace, grace_period_seconds=0)
        await resource.delete_device_class(parts)
        await custom.delete_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                                  namespace)
