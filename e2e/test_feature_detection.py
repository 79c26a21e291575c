"""What the operator learns the cluster serves, against real kube-apiservers (issue 26, item 2):
the session's control plane with its default gates, and one started with the gates of
Kubernetes 1.34's defaults for these fields (``DRADeviceTaints``, ``DRADeviceTaintRules`` and
``DRAPartitionableDevices`` off), where the API server drops taints and counters from a
written slice without an error. There an unhealthy device is left out of the slice, with the
reason, and the scheduler does not allocate it until it is healthy again."""

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
from e2e.harness.controlplane import free_port, kube_version
from e2e.harness.kubedra import Kubedra
from e2e.harness.scrape import client_tls
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, create_gpu_pod, pod_claim, read_inventory, slices_of
from kubedra.controller.features import PROBE_DRIVER, detect
from kubedra.kube import make_api_client

GATES_OF_1_34 = "DRADeviceTaints=false,DRADeviceTaintRules=false,DRAPartitionableDevices=false"
ON_1_37 = pytest.mark.skipif(not kube_version().startswith("1.37."), reason=(
    "the gates are turned off on v1.37 (older releases have them off already, and 1.34 "
    "refuses DRADeviceTaintRules as unknown)"))


@pytest.fixture(scope="module")
def gates_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubedra, int]]:
    """kubedra installed on a second control plane whose kube-apiserver and kube-scheduler
    have the gates of :data:`GATES_OF_1_34` off, its operator serving ``/healthz`` on the
    returned port (everything stopped by PID afterwards)."""
    plane = ControlPlane(Path(tmp_path_factory.mktemp("gates-off")),
                         feature_gates=GATES_OF_1_34)
    plane.start()
    try:
        deployment = Kubedra(plane)
        deployment.install()
        port = free_port()
        deployment.start_operator(liveness_port=port)
        yield deployment, port
    finally:
        assert plane.stop() == []


@pytest.fixture(scope="module")
async def gates_off_api(gates_off: tuple[Kubedra, int]) -> AsyncIterator[ApiClient]:
    api = await make_api_client(gates_off[0].plane.admin_kubeconfig)
    async with api:
        yield api


DEFAULT_OFF = {
    "1.34": ("DRADeviceTaints", "DRAPartitionableDevices", "DRADeviceTaintRules"),
    "1.35": ("DRADeviceTaints", "DRAPartitionableDevices", "DRADeviceTaintRules"),
    "1.36": ("DRADeviceTaintRules",),
    "1.37": (),
}
"""What each minor has off by default, by the gate stages of reference/dra-api.md section 6
(DeviceTaintRule joins resource.k8s.io/v1 in 1.37); measured on 1.34.4 and 1.37.2."""


async def test_the_default_cluster_is_detected_as_its_release_ships(
        admin_api: ApiClient) -> None:
    served = await detect(admin_api, PROBE_DRIVER)
    assert served.server_version == f"v{kube_version()}"
    assert served.resource_versions[0] == "v1"
    assert served.off == DEFAULT_OFF[kube_version().rpartition(".")[0]]


@ON_1_37
async def test_a_cluster_with_the_gates_off_is_detected(gates_off: tuple[Kubedra, int],
                                                        gates_off_api: ApiClient) -> None:
    served = await detect(gates_off_api, PROBE_DRIVER)
    # v1.37.2's kube-apiserver still lists devicetaintrules in resource.k8s.io/v1 with
    # DRADeviceTaintRules off (measured here): discovery says the kind is served, not whether
    # the scheduler applies it, so only the two fields a slice write drops are off
    assert served.off == ("DRADeviceTaints", "DRAPartitionableDevices")
    assert served.server_version == f"v{kube_version()}"
    assert served.resource_versions[0] == "v1"

    async def health() -> dict[str, Any] | None:
        async with aiohttp.ClientSession() as http, http.get(
                f"https://127.0.0.1:{gates_off[1]}/healthz",
                ssl=client_tls(gates_off[0].plane)) as response:
            body: dict[str, Any] = json.loads(await response.read())
        return body if (body.get("kubedra") or {}).get("servedFeatures") else None
    body = await eventually(health, timeout=60, what="the operator's /healthz")
    assert body["kubedra"]["servedFeatures"] == {
        "serverVersion": f"v{kube_version()}", "resourceVersions": list(served.resource_versions),
        "deviceTaints": False, "partitionableDevices": False, "deviceTaintRules": True}


@ON_1_37
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

    async def left_out() -> dict[str, Any] | None:
        ready = condition(await read_inventory(api, "taintless"), "Published")
        return ready if ready and ready["reason"] == "DevicesLeftOut" else None
    ready = await eventually(left_out, timeout=60, what="taintless DevicesLeftOut")
    assert ready["message"] == (
        "1 device in 1 ResourceSlice (pool taintless, generation 1); left out, as the API "
        "server would refuse them: dev-001 (devices[dev-001].taints: this cluster does not "
        "keep device taints (feature gate DRADeviceTaints is off), so the device would be "
        "published without its taint and be allocated)")
    [published] = await slices_of(api, "taintless")
    assert [d["name"] for d in published["spec"]["devices"]] == ["dev-000"]
    events = await client.CoreV1Api(api).list_namespaced_event(
        "default", field_selector="involvedObject.name=taintless")
    assert [(e.type, e.reason, e.message) for e in events.items] == [
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
