"""The main job end to end on the local control plane (v1.37.2, or ``KUBE_VERSION``'s): an
agent replays the real H200 capture into a DeviceInventory, the operator publishes it,
kube-scheduler allocates the GPU, and the operator reports on the claim — plus the failure and
recovery paths of publishing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.kubedra import Kubedra, kubectl
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    claim_events,
    condition,
    create_gpu_pod,
    pod_claim,
    posted_events,
    read_inventory,
    slices_of,
)
from kubedra import kube
from kubedra.kube import make_api_client
from kubedra.publishing.features import TAINTS_OFF, ServedFeatures
from tests.support.h200 import H200_GPU0

pytestmark = pytest.mark.cluster

H200_GPU = {k: v for k, v in H200_GPU0.items() if k != "health"}  # as published in a slice
FITS = ('device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0 && '
        'device.attributes["gpu.kubedra.io"].cudaComputeCapability.compareTo('
        'semver("9.0.0")) >= 0')
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'


async def _ready_inventory(api: ApiClient, name: str, generation: int = 1) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        obj = await read_inventory(api, name)
        published = (obj or {}).get("status", {}).get("pool", {}).get("generation")
        ok = (condition(obj, "Ready") or {}).get("status") == "True"
        return obj if ok and published == generation else None
    found: dict[str, Any] = await eventually(ready, timeout=60,
                                             what=f"{name} Ready at generation {generation}")
    return found


def _static_inventory(name: str, devices: int, *, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "pci.kubedra.io", "devices": [
        {"name": f"dev-{i:03d}", "attributes": {"index": {"int": i}}} for i in range(devices)]}
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
        spec["pool"] = name
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": name}, "spec": spec}


async def _suite_inventory(api: ApiClient, suite: str) -> None:
    """A published static inventory ``suite`` of two pci.kubedra.io devices carrying the
    attribute ``suite`` (other tests publish devices with an ``index`` too: select by it)."""
    body = _static_inventory(suite, 2)
    for device in body["spec"]["devices"]:
        device["attributes"]["suite"] = {"string": suite}
    await client.CustomObjectsApi(api).create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", body)
    await _ready_inventory(api, suite)


@pytest.fixture(scope="module")
def demo_h200(kubedra: Kubedra) -> str:
    """The demo's node: an agent replays the H200 capture for kwok node ``demo-h200``."""
    kubedra.add_node("demo-h200", {"kubedra.io/gpu": "true"})
    kubedra.start_agent("demo-h200")
    return "demo-h200"


async def test_h200_is_published_allocated_and_reported(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, demo_h200: str) -> None:
    inventory = await _ready_inventory(admin_api, "demo-h200-gpu.kubedra.io")
    assert inventory["spec"] == {"driver": "gpu.kubedra.io", "nodeName": "demo-h200"}
    status = inventory["status"]
    assert status["deviceCount"] == 1
    assert status["slices"] == ["demo-h200-gpu.kubedra.io-00000"]
    assert status["pool"] == {"name": "demo-h200", "generation": 1, "resourceSliceCount": 1}
    assert condition(inventory, "Published") | {"lastTransitionTime": None} == {
        "type": "Published", "status": "True", "reason": "SlicesPublished",
        "message": "1 device in 1 ResourceSlice (pool demo-h200, generation 1)",
        "observedGeneration": 1, "lastTransitionTime": None}
    [published] = await slices_of(admin_api, "demo-h200-gpu.kubedra.io")
    assert published["spec"] == {
        "driver": "gpu.kubedra.io", "nodeName": "demo-h200",
        "pool": {"name": "demo-h200", "generation": 1, "resourceSliceCount": 1},
        "devices": [H200_GPU]}
    [owner] = published["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("CustomResourceDefinition",
                                              "deviceinventories.kubedra.io")

    await create_gpu_pod(admin_api, namespace, "trainer", FITS, node="demo-h200")
    await create_gpu_pod(admin_api, namespace, "too-big", TOO_BIG, node="demo-h200")
    core = client.CoreV1Api(admin_api)

    async def running() -> bool:
        return bool((await core.read_namespaced_pod("trainer", namespace)).status.phase
                    == "Running")
    await eventually(running, timeout=60, what="trainer pod Running")

    async def reported() -> dict[str, Any] | None:
        claim = await pod_claim(admin_api, namespace, "trainer")
        return claim if claim and claim["status"].get("devices") else None
    claim = await eventually(reported, timeout=30, what="status.devices on the claim")
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "demo-h200", "device": "gpu-0"}]
    [device_status] = claim["status"]["devices"]
    ready = device_status["conditions"][0]
    assert (device_status["driver"], device_status["pool"], device_status["device"]) == (
        "gpu.kubedra.io", "demo-h200", "gpu-0")
    assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == (
        "Ready", "True", "Allocated",
        "device gpu-0 of pool demo-h200 (DeviceInventory demo-h200-gpu.kubedra.io) is "
        "allocated to request gpu")

    async def allocated() -> dict[str, Any] | None:
        obj = await read_inventory(admin_api, "demo-h200-gpu.kubedra.io")
        return obj if (obj or {}).get("status", {}).get("allocatedCount") == 1 else None
    inventory = await eventually(allocated, what="allocation recorded in the inventory")
    assert inventory["status"]["allocations"] == [{
        "device": "gpu-0", "claim": f"{namespace}/{claim['metadata']['name']}",
        "claimUID": claim["metadata"]["uid"], "request": "gpu"}]

    async def pending() -> Any:
        pod = await core.read_namespaced_pod("too-big", namespace)
        return next((c for c in pod.status.conditions or []
                     if c.type == "PodScheduled" and c.status == "False"), None)
    unschedulable = await eventually(pending, timeout=60, what="too-big unschedulable")
    assert unschedulable.message.startswith("0/")
    assert "cannot allocate all claims" in unschedulable.message
    assert (await core.read_namespaced_pod("too-big", namespace)).spec.node_name is None

    text = kubectl(kubedra.plane, "describe", "resourceclaim", "-n", namespace,
                   claim["metadata"]["name"])
    assert "Reason:                Allocated" in text


async def test_pending_claim_is_explained_in_an_event_and_by_kubectl_dra(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, demo_h200: str) -> None:
    await _ready_inventory(admin_api, "demo-h200-gpu.kubedra.io")
    await create_gpu_pod(admin_api, namespace, "too-big", TOO_BIG, node=demo_h200)
    claim = await eventually(lambda: pod_claim(admin_api, namespace, "too-big"),
                             what="the claim of too-big")
    name = claim["metadata"]["name"]

    async def explained() -> list[dict[str, Any]]:
        return await claim_events(admin_api, namespace, name, "CannotAllocate")
    events = await eventually(explained, timeout=60, what="CannotAllocate Event on the claim")
    reason = ("gpu-0 on demo-h200 has 150754820096 bytes, less than the 151397597184 asked "
              "(gpu.kubedra.io/memory: 143771Mi < 141Gi)")
    message = ("cannot be allocated: demo-h200: request gpu: 0 of 1 devices of class "
               f"gpu.kubedra.io match the request's selectors (1 needed): {reason}")
    assert [(e["type"], e["source"]["component"], e["message"]) for e in events] == [
        ("Warning", "kubedra-operator", message)]

    explanation = json.loads(kubectl(kubedra.plane, "dra", "explain", "resourceclaim", name,
                                     "-n", namespace, "-o", "json"))
    assert (explanation["kind"], explanation["verdict"], explanation["message"]) == (
        "ResourceClaimExplanation", "Unschedulable", message)
    assert explanation["claim"] == {"namespace": namespace, "name": name,
                                    "uid": claim["metadata"]["uid"]}
    assert explanation["pods"] == [f"{namespace}/too-big"]
    [candidate] = explanation["candidates"]
    assert (candidate["node"], candidate["fits"]) == ("demo-h200", False)
    [request] = candidate["requests"]
    # "devices" also counts the allNodes pools other tests publish: not compared
    assert request["funnel"]["devices"] >= 1
    assert {k: v for k, v in request["funnel"].items() if k != "devices"} == {
        "inClass": 1, "matchRequest": 0, "free": 0, "capacity": 0, "counters": 0,
        "untainted": 0}
    assert (request["request"], request["needed"], request["failedAt"]) == (
        "gpu", 1, "matchRequest")
    assert request["devices"] == [{
        "device": "gpu-0", "driver": "gpu.kubedra.io", "pool": "demo-h200",
        "check": "matchRequest", "reason": reason,
        "selector": {"source": "request gpu", "expression": TOO_BIG, "conjunct": TOO_BIG},
        "comparison": {"name": "gpu.kubedra.io/memory", "relation": ">=",
                       "device": "150754820096", "asked": "151397597184",
                       "deviceQuantity": "143771Mi", "askedQuantity": "141Gi"}}]
    text = kubectl(kubedra.plane, "describe", "resourceclaim", "-n", namespace, name)
    assert "CannotAllocate" in text


async def test_explanation_event_follows_a_changed_reason(
        admin_api: ApiClient, namespace: str, demo_h200: str) -> None:
    await _ready_inventory(admin_api, "demo-h200-gpu.kubedra.io")
    resource = client.ResourceV1Api(admin_api)
    class_name = f"{namespace}-gpus"
    await resource.create_device_class({"metadata": {"name": class_name}, "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.kubedra.io"'}}]}})
    try:
        await create_gpu_pod(admin_api, namespace, "big", TOO_BIG, device_class=class_name,
                             node=demo_h200)
        claim = await eventually(lambda: pod_claim(admin_api, namespace, "big"),
                                 what="the claim of big")
        name = claim["metadata"]["name"]
        first = (f"cannot be allocated: demo-h200: request gpu: 0 of 1 devices of class "
                 f"{class_name} match the request's selectors (1 needed): gpu-0 on demo-h200 "
                 "has 150754820096 bytes, less than the 151397597184 asked "
                 "(gpu.kubedra.io/memory: 143771Mi < 141Gi)")

        async def messages(count: int) -> list[str] | None:
            events = await claim_events(admin_api, namespace, name, "CannotAllocate")
            return [e["message"] for e in events] if len(events) >= count else None
        assert await eventually(lambda: messages(1), timeout=60, what="first Event") == [first]
        await resource.patch_device_class(class_name, {"spec": {"selectors": [{"cel": {
            "expression": 'device.attributes["gpu.kubedra.io"].type == "mig"'}}]}})
        second = (f"cannot be allocated: demo-h200: request gpu: 0 of 1 devices are in class "
                  f"{class_name} (1 needed): gpu-0 on demo-h200 has type \"gpu\", not the "
                  "\"mig\" asked")
        assert await eventually(lambda: messages(2), timeout=60, what="second Event") == [
            first, second]
    finally:
        await resource.delete_device_class(class_name)


async def test_deleted_slice_is_recreated_with_a_new_generation(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", _static_inventory("recreate", 3))
    await _ready_inventory(admin_api, "recreate")
    await client.ResourceV1Api(admin_api).delete_resource_slice("recreate-00000")
    await _ready_inventory(admin_api, "recreate", generation=2)
    [recreated] = await slices_of(admin_api, "recreate")
    assert recreated["metadata"]["name"] == "recreate-00000"
    assert recreated["spec"]["pool"] == {"name": "recreate", "generation": 2,
                                         "resourceSliceCount": 1}
    assert [d["name"] for d in recreated["spec"]["devices"]] == ["dev-000", "dev-001", "dev-002"]


async def test_changed_attributes_republish_with_the_right_generation(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", _static_inventory("changes", 200))
    await _ready_inventory(admin_api, "changes")
    first = await slices_of(admin_api, "changes")
    assert [len(s["spec"]["devices"]) for s in first] == [128, 72]

    # one slice changes: updated in place, generation kept
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", "changes",
        [{"op": "replace", "path": "/spec/devices/5/attributes/index/int", "value": 500}])

    async def updated() -> list[dict[str, Any]] | None:
        current = await slices_of(admin_api, "changes")
        return current if current[0]["spec"]["devices"][5]["attributes"]["index"] == {
            "int": 500} else None
    current = await eventually(updated, what="slice 0 updated")
    assert [s["spec"]["pool"]["generation"] for s in current] == [1, 1]
    assert current[1]["metadata"]["resourceVersion"] == first[1]["metadata"]["resourceVersion"]

    # two slices change: every slice is rewritten at generation 2
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", "changes",
        [{"op": "replace", "path": "/spec/devices/6/attributes/index/int", "value": 600},
         {"op": "replace", "path": "/spec/devices/150/attributes/index/int", "value": 1500}])
    await _ready_inventory(admin_api, "changes", generation=2)
    current = await slices_of(admin_api, "changes")
    assert [s["spec"]["pool"] for s in current] == [
        {"name": "changes", "generation": 2, "resourceSliceCount": 2}] * 2
    assert current[1]["spec"]["devices"][22]["attributes"]["index"] == {"int": 1500}


async def test_deleting_an_inventory_removes_its_slices(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", _static_inventory("goes-away", 130))
    await _ready_inventory(admin_api, "goes-away")
    assert len(await slices_of(admin_api, "goes-away")) == 2
    await custom.delete_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                              "goes-away")

    async def gone() -> bool:
        return not await slices_of(admin_api, "goes-away")
    await eventually(gone, timeout=60, what="slices garbage-collected")


async def test_invalid_inventories_are_rejected_or_reported_and_others_keep_publishing(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", _static_inventory("healthy", 2))
    bad_name = _static_inventory("bad-name", 1)
    bad_name["spec"]["devices"][0]["name"] = "Not_A_DNS_Label"
    with pytest.raises(ApiException) as rejected:
        await custom.create_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", bad_name)
    assert rejected.value.status == 422
    assert "spec.devices[0].name" in rejected.value.body

    # passes admission, but consumes a counter set nobody declared: only that device is left
    # out, named with the field; the other is published
    unknown_counter = _static_inventory("unknown-counter", 2)
    unknown_counter["spec"]["devices"][1]["consumesCounters"] = [
        {"counterSet": "nowhere", "counters": {"slots": {"value": "1"}}}]
    await custom.create_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", unknown_counter)

    async def reported() -> dict[str, Any] | None:
        published = condition(await read_inventory(admin_api, "unknown-counter"), "Published")
        return published if published and published["reason"] == "DevicesLeftOut" else None
    published = await eventually(reported, what="DevicesLeftOut on unknown-counter")
    assert (published["status"], published["message"]) == (
        "True",
        "1 device in 1 ResourceSlice (pool unknown-counter, generation 1); left out, as the API "
        "server would refuse them: dev-001 (spec.devices[1].consumesCounters[0].counterSet: no "
        "usable counter set named 'nowhere')")
    [published_slice] = await slices_of(admin_api, "unknown-counter")
    assert [d["name"] for d in published_slice["spec"]["devices"]] == ["dev-000"]
    events = await posted_events(admin_api, "default", "involvedObject.name=unknown-counter")
    assert [(e.type, e.reason) for e in events] == [("Warning", "DevicesLeftOut")]
    healthy = await _ready_inventory(admin_api, "healthy")
    assert healthy["status"]["deviceCount"] == 2


async def test_agent_lease_expiry_withdraws_the_pool_and_recovery_restores_it(
        kubedra: Kubedra, admin_api: ApiClient, served: ServedFeatures) -> None:
    kubedra.add_node("lease-node")
    kubedra.start_agent("lease-node", lease_duration=4)
    name = "lease-node-gpu.kubedra.io"
    await _ready_inventory(admin_api, name)

    async def serving() -> list[str] | None:  # the plugin starts after the first report
        found = sorted(p.name for p in kubedra.node_dir("lease-node").rglob("*.sock"))
        return found if len(found) == 2 else None
    sockets = await eventually(serving, timeout=30, what="the agent's plugin sockets")
    assert sockets == ["dra.sock", "gpu.kubedra.io-reg.sock"]
    kubedra.stop_agent("lease-node")  # SIGTERM, as the kubelet stops a pod: a clean stop
    assert list(kubedra.node_dir("lease-node").rglob("*.sock")) == []
    assert "agent stopped" in (kubedra.plane.logs / "kubedra-agent-lease-node.log").read_text()

    async def withdrawn() -> dict[str, Any] | None:  # after the drain grace of its device
        obj = await read_inventory(admin_api, name)
        published = condition(obj, "Published") or {}
        return obj if published.get("reason") == "AgentLeaseExpired" \
            and obj["status"]["deviceCount"] == 0 else None  # type: ignore[index]
    obj = await eventually(withdrawn, timeout=60, what="pool withdrawn")
    assert condition(obj, "Ready")["status"] == "False"  # type: ignore[index]
    assert condition(obj, "Published")["message"] == (  # type: ignore[index]
        "agent Lease kubedra-system/kubedra-agent-lease-node of node lease-node is not "
        "renewed; pool lease-node withdrawn until the agent returns")
    assert obj["status"]["deviceCount"] == 0
    assert await slices_of(admin_api, name) == []
    # the agent's first start (its report may come before its Lease) withdrew nothing; the
    # withdrawal is two transitions: its device tainted for the drain grace, then taken out —
    # or, where the cluster drops device taints (1.34, 1.35), one: taken out at once, saying so
    events = await posted_events(admin_api, "default", f"involvedObject.name={name}",
                                 count=3 if served.device_taints else 2)
    lease = ("agent Lease kubedra-system/kubedra-agent-lease-node of node lease-node is not "
             "renewed; pool lease-node withdrawn until the agent returns")
    drained = (f"{lease}; leaving the pool, so published with a NoSchedule taint until the "
               "drain grace ends: gpu-0 (withdrawn)" if served.device_taints else
               f"{lease}; left out, as the API server would refuse them: gpu-0 "
               f"(devices[gpu-0].taints: {TAINTS_OFF})")
    assert sorted((e.type, e.reason, e.message) for e in events) == sorted([
        ("Normal", "Published", "1 device in 1 ResourceSlice (pool lease-node, generation 1): "
                                "1 created"),
        *([("Warning", "PoolWithdrawn", lease)] if served.device_taints else []),
        ("Warning", "PoolWithdrawn", drained)])

    kubedra.start_agent("lease-node", lease_duration=4)
    restored = await _ready_inventory(admin_api, name, generation=1)
    assert restored["status"]["deviceCount"] == 1
    [back] = await slices_of(admin_api, name)
    assert back["spec"]["devices"] == [H200_GPU]


async def test_claim_reports_a_device_that_went_away_or_turned_unhealthy(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, served: ServedFeatures) -> None:
    """Where the cluster drops device taints (1.34, 1.35) both devices are left out of the
    slice instead of published tainted, and the claims and the inventory say so."""
    kubedra.add_node("claims-node")
    custom = client.CustomObjectsApi(admin_api)
    await _suite_inventory(admin_api, "claims")
    pick = ('device.attributes["pci.kubedra.io"].?suite.orValue("") == "claims" && '
            'device.attributes["pci.kubedra.io"].index == ')
    for i in (0, 1):
        await create_gpu_pod(admin_api, namespace, f"uses-{i}", pick + str(i),
                             device_class="pci.kubedra.io", node="claims-node")

    async def ready_condition(pod: str, reason: str) -> dict[str, Any] | None:
        claim = await pod_claim(admin_api, namespace, pod)
        for entry in (claim or {}).get("status", {}).get("devices") or []:
            for cond in entry.get("conditions") or []:
                if cond["type"] == "Ready" and cond["reason"] == reason:
                    return {**cond, "claim": claim}
        return None

    for pod in ("uses-0", "uses-1"):
        await eventually(lambda pod=pod: ready_condition(pod, "Allocated"),  # type: ignore[misc]
                         timeout=60, what=f"{pod} Allocated")

    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", "claims",
        [{"op": "add", "path": "/spec/overrides", "value": [{"device": "dev-000",
                                                              "disabled": True}]},
         {"op": "add", "path": "/spec/devices/1/health", "value": "Unhealthy"},
         {"op": "add", "path": "/spec/devices/1/healthMessage", "value": "XID 79"}])
    disabled = await eventually(lambda: ready_condition("uses-0", "DeviceDisabled"), timeout=60,
                                what="uses-0 DeviceDisabled")
    kept = ("it stays published, tainted, until released" if served.device_taints else
            f"it is left out of the slices ({TAINTS_OFF})")
    assert (disabled["status"], disabled["message"]) == (
        "False", "device dev-000 of pool claims is disabled by an override in DeviceInventory "
                 f"claims; {kept}")
    sick = await eventually(lambda: ready_condition("uses-1", "DeviceUnhealthy"), timeout=60,
                            what="uses-1 DeviceUnhealthy")
    assert (sick["status"], sick["message"]) == (
        "False", "device dev-001 in pool claims is unhealthy: XID 79")
    events = await posted_events(
        admin_api, namespace, f"involvedObject.name={sick['claim']['metadata']['name']}")
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Warning", "DeviceNotReady", "device dev-001 in pool claims is unhealthy: XID 79")]
    if not served.device_taints:
        await _left_out_without_taints(admin_api, namespace)
        return
    # the disabled device is still allocated: it stays, tainted, so that nothing else gets it
    [published] = await slices_of(admin_api, "claims")
    taints = {d["name"]: [(t["key"], t.get("value"), t["effect"]) for t in d.get("taints", [])]
              for d in published["spec"]["devices"]}
    assert taints == {"dev-000": [("kubedra.io/draining", "disabled", "NoSchedule")],
                      "dev-001": [("kubedra.io/unhealthy", "XID-79", "NoSchedule")]}
    # once released, the disabled device is no longer published
    await client.CoreV1Api(admin_api).delete_namespaced_pod("uses-0", namespace)

    async def released() -> bool:
        [current] = await slices_of(admin_api, "claims")
        return [d["name"] for d in current["spec"]["devices"]] == ["dev-001"]
    await eventually(released, timeout=60, what="dev-000 unpublished after release")


async def _left_out_without_taints(api: ApiClient, namespace: str) -> None:
    """The rest of the test above where the cluster drops device taints: neither device is
    published (each would carry a taint), the inventory names both with why, and once the
    disabled one is released it is named as disabled."""
    def left_out(device: str) -> str:
        return f"{device} (devices[{device}].taints: {TAINTS_OFF})"

    async def published_message(expected: str) -> str | None:
        found = condition(await read_inventory(api, "claims"), "Published") or {}
        return found.get("message") if found.get("message") == expected else None
    both = ("0 devices in 1 ResourceSlice (pool claims, generation 1); left out, as the API "
            f"server would refuse them: {left_out('dev-000')}; {left_out('dev-001')}")
    await eventually(lambda: published_message(both), timeout=60, what="both left out")
    [published] = await slices_of(api, "claims")
    assert published["spec"].get("devices", []) == []
    await client.CoreV1Api(api).delete_namespaced_pod("uses-0", namespace)
    released = ("0 devices in 1 ResourceSlice (pool claims, generation 1); disabled by an "
                "override, not published: dev-000; left out, as the API server would refuse "
                f"them: {left_out('dev-001')}")
    await eventually(lambda: published_message(released), timeout=60,
                     what="dev-000 named as disabled after release")


async def test_an_agent_may_only_write_its_own_nodes_inventory(kubedra: Kubedra) -> None:
    kubedra.add_node("honest-node")
    config = kubedra.plane.kubeconfig_for_service_account(
        "kubedra-system", "kubedra-agent", bound_pod="kubedra-agent-honest-node")
    agent_api = await make_api_client(config)
    async with agent_api:
        custom = client.CustomObjectsApi(agent_api)
        own = {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
               "metadata": {"name": "honest-node-pci.kubedra.io"},
               "spec": {"driver": "pci.kubedra.io", "nodeName": "honest-node"}}
        await custom.create_cluster_custom_object("kubedra.io", "v1alpha1",
                                                  "deviceinventories", own)
        other = {**own, "metadata": {"name": "other-node-pci.kubedra.io"},
                 "spec": {"driver": "pci.kubedra.io", "nodeName": "other-node"}}
        with pytest.raises(ApiException) as denied:
            await custom.create_cluster_custom_object("kubedra.io", "v1alpha1",
                                                      "deviceinventories", other)
        assert denied.value.status == 403
        assert ("the node agent may only write the DeviceInventory of the node its pod runs on"
                in denied.value.body)
        with pytest.raises(ApiException) as denied:
            await kube.renew_lease(agent_api, "kubedra-system", "kubedra-agent-other-node",
                                   "other-node", 40)
        assert denied.value.status == 403
        assert "the node agent may only renew the Lease of the node its pod runs on" in str(
            denied.value.body)
        await kube.renew_lease(agent_api, "kubedra-system", "kubedra-agent-honest-node",
                               "honest-node", 40)


async def test_claim_whose_config_the_api_server_refuses_to_update_is_not_retried(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    """kube-apiserver refuses every JSON status write to a claim whose opaque parameters were
    stored as non-canonical JSON (as any Python client sends them): it re-encodes them and finds
    status.allocation "modified" (v1.37.2) or "immutable" (v1.34.4). The operator logs it once
    and moves on instead of retrying a write that cannot succeed."""
    kubedra.add_node("config-node")
    await _suite_inventory(admin_api, "config")
    resource, core = client.ResourceV1Api(admin_api), client.CoreV1Api(admin_api)
    pick = 'device.attributes["pci.kubedra.io"].?suite.orValue("") == "config"'
    for name, config in (("with-config", True), ("plain", False)):
        spec: dict[str, Any] = {"devices": {"requests": [{"name": "dev", "exactly": {
            "deviceClassName": "pci.kubedra.io", "selectors": [{"cel": {"expression": pick}}]}}]}}
        if config:  # sent as json.dumps(...) by the client: with spaces, i.e. not canonical
            spec["devices"]["config"] = [{"opaque": {"driver": "pci.kubedra.io", "parameters": {
                "apiVersion": "pci.kubedra.io/v1alpha1", "kind": "PciConfig"}}}]
        await resource.create_namespaced_resource_claim(
            namespace, {"metadata": {"name": name}, "spec": spec})
        await core.create_namespaced_pod(namespace, {
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "config-node"},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
                     "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                     "resources": {"claims": [{"name": "dev"}]}}]}})

    async def plain_reported() -> bool:
        claim = await resource.read_namespaced_resource_claim("plain", namespace)
        return bool(claim.status.devices)
    await eventually(plain_reported, timeout=60, what="the plain claim reported")
    refused = await resource.read_namespaced_resource_claim("with-config", namespace)
    assert refused.status.allocation is not None
    assert not refused.status.devices
    log = (kubedra.plane.logs / "kubedra-operator.log").read_text()
    assert log.count(f"claim={namespace}/with-config") == 1
    assert "the API server refuses status writes to this claim" in log


async def test_two_inventories_of_one_pool_do_not_hide_each_other(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    custom = client.CustomObjectsApi(admin_api)
    first = _static_inventory("pool-first", 2)
    await custom.create_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                              first)
    await _ready_inventory(admin_api, "pool-first")
    second = _static_inventory("pool-second", 1)
    second["spec"]["pool"] = "pool-first"
    await custom.create_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                              second)

    async def conflict() -> dict[str, Any] | None:
        ready = condition(await read_inventory(admin_api, "pool-second"), "Ready")
        return ready if ready and ready["reason"] == "PoolConflict" else None
    ready = await eventually(conflict, what="PoolConflict on the second inventory")
    assert (ready["status"], ready["message"]) == (
        "False", "pool pool-first of driver pci.kubedra.io is published by DeviceInventory "
                 "pool-first, created earlier; this inventory publishes nothing while that one "
                 "exists")
    assert await slices_of(admin_api, "pool-second") == []
    [kept] = await slices_of(admin_api, "pool-first")
    assert [d["name"] for d in kept["spec"]["devices"]] == ["dev-000", "dev-001"]
    # when the first goes away, the second publishes the pool
    await custom.delete_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories",
                                              "pool-first")
    await _ready_inventory(admin_api, "pool-second")
    [taken] = await slices_of(admin_api, "pool-second")
    assert taken["spec"]["pool"]["name"] == "pool-first"
    assert [d["name"] for d in taken["spec"]["devices"]] == ["dev-000"]
