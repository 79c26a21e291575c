"""Proof that the local control plane is a real Kubernetes v1.37.2 (no kubedra code involved).

The test writes ResourceSlices itself; kube-controller-manager creates the claim from the
template, kube-scheduler's DynamicResources plugin allocates it and binds the pod, kwok runs the
pod, and deleting the pod makes the claim controller deallocate and delete the claim.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from e2e.harness import KWOK_NODE_LABEL, ControlPlane
from e2e.harness.controlplane import KWOK_NODE_IP, KWOK_POD_CIDR
from e2e.harness.wait import eventually

pytestmark = pytest.mark.cluster

DRIVER = "dra.test.kubedra.io"
CLASS = "foundation.test.kubedra.io"
NODES = ("foundation-a", "foundation-b")
# (device, index attribute, memory capacity) per node; only foundation-b/dev-1 has >= 20Gi
DEVICES = {
    "foundation-a": [("dev-0", 0, "8Gi"), ("dev-1", 1, "16Gi")],
    "foundation-b": [("dev-0", 0, "8Gi"), ("dev-1", 1, "32Gi")],
}
SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("20Gi")) >= 0'


def _plain(api: ApiClient, obj: Any) -> Any:
    return api.sanitize_for_serialization(obj)


@pytest.fixture(scope="module")
async def published(admin_api: ApiClient) -> None:
    """Two kwok nodes, a DeviceClass and one ResourceSlice per node."""
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    for node in NODES:
        await core.create_node({"metadata": {"name": node, "labels": {
            KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": node}}})
        await resource.create_resource_slice({
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": name, "attributes": {"index": {"int": index}},
                             "capacity": {"memory": {"value": memory}}}
                            for name, index, memory in DEVICES[node]],
            }})
    await resource.create_device_class({
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})

    async def nodes_ready() -> bool:
        for node in NODES:
            status = (await core.read_node(node)).status
            if not any(c.type == "Ready" and c.status == "True" for c in status.conditions or []):
                return False
        return True

    await eventually(nodes_ready, what="kwok to mark both nodes Ready")


async def _create_pod_with_template(admin_api: ApiClient, namespace: str, name: str,
                                    selector: str) -> None:
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    await resource.create_namespaced_resource_claim_template(namespace, {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "device", "exactly": {
            "deviceClassName": CLASS, "selectors": [{"cel": {"expression": selector}}]}}]}}}})
    await core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1]},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
            "resourceClaims": [{"name": "device", "resourceClaimTemplateName": name}],
            "containers": [{"name": "main", "image": "registry.invalid/app:1",
                            "resources": {"claims": [{"name": "device"}]}}],
        }})


async def test_scheduler_allocates_the_device_the_selector_admits(
        control_plane: ControlPlane, admin_api: ApiClient, published: None,
        namespace: str) -> None:
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    await _create_pod_with_template(admin_api, namespace, "fits", SELECTOR)

    async def running_pod() -> Any:
        pod = await core.read_namespaced_pod("fits", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = await eventually(running_pod, what="pod to be Running", timeout=60)
    assert pod.spec.node_name == "foundation-b"
    # kwok's addresses are loopback ones: nothing could reach another host through them
    node = await core.read_node("foundation-b")
    assert [(a.type, a.address) for a in node.status.addresses if a.type == "InternalIP"] == [
        ("InternalIP", KWOK_NODE_IP)]
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(KWOK_POD_CIDR)
    assert ipaddress.ip_network(KWOK_POD_CIDR).subnet_of(ipaddress.ip_network("127.0.0.0/8"))
    statuses = pod.status.resource_claim_statuses
    assert [s.name for s in statuses] == ["device"]
    claim_name = statuses[0].resource_claim_name

    claim = _plain(admin_api, await resource.read_namespaced_resource_claim(claim_name, namespace))
    assert claim["metadata"]["ownerReferences"][0]["name"] == "fits"
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "device"
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "device", "driver": DRIVER, "pool": "foundation-b", "device": "dev-1"}]
    assert allocation["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["foundation-b"]}]}]}
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "fits", "uid": pod.metadata.uid}]

    # Deleting the pod: the claim controller deallocates (clears the allocation, then removes the
    # delete-protection finalizer) and the claim, owned by the pod, is garbage-collected.
    stream = watch.Watch(return_type="object")  # the client's model name lookup fails here
    deleted: dict[str, Any] = {}

    async def watch_claim() -> None:
        # from the version just read, so no event after it can be missed
        async for event in stream.stream(
                resource.list_namespaced_resource_claim, namespace,
                field_selector=f"metadata.name={claim_name}", timeout_seconds=60,
                resource_version=claim["metadata"]["resourceVersion"]):
            if event["type"] == "DELETED":
                deleted.update(event["raw_object"])
                return

    watcher = asyncio.create_task(watch_claim())
    await core.delete_namespaced_pod("fits", namespace)
    await asyncio.wait_for(watcher, timeout=60)
    stream.stop()
    assert deleted["metadata"]["name"] == claim_name
    # deallocated before it went: the allocation is gone from its last state (the finalizer may
    # still show there: the DELETED event can carry the object as stored before its removal)
    assert "allocation" not in deleted.get("status", {})


async def test_unsatisfiable_claim_leaves_pod_unschedulable(
        control_plane: ControlPlane, admin_api: ApiClient, published: None,
        namespace: str) -> None:
    core = client.CoreV1Api(admin_api)
    too_big = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
    await _create_pod_with_template(admin_api, namespace, "too-big", too_big)

    async def unschedulable() -> Any:
        pod = await core.read_namespaced_pod("too-big", namespace)
        return next((c for c in pod.status.conditions or []
                     if c.type == "PodScheduled" and c.status == "False"), None)

    condition = await eventually(unschedulable, what="PodScheduled=False", timeout=60)
    assert condition.reason == "Unschedulable"
    assert condition.message == (
        "0/2 nodes are available: 2 cannot allocate all claims. "
        "preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.")
