"""MIG partitions on the real scheduler (v1.37.2, or ``KUBE_VERSION``'s where it keeps shared
counters), with the H200 capture (issue: MIG partitions the scheduler can never double-book).
Every outcome below follows from the placement table in hardware/nvidia-h200/mig_placements.json
and the counters kubedra publishes; kube-scheduler's first-fit order is by device name within
the pool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e import kube_objects
from e2e.harness.kubedra import Kubedra, kubectl
from e2e.harness.wait import eventually
from e2e.kube_objects import claim_events, condition, create_gpu_pod, pod_claim, read_inventory
from kubedra.publishing.features import COUNTERS_OFF, ServedFeatures

pytestmark = pytest.mark.cluster

NODE = "mig-h200"
INVENTORY = f"{NODE}-gpu.kubedra.io"
COUNTERS_OFF_SKIP = ("this cluster does not keep shared counters (DRAPartitionableDevices is "
                     "off): MIG partitions are left out and the GPU published whole, as the "
                     "inventory's DevicesLeftOut condition says (asserted)")
"""Why MIG tests are skipped on 1.34 and 1.35 (after :func:`left_out_without_counters`)."""


def profile(name: str) -> str:
    """A selector for one MIG profile."""
    return f'device.attributes["gpu.kubedra.io"].profile == "{name}"'


@pytest.fixture(scope="module")
async def mig_node(kubedra: Kubedra, admin_api: ApiClient, served: ServedFeatures
                   ) -> AsyncIterator[None]:
    """An H200 node whose inventory publishes MIG partitions: its agent creates the
    inventory with them on (``KUBEDRA_MIG=partitions``, the ``mig-partitions`` component).
    Where the cluster drops shared counters (1.34, 1.35) every test here is skipped, once the
    inventory is shown to publish the GPU whole and to say why its partitions are not."""
    kubedra.add_node(NODE)
    kubedra.start_agent(NODE, mig="partitions")
    if not served.partitionable_devices:
        try:
            assert await left_out_without_counters(admin_api, INVENTORY, NODE) == 1
        finally:
            kubedra.stop_agent(NODE)
        pytest.skip(COUNTERS_OFF_SKIP)

    async def published() -> bool:
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return bool(status.get("deviceCount") == 26)
    await eventually(published, timeout=60, what="26 devices published")
    inventory = await read_inventory(admin_api, INVENTORY) or {}
    assert inventory["spec"]["discovery"] == {"mig": "partitions"}
    yield
    kubedra.stop_agent(NODE)


async def left_out_without_counters(api: ApiClient, inventory: str, pool: str) -> int:
    """The inventory of a GPU with MIG partitions on a cluster that drops shared counters: the
    whole GPU is published without its counters, its 25 partitions and the counter set are
    left out, named with why. Returns the pool's generation the condition names."""
    async def left_out() -> dict[str, Any] | None:
        found = condition(await read_inventory(api, inventory), "Published")
        return found if found and found["reason"] == "DevicesLeftOut" else None
    published = await eventually(left_out, timeout=60, what="DevicesLeftOut")
    status = (await read_inventory(api, inventory) or {})["status"]
    why = f"consumesCounters: {COUNTERS_OFF}"
    assert published["message"].startswith(
        f"1 device in 1 ResourceSlice (pool {pool}, generation {status['pool']['generation']}); "
        "left out, as the API server would refuse them: gpu-0-mig-1g18gb-me-s0 "
        f"(devices[gpu-0-mig-1g18gb-me-s0].{why}); gpu-0-mig-1g18gb-me-s1 "
        f"(devices[gpu-0-mig-1g18gb-me-s1].{why}); ")
    assert published["message"].endswith("; and 16 more")
    assert status["deviceCount"] == 1
    [gpu] = (await kube_objects.slices_of(api, inventory))[0]["spec"]["devices"]
    assert gpu["name"] == "gpu-0"
    assert "consumesCounters" not in gpu
    generation: int = status["pool"]["generation"]
    return generation


@pytest.fixture
async def gpu_free(mig_node: None, admin_api: ApiClient, namespace: str) -> AsyncIterator[str]:
    """A namespace to create pods in; the GPU is entirely free at the start."""
    async def free() -> bool:
        status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
        return bool(status.get("allocatedCount") == 0)
    await eventually(free, timeout=60, what="no device of the GPU allocated")
    yield namespace
    core = client.CoreV1Api(admin_api)
    for pod in (await core.list_namespaced_pod(namespace)).items:
        await core.delete_namespaced_pod(pod.metadata.name, namespace)


async def allocated_device(api: ApiClient, namespace: str, pod: str) -> str:
    """Wait until ``pod`` runs and return the device its claim got."""
    async def device() -> str | None:
        obj = await client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
        if obj.status.phase != "Running":
            return None
        claim = await pod_claim(api, namespace, pod)
        results = ((claim or {}).get("status", {}).get("allocation") or {}).get(
            "devices", {}).get("results") or []
        return str(results[0]["device"]) if results else None
    found: str = await eventually(device, timeout=60, what=f"{pod} running with a device")
    return found


async def stays_pending(api: ApiClient, namespace: str, pod: str) -> None:
    """Wait until the scheduler reports ``pod`` unschedulable because of its claims."""
    async def unschedulable() -> Any:
        obj = await client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
        return next((c for c in obj.status.conditions or [] if c.type == "PodScheduled"
                     and c.status == "False" and "cannot allocate all claims" in c.message),
                    None)
    await eventually(unschedulable, timeout=60, what=f"{pod} unschedulable")
    assert (await client.CoreV1Api(api).read_namespaced_pod(pod, namespace)).spec.node_name \
        is None


async def test_seven_1g18gb_fit_and_an_eighth_stays_pending_and_blocks_7g(
        admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    devices = []
    for i in range(7):
        await create_gpu_pod(admin_api, ns, f"small-{i}", profile("1g.18gb"),
                             device_class="mig.gpu.kubedra.io", node=NODE)
        devices.append(await allocated_device(admin_api, ns, f"small-{i}"))
    assert sorted(devices) == [f"gpu-0-mig-1g18gb-s{s}" for s in range(7)]
    await create_gpu_pod(admin_api, ns, "small-7", profile("1g.18gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(admin_api, ns, "small-7")
    # with any 1g.18gb allocated, the 7g.141gb (all 8 memory slices) cannot be
    core = client.CoreV1Api(admin_api)
    for i in range(1, 8):
        await core.delete_namespaced_pod(f"small-{i}", ns)
    await create_gpu_pod(admin_api, ns, "full", profile("7g.141gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(admin_api, ns, "full")


async def test_two_3g71gb_fit(admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    for i in range(2):
        await create_gpu_pod(admin_api, ns, f"half-{i}", profile("3g.71gb"),
                             device_class="mig.gpu.kubedra.io", node=NODE)
    assert {await allocated_device(admin_api, ns, "half-0"),
            await allocated_device(admin_api, ns, "half-1")} == {
        "gpu-0-mig-3g71gb-s0", "gpu-0-mig-3g71gb-s4"}


async def test_4g71gb_and_3g71gb_fit_only_at_starts_0_and_4(
        admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    await create_gpu_pod(admin_api, ns, "four", profile("4g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "four") == "gpu-0-mig-4g71gb-s0"
    await create_gpu_pod(admin_api, ns, "three", profile("3g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "three") == "gpu-0-mig-3g71gb-s4"
    # the GPU's 7 compute slices are now all taken: not even a 1g.18gb fits
    await create_gpu_pod(admin_api, ns, "one-more", profile("1g.18gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(admin_api, ns, "one-more")


async def test_whole_gpu_excludes_every_partition(admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    await create_gpu_pod(admin_api, ns, "whole", "true", node=NODE)
    assert await allocated_device(admin_api, ns, "whole") == "gpu-0"
    await create_gpu_pod(admin_api, ns, "any-mig", "true", device_class="mig.gpu.kubedra.io",
                         node=NODE)
    await stays_pending(admin_api, ns, "any-mig")


async def test_a_partition_excludes_the_whole_gpu(admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    await create_gpu_pod(admin_api, ns, "tiny", profile("1g.18gb+me"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "tiny") == "gpu-0-mig-1g18gb-me-s0"
    await create_gpu_pod(admin_api, ns, "whole", "true", node=NODE)
    await stays_pending(admin_api, ns, "whole")
    # only one media-extension partition at a time (one OFA engine)
    await create_gpu_pod(admin_api, ns, "tiny-2", profile("1g.18gb+me"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(admin_api, ns, "tiny-2")


async def test_a_disabled_but_allocated_partition_still_blocks_overlapping_ones(
        admin_api: ApiClient, gpu_free: str) -> None:
    """Disabling an allocated partition must not free its memory slices for another one."""
    ns = gpu_free
    await create_gpu_pod(admin_api, ns, "four", profile("4g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "four") == "gpu-0-mig-4g71gb-s0"
    custom = client.CustomObjectsApi(admin_api)
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY,
        {"spec": {"overrides": [{"device": "gpu-0-mig-4g71gb-s0", "disabled": True}]}},
        _content_type="application/merge-patch+json")

    async def draining() -> bool:
        ready = condition(await read_inventory(admin_api, INVENTORY), "Published") or {}
        return "gpu-0-mig-4g71gb-s0 (disabled)" in ready.get("message", "")
    await eventually(draining, what="the disabled partition kept while allocated")
    # 3g.71gb at start 0 overlaps the 4g's memory slices 0-3: only start 4 is possible
    await create_gpu_pod(admin_api, ns, "three", profile("3g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "three") == "gpu-0-mig-3g71gb-s4"
    await create_gpu_pod(admin_api, ns, "three-more", profile("3g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(admin_api, ns, "three-more")
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY, {"spec": {"overrides": None}},
        _content_type="application/merge-patch+json")


async def small_runs_and_full_pends(api: ApiClient, ns: str) -> tuple[str, str]:
    """Pod ``small`` gets a 1g.18gb partition, pod ``full`` (7g.141gb) stays pending; returns
    the names of their claims."""
    await create_gpu_pod(api, ns, "small", profile("1g.18gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(api, ns, "small") == "gpu-0-mig-1g18gb-s0"
    small = (await pod_claim(api, ns, "small") or {})["metadata"]["name"]
    await create_gpu_pod(api, ns, "full", profile("7g.141gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    await stays_pending(api, ns, "full")
    full = (await pod_claim(api, ns, "full") or {})["metadata"]["name"]
    return small, full


async def test_explain_names_the_counter_that_ran_out(
        kubedra: Kubedra, admin_api: ApiClient, gpu_free: str) -> None:
    ns = gpu_free
    small, full = await small_runs_and_full_pends(admin_api, ns)

    async def explained() -> list[dict[str, Any]]:
        return await claim_events(admin_api, ns, full, "CannotAllocate")
    events = await eventually(explained, timeout=60, what="CannotAllocate Event on the claim")
    holder = f"gpu-0-mig-1g18gb-s0 of claim {ns}/{small} (request gpu)"
    reason = ("gpu-0-mig-7g141gb-s0 on mig-h200 needs more of counter set gpu-0-counters than "
              "is left: compute-slices (needs 7, 6 left), copy-engines (needs 8, 7 left), "
              "decoders (needs 7, 6 left), jpeg-engines (needs 7, 6 left), memory-slice-0 "
              f"(needs 1, 0 left); in use by {holder}")
    message = ("cannot be allocated: mig-h200: request gpu: 0 of 1 devices have the shared "
               f"counters left (1 needed): {reason}")
    assert [e["message"] for e in events] == [message]

    explanation = json.loads(kubectl(kubedra.plane, "dra", "explain", "resourceclaim", full,
                                     "-n", ns, "-o", "json"))
    [candidate] = explanation["candidates"]
    [request] = candidate["requests"]
    assert (candidate["node"], request["failedAt"]) == (NODE, "counters")
    # "devices" also counts the allNodes pools other tests publish: not compared
    assert request["funnel"]["devices"] >= 26
    assert {k: v for k, v in request["funnel"].items() if k != "devices"} == {
        "inClass": 25, "matchRequest": 1, "free": 1, "capacity": 1, "counters": 0,
        "untainted": 0}
    [device] = request["devices"]
    assert (device["device"], device["check"], device["reason"]) == (
        "gpu-0-mig-7g141gb-s0", "counters", reason)
    assert [(c["counter"], c["needed"], c["left"], c["heldBy"]) for c in device["counters"]
            if c["counterSet"] == "gpu-0-counters"] == [
        ("compute-slices", "7", "6", [holder]), ("copy-engines", "8", "7", [holder]),
        ("decoders", "7", "6", [holder]), ("jpeg-engines", "7", "6", [holder]),
        ("memory-slice-0", "1", "0", [holder])]


async def test_explain_from_a_dump_is_the_live_explanation(
        kubedra: Kubedra, admin_api: ApiClient, gpu_free: str, tmp_path: Path,
        served: ServedFeatures) -> None:
    ns = gpu_free
    _small, full = await small_runs_and_full_pends(admin_api, ns)
    ours, kubectls = tmp_path / "dump.yaml", tmp_path / "kubectl"
    kubectl(kubedra.plane, "dra", "dump", "-o", str(ours))
    kubectls.mkdir()
    # kubectl fails on a type the server does not serve: DeviceTaintRule before 1.37 (its gate
    # is off by default; kubectl get exited 1 on v1.36.3)
    rules = "devicetaintrules," if served.device_taint_rules else ""
    (kubectls / "all.yaml").write_text(kubectl(
        kubedra.plane, "get", f"resourceslices,deviceclasses,{rules}resourceclaims,nodes,pods",
        "-A", "-o", "yaml"))
    explain = ["dra", "explain", "resourceclaim", full, "-n", ns]
    live = kubectl(kubedra.plane, *explain)
    assert "Verdict:        Unschedulable\n" in live
    assert kubectl(kubedra.plane, *explain, "--from", str(ours)) == live
    assert kubectl(kubedra.plane, *explain, "--from", str(kubectls)) == live
    live_json = kubectl(kubedra.plane, *explain, "-o", "json")
    assert kubectl(kubedra.plane, *explain, "-o", "json", "--from", str(ours)) == live_json
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "one-more", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "mig.gpu.kubedra.io",
            "selectors": [{"cel": {"expression": profile("1g.18gb")}}]}}]}}}))
    simulate = ["dra", "simulate", "-f", str(claim), "--node", NODE]
    assert kubectl(kubedra.plane, *simulate, "--from", str(ours)) == \
        kubectl(kubedra.plane, *simulate)
    dumped = yaml.safe_load(ours.read_text())
    kinds = {item["kind"] for item in dumped["items"]}
    assert kinds <= {"ResourceSlice", "DeviceClass", "DeviceTaintRule", "ResourceClaim", "Node",
                     "Pod"}
    [pod] = [i for i in dumped["items"] if i["kind"] == "Pod" and i["metadata"]["name"] == "full"]
    assert set(pod["spec"]) == {"nodeSelector", "resourceClaims"}
    assert "containers" not in ours.read_text()


@pytest.mark.usefixtures("gpu_free")
async def test_simulate_counts_the_copies_that_fit(kubedra: Kubedra, tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "small"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "mig.gpu.kubedra.io",
            "selectors": [{"cel": {"expression": profile("1g.18gb")}}]}}]}}}}))
    found = json.loads(kubectl(kubedra.plane, "dra", "simulate", "-f", str(template),
                               "--node", NODE, "-o", "json"))
    assert found["copies"]["byNode"] == {NODE: 7}
    assert [a["devices"][0]["device"] for a in found["copies"]["allocations"]] == [
        f"gpu-0-mig-1g18gb-s{start}" for start in range(7)]
    assert found["message"] == "7 copies fit in the cluster now (mig-h200: 7)"
    whole = tmp_path / "whole.yaml"
    whole.write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "whole", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.kubedra.io"}}]}}}))
    found = json.loads(kubectl(kubedra.plane, "dra", "simulate", "-f", str(whole),
                               "--node", NODE, "-o", "json"))
    assert found["copies"]["allocations"] == [{"node": NODE, "devices": [
        {"request": "gpu", "driver": "gpu.kubedra.io", "pool": NODE, "device": "gpu-0"}]}]


async def test_switching_mig_off_keeps_an_allocated_partition_exclusive(
        admin_api: ApiClient, gpu_free: str) -> None:
    """With MIG partitions switched off while one is allocated, the whole GPU must not be
    handed out: the held partition stays published, and the GPU keeps consuming its counters."""
    ns = gpu_free
    await create_gpu_pod(admin_api, ns, "part", profile("3g.71gb"),
                         device_class="mig.gpu.kubedra.io", node=NODE)
    assert await allocated_device(admin_api, ns, "part") == "gpu-0-mig-3g71gb-s0"
    custom = client.CustomObjectsApi(admin_api)
    await custom.patch_cluster_custom_object(
        "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY,
        {"spec": {"discovery": {"mig": "none"}}}, _content_type="application/merge-patch+json")
    try:
        async def whole_gpu_only() -> bool:
            ready = condition(await read_inventory(admin_api, INVENTORY), "Published") or {}
            return "gpu-0-mig-3g71gb-s0 (gone)" in ready.get("message", "")
        await eventually(whole_gpu_only, timeout=60, what="partitions dropped, s0 kept")
        await create_gpu_pod(admin_api, ns, "whole", "true", node=NODE)
        await stays_pending(admin_api, ns, "whole")
    finally:
        await custom.patch_cluster_custom_object(
            "kubedra.io", "v1alpha1", "deviceinventories", INVENTORY,
            {"spec": {"discovery": {"mig": "partitions"}}},
            _content_type="application/merge-patch+json")

        async def partitions_back() -> bool:
            status = (await read_inventory(admin_api, INVENTORY) or {}).get("status") or {}
            return bool(status.get("deviceCount") == 26)
        await eventually(partitions_back, timeout=60, what="partitions published again")
