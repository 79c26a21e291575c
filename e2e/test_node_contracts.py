"""The contracts of Kubernetes 1.37 between kubedra and the rest of the cluster, proven with the
v1.37.2 kubelet, scheduler and controller-manager: device health in the pod's status
(KEP-4680; also with an older kubelet, ``KUBELET_VERSION``: ``make test-skew``), device
metadata in the container (KEP-5304), admin access (KEP-5018), extended resources (KEP-5004),
the standard numaNode attribute, and the hold-down of a recovered GPU.

The real node ``real-h200`` (shared with e2e/test_real_node.py: the first module that needs it
starts it) replays the H200 capture with stand-in device nodes; each test starts with the GPU
free and ends with its pods deleted.
"""

# ruff: noqa: F811  (the fixtures node and ns come from e2e/test_real_node.py)
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import HEALTH_HOLD_DOWN, Kubedra, kubectl
from e2e.harness.versions import kubelet_version
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    condition,
    create_claim_template,
    create_gpu_pod,
    create_reporting_pod,
    gpu_claim_spec,
    pod_claim,
    read_inventory,
    running_report,
    slices_of,
)
from e2e.test_real_node import (  # the real node's fixtures too: one node for both modules
    DRIVER,
    H200_REPORT,
    H200_UUID,
    INVENTORY,
    NODE,
    TIMEOUT,
    Node,
    _delete_pod,
    _main_container,
    _run,
    node,  # noqa: F401
    ns,  # noqa: F401
)
from kubedra.publishing.pool import RECOVERED_TAINT_VALUE
from tests.support.health_agent import faults_file
from tests.support.sysfs_tree import build_sysfs

pytestmark = pytest.mark.cluster

H200_BUS_ID = "0000:00:06.0"
XID = "XID 79: GPU has fallen off the bus"
KUBELET_WATCHES_HEALTH = int(kubelet_version().split(".")[1]) >= 36
"""The kubelet opens the agent's health stream: gate ``ResourceHealthStatus`` is beta and on by
default from 1.36 (``pkg/features/kube_features.go``), alpha and off before."""


async def _pod(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = api.sanitize_for_serialization(
        await client.CoreV1Api(api).read_namespaced_pod(name, namespace))
    return pod


async def test_device_health_shows_in_the_running_pods_status_where_the_kubelet_watches_it(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """The agent's health stream carries a fault of the GPU to the kubelet, which writes it into
    the running pod's allocatedResourcesStatus with kubedra's message, and Healthy again once
    discovery finds the GPU well: on a kubelet of 1.36 or later (``ResourceHealthStatus`` beta
    and on by default; the stream is ``v1.DRAResourceHealth`` from 1.37, ``v1alpha1`` on 1.36,
    ``pickHealthService``). An older kubelet (``KUBELET_VERSION=1.35.4``: the gate is alpha and
    off) never opens the stream: the pod's status has no health while the inventory says the
    GPU is Unhealthy, and the agent serves its prepares as before."""
    kubedra, plane = node.kubedra, node.kubedra.plane
    faults = faults_file(node.real.root / "plugins")
    plane.stop_component(kubedra.agents.pop(NODE))
    kubedra.start_agent(NODE, device_root=node.real.device_root, boot_id_path=node.boot_id,
                        module="tests.support.health_agent")
    try:
        await _run(admin_api, ns, "watched", template="h200")
        claim = await pod_claim(admin_api, ns, "watched")
        assert claim is not None
        resource_id = f"{DRIVER}/claim={claim['metadata']['uid']}-gpu-0"

        async def health_is(health: str | None, message: str | None) -> bool:
            """The pod's health of the GPU is ``health`` (None: the status has none)."""
            main = _main_container(await _pod(admin_api, ns, "watched"))
            want = {"resourceID": resource_id, "health": health,
                    **({"message": message} if message else {})}
            return bool(main.get("allocatedResourcesStatus") == (
                [{"name": "claim:gpu", "resources": [want]}] if health else None))

        async def inventory_says(health: str) -> bool:
            status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
            [device] = status["discovered"]["devices"]
            return bool(device.get("health", "Healthy") == health)

        watched = KUBELET_WATCHES_HEALTH
        await eventually(lambda: health_is("Healthy" if watched else None, None),
                         timeout=TIMEOUT, what="the H200's health in the pod's status")
        faults.write_text(json.dumps({"gpu-0": XID}))
        await eventually(lambda: inventory_says("Unhealthy"), timeout=TIMEOUT,
                         what="the H200 Unhealthy in its inventory")
        assert XID in kubectl(plane, "describe", "deviceinventory", INVENTORY)
        await eventually(lambda: health_is("Unhealthy" if watched else None, XID),
                         timeout=TIMEOUT, what="the H200's health in the pod's status")
        faults.unlink()
        await eventually(lambda: inventory_says("Healthy"), timeout=TIMEOUT,
                         what="the H200 healthy again in its inventory")
        await eventually(lambda: health_is("Healthy" if watched else None, None),
                         timeout=TIMEOUT, what="the H200's health in the pod's status")
        assert _main_container(await _pod(admin_api, ns, "watched"))["restartCount"] == 0
        await _delete_pod(admin_api, ns, "watched")
    finally:
        faults.unlink(missing_ok=True)
        plane.stop_component(kubedra.agents.pop(NODE))
        node.start_agent()
    # the stream ended cleanly when the agent stopped, and the kubelet logged no error
    log = node.kubelet_log
    assert ("Successfully started WatchResources health stream" in log) == watched
    assert "Error receiving from WatchResources stream" not in log


async def test_container_reads_its_gpus_uuid_and_bus_id_from_the_metadata_file(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """KEP-5304: the device metadata file of request ``gpu`` of the pod's claim ``gpu`` is
    mounted at the standard path; the container reads the H200's attributes there."""
    path = ("/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/"
            f"{DRIVER}-metadata.json")
    await create_claim_template(admin_api, ns, "meta")
    await create_reporting_pod(admin_api, ns, "meta", NODE, template="meta",
                               script=f"head -n 1 {path} > /dev/termination-log")
    pod = await eventually(lambda: running_report(admin_api, ns, "meta"), timeout=TIMEOUT,
                           what="pod meta running")
    claim = await pod_claim(admin_api, ns, "meta")
    assert claim is not None
    document = json.loads(pod["report"])
    [request] = document["requests"]
    [device] = request["devices"]
    assert device["attributes"]["uuid"] == {"string": H200_UUID}
    assert device["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": H200_BUS_ID}
    published = (await read_inventory(admin_api, INVENTORY) or {})["status"]["discovered"]
    assert document == {
        "kind": "DeviceMetadata", "apiVersion": "metadata.resource.k8s.io/v1beta1",
        "metadata": {"name": claim["metadata"]["name"], "namespace": ns,
                     "uid": claim["metadata"]["uid"], "generation": 1},
        "podClaimName": "gpu",
        "requests": [{"name": "gpu", "devices": [{
            "driver": DRIVER, "pool": NODE, "name": "gpu-0",
            "attributes": published["devices"][0]["attributes"]}]}]}
    await _delete_pod(admin_api, ns, "meta")
    assert not list(node.real.cdi_dir.glob(f"{DRIVER}_metadata_*"))
    assert not list((node.data_dir / "dra-device-metadata").iterdir())


async def test_admin_access_claim_is_prepared_while_another_claim_uses_the_device(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """KEP-5018: a request with ``adminAccess: true`` (in a namespace labelled for it) gets the
    H200 while a pod of another claim runs with it; the agent prepares it without the
    exclusivity check that every other claim gets."""
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    await core.patch_namespace(ns, {"metadata": {"labels": {
        "resource.kubernetes.io/admin-access": "true"}}})
    user = await _run(admin_api, ns, "user", template="user")
    assert user["report"] == H200_REPORT
    monitor_spec = gpu_claim_spec()
    monitor_spec["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    await resource.create_namespaced_resource_claim(ns, {"metadata": {"name": "monitor"},
                                                         "spec": monitor_spec})
    monitor = await _run(admin_api, ns, "monitor", claim="monitor")
    assert monitor["report"] == H200_REPORT
    claim = await resource.read_namespaced_resource_claim("monitor", ns)
    [result] = claim.status.allocation.devices.results
    assert (result.device, result.admin_access) == ("gpu-0", True)
    user_claim = await pod_claim(admin_api, ns, "user")
    assert user_claim is not None
    checkpointed = node.checkpointed()
    assert sorted(checkpointed) == sorted([claim.metadata.uid, user_claim["metadata"]["uid"]])
    assert checkpointed[claim.metadata.uid]["devices"][0]["adminAccess"] is True
    assert "adminAccess" not in checkpointed[user_claim["metadata"]["uid"]]["devices"][0]
    await _delete_pod(admin_api, ns, "monitor")
    assert _main_container(await _pod(admin_api, ns, "user"))["restartCount"] == 0
    await _delete_pod(admin_api, ns, "user")


async def test_pod_written_for_the_device_plugin_world_gets_the_h200(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """KEP-5004: ``resources.limits: {nvidia.com/gpu: 1}`` and no claim. The scheduler makes a
    claim for the DeviceClass whose extendedResourceName is nvidia.com/gpu, owned by the pod,
    with request ``container-1-request-0`` (init container ``report`` reuses the request of
    container ``main``, index 1); the agent prepares it and the container sees the H200."""
    await create_reporting_pod(admin_api, ns, "legacy", NODE,
                               extended_resources={"nvidia.com/gpu": 1})
    pod = await eventually(lambda: running_report(admin_api, ns, "legacy"), timeout=TIMEOUT,
                           what="pod legacy running")
    assert pod["report"] == H200_REPORT
    assert pod["spec"].get("resourceClaims") in (None, [])
    extended = pod["status"]["extendedResourceClaimStatus"]
    assert extended["requestMappings"] == [
        {"containerName": "main", "resourceName": "nvidia.com/gpu",
         "requestName": "container-1-request-0"},
        {"containerName": "report", "resourceName": "nvidia.com/gpu",
         "requestName": "container-1-request-0"}]
    claim: dict[str, Any] = admin_api.sanitize_for_serialization(
        await client.ResourceV1Api(admin_api).read_namespaced_resource_claim(
            extended["resourceClaimName"], ns))
    assert claim["metadata"]["annotations"] == {
        "resource.kubernetes.io/extended-resource-claim": "true"}
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "legacy", True)
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-1-request-0", "exactly": {
        "deviceClassName": "gpu.kubedra.io", "allocationMode": "ExactCount", "count": 1}}]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["pool"], result["device"]) == (
        "container-1-request-0", NODE, "gpu-0")
    assert list(node.checkpointed()) == [claim["metadata"]["uid"]]

    # kubectl dra explain pod: the allocated one explains the scheduler's claim; a second such
    # pod, pending while the H200 is taken, the claim the scheduler would make for it
    plane = node.kubedra.plane
    allocated = json.loads(kubectl(plane, "dra", "explain", "pod", "legacy", "-n", ns,
                                   "-o", "json"))
    assert (allocated["verdict"], allocated["claims"]) == ("Allocated", {
        "allocated": [f"{ns}/{extended['resourceClaimName']}"], "pending": [], "missing": []})
    await create_reporting_pod(admin_api, ns, "waiting", NODE,
                               extended_resources={"nvidia.com/gpu": 1})
    pending = json.loads(kubectl(plane, "dra", "explain", "pod", "waiting", "-n", ns,
                                 "-o", "json"))
    assert (pending["verdict"], pending["claims"]) == ("Unschedulable", {
        "allocated": [], "pending": [f"{ns}/waiting-extended-resources"], "missing": []})
    [outcome] = pending["nodes"]
    [alone] = outcome["claims"]
    assert (outcome["node"], outcome["fits"], alone["claim"], alone["fitsAlone"]) == (
        NODE, False, f"{ns}/waiting-extended-resources", False)
    for named in ("container-1-request-0", "gpu-0", extended["resourceClaimName"]):
        assert named in alone["message"], alone["message"]

    await _delete_pod(admin_api, ns, "legacy")
    assert not node.spec(claim["metadata"]["uid"]).exists()
    waiting = await eventually(lambda: running_report(admin_api, ns, "waiting"),
                               timeout=TIMEOUT, what="pod waiting running")
    assert waiting["report"] == H200_REPORT
    await _delete_pod(admin_api, ns, "waiting")


NUMA_FUNCTIONS = [
    {"address": f"0000:{bus}:00.0", "vendor": "0x15b3", "device": "0x101d",
     "class": "0x020000", "numa_node": numa,
     "real_path": f"/sys/devices/pci0000:{bus}/0000:{bus}:00.0"}
    for bus, numa in (("17", "0"), ("3b", "1"), ("5e", "1"), ("86", "-1"))]
"""Four NICs on four root ports: NUMA nodes 0, 1, 1 and none (``-1``)."""


async def test_match_attribute_numa_node_across_two_requests(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, tmp_path: Path) -> None:
    """numaNode from sysfs (omitted for -1) is published next to pciBusID and pcieRoot, and
    kube-scheduler's matchAttribute on it puts two requests on one NUMA node: the first
    device (NUMA 0) has no partner, so the allocation is the two NICs of NUMA 1."""
    kwok_node = "numa-node"
    kubedra.add_node(kwok_node)
    sysfs = build_sysfs(tmp_path / "sys", NUMA_FUNCTIONS)
    kubedra.start_agent(kwok_node, backend="pci", driver="pci.kubedra.io", sysfs_root=sysfs)
    inventory = f"{kwok_node}-pci.kubedra.io"
    try:
        async def published() -> list[dict[str, Any]]:
            slices = await slices_of(admin_api, inventory)
            return slices[0]["spec"]["devices"] if slices else []
        devices = await eventually(published, timeout=TIMEOUT, what=f"{inventory} published")
        assert {d["name"]: (d["attributes"].get("resource.kubernetes.io/numaNode"),
                            d["attributes"]["resource.kubernetes.io/pcieRoot"])
                for d in devices} == {
            "pci-0000-17-00-0": ({"int": 0}, {"string": "pci0000:17"}),
            "pci-0000-3b-00-0": ({"int": 1}, {"string": "pci0000:3b"}),
            "pci-0000-5e-00-0": ({"int": 1}, {"string": "pci0000:5e"}),
            "pci-0000-86-00-0": (None, {"string": "pci0000:86"})}
        requests = [{"name": r, "exactly": {"deviceClassName": "pci.kubedra.io"}}
                    for r in ("a", "b")]
        await client.ResourceV1Api(admin_api).create_namespaced_resource_claim(namespace, {
            "metadata": {"name": "pair"}, "spec": {"devices": {
                "requests": requests, "constraints": [{
                    "requests": ["a", "b"],
                    "matchAttribute": "resource.kubernetes.io/numaNode"}]}}})
        await client.CoreV1Api(admin_api).create_namespaced_pod(namespace, {
            "metadata": {"name": "pair"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": kwok_node},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "resourceClaims": [{"name": "nics", "resourceClaimName": "pair"}],
                     "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                     "resources": {"claims": [{"name": "nics"}]}}]}})

        async def allocated() -> list[tuple[str, str]]:
            claim = await client.ResourceV1Api(admin_api).read_namespaced_resource_claim(
                "pair", namespace)
            allocation = claim.status.allocation
            return [(r.request, r.device) for r in allocation.devices.results] if (
                allocation) else []
        assert await eventually(allocated, timeout=TIMEOUT, what="claim pair allocated") == [
            ("a", "pci-0000-3b-00-0"), ("b", "pci-0000-5e-00-0")]
    finally:
        kubedra.stop_agent(kwok_node)


async def test_recovered_gpu_is_held_out_of_scheduling_for_the_hold_down_time(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    """An Unhealthy GPU gets the kubedra.io/unhealthy NoSchedule taint and new claims avoid it;
    healthy again, it keeps the taint (value recovered-hold-down) for the operator's
    hold-down time (HEALTH_HOLD_DOWN, 10 s here), then kube-scheduler allocates it."""
    kwok_node = "flaky-h200"
    inventory = f"{kwok_node}-{DRIVER}"
    kubedra.add_node(kwok_node)
    kubedra.start_agent(kwok_node, module="tests.support.health_agent")
    faults = faults_file(kubedra.node_dir(kwok_node) / "plugins")
    try:
        async def taints(value: str | None) -> bool:
            slices = await slices_of(admin_api, inventory)
            if not slices:
                return False
            [device] = slices[0]["spec"]["devices"]
            have = [(t["key"], t["value"], t["effect"]) for t in device.get("taints") or []]
            return have == ([("kubedra.io/unhealthy", value, "NoSchedule")] if value else [])
        await eventually(lambda: taints(None), timeout=TIMEOUT, what=f"{inventory} published")
        faults.parent.mkdir(parents=True, exist_ok=True)
        faults.write_text(json.dumps({"gpu-0": XID}))
        await eventually(lambda: taints("XID-79--GPU-has-fallen-off-the-bus"), timeout=TIMEOUT,
                         what="gpu-0 tainted unhealthy")
        await create_gpu_pod(admin_api, namespace, "wants-gpu", "true", node=kwok_node)

        async def unschedulable() -> bool:
            pod = await client.CoreV1Api(admin_api).read_namespaced_pod("wants-gpu", namespace)
            return any(c.type == "PodScheduled" and c.status == "False"
                       for c in pod.status.conditions or [])
        await eventually(unschedulable, timeout=TIMEOUT, what="pod wants-gpu unschedulable")

        faults.unlink()
        await eventually(lambda: taints(RECOVERED_TAINT_VALUE), timeout=TIMEOUT,
                         what="gpu-0 held down after recovering")
        recovered = time.monotonic()

        async def said() -> str | None:  # the status is written after the slices
            ready = condition(await read_inventory(admin_api, inventory), "Ready") or {}
            message = str(ready.get("message", ""))
            return message if "healthy again" in message else None
        message = await eventually(said, timeout=TIMEOUT, what="the hold-down in the status")
        assert "healthy again, kept tainted NoSchedule for the hold-down time" in message
        assert message.endswith("): gpu-0")

        async def allocated() -> str | None:
            claim = await pod_claim(admin_api, namespace, "wants-gpu")
            allocation = ((claim or {}).get("status") or {}).get("allocation")
            return allocation["devices"]["results"][0]["device"] if allocation else None
        assert await allocated() is None
        assert await eventually(allocated, timeout=TIMEOUT, what="gpu-0 allocated") == "gpu-0"
        held = time.monotonic() - recovered
        assert held >= HEALTH_HOLD_DOWN / 2, f"allocated {held:.1f} s after recovering"
        assert await taints(None)
    finally:
        faults.unlink(missing_ok=True)
        kubedra.stop_agent(kwok_node)


async def test_pod_waits_for_the_attach_step_and_a_failed_attach_sends_it_back(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    """KEP-5007 on the real scheduler: a network-attached NIC declares binding conditions;
    kube-scheduler allocates it and waits in PreBind; the operator's attach step (the test one:
    ``*-flaky`` fails the first time) sets the failure condition, which sends the pod back to
    scheduling; the second attempt attaches, the binding condition turns True and the pod is
    bound to the node the NIC was attached to."""
    kwok_node, driver = "fabric-node", "fabric.kubedra.io"
    kubedra.add_node(kwok_node)
    custom = client.CustomObjectsApi(admin_api)
    resource = client.ResourceV1Api(admin_api)
    rbac = client.RbacAuthorizationV1Api(admin_api)
    # what an admin adds for a driver of their own: the operator may write its status.devices
    await rbac.create_cluster_role({"metadata": {"name": "kubedra-operator-fabric"}, "rules": [{
        "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
        "resourceNames": [driver], "verbs": ["arbitrary-node:patch"]}]})
    await rbac.create_cluster_role_binding({
        "metadata": {"name": "kubedra-operator-fabric"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kubedra-operator-fabric"},
        "subjects": [{"kind": "ServiceAccount", "name": "kubedra-operator",
                      "namespace": "kubedra-system"}]})
    await resource.create_device_class({"metadata": {"name": driver}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    await custom.create_cluster_custom_object("kubedra.io", "v1alpha1", "deviceinventories", {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": "fabric"},
        "spec": {"driver": driver, "allNodes": True, "devices": [{
            "name": "nic-flaky", "bindsToNode": True,
            "bindingConditions": ["kubedra.io/attached"],
            "bindingFailureConditions": ["kubedra.io/attach-failed"]}]}})
    try:
        async def published() -> list[dict[str, Any]]:
            slices = await slices_of(admin_api, "fabric")
            return slices[0]["spec"]["devices"] if slices else []
        assert await eventually(published, timeout=TIMEOUT, what="fabric published") == [{
            "name": "nic-flaky", "bindsToNode": True,
            "bindingConditions": ["kubedra.io/attached"],
            "bindingFailureConditions": ["kubedra.io/attach-failed"]}]
        await resource.create_namespaced_resource_claim(namespace, {
            "metadata": {"name": "nic"}, "spec": {"devices": {"requests": [
                {"name": "nic", "exactly": {"deviceClassName": driver}}]}}})
        core = client.CoreV1Api(admin_api)
        await core.create_namespaced_pod(namespace, {
            "metadata": {"name": "attached"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": kwok_node},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "resourceClaims": [{"name": "nic", "resourceClaimName": "nic"}],
                     "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                     "resources": {"claims": [{"name": "nic"}]}}]}})

        async def bound() -> str | None:
            pod = await core.read_namespaced_pod("attached", namespace)
            return pod.spec.node_name
        assert await eventually(bound, timeout=TIMEOUT, what="pod attached bound") == kwok_node
        claim: dict[str, Any] = admin_api.sanitize_for_serialization(
            await resource.read_namespaced_resource_claim("nic", namespace))
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["device"], result["bindingConditions"],
                result["bindingFailureConditions"]) == (
            "nic-flaky", ["kubedra.io/attached"], ["kubedra.io/attach-failed"])
        [entry] = claim["status"]["devices"]
        assert sorted((c["type"], c["status"], c["reason"]) for c in entry["conditions"]) == [
            ("Ready", "True", "Allocated"), ("kubedra.io/attached", "True", "Attached")]
        [term] = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert kwok_node in json.dumps(term)
        events = await core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=attached")
        reasons = [(e.reason, e.message) for e in events.items]
        assert any(reason == "BindingConditionsPending" for reason, _ in reasons)
        assert any(reason == "FailedScheduling" and "AttachFailed" in message
                   for reason, message in reasons), reasons
    finally:
        await custom.delete_cluster_custom_object("kubedra.io", "v1alpha1",
                                                  "deviceinventories", "fabric")
        await resource.delete_device_class(driver)
        await rbac.delete_cluster_role_binding("kubedra-operator-fabric")
        await rbac.delete_cluster_role("kubedra-operator-fabric")
