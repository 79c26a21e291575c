"""``kubectl dra status`` on the local v1.37.2 control plane: the demo's H200 (an agent
replays the real capture), one pod holding the GPU and one too big for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import Kubedra, kubectl
from e2e.harness.wait import eventually
from e2e.kube_objects import create_gpu_pod, pod_claim

pytestmark = pytest.mark.cluster

NODE = "status-h200"
FITS = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0'
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'


@pytest.fixture
def agent(kubedra: Kubedra) -> Iterator[str]:
    """An agent replaying the H200 capture for kwok node ``NODE`` (stopped after)."""
    kubedra.add_node(NODE, {"kubedra.io/gpu": "true"})
    kubedra.start_agent(NODE)
    yield NODE
    kubedra.stop_agent(NODE)


async def test_status_counts_the_demo_gpu_and_groups_the_pending_claim(
        kubedra: Kubedra, agent: str, admin_api: ApiClient, namespace: str) -> None:
    await create_gpu_pod(admin_api, namespace, "trainer", FITS, node=NODE)
    await create_gpu_pod(admin_api, namespace, "too-big", TOO_BIG, node=NODE)
    core = client.CoreV1Api(admin_api)

    async def running() -> bool:
        return bool((await core.read_namespaced_pod("trainer", namespace)).status.phase
                    == "Running")
    await eventually(running, timeout=90, what="trainer pod Running")
    trainer = await pod_claim(admin_api, namespace, "trainer")
    too_big = await eventually(lambda: pod_claim(admin_api, namespace, "too-big"),
                               what="the claim of too-big")
    assert trainer is not None

    async def pool_of_node() -> dict[str, Any] | None:
        found = json.loads(kubectl(kubedra.plane, "dra", "status", "--by", "pool", "-o",
                                   "json"))
        pools = [p for p in found["byPool"] if p["pool"] == NODE]
        return found if pools and pools[0]["devices"][0]["allocated"] else None
    status = await eventually(pool_of_node, timeout=60, what=f"pool {NODE} in status")
    assert (status["apiVersion"], status["kind"]) == ("kubedra.io/v1alpha1", "FleetStatus")
    [pool] = [p for p in status["byPool"] if p["pool"] == NODE]
    assert pool == {"driver": "gpu.kubedra.io", "pool": NODE, "node": NODE, "generation": 1,
                    "slices": 1, "devices": [{
                        "driver": "gpu.kubedra.io", "model": "NVIDIA H200", "profile": None,
                        "published": 1, "allocated": 1, "claims": 1, "free": 0,
                        "unhealthy": 0, "draining": 0, "withdrawn": 0}]}
    name = f"{namespace}/{too_big['metadata']['name']}"
    [group] = [g for g in status["pending"] if name in g["claims"]]
    # on the demo's node the H200 is held; elsewhere no GPU has 141Gi either
    assert (group["verdict"], group["failedAt"]) == ("Unschedulable", "matchRequest")

    text = kubectl(kubedra.plane, "dra", "status", "--by", "node", "--all")
    [line] = [line for line in text.splitlines() if line.startswith(f"{NODE} ")]
    assert line.split() == [NODE, "gpu.kubedra.io", "NVIDIA", "H200", "1", "1", "1", "0", "0",
                            "0", "0"]
