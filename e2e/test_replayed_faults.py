"""Faults found by replaying other DRA drivers' public bug reports (issue 16), each on the real
v1.37.2 control plane with kubedra's operator and agents: one bad value of one device, lengths
in bytes, empty counter sets, custom pool names and declared devices at prepare, a stopping or
crashing agent, a CDI spec deleted while its claim stays prepared."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.kubedra import Kubedra
from e2e.harness.realnode import stand_in_devices
from e2e.harness.wait import eventually
from e2e.harness.webhook import AdmissionHook
from e2e.kube_objects import (
    condition,
    create_gpu_pod,
    pod_claim,
    posted_events,
    read_inventory,
    slices_of,
)
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from tests.support.fake_kubelet import Claim, FakeKubelet
from tests.support.h200 import H200_CAPTURE, H200_GPU0, capture_with_second_gpu

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "kubedra.io", "v1alpha1", "deviceinventories"
OPERATOR_USER = "system:serviceaccount:kubedra-system:kubedra-operator"


async def _published(api: ApiClient, name: str, devices: int) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        obj = await read_inventory(api, name)
        ok = (condition(obj, "Published") or {}).get("status") == "True"
        return obj if ok and obj and obj["status"].get("deviceCount") == devices else None
    found: dict[str, Any] = await eventually(ready, timeout=60,
                                             what=f"{name} published with {devices} devices")
    return found


async def _allocated_claim(api: ApiClient, namespace: str, pod: str) -> dict[str, Any]:
    async def allocated() -> dict[str, Any] | None:
        claim = await pod_claim(api, namespace, pod)
        return claim if claim and claim["status"].get("allocation") else None
    found: dict[str, Any] = await eventually(allocated, timeout=60,
                                             what=f"the claim of {pod} allocated")
    return found


async def _prepare(kubedra: Kubedra, node: str, claim: dict[str, Any]) -> Any:
    """NodePrepareResources for ``claim`` over the agent's sockets, as the kubelet calls it."""
    kubelet = FakeKubelet(kubedra.node_dir(node) / "plugins_registry")
    try:
        await kubelet.register()
        meta = claim["metadata"]
        answer = await kubelet.prepare([Claim(meta["namespace"], meta["name"], meta["uid"])])
        return answer.claims[meta["uid"]]
    finally:
        await kubelet.close()


def _static(name: str, devices: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceInventory",
            "metadata": {"name": name},
            "spec": {"driver": "pci.kubedra.io", "allNodes": True, "pool": name, "devices": [
                {"name": f"dev-{i}", "attributes": {"lost": {"bool": True}}}
                for i in range(devices)]}}


def _taints(obj: dict[str, Any]) -> dict[str, list[str]]:
    return {d["name"]: [t["key"] for t in d.get("taints") or []]
            for d in obj["spec"].get("devices") or []}


async def test_a_slice_deleted_right_after_the_operators_update_is_recreated(
        kubedra: Kubedra, admin_api: ApiClient, tmp_path: Path) -> None:
    """Item 1: an override adds a taint, the operator updates the slice, and the slice is
    deleted before the operator sees its own update. The order is fixed by an admission
    webhook on the operator's slice update: it pauses the operator (SIGSTOP) before admitting
    the update, the test deletes the slice once the update is stored, then resumes the
    operator, which gets the answer to its update and, on its watch, the update and the
    delete together. The operator used to keep its write in its cache for good: the slice was
    never recreated, the status claimed it, and the next change failed with 404. Now it is
    recreated, the status names only slices that exist, and the next change is published."""
    custom, resource = client.CustomObjectsApi(admin_api), client.ResourceV1Api(admin_api)
    name = "lost"
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, _static(name, 2))
    await _published(admin_api, name, 2)
    [published] = await slices_of(admin_api, name)
    operator = kubedra.operator
    assert operator is not None
    paused: list[str] = []

    def pause(request: dict[str, Any]) -> None:
        if not paused and request["userInfo"]["username"] == OPERATOR_USER:
            os.kill(operator.pid, signal.SIGSTOP)
            paused.append(request["name"])

    async def stored() -> bool:
        slices = await slices_of(admin_api, name)
        return bool(paused) and [_taints(s) for s in slices] == [
            {"dev-0": ["first"], "dev-1": []}]

    rule = {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"],
            "resources": ["resourceslices"]}
    try:
        async with AdmissionHook(kubedra.plane, tmp_path, rule, pause,
                                 {"kubedra.io/inventory": name}):
            await custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, [
                {"op": "add", "path": "/spec/overrides", "value": [
                    {"device": "dev-0", "taints": [{"key": "first", "effect": "NoSchedule"}]}]}])
            await eventually(stored, timeout=30, what="the operator's update stored")
            await resource.delete_resource_slice(published["metadata"]["name"])
    finally:
        os.kill(operator.pid, signal.SIGCONT)
    assert paused == [published["metadata"]["name"]]

    async def recreated() -> list[dict[str, Any]] | None:
        slices = await slices_of(admin_api, name)
        return slices if [_taints(s) for s in slices] == [
            {"dev-0": ["first"], "dev-1": []}] else None
    [again] = await eventually(recreated, timeout=30, what="the deleted slice recreated")
    assert again["metadata"]["uid"] != published["metadata"]["uid"]
    inventory = await read_inventory(admin_api, name)
    assert inventory is not None
    assert inventory["status"]["slices"] == [again["metadata"]["name"]]

    await custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, [
        {"op": "add", "path": "/spec/overrides/0/taints/-",
         "value": {"key": "second", "effect": "NoSchedule"}}])

    async def next_change() -> bool:
        slices = await slices_of(admin_api, name)
        return [_taints(s) for s in slices] == [{"dev-0": ["first", "second"], "dev-1": []}]
    await eventually(next_change, timeout=30, what="the next change published")
    condition_now = condition(await read_inventory(admin_api, name), "Published") or {}
    assert condition_now.get("status") == "True", condition_now
    # an allNodes pool is seen by every other test's claims: leave none behind
    await custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def stand_in_root(kubedra: Kubedra, node: str) -> Path:
    """A device root with stand-ins for the H200's device nodes, for the agent of kwok node
    ``node``: this machine has no /dev/nvidia0, and the agent refuses to prepare a claim whose
    CDI device nodes do not exist (the runtime would refuse the container)."""
    root = kubedra.node_dir(node) / "host"
    stand_in_devices(root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
    return root


async def test_a_70_character_product_name_costs_only_its_gpu(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str, tmp_path: Path) -> None:
    """Item 2: a capture whose second GPU has a 70-character product name. gpu-0 is reported,
    published and prepared; gpu-1 is named in the inventory (status.discovered.rejected, the
    Published condition and a Warning Event) with the field; the plugin serves."""
    capture = capture_with_second_gpu(tmp_path / "capture", "NVIDIA " + "H" * 63)
    kubedra.add_node("lname")
    kubedra.start_agent("lname", backend=f"snapshot:{capture}",
                        device_root=stand_in_root(kubedra, "lname"))
    name = "lname-gpu.kubedra.io"
    inventory = await _published(admin_api, name, 1)
    refused = ("devices[gpu-1].attributes[productName].string",
               "70 bytes (70 characters); the API server allows at most 64 bytes")
    discovered = inventory["status"]["discovered"]
    assert [d["name"] for d in discovered["devices"]] == ["gpu-0"]
    assert discovered["rejected"] == [{"name": "gpu-1", "field": refused[0],
                                       "message": refused[1]}]
    published = condition(inventory, "Published")
    assert published is not None
    assert (published["status"], published["reason"]) == ("True", "DevicesLeftOut")
    assert published["message"] == (
        "1 device in 1 ResourceSlice (pool lname, generation 1); left out, as the API "
        f"server would refuse them: gpu-1 ({refused[0]}: {refused[1]})")
    events = await posted_events(admin_api, "default",
                                 f"involvedObject.name={name},reason=DevicesLeftOut")
    assert [e.type for e in events] == ["Warning"]
    [published_slice] = await slices_of(admin_api, name)
    assert [d["name"] for d in published_slice["spec"]["devices"]] == ["gpu-0"]

    await create_gpu_pod(admin_api, namespace, "good-gpu", 'device.driver == "gpu.kubedra.io"',
                         node="lname")
    claim = await _allocated_claim(admin_api, namespace, "good-gpu")
    answer = await _prepare(kubedra, "lname", claim)
    assert answer.error == ""
    assert [d.device_name for d in answer.devices] == ["gpu-0"]
    kubedra.stop_agent("lname")


async def test_a_capture_without_gpus_says_why_the_pool_is_empty(
        kubedra: Kubedra, admin_api: ApiClient, tmp_path: Path) -> None:
    """Item 7 (NVIDIA dra-driver#1008 shape): a capture with no GPUs. The pool is published
    empty, and the Published condition (reason EmptyPool) and a Warning Event say which
    backend found nothing with which settings."""
    capture = tmp_path / "capture"
    shutil.copytree(H200_CAPTURE, capture)
    document = json.loads((capture / "nvml.json").read_text())
    document["devices"] = []
    (capture / "nvml.json").write_text(json.dumps(document))
    kubedra.add_node("nogpu")
    kubedra.start_agent("nogpu", backend=f"snapshot:{capture}")
    name = "nogpu-gpu.kubedra.io"
    inventory = await _published(admin_api, name, 0)
    published = condition(inventory, "Published")
    assert published is not None
    assert (published["status"], published["reason"], published["message"]) == (
        "True", "EmptyPool",
        "0 devices in 1 ResourceSlice (pool nogpu, generation 1): the node agent's discovery "
        "backend snapshot found no devices (discovery.mig: none), and spec.devices declares "
        "none")
    events = await posted_events(admin_api, "default",
                                 f"involvedObject.name={name},reason=EmptyPool")
    assert [e.type for e in events] == ["Warning"]
    kubedra.stop_agent("nogpu")


@pytest.mark.parametrize(("field", "value", "path", "message"), [
    ("attributes", {"model": {"string": "é" * 33}},
     "spec.devices[1].attributes[model].string", "may not be more than 64 bytes"),
    ("attributes", {"tags": {"strings": []}},
     "spec.devices[1].attributes.tags.strings", "should have at least 1 items"),
    ("consumesCounters", [{"counterSet": "cs-0", "counters": {}}],
     "spec.devices[1].consumesCounters[0].counters", "should have at least 1 properties"),
])
async def test_values_the_api_server_refuses_in_a_slice_are_refused_at_admission(
        kubedra: Kubedra, admin_api: ApiClient, field: str, value: Any, path: str,
        message: str) -> None:
    """Items 3 and 4: ``model`` = 33 times "é" (33 characters, 66 bytes) and an empty counter map
    passed admission and cost every device of the slice; the CRD now counts bytes and
    requires counters, as the API server does for a ResourceSlice."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceInventory",
            "metadata": {"name": "refused"},
            "spec": {"driver": "pci.kubedra.io", "allNodes": True, "devices": [
                {"name": "dev-0", "attributes": {"model": {"string": "ok"}}},
                {"name": "dev-1", field: value}]}}
    with pytest.raises(ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            GROUP, VERSION, PLURAL, body)
    assert refused.value.status == 422
    assert path in refused.value.body
    assert message in refused.value.body


async def test_an_empty_counter_set_is_refused_at_admission(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    """Item 4: ``counterSets: [{name: cs-0, counters: {}}]`` beside an unrelated ``dev-0``."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceInventory",
            "metadata": {"name": "empty-counters"},
            "spec": {"driver": "pci.kubedra.io", "allNodes": True,
                     "counterSets": [{"name": "cs-0", "counters": {}}],
                     "devices": [{"name": "dev-0"}]}}
    with pytest.raises(ApiException) as refused:
        await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
            GROUP, VERSION, PLURAL, body)
    assert refused.value.status == 422
    assert "spec.counterSets[0].counters: Invalid value" in refused.value.body


async def test_declared_devices_of_a_custom_pool_are_prepared(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    """Items 5 and 6: a node inventory with ``spec.pool: dx-shard`` and a declared ``nic-0``,
    an agent with ``--backend static``: the scheduler allocates ``dx-shard/nic-0`` and the
    agent prepares it (no device node; ``KUBEDRA_DEVICES=nic-0``)."""
    node = "shard-node"
    kubedra.add_node(node)
    await client.CustomObjectsApi(admin_api).create_cluster_custom_object(
        GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceInventory",
            "metadata": {"name": f"{node}-pci.kubedra.io"},
            "spec": {"driver": "pci.kubedra.io", "nodeName": node, "pool": "dx-shard",
                     "devices": [{"name": "nic-0", "attributes": {"speed": {"string": "100G"}}}]}})
    kubedra.start_agent(node, backend="static", driver="pci.kubedra.io")
    await _published(admin_api, f"{node}-pci.kubedra.io", 1)
    await create_gpu_pod(admin_api, namespace, "nic-user",
                         'device.attributes["pci.kubedra.io"].?speed.orValue("") == "100G"',
                         device_class="pci.kubedra.io", node=node)
    claim = await _allocated_claim(admin_api, namespace, "nic-user")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("dx-shard", "nic-0")
    uid = claim["metadata"]["uid"]
    answer = await _prepare(kubedra, node, claim)
    assert answer.error == ""
    assert [(d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in answer.devices] == [
        ("dx-shard", "nic-0", [f"pci.kubedra.io/claim={uid}-nic-0",
                               f"pci.kubedra.io/metadata={uid}_gpu"])]  # KEP-5304 metadata
    spec = json.loads((kubedra.node_dir(node) / "cdi" / f"pci.kubedra.io-claim_{uid}.json")
                      .read_text())
    assert spec["devices"][0]["containerEdits"] == {"env": ["KUBEDRA_DEVICES=nic-0"]}

    async def prepared() -> bool:
        current = await pod_claim(admin_api, namespace, "nic-user")
        entries = (current or {}).get("status", {}).get("devices") or []
        return any(c["type"] == "Prepared" and c["status"] == "True"
                   for e in entries if e["pool"] == "dx-shard" for c in e["conditions"])
    await eventually(prepared, timeout=30, what="Prepared on dx-shard/nic-0")
    kubedra.stop_agent(node)


async def test_a_cdi_spec_deleted_while_prepared_is_written_again(
        kubedra: Kubedra, admin_api: ApiClient, namespace: str) -> None:
    """Item 9: the running agent notices within ``--cdi-check-interval`` seconds that a
    prepared claim's CDI spec is gone and writes it again, the same."""
    node = "cdi-node"
    kubedra.add_node(node)
    kubedra.start_agent(node, cdi_check_interval=1.0, device_root=stand_in_root(kubedra, node))
    await _published(admin_api, f"{node}-gpu.kubedra.io", 1)
    await create_gpu_pod(admin_api, namespace, "cdi-user", 'device.driver == "gpu.kubedra.io"',
                         node=node)
    claim = await _allocated_claim(admin_api, namespace, "cdi-user")
    assert (await _prepare(kubedra, node, claim)).error == ""
    spec = kubedra.node_dir(node) / "cdi" / f"gpu.kubedra.io-claim_{claim['metadata']['uid']}.json"
    written = spec.read_text()
    spec.unlink()

    async def back() -> bool:
        return spec.exists()
    await eventually(back, timeout=30, what="the CDI spec written again")
    assert spec.read_text() == written
    log = kubedra.plane.logs / f"kubedra-agent-{node}.log"

    async def logged() -> bool:  # the agent logs just after the write
        return "a file of a prepared claim was missing; written again" in log.read_text()
    await eventually(logged, timeout=10, what="the agent's log line of the rewrite")
    kubedra.stop_agent(node)


async def _withdrawn_after(admin_api: ApiClient, name: str, since: float) -> float:
    """Seconds from ``since`` (time.monotonic) until the pool of ``name`` is withdrawn."""
    async def withdrawn() -> bool:
        obj = await read_inventory(admin_api, name)
        return (condition(obj, "Published") or {}).get("reason") == "AgentLeaseExpired"
    await eventually(withdrawn, timeout=90, interval=0.1, what=f"{name} withdrawn")
    return time.monotonic() - since


async def test_a_stopping_agent_gives_its_lease_up_and_a_crash_is_bounded(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    """Item 8: on SIGTERM the agent gives its Lease up and the pool is withdrawn within
    seconds, though the Lease would be valid for 40 s more; after SIGKILL it is withdrawn when
    the Lease expires: between 2/3 of ``--lease-duration`` (the last renewal came up to a
    third before the crash) and the duration plus the operator's lease check interval (1 s
    here), with a few seconds of slack for a busy machine."""
    node, name = "stop-node", "stop-node-gpu.kubedra.io"
    kubedra.add_node(node)
    kubedra.start_agent(node, lease_duration=40)
    await _published(admin_api, name, 1)
    stopped = time.monotonic()
    kubedra.stop_agent(node)
    clean = await _withdrawn_after(admin_api, name, stopped)
    assert clean < 10, f"withdrawn {clean:.1f} s after a clean stop"
    log = (kubedra.plane.logs / f"kubedra-agent-{node}.log").read_text()
    assert "lease released" in log

    kubedra.start_agent(node, lease_duration=6)
    await _published(admin_api, name, 1)
    crashed = time.monotonic()
    kubedra.stop_agent(node, crash=True)
    after_crash = await _withdrawn_after(admin_api, name, crashed)
    print(f"withdrawn {clean:.1f} s after SIGTERM, {after_crash:.1f} s after SIGKILL "
          "(lease 6 s, check interval 1 s)")
    assert 6 * 2 / 3 - 0.5 <= after_crash <= 6 + 1 + 5, after_crash
    kubedra.start_agent(node, lease_duration=40)
    back = await _published(admin_api, name, 1)
    assert back["status"]["discovered"]["devices"] == [H200_GPU0]
    kubedra.stop_agent(node)
