"""Compact MIG inventories on the real API server: the agent reports a MIG node's GPUs by their
``migModels`` entry, the operator publishes the same slices as from the full form, an agent of
the previous version (the full form) is still published, and upgrading it to the compact form
writes no slice. The inventory of an 8-GPU H200 MIG node as the API server sends it
(``managedFields`` included) is at most 20 KB; in the full form it is 210 KB (397 KB while
the agent's managedFields named every field of ``status.discovered``)."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from bench.scale import h200_node, published_slices
from e2e.harness.kubedra import NAMESPACE, Kubedra, kubectl
from e2e.harness.wait import eventually
from e2e.kube_objects import read_inventory, slices_of
from kubedra import kube
from kubedra.api.inventory import agent_lease_name

pytestmark = pytest.mark.cluster

DRIVER = "gpu.kubedra.io"
RECORDED = Path(__file__).resolve().parents[1] / "tests" / "unit" / "data" / "h200-mig"
MAX_LISTED_BYTES = 20_000


def slice_specs(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``devices`` and ``sharedCounters`` of each slice (what ``published_slices`` gives)."""
    return [{k: s["spec"][k] for k in ("devices", "sharedCounters") if s["spec"].get(k)}
            for s in slices]


async def published(api: ApiClient, name: str, devices: int) -> dict[str, Any]:
    """The inventory once the operator has published ``devices`` devices of it."""
    async def ready() -> dict[str, Any] | None:
        obj = await read_inventory(api, name) or {}
        return obj if (obj.get("status") or {}).get("deviceCount") == devices else None
    found: dict[str, Any] = await eventually(ready, timeout=90, what=f"{name}: {devices} devices")
    return found


async def test_the_agent_reports_a_mig_gpu_compactly_and_the_slices_are_as_recorded(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    node = "compact-h200"
    name = f"{node}-{DRIVER}"
    kubedra.add_node(node)
    kubedra.start_agent(node, mig="partitions")
    try:
        obj = await published(admin_api, name, 26)
        discovered = obj["status"]["discovered"]
        assert [(d["name"], d.get("migModel")) for d in discovered["devices"]] == [
            ("gpu-0", "nvidia-h200")]
        assert [m["name"] for m in discovered["migModels"]] == ["nvidia-h200"]
        assert "counterSets" not in discovered
        recorded = json.loads((RECORDED / "slices.json").read_text())
        assert slice_specs(await slices_of(admin_api, name)) == recorded
        listed = kubectl(kubedra.plane, "get", "dinv", name)
        assert listed.split("\n")[1].split()[:4] == [name, DRIVER, node, "26"]
        described = kubectl(kubedra.plane, "describe", "dinv", name)
        assert "Mig Model:  nvidia-h200" in described
        assert re.search(r"Name:\s+MIG 1g\.18gb\n", described)
        assert re.search(r"Memory Size MB:\s+16384\n", described)
    finally:
        kubedra.stop_agent(node)


async def report_as_agent(api: ApiClient, node: str, discovered: dict[str, Any]) -> str:
    """What an agent does for ``node``: its Lease (an hour long, so it needs no renewal
    here), its inventory, and ``status.discovered`` applied as the agent's field manager."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await client.CoordinationV1Api(api).create_namespaced_lease(NAMESPACE, {
        "metadata": {"name": agent_lease_name(node)},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 3600, "renewTime": now}})
    name = f"{node}-{DRIVER}"
    await kube.create_inventory(api, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name}, "spec": {"driver": DRIVER, "nodeName": node}})
    await kube.apply_discovered(api, name, discovered)
    return name


def listed_bytes(kubedra: Kubedra, name: str) -> bytes:
    """The inventory as the API server sends it (``managedFields`` included, no indentation:
    the bytes a list or watch carries)."""
    path = f"/apis/kubedra.io/v1alpha1/deviceinventories/{name}"
    return kubectl(kubedra.plane, "get", "--raw", path).encode()


async def test_upgrading_an_agent_to_the_compact_form_writes_no_slice_and_shrinks_it(
        kubedra: Kubedra, admin_api: ApiClient) -> None:
    node = "upgraded-h200"
    kubedra.add_node(node)
    explicit, compact = h200_node(1, True, "explicit"), h200_node(1, True, "compact")
    name = await report_as_agent(admin_api, node, explicit)
    before = await published(admin_api, name, 208)
    slices = await slices_of(admin_api, name)
    assert slice_specs(slices) == published_slices(node, explicit)
    full_bytes = len(listed_bytes(kubedra, name))
    assert full_bytes > 200_000, full_bytes
    versions = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in slices}

    await kube.apply_discovered(admin_api, name, compact)

    async def recorded() -> bool:  # the operator saw the new report and verified the pool
        obj = await read_inventory(admin_api, name) or {}
        status = obj.get("status") or {}
        return bool((status.get("publishedFrom") or {}).get("inputs")
                    not in (None, before["status"]["publishedFrom"]["inputs"]))
    await eventually(recorded, timeout=60, what="the compact report verified")
    after = await slices_of(admin_api, name)
    assert {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in after} == versions
    listed = listed_bytes(kubedra, name)
    obj = json.loads(listed)
    assert [d["name"] for d in obj["status"]["discovered"]["devices"]] == [
        f"gpu-{i}" for i in range(8)]
    assert obj["status"]["deviceCount"] == 208
    assert len(listed) <= MAX_LISTED_BYTES, len(listed)
    print(f"MIG inventory as listed: full form {full_bytes} B, compact {len(listed)} B")
