"""What the operator learns the cluster serves, against real kube-apiservers (issue 26, item 2):
the session's control plane with its default gates, and one started with the gates of
Kubernetes 1.34's defaults for these fields (``DRADeviceTaints``, ``DRADeviceTaintRules`` and
``DRAPartitionableDevices`` off: turned off on 1.36 and 1.37, as they ship on 1.34 and 1.35),
where the API server drops taints and counters from a written slice without an error. There an
unhealthy device is left out of the slice, with the reason, and the scheduler does not allocate
it until it is healthy again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra
from e2e.harness.scrape import client_tls
from e2e.harness.versions import kube_version
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    condition,
    create_gpu_pod,
    pod_claim,
    posted_events,
    read_inventory,
    slices_of,
)
from kubedra import kube
from kubedra.api.quantity import QUANTITY_PATTERN
from kubedra.controller.features import PROBE_DRIVER, detect
from kubedra.kube import make_api_client
from kubedra.publishing.features import probe_effect_none_slice

GATES_OF_1_34 = "DRADeviceTaints=false,DRADeviceTaintRules=false,DRAPartitionableDevices=false"
GATES_OFF = {"1.34": "", "1.35": "", "1.36": GATES_OF_1_34, "1.37": GATES_OF_1_34}
"""``--feature-gates`` that give each minor 1.34's defaults for these fields: none on 1.34 and
1.35, which have them off already (and 1.34 refuses DRADeviceTaintRules as unknown)."""
MINOR = kube_version().rpartition(".")[0]
GATES_CAN_BE_OFF = pytest.mark.skipif(MINOR not in GATES_OFF, reason=(
    f"Kubernetes {MINOR} is not in the matrix (from 1.38 DRADeviceTaints is locked on)"))


@pytest.fixture(scope="module")
def gates_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubedra, int]]:
    """kubedra installed on a second control plane whose kube-apiserver, kube-scheduler and
    kube-controller-manager have the gates of :data:`GATES_OF_1_34` off (by default, or by
    :data:`GATES_OFF`)."""
    yield from _kubedra_on(Path(tmp_path_factory.mktemp("gates-off")), GATES_OFF[MINOR])


def _kubedra_on(directory: Path, feature_gates: str) -> Iterator[tuple[Kubedra, int]]:
    """kubedra installed on a control plane of its own in ``directory`` with
    ``feature_gates`` (for kube-apiserver, kube-scheduler and kube-controller-manager), its
    operator serving ``/healthz`` on the port yielded (everything stopped by PID after)."""
    plane = ControlPlane(directory, feature_gates=feature_gates)
    plane.start()
    try:
        deployment = Kubedra(plane)
        deployment.install()
        port = free_port()
        deployment.start_operator(liveness_port=port)
        yield deployment, port
    finally:
        assert plane.stop() == []


async def _operator_health(deployment: Kubedra, port: int) -> dict[str, Any]:
    """The ``kubedra`` part of the operator's ``/healthz``."""
    async with aiohttp.ClientSession() as http, http.get(
            f"https://127.0.0.1:{port}/healthz", ssl=client_tls(deployment.plane)) as response:
        body: dict[str, Any] = json.loads(await response.read())
    return dict(body.get("kubedra") or {})


async def _served_features(deployment: Kubedra, port: int) -> dict[str, Any]:
    """The operator's ``/healthz`` ``kubedra.servedFeatures``, once detected."""
    async def health() -> dict[str, Any] | None:
        return (await _operator_health(deployment, port)).get("servedFeatures")
    found: dict[str, Any] = await eventually(health, timeout=60, what="the operator's /healthz")
    return found


@pytest.fixture(scope="module")
async def gates_off_api(gates_off: tuple[Kubedra, int]) -> AsyncIterator[ApiClient]:
    api = await make_api_client(gates_off[0].plane.admin_kubeconfig)
    async with api:
        yield api


ALPHA_OFF = ("DRAOptionalNodeOperations", "DRANodeAllocatableResources")
DEFAULT_OFF = {
    "1.34": ("DRADeviceTaints", "DRAPartitionableDevices", "DRADeviceTaintRules", *ALPHA_OFF),
    "1.35": ("DRADeviceTaints", "DRAPartitionableDevices", "DRADeviceTaintRules", *ALPHA_OFF),
    "1.36": ("DRADeviceTaintRules", *ALPHA_OFF),
    "1.37": ALPHA_OFF,
}
"""What each minor has off by default, by the gate stages of reference/dra-api.md section 6
(DeviceTaintRule joins resource.k8s.io/v1 in 1.37; DRAOptionalNodeOperations is alpha, off, in
1.37 and unknown before; DRANodeAllocatableResources alpha, off, in 1.37 and unknown before, as
1.36's alpha field had another name); measured on 1.34.4, 1.35.4, 1.36.3 and 1.37.2 (the two
alpha gates on 1.37.2 only)."""


async def test_the_default_cluster_is_detected_as_its_release_ships(
        admin_api: ApiClient) -> None:
    served = await detect(admin_api, PROBE_DRIVER)
    assert served.server_version == f"v{kube_version()}"
    assert served.resource_versions[0] == "v1"
    assert served.off == DEFAULT_OFF[kube_version().rpartition(".")[0]]
    # the effect None is taken from 1.35 (validDeviceTaintEffects); 1.34 keeps no taints by
    # default, so its probe is not made
    assert served.taint_effect_none is True
    if served.device_taints:
        kept = await kube.dry_run_resource_slice(admin_api, probe_effect_none_slice(PROBE_DRIVER))
        [taint] = kept["spec"]["devices"][0]["taints"]
        assert (taint["key"], taint["effect"]) == ("kubedra.io/probe", "None")


@GATES_CAN_BE_OFF
async def test_a_cluster_with_the_gates_off_is_detected(gates_off: tuple[Kubedra, int],
                                                        gates_off_api: ApiClient) -> None:
    served = await detect(gates_off_api, PROBE_DRIVER)
    # v1.37.2's kube-apiserver still lists devicetaintrules in resource.k8s.io/v1 with
    # DRADeviceTaintRules off (measured here): discovery says the kind is served, not whether
    # the scheduler applies it, so only the two fields a slice write drops are off; before
    # 1.37 DeviceTaintRule is not in v1 at all
    rules_listed = MINOR == "1.37"
    assert served.off == ("DRADeviceTaints", "DRAPartitionableDevices",
                          *(() if rules_listed else ("DRADeviceTaintRules",)), *ALPHA_OFF)
    assert served.server_version == f"v{kube_version()}"
    assert served.resource_versions[0] == "v1"
    assert await _served_features(*gates_off) == {
        "serverVersion": f"v{kube_version()}", "resourceVersions": list(served.resource_versions),
        "deviceTaints": False, "partitionableDevices": False, "deviceTaintRules": rules_listed,
        "skipNodeOperations": False, "nodeAllocatableResources": False,
        "taintEffectNone": True, "off": list(served.off)}


async def published_with(api: ApiClient, name: str, reason: str,
                         timeout: float = 60) -> dict[str, Any]:
    """Inventory ``name``'s ``Published`` condition, once its reason is ``reason``."""
    async def found() -> dict[str, Any] | None:
        ready = condition(await read_inventory(api, name), "Published")
        return ready if ready and ready["reason"] == reason else None
    ready: dict[str, Any] = await eventually(found, timeout=timeout, what=f"{name} {reason}")
    return ready


async def _detected_off(api: ApiClient, gate: str) -> None:
    """Detection on ``api``'s cluster finds feature gate ``gate`` off."""
    assert gate in (await detect(api, PROBE_DRIVER)).off


@GATES_CAN_BE_OFF
async def test_an_unhealthy_device_is_left_out_and_never_allocated(
        gates_off: tuple[Kubedra, int], gates_off_api: ApiClient) -> None:
    deployment, api = gates_off[0], gates_off_api
    deployment.add_node("taintless-node")
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": "taintless"}})
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories", {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": "taintless"},
        "spec": {"driver": "pci.kubedra.io", "allNodes": True, "pool": "taintless", "devices": [
            {"name": "dev-000", "attributes": {"index": {"int": 0}}},
            {"name": "dev-001", "attributes": {"index": {"int": 1}}, "health": "Unhealthy",
             "healthMessage": "XID 79"}]}})

    ready = await published_with(api, "taintless", "DevicesLeftOut")
    assert ready["message"] == (
        "1 device in 1 ResourceSlice (pool taintless, generation 1); left out, as the API "
        "server would refuse them: dev-001 (devices[dev-001].taints: this cluster does not "
        "keep device taints (feature gate DRADeviceTaints is off), so the device would be "
        "published without its taint and be allocated)")
    [published] = await slices_of(api, "taintless")
    assert [d["name"] for d in published["spec"]["devices"]] == ["dev-000"]

    async def warned() -> list[tuple[str, str, str]] | None:  # posted after the status
        events = await client.CoreV1Api(api).list_namespaced_event(
            "default", field_selector="involvedObject.name=taintless")
        return [(e.type, e.reason, e.message) for e in events.items] or None
    assert await eventually(warned, timeout=60, what="the DevicesLeftOut Event") == [
        ("Warning", "DevicesLeftOut", f"{ready['message']}: 1 created")]

    async def allocated(pod: str) -> list[str] | None:
        found = await pod_claim(api, "taintless", pod)
        allocation = (found or {}).get("status", {}).get("allocation")
        return [r["device"] for r in allocation["devices"]["results"]] if allocation else None

    # the pod asking for the unhealthy device first, then one asking for the healthy one: the
    # scheduler allocates the second, and the first stays unallocated
    for pod in ("wants-1", "wants-0"):
        await create_gpu_pod(api, "taintless", pod, 'device.attributes["pci.kubedra.io"]'
                             f'.index == {pod[-1]}', device_class="pci.kubedra.io",
                             node="taintless-node")
    assert await eventually(lambda: allocated("wants-0"), timeout=60,
                            what="wants-0 allocated") == ["dev-000"]
    assert await allocated("wants-1") is None

    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", "taintless",
        [{"op": "replace", "path": "/spec/devices/1/health", "value": "Healthy"}])
    # healthy again: published once its hold-down ends (a recovering device keeps a taint,
    # which this cluster cannot carry), then allocated
    assert await eventually(lambda: allocated("wants-1"), timeout=90,
                            what="wants-1 allocated") == ["dev-001"]


async def test_an_inventory_node_selector_of_two_terms_is_refused(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
    with pytest.raises(client.ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", {
                "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": "two-terms"},
                "spec": {"driver": "pci.kubedra.io", "nodeSelector": {
                    "nodeSelectorTerms": [term, term]}, "devices": [{"name": "dev-0"}]}})
    assert refused.value.status == 422
    [cause] = json.loads(refused.value.body)["details"]["causes"]
    rule = ("must have exactly one term: the API server refuses a ResourceSlice (and from "
            "Kubernetes 1.38 a device) whose node selector has more")
    # v1.34.4 names the value's type, v1.37.2 does not (both measured)
    assert cause in ({"reason": "FieldValueInvalid", "field": "spec.nodeSelector",
                      "message": f"Invalid value: {rule}"},
                     {"reason": "FieldValueInvalid", "field": "spec.nodeSelector",
                      "message": f'Invalid value: "object": {rule}'})


GATE_CAN_BE_ON = pytest.mark.skipif(MINOR in ("1.34", "1.35", "1.36"), reason=(
    f"Kubernetes {MINOR} has no DRAOptionalNodeOperations gate, nor nodeAllocatableResources "
    "(alpha from 1.37)"))
NO_NODE_OPERATIONS = ["NodePrepareResources", "NodeUnprepareResources"]


@pytest.fixture(scope="module")
def alpha_gates_on(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubedra, int]]:
    """kubedra on a control plane with ``DRAOptionalNodeOperations`` (KEP-5945) and
    ``DRANodeAllocatableResources`` (KEP-5517) on, as :func:`_kubedra_on`."""
    yield from _kubedra_on(Path(tmp_path_factory.mktemp("alpha-gates")),
                           "DRAOptionalNodeOperations=true,DRANodeAllocatableResources=true")


@pytest.fixture(scope="module")
async def alpha_api(alpha_gates_on: tuple[Kubedra, int]) -> AsyncIterator[ApiClient]:
    api = await make_api_client(alpha_gates_on[0].plane.admin_kubeconfig)
    async with api:
        yield api


async def _publish_network_pool(api: ApiClient, name: str,
                                spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create network pool ``name`` (allNodes, one declared device; or the inventory of
    ``spec``) and return its one slice, as the API server stored it, once published and its
    condition written. Read raw: the client's models drop the fields they do not know
    (``skipNodeOperations``)."""
    await client.CustomObjectsApi(api).create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", {
            "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": name},
            "spec": spec or {"driver": "pci.kubedra.io", "allNodes": True, "pool": name,
                             "devices": [{"name": "nic-0"}]}})

    async def published() -> dict[str, Any] | None:
        ready = condition(await read_inventory(api, name), "Published")
        found = await slices_of(api, name)
        return found[0] if ready and len(found) == 1 else None
    stored = await eventually(published, timeout=60, what=f"{name} published")
    raw: dict[str, Any] = await kube.get_discovery(  # a raw GET of the one object
        api, f"/apis/resource.k8s.io/v1/resourceslices/{stored['metadata']['name']}")
    return raw


async def _delete_inventory(api: ApiClient, name: str) -> None:
    await client.CustomObjectsApi(api).delete_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", name)


@GATE_CAN_BE_ON
async def test_a_network_pool_skips_node_operations_where_the_cluster_keeps_the_field(
        alpha_gates_on: tuple[Kubedra, int], alpha_api: ApiClient) -> None:
    deployment, port = alpha_gates_on
    api = alpha_api
    served = await detect(api, PROBE_DRIVER)
    assert served.skip_node_operations
    assert "DRAOptionalNodeOperations" not in served.off
    published = await _publish_network_pool(api, "fabric-skip")
    # read back from the API server: the field survived the write, written once (a
    # slice whose stored copy differed from what the operator wants would be rewritten)
    assert published["spec"]["skipNodeOperations"] == NO_NODE_OPERATIONS
    assert published["metadata"]["generation"] == 1
    ready = condition(await read_inventory(api, "fabric-skip"), "Published")
    assert ready is not None
    assert (ready["reason"], ready["message"]) == (
        "SlicesPublished", "1 device in 1 ResourceSlice (pool fabric-skip, generation 1); "
        "the kubelet skips node operations for its devices (skipNodeOperations: "
        "NodePrepareResources, NodeUnprepareResources)")
    assert await _served_features(deployment, port) == {
        "serverVersion": f"v{kube_version()}",
        "resourceVersions": list(served.resource_versions), "deviceTaints": True,
        "partitionableDevices": True, "deviceTaintRules": True, "skipNodeOperations": True,
        "nodeAllocatableResources": True, "taintEffectNone": True, "off": []}
    await _delete_inventory(api, "fabric-skip")


async def test_the_default_cluster_reports_skip_node_operations_unavailable(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    await _detected_off(admin_api, "DRAOptionalNodeOperations")
    published = await _publish_network_pool(admin_api, "fabric-no-skip")
    try:
        assert "skipNodeOperations" not in published["spec"]
        assert published["spec"]["devices"] == [{"name": "nic-0"}]
        ready = condition(await read_inventory(admin_api, "fabric-no-skip"), "Published")
        assert ready is not None
        assert (ready["reason"], ready["message"]) == (
            "SlicesPublished", "1 device in 1 ResourceSlice (pool fabric-no-skip, generation 1)")
    finally:
        await _delete_inventory(admin_api, "fabric-no-skip")


GPU_OVERHEAD = {"memory": {"perPod": "256Mi", "perContainer": "64Mi"}, "cpu": {"perPod": "500m"}}
STORED_OVERHEAD = {"cpu": {"overhead": {"perPod": "500m"}},
                   "memory": {"overhead": {"perPod": "256Mi", "perContainer": "64Mi"}}}
GPU = {"name": "gpu-0", "attributes": {"index": {"int": 0}}}


async def _publish_gpu_pool(deployment: Kubedra, api: ApiClient, node: str, *,
                            declared: list[str] | None = None, port: int | None = None
                            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A GPU inventory of kwok node ``node`` (one declared GPU, :data:`GPU_OVERHEAD`; the
    node declaring ``declared``): its one slice as stored (raw) and its ``Published``
    condition. With the operator's ``port``, the inventory is created once the operator has
    cached the node (its ``/healthz`` count of Node changes grew: nothing else changes a Node
    record there)."""
    before = 0
    if port:
        await _served_features(deployment, port)  # /healthz answers, the features detected
        before = (await _operator_health(deployment, port))["nodeChanges"]
    deployment.add_node(node, declared_features=declared)
    if port:
        async def seen() -> bool:
            return bool((await _operator_health(deployment, port))["nodeChanges"] > before)
        await eventually(seen, timeout=30, what=f"the operator's cache has node {node}")
    published = await _publish_network_pool(api, node, {
        "driver": "gpu.kubedra.io", "nodeName": node, "nodeAllocatableOverhead": GPU_OVERHEAD,
        "devices": [GPU]})
    ready = condition(await read_inventory(api, node), "Published")
    assert ready is not None
    return published, ready


@GATE_CAN_BE_ON
async def test_a_gpu_pool_carries_its_overhead_where_the_cluster_keeps_the_field(
        alpha_gates_on: tuple[Kubedra, int], alpha_api: ApiClient) -> None:
    deployment, port = alpha_gates_on
    api = alpha_api
    assert (await detect(api, PROBE_DRIVER)).node_allocatable_resources
    published, ready = await _publish_gpu_pool(
        deployment, api, "overhead-node", declared=["DRANodeAllocatableResources"],
        port=port)
    # read back: kept as written, and written once (no rewrite of a differing copy)
    assert published["spec"]["devices"] == [
        {**GPU, "nodeAllocatableResources": STORED_OVERHEAD}]
    assert published["metadata"]["generation"] == 1
    assert (ready["reason"], ready["message"]) == (
        "SlicesPublished", "1 device in 1 ResourceSlice (pool overhead-node, generation 1); "
        "each pod using its devices is charged besides them (nodeAllocatableResources): "
        "cpu 500m per pod, memory 256Mi per pod and 64Mi per container")
    await _delete_inventory(api, "overhead-node")


@GATE_CAN_BE_ON
async def test_a_node_that_does_not_declare_the_feature_gets_no_overhead(
        alpha_gates_on: tuple[Kubedra, int], alpha_api: ApiClient) -> None:
    deployment, port = alpha_gates_on
    api = alpha_api
    published, ready = await _publish_gpu_pool(deployment, api, "undeclared-node",
                                               port=port)
    # the API server would refuse the slice with it (NodeDeclaredFeatureValidator)
    assert published["spec"]["devices"] == [GPU]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True", "FeatureOff", "1 device in 1 ResourceSlice (pool undeclared-node, "
        "generation 1); published without spec.nodeAllocatableOverhead: node "
        "undeclared-node does not declare the feature DRANodeAllocatableResources (its "
        "kubelet has the feature gate off), and the API server refuses a slice with the "
        "overhead for such a node")
    await _delete_inventory(api, "undeclared-node")


async def test_the_default_cluster_reports_the_overhead_unavailable(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    await _detected_off(admin_api, "DRANodeAllocatableResources")
    published, ready = await _publish_gpu_pool(kubedra, admin_api, "no-overhead-node")
    try:
        assert published["spec"]["devices"] == [GPU]
        message = ("1 device in 1 ResourceSlice (pool no-overhead-node, generation 1); "
                   "published without spec.nodeAllocatableOverhead: this cluster does not keep "
                   "nodeAllocatableResources (feature gate DRANodeAllocatableResources is off), "
                   "so pods are not charged for it")
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "True", "FeatureOff", message)
        events = await posted_events(
            admin_api, "default", "involvedObject.kind=DeviceInventory,"
                                  "involvedObject.name=no-overhead-node")
        assert [(e.type, e.reason, e.message) for e in events] == [
            ("Warning", "FeatureOff", f"{message}: 1 created")]
    finally:
        await _delete_inventory(admin_api, "no-overhead-node")


async def test_an_overhead_without_a_node_is_refused(kubedra: Kubedra,
                                                     admin_api: ApiClient) -> None:
    with pytest.raises(client.ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", {
                "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": "overhead-everywhere"},
                "spec": {"driver": "gpu.kubedra.io", "allNodes": True,
                         "nodeAllocatableOverhead": {"memory": {"perPod": "1Gi"},
                                                     "nvidia.com/gpu": {"perPod": "1"},
                                                     "cpu": {"perPod": "-1"}},
                         "devices": [GPU]}})
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    # v1.34.4 names the value's type ('Invalid value: "object": ...'), v1.37.2 does not
    assert sorted((c["field"], c["message"].replace('"object": ', "")) for c in causes) == [
        ("spec", "Invalid value: nodeAllocatableOverhead needs nodeName: the API "
                 "server accepts the overhead only for nodes whose kubelet declares "
                 "DRANodeAllocatableResources, so kubedra publishes it for node-local pools only"),
        ("spec.nodeAllocatableOverhead", "Invalid value: keys must match "
                                         "^(cpu|memory|hugepages-.+)$"),
        ("spec.nodeAllocatableOverhead[cpu]", "Invalid value: perPod and perContainer must "
                                              "not be negative")]


async def test_an_overhead_that_is_no_quantity_is_refused(kubedra: Kubedra,
                                                          admin_api: ApiClient) -> None:
    """The API server refuses it, naming the field: before, it kept ``perPod: abc``, the
    operator said InvalidInventory and the node's agent exited on reading its inventory."""
    with pytest.raises(client.ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", {
                "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                "metadata": {"name": "overhead-no-quantity"},
                "spec": {"driver": "gpu.kubedra.io", "nodeName": "no-quantity",
                         "nodeAllocatableOverhead": {"memory": {"perPod": "abc",
                                                                "perContainer": "1.5.5Mi"},
                                                     "cpu": {"perPod": "500m"}},
                         "devices": [GPU]}})
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert sorted((c["field"], c["message"]) for c in causes) == [
        (f"spec.nodeAllocatableOverhead.memory.{key}",
         f'Invalid value: "{value}": spec.nodeAllocatableOverhead.memory.{key} in body should '
         f"match '{QUANTITY_PATTERN}'")
        for key, value in (("perContainer", "1.5.5Mi"), ("perPod", "abc"))]
