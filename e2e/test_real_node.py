"""Activation on a real node: kubelet v1.37.2 (or ``KUBELET_VERSION``'s, default
``KUBE_VERSION``'s), containerd and runc run pods whose claims kubedra's agent prepares, and the
containers receive the H200's CDI edits.

The node ``real-h200`` replays the H200 capture (one GPU, ``gpu-0``) with stand-in device
nodes; each test starts with that GPU free and ends with its pods deleted. Container output
comes back as termination messages (:func:`e2e.kube_objects.create_reporting_pod`), never
over the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness import scrape
from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra, kubectl
from e2e.harness.realnode import RealNode, stand_in_devices
from e2e.harness.versions import kubelet_version
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    create_claim_template,
    create_reporting_pod,
    gpu_claim_spec,
    pod_claim,
    read_inventory,
    running_report,
    slices_of,
)
from e2e.test_mig import COUNTERS_OFF_SKIP, left_out_without_counters
from kubedra.node.checkpoint import CHECKPOINT_FILE
from kubedra.node.claimspec import spec_path
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from kubedra.publishing.features import ServedFeatures

pytestmark = pytest.mark.cluster

NODE = "real-h200"
DRIVER = "gpu.kubedra.io"
GPU_CLASS, MIG_CLASS = DRIVER, f"mig.{DRIVER}"
"""The DeviceClasses of whole GPUs and of MIG placements."""
INVENTORY = f"{NODE}-{DRIVER}"
H200_UUID = "GPU-3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"
H200_REPORT = (f"NVIDIA_VISIBLE_DEVICES={H200_UUID}\n"
               "/dev/nvidia-uvm\n/dev/nvidia-uvm-tools\n/dev/nvidia0\n/dev/nvidiactl\n")
"""What a container given the H200 reports (device nodes in the shell's glob order)."""
MIG_REPORT = ("NVIDIA_VISIBLE_DEVICES=MIG-fake-1\n/dev/nvidia-uvm\n/dev/nvidia-uvm-tools\n"
              "/dev/nvidia0\n/dev/nvidiactl\n/dev/nvidia-caps/nvidia-cap102\n"
              "/dev/nvidia-caps/nvidia-cap103\n")
"""What a container given the first MIG instance an agent with the fake partitioner creates
reports."""
TIMEOUT = 180.0
"""Seconds a pod gets to start or go away (the machine is shared and slow under load)."""


class Node:
    """The real node of this module, its agent and where to look on its disk."""

    def __init__(self, kubedra: Kubedra, real: RealNode) -> None:
        self.kubedra, self.real = kubedra, real
        self.boot_id = real.root / "boot_id"
        self.data_dir = real.root / "plugins" / DRIVER

    def start_agent(self) -> None:
        self.kubedra.start_agent(NODE, device_root=self.real.device_root,
                                 boot_id_path=self.boot_id)

    @property
    def agent_log(self) -> str:
        return (self.kubedra.plane.logs / f"kubedra-agent-{NODE}.log").read_text()

    @property
    def kubelet_log(self) -> str:
        return (self.kubedra.plane.logs / f"kubelet-{NODE}.log").read_text()

    def prepared_count(self, uid: str) -> int:
        """How often the agent did the work of preparing claim ``uid`` (not cached answers)."""
        return sum(1 for line in self.agent_log.splitlines()
                   if "claim prepared" in line and uid in line)

    def spec(self, uid: str) -> Path:
        return spec_path(self.real.cdi_dir, DRIVER, uid)

    async def unprepared(self, uid: str) -> None:
        """Wait until claim ``uid`` is unprepared: its CDI spec and checkpoint entry gone (the
        kubelet may finish unpreparing just after the pod object is deleted)."""
        async def gone() -> bool:
            return not self.spec(uid).exists() and uid not in self.checkpointed()
        await eventually(gone, timeout=TIMEOUT, what=f"claim {uid} unprepared")

    def checkpointed(self) -> dict[str, Any]:
        """The agent's checkpoint entries by claim UID (none before its first prepare)."""
        path = self.data_dir / CHECKPOINT_FILE
        if not path.exists():
            return {}
        claims: dict[str, Any] = json.loads(path.read_text())["data"]["claims"]
        return claims


@pytest.fixture(scope="module")
async def node(kubedra: Kubedra, admin_api: ApiClient) -> AsyncIterator[Node]:
    """Real node ``real-h200`` with its agent replaying the H200 capture (stand-in device
    nodes, boot ID from a file the reboot test changes)."""
    real = kubedra.real_node(NODE, {"kubedra.io/gpu": "true"})
    stand_in_devices(real.device_root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
    this = Node(kubedra, real)
    this.boot_id.write_text("boot-1\n")
    this.start_agent()

    async def published() -> bool:
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return bool(status.get("deviceCount") == 1)
    await eventually(published, timeout=120, what=f"{INVENTORY} published")
    yield this
    kubedra.stop_agent(NODE)


@pytest.fixture
async def ns(node: Node, admin_api: ApiClient, namespace: str) -> str:
    """A namespace for the test's pods, with the H200 free at the start: allocated to no
    claim, prepared for none."""
    async def free() -> bool:
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return status.get("allocatedCount") == 0 and node.checkpointed() == {}
    await eventually(free, timeout=TIMEOUT, what="the H200 free")
    return namespace


async def _run(api: ApiClient, namespace: str, name: str, *, template: str | None = None,
               claim: str | None = None, selector: str | None = None,
               device_class: str = GPU_CLASS) -> dict[str, Any]:
    """Create a reporting pod and return it once its main container runs; with ``template``
    its claim comes from a new ResourceClaimTemplate of that name, asking for one device of
    ``device_class`` matching ``selector``."""
    if template:
        await create_claim_template(api, namespace, template, selector, device_class)
    await create_reporting_pod(api, namespace, name, NODE, template=template, claim=claim)
    pod: dict[str, Any] = await eventually(lambda: running_report(api, namespace, name),
                                           timeout=TIMEOUT, what=f"pod {name} running")
    return pod


async def _delete_pod(api: ApiClient, namespace: str, name: str, **options: Any) -> None:
    """Delete pod ``name`` and wait until it is gone."""
    core = client.CoreV1Api(api)
    await core.delete_namespaced_pod(name, namespace, **options)

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod(name, namespace)
        except ApiException as err:
            return err.status == 404
        return False
    await eventually(gone, timeout=TIMEOUT, what=f"pod {name} deleted")


async def _run_template_pod(api: ApiClient, namespace: str, name: str, template: str, *,
                            selector: str | None = None, device_class: str = GPU_CLASS
                            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`_run` with a claim from ResourceClaimTemplate ``template``; the pod and its
    claim."""
    pod = await _run(api, namespace, name, template=template, selector=selector,
                     device_class=device_class)
    claim = await pod_claim(api, namespace, name)
    assert claim is not None
    return pod, claim


def _main_container(pod: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = next(c for c in pod["status"]["containerStatuses"]
                                  if c["name"] == "main")
    return status


async def _kubelet_plugin_apis(api: ApiClient) -> dict[str, str] | None:
    """The agent's ``status.discovered.kubeletPluginAPIs``, once it names the DRAPlugin
    version (known from the kubelet's first prepare)."""
    discovered = ((await read_inventory(api, INVENTORY) or {}).get("status") or {}).get(
        "discovered") or {}
    apis: dict[str, str] = discovered.get("kubeletPluginAPIs") or {}
    return apis if "DRAPlugin" in apis else None


async def test_pod_with_a_claim_gets_the_h200_and_unprepare_removes_it(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    pod, claim = await _run_template_pod(admin_api, ns, "trainer", "h200")
    assert pod["report"] == H200_REPORT
    uid, name = claim["metadata"]["uid"], claim["metadata"]["name"]
    [device] = claim["status"]["devices"]
    assert (device["driver"], device["pool"], device["device"]) == (DRIVER, NODE, "gpu-0")
    conditions = {c["type"]: (c["status"], c["reason"], c["message"])
                  for c in device["conditions"]}
    assert conditions == {
        "Ready": ("True", "Allocated", f"device gpu-0 of pool {NODE} (DeviceInventory "
                  f"{INVENTORY}) is allocated to request gpu"),
        "Prepared": ("True", "DevicePrepared", f"prepared on node {NODE} as CDI device "
                     f"{DRIVER}/claim={uid}-gpu-0")}
    described = kubectl(node.kubedra.plane, "describe", "resourceclaim", "-n", ns, name)
    assert "Reason:                DevicePrepared" in described
    assert "Reason:                Allocated" in described
    spec = json.loads(node.spec(uid).read_text())
    assert spec["devices"][0]["containerEdits"]["deviceNodes"][0] == {
        "path": "/dev/nvidia0", "hostPath": f"{node.real.device_root}/dev/nvidia0"}
    assert list(node.checkpointed()) == [uid]
    assert f'"Registered DRA plugin" logger="DRA registration handler" driverName="{DRIVER}"' in (
        node.kubelet_log)
    assert 'chosenService="v1.DRAPlugin"' in node.kubelet_log  # every kubelet since 1.34
    info = (await client.CoreV1Api(admin_api).read_node(NODE)).status.node_info
    assert info.kubelet_version == f"v{kubelet_version()}"
    assert "Calling NodePrepareResources rpc" in node.kubelet_log
    assert uid in node.kubelet_log
    assert node.prepared_count(uid) == 1
    # the plugin API versions this kubelet chose, as its calls showed them to the agent: the
    # health stream v1 from 1.37, v1alpha1 on 1.36, never opened before (ResourceHealthStatus
    # alpha and off)
    minor = int(kubelet_version().split(".")[1])
    health = {"DRAResourceHealth": "v1" if minor >= 37 else "v1alpha1"} if minor >= 36 else {}
    assert await eventually(lambda: _kubelet_plugin_apis(admin_api), timeout=TIMEOUT,
                            what="kubeletPluginAPIs reported") == {"DRAPlugin": "v1", **health}
    inventory = " ".join(kubectl(node.kubedra.plane, "describe", "dinv", INVENTORY).split())
    described = "".join(f" DRAResource Health: {v}" for v in health.values())
    assert f"Kubelet Plugin APIs: DRAPlugin: v1{described} Observed Time:" in inventory

    await _delete_pod(admin_api, ns, "trainer")
    await node.unprepared(uid)
    assert "Calling NodeUnprepareResource rpc" in node.kubelet_log


async def test_shared_claim_is_prepared_once_and_unprepared_after_the_last_pod(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    await client.ResourceV1Api(admin_api).create_namespaced_resource_claim(ns, {
        "metadata": {"name": "shared"}, "spec": gpu_claim_spec()})
    first = await _run(admin_api, ns, "first", claim="shared")
    second = await _run(admin_api, ns, "second", claim="shared")
    assert first["report"] == second["report"] == H200_REPORT
    claim = await client.ResourceV1Api(admin_api).read_namespaced_resource_claim("shared", ns)
    uid = claim.metadata.uid
    assert sorted(r.name for r in claim.status.reserved_for) == ["first", "second"]
    assert node.prepared_count(uid) == 1

    await _delete_pod(admin_api, ns, "first")
    assert node.spec(uid).exists()
    assert list(node.checkpointed()) == [uid]
    await _delete_pod(admin_api, ns, "second")
    await node.unprepared(uid)
    assert node.prepared_count(uid) == 1


async def test_kubelet_restart_keeps_the_pod_and_prepares_nothing_twice(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    pod, claim = await _run_template_pod(admin_api, ns, "steady", "h200")
    uid = claim["metadata"]["uid"]
    before = _main_container(pod)
    registrations = node.agent_log.count("registered with the kubelet")
    wipes = node.kubelet_log.count('"Deleted ResourceSlices"')
    generation = ((await read_inventory(admin_api, INVENTORY) or {})["status"]["pool"]
                  ["generation"])

    node.real.restart_kubelet()

    async def registered_again() -> bool:
        return node.agent_log.count("registered with the kubelet") > registrations
    await eventually(registered_again, timeout=TIMEOUT, what="the plugin registered again")

    async def republished() -> bool:  # a starting kubelet deletes its node's ResourceSlices
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return (node.kubelet_log.count('"Deleted ResourceSlices"') > wipes
                and status["pool"]["generation"] > generation
                and len(await slices_of(admin_api, INVENTORY)) == 1)
    await eventually(republished, timeout=TIMEOUT, what="the operator republishing the slice")
    after = _main_container(await running_report(admin_api, ns, "steady") or {})
    assert (after["containerID"], after["restartCount"]) == (before["containerID"], 0)
    assert node.prepared_count(uid) == 1
    await _delete_pod(admin_api, ns, "steady")
    await node.unprepared(uid)


async def test_unprepare_after_agent_sigkill_works_from_the_checkpoint(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    _, claim = await _run_template_pod(admin_api, ns, "survivor", "h200")
    uid = claim["metadata"]["uid"]
    agent = node.kubedra.agents[NODE]
    os.kill(agent.pid, signal.SIGKILL)
    node.kubedra.stop_agent(NODE)  # collects the killed process
    assert list(node.checkpointed()) == [uid]
    node.start_agent()

    await _delete_pod(admin_api, ns, "survivor")
    await node.unprepared(uid)
    assert node.checkpointed() == {}
    assert node.prepared_count(uid) == 1


async def test_reboot_prepares_again_and_the_container_starts(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    pod, claim = await _run_template_pod(admin_api, ns, "rebooted", "h200")
    uid = claim["metadata"]["uid"]
    before = _main_container(pod)["containerID"]

    node.kubedra.stop_agent(NODE)
    node.real.shut_down()
    assert not node.spec(uid).exists()
    node.boot_id.write_text("boot-2\n")
    node.start_agent()
    node.real.start()

    async def restarted() -> dict[str, Any] | None:
        now = await running_report(admin_api, ns, "rebooted")
        return now if now and _main_container(now)["containerID"] != before else None
    pod = await eventually(restarted, timeout=TIMEOUT, what="the container started again")
    assert pod["report"] == H200_REPORT
    assert node.spec(uid).exists()
    assert node.checkpointed()[uid]["bootID"] == "boot-2"
    assert node.prepared_count(uid) == 2
    await _delete_pod(admin_api, ns, "rebooted")
    await node.unprepared(uid)


async def test_force_deleted_pods_device_is_prepared_again_only_after_unprepare(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """``kubectl delete --grace-period=0 --force`` removes the pod at once; the scheduler
    gives the H200 to a new claim while the old pod's containers still run (frozen here, so
    they cannot end before the new pod arrives). The agent refuses the device until the old
    claim is unprepared; then the new pod starts."""
    old, old_claim = await _run_template_pod(admin_api, ns, "old", "old")
    old_uid, old_name = old_claim["metadata"]["uid"], old_claim["metadata"]["name"]
    node.real.freeze_pod(old["metadata"]["uid"])
    try:
        kubectl(node.kubedra.plane, "delete", "pod", "old", "-n", ns, "--grace-period=0",
                "--force")
        await create_claim_template(admin_api, ns, "new")
        await create_reporting_pod(admin_api, ns, "new", NODE, template="new")

        async def refused() -> list[str]:
            listed = await client.CoreV1Api(admin_api).list_namespaced_event(
                ns, field_selector="involvedObject.name=new,"
                                   "reason=FailedPrepareDynamicResources")
            return [e.message for e in listed.items if "still prepared" in e.message]
        [message, *_] = await eventually(refused, timeout=TIMEOUT,
                                         what="the agent refusing the device")
        assert (f"is still prepared for claim {ns}/{old_name} (UID {old_uid}); it is "
                "prepared once that claim is unprepared") in message
        assert node.spec(old_uid).exists()
    finally:
        node.real.freeze_pod(old["metadata"]["uid"], frozen=False)
    pod = await eventually(lambda: running_report(admin_api, ns, "new"), timeout=TIMEOUT,
                           what="pod new running")
    assert pod["report"] == H200_REPORT
    assert not node.spec(old_uid).exists()
    new_claim = await pod_claim(admin_api, ns, "new")
    assert new_claim is not None
    assert list(node.checkpointed()) == [new_claim["metadata"]["uid"]]
    await _delete_pod(admin_api, ns, "new")


async def test_sigterm_hands_over_to_a_second_agent_instance(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """A rolling update: a second agent (another pod UID, sockets of its own) registers while
    the first still runs; prepares in between succeed; SIGTERM makes the first remove its
    sockets, the kubelet drops it, and the second prepares alone."""
    kubedra, plane = node.kubedra, node.kubedra.plane
    first = kubedra.agents[NODE]
    registry, data = node.real.root / "plugins_registry", node.data_dir
    assert sorted(p.name for p in registry.iterdir()) == [f"{DRIVER}-reg.sock"]
    unregistered = node.kubelet_log.count("Unregistered DRA plugin")
    uid = kubedra.create_real_agent_pod(f"kubedra-agent-{NODE}-b", NODE)
    second = kubedra.start_agent(NODE, pod=f"kubedra-agent-{NODE}-b", pod_uid=uid,
                                 device_root=node.real.device_root, boot_id_path=node.boot_id,
                                 name=f"kubedra-agent-{NODE}-b")
    try:
        async def second_registered() -> bool:
            return "registered with the kubelet" in second.log.read_text()
        await eventually(second_registered, timeout=TIMEOUT, what="the second agent registered")
        assert sorted(p.name for p in registry.iterdir()) == [
            f"{DRIVER}-{uid}-reg.sock", f"{DRIVER}-reg.sock"]
        between = await _run(admin_api, ns, "between", template="between")
        assert between["report"] == H200_REPORT
        await _delete_pod(admin_api, ns, "between")

        os.kill(first.pid, signal.SIGTERM)
        assert first.process is not None
        assert first.process.wait(timeout=60) == 0
        plane.stop_component(first)
        assert sorted(p.name for p in registry.iterdir()) == [f"{DRIVER}-{uid}-reg.sock"]
        assert sorted(p.name for p in data.glob("*.sock")) == [f"dra-{uid}.sock"]

        async def dropped() -> bool:
            return node.kubelet_log.count("Unregistered DRA plugin") > unregistered
        await eventually(dropped, timeout=TIMEOUT, what="the kubelet dropping the first agent")
        after, claim = await _run_template_pod(admin_api, ns, "after", "after")
        assert after["report"] == H200_REPORT
        assert claim["metadata"]["uid"] in second.log.read_text()
        await _delete_pod(admin_api, ns, "after")
    finally:  # the module's agent again, with its plain socket names
        plane.stop_component(second)
        if first in plane.components:
            kubedra.agents[NODE] = first
        else:
            node.start_agent()
        await client.CoreV1Api(admin_api).delete_namespaced_pod(
            f"kubedra-agent-{NODE}-b", "kubedra-system")


@contextlib.asynccontextmanager
async def _mig_partitions(node: Node, admin_api: ApiClient, served: ServedFeatures
                          ) -> AsyncIterator[None]:
    """The node's H200 published as MIG placements (``discovery.mig: partitions``, 26 devices:
    the whole GPU and 25 placements sharing ``gpu-0-counters``), its agent with a fake MIG
    partitioner (no GPU here) and the capability nodes it hands out; afterwards the whole GPU
    alone again, with the module's agent. Where the cluster drops shared counters (1.34, 1.35)
    the test is skipped, once the inventory is shown to leave the partitions out and say why."""
    kubedra, plane = node.kubedra, node.kubedra.plane
    custom = client.CustomObjectsApi(admin_api)
    caps = [f"/dev/nvidia-caps/nvidia-cap{minor}" for minor in range(100, 132)]
    stand_in_devices(node.real.device_root, caps)
    plane.stop_component(kubedra.agents.pop(NODE))
    kubedra.start_agent(NODE, device_root=node.real.device_root, boot_id_path=node.boot_id,
                        module="tests.support.fake_mig_agent")

    async def published(count: int) -> bool:
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return bool(status.get("deviceCount") == count)
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY,
        {"spec": {"discovery": {"mig": "partitions"}}},
        _content_type="application/merge-patch+json")
    try:
        if served.partitionable_devices:
            await eventually(lambda: published(26), timeout=TIMEOUT, what="26 devices published")
            yield
        else:
            await left_out_without_counters(admin_api, INVENTORY, NODE)
    finally:
        await custom.patch_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY,
            {"spec": {"discovery": None}}, _content_type="application/merge-patch+json")
        plane.stop_component(kubedra.agents.pop(NODE))
        node.start_agent()
    await eventually(lambda: published(1), timeout=TIMEOUT, what="the whole GPU published")
    if not served.partitionable_devices:
        pytest.skip(COUNTERS_OFF_SKIP)


async def test_mig_partition_reaches_the_container(
        node: Node, admin_api: ApiClient, ns: str, served: ServedFeatures) -> None:
    """With ``discovery.mig: partitions`` the agent publishes the H200's MIG placements; a
    claim for a 1g.18gb partition is prepared by creating the instance (a fake partitioner:
    no GPU here) and the container gets its CDI edits: the MIG device's UUID and the
    capability nodes of its GPU and compute instance."""
    async with _mig_partitions(node, admin_api, served):
        await create_claim_template(
            admin_api, ns, "slice", 'device.attributes["gpu.kubedra.io"].profile == "1g.18gb"',
            device_class=MIG_CLASS)
        await create_reporting_pod(admin_api, ns, "slice", NODE, template="slice")
        pod = await eventually(lambda: running_report(admin_api, ns, "slice"),
                               timeout=TIMEOUT, what="pod slice running")
        assert pod["report"] == MIG_REPORT
        claim = await pod_claim(admin_api, ns, "slice")
        assert claim is not None
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert result["device"].startswith("gpu-0-mig-1g18gb-")
        await _delete_pod(admin_api, ns, "slice")
        await node.unprepared(claim["metadata"]["uid"])


def _placement(profile: str, start: int) -> str:
    """A CEL selector for the MIG placement of ``profile`` at memory slice ``start``."""
    return (f'device.attributes["{DRIVER}"].profile == "{profile}" && '
            f'device.attributes["{DRIVER}"].placementStart == {start}')


async def _force_deleted_holder_keeps_what_it_shares(
        node: Node, admin_api: ApiClient, ns: str, *, old: tuple[str, str | None, str],
        new: tuple[str, str | None, str], counter: str, report: str) -> None:
    """Pod ``old`` runs on one device, its containers are frozen and it is force-deleted; pod
    ``new`` asks for a device that shares ``counter`` of ``gpu-0-counters`` with it. Each of
    ``old`` and ``new`` is (device class, CEL selector, the device it gets). The agent refuses
    the new device, naming the old claim and its device, while the old claim is prepared; the
    checkpoint never holds both claims, the agent unprepares the old claim before it prepares
    the new one, and the new pod then runs, its container given ``report``."""
    (old_class, old_selector, old_device), (new_class, new_selector, new_device) = old, new
    old_pod, old_claim = await _run_template_pod(admin_api, ns, "old", "old",
                                                 selector=old_selector, device_class=old_class)
    old_uid, old_name = old_claim["metadata"]["uid"], old_claim["metadata"]["name"]
    [result] = old_claim["status"]["allocation"]["devices"]["results"]
    assert result["device"] == old_device
    both: list[list[str]] = []
    watching = asyncio.create_task(_record_checkpoints_with_two_claims(node, both))
    node.real.freeze_pod(old_pod["metadata"]["uid"])
    try:
        kubectl(node.kubedra.plane, "delete", "pod", "old", "-n", ns, "--grace-period=0",
                "--force")
        await create_claim_template(admin_api, ns, "new", new_selector, device_class=new_class)
        await create_reporting_pod(admin_api, ns, "new", NODE, template="new")
        [message, *_] = await eventually(lambda: _refusals(admin_api, ns, "new"),
                                         timeout=TIMEOUT, what="the agent refusing the device")
        new_claim = await pod_claim(admin_api, ns, "new")
        assert new_claim is not None
        new_uid, new_name = new_claim["metadata"]["uid"], new_claim["metadata"]["name"]
        assert (f"device {NODE}/{new_device} of claim {ns}/{new_name} shares counter {counter} "
                f"of counter set gpu-0-counters (7 in all, 10 wanted) with device "
                f"{NODE}/{old_device}, still prepared for claim {ns}/{old_name} (UID "
                f"{old_uid}); it is prepared once that claim is unprepared") in message
        assert list(node.checkpointed()) == [old_uid]
        assert node.spec(old_uid).exists()
        assert not node.spec(new_uid).exists()
    finally:
        node.real.freeze_pod(old_pod["metadata"]["uid"], frozen=False)
    try:
        pod = await eventually(lambda: running_report(admin_api, ns, "new"), timeout=TIMEOUT,
                               what="pod new running")
    finally:
        watching.cancel()
    assert pod["report"] == report
    assert both == []
    lines = node.agent_log.splitlines()
    unprepared = next(i for i, line in enumerate(lines)
                      if "claim unprepared" in line and old_uid in line)
    prepared = next(i for i, line in enumerate(lines)
                    if "claim prepared" in line and new_uid in line)
    assert unprepared < prepared
    assert list(node.checkpointed()) == [new_uid]
    await _delete_pod(admin_api, ns, "new")
    await node.unprepared(new_uid)


async def _refusals(api: ApiClient, namespace: str, pod: str) -> list[str]:
    """Messages of the pod's ``FailedPrepareDynamicResources`` Events that refuse a device in
    use."""
    listed = await client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod},"
                                  "reason=FailedPrepareDynamicResources")
    return [e.message for e in listed.items if "still prepared" in e.message]


async def _record_checkpoints_with_two_claims(node: Node, seen: list[list[str]]) -> None:
    """Append to ``seen`` every checkpoint read with more than one claim, until cancelled."""
    while True:
        with contextlib.suppress(OSError, ValueError):
            claims = list(node.checkpointed())
            if len(claims) > 1:
                seen.append(claims)
        await asyncio.sleep(0.05)


async def test_whole_gpu_after_a_force_deleted_partition_waits_for_its_unprepare(
        node: Node, admin_api: ApiClient, ns: str, served: ServedFeatures) -> None:
    """Issue 22: pod A on MIG partition ``gpu-0-mig-3g71gb-s0``, frozen and force-deleted;
    pod B's claim asks for the whole GPU, which the scheduler allocates at once."""
    async with _mig_partitions(node, admin_api, served):
        await _force_deleted_holder_keeps_what_it_shares(
            node, admin_api, ns, old=(MIG_CLASS, _placement("3g.71gb", 0), "gpu-0-mig-3g71gb-s0"),
            new=(GPU_CLASS, None, "gpu-0"), counter="compute-slices", report=H200_REPORT)


async def test_partition_after_a_force_deleted_whole_gpu_waits_for_its_unprepare(
        node: Node, admin_api: ApiClient, ns: str, served: ServedFeatures) -> None:
    """Issue 22: pod A on the whole GPU, frozen and force-deleted; pod B's claim asks for MIG
    partition ``gpu-0-mig-3g71gb-s4``."""
    async with _mig_partitions(node, admin_api, served):
        await _force_deleted_holder_keeps_what_it_shares(
            node, admin_api, ns, old=(GPU_CLASS, None, "gpu-0"),
            new=(MIG_CLASS, _placement("3g.71gb", 4), "gpu-0-mig-3g71gb-s4"),
            counter="compute-slices", report=MIG_REPORT)


async def test_deleted_metadata_spec_is_written_again_and_the_restarted_container_starts(
        node: Node, admin_api: ApiClient, ns: str) -> None:
    """Issue 22, item 3: with a claim prepared, only its device metadata CDI spec is deleted
    and the container is killed. The agent (checking every 2 s here) writes the spec again,
    the same, counts it by kind in ``/metrics`` (on loopback), leaves the claim's own spec
    alone, and the kubelet starts the container again."""
    kubedra, plane = node.kubedra, node.kubedra.plane
    port = free_port()
    plane.stop_component(kubedra.agents.pop(NODE))
    kubedra.start_agent(NODE, device_root=node.real.device_root, boot_id_path=node.boot_id,
                        cdi_check_interval=2.0, metrics_port=port)
    try:
        pod, claim = await _run_template_pod(admin_api, ns, "healed", "h200")
        uid = claim["metadata"]["uid"]
        before = _main_container(pod)
        path = node.real.cdi_dir / f"{DRIVER}_metadata_{uid}_gpu.json"
        written, claim_spec = path.read_text(), node.spec(uid).stat().st_ino

        path.unlink()
        node.real.kill_container(before["containerID"])

        async def restarted() -> dict[str, Any] | None:
            now = await running_report(admin_api, ns, "healed")
            return now if now and _main_container(now)["restartCount"] >= 1 else None
        after = _main_container(await eventually(restarted, timeout=TIMEOUT,
                                                 what="the container started again"))
        assert after["containerID"] != before["containerID"]
        assert path.read_text() == written
        assert node.spec(uid).stat().st_ino == claim_spec
        status, text = await asyncio.to_thread(scrape.get, plane, port, "/metrics",
                                               scrape.scraper_token(plane))
        assert status == 200
        metrics = text.splitlines()
        assert [line for line in metrics if line.startswith(
            "kubedra_plugin_cdi_specs_restored_total{")] == [
            'kubedra_plugin_cdi_specs_restored_total{kind="metadata",result="done"} 1.0']
        await _delete_pod(admin_api, ns, "healed")
        await node.unprepared(uid)
    finally:
        plane.stop_component(kubedra.agents.pop(NODE))
        node.start_agent()
