"""Two operators of disjoint pools on one API server (issue 23, item 6): each publishes only the
pools its selector owns (``KUBEDRA_POOL_SELECTOR``), labels their slices so that they match it,
and never writes or deletes the other's slices — also when an inventory of its own is deleted
and one of the other's is changed. A control plane of its own: the session's operator owns
every pool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from bench.scale import free_port
from e2e.harness import scrape
from e2e.harness.kubedra import Kubedra, own_control_plane
from e2e.harness.wait import eventually
from e2e.kube_objects import slices_of

pytestmark = pytest.mark.cluster

INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")
SHARD = "kubedra-test/shard"


@pytest.fixture(scope="module")
async def plane(tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[tuple[Kubedra, ApiClient]]:
    """A control plane with kubedra installed and no operator."""
    async with own_control_plane(tmp_path_factory.mktemp("shards-plane")) as (_, kubedra, api):
        yield kubedra, api


async def _inventory(api: ApiClient, name: str, shard: str, devices: list[str]) -> None:
    await client.CustomObjectsApi(api).create_cluster_custom_object(*INVENTORIES, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name, "labels": {SHARD: shard}},
        "spec": {"driver": "pci.kubedra.io", "allNodes": True, "pool": name,
                 "devices": [{"name": d} for d in devices]}})


def _health(kubedra: Kubedra, port: int) -> dict[str, Any]:
    """The kubedra part of an operator's ``/healthz`` ({} while it does not answer)."""
    try:
        status, body = scrape.get(kubedra.plane, port, "/healthz")
    except OSError:
        return {}
    return dict(json.loads(body).get("kubedra") or {}) if status == 200 else {}


def _shape(slices: list[dict[str, Any]]) -> list[tuple[str, str | None, list[str]]]:
    return [(s["metadata"]["name"], (s["metadata"].get("labels") or {}).get(SHARD),
             [d["name"] for d in s["spec"].get("devices") or []]) for s in slices]


async def test_operators_of_disjoint_selectors_publish_and_delete_only_their_own_pools(
        plane: tuple[Kubedra, ApiClient]) -> None:
    kubedra, api = plane
    await _inventory(api, "pool-a", "a", ["dev-0"])
    await _inventory(api, "pool-a2", "a", ["dev-0"])
    await _inventory(api, "pool-b", "b", ["dev-0", "dev-1"])
    ports = {}
    for shard in ("a", "b"):
        ports[shard] = free_port()
        kubedra.start_operator(liveness_port=ports[shard], leader_elect=False,
                               pool_selector=f"{SHARD}={shard}")

    async def published() -> bool:
        return all([await slices_of(api, n) for n in ("pool-a", "pool-a2", "pool-b")])
    await eventually(published, timeout=90, what="every pool published")
    assert _shape(await slices_of(api, "pool-a")) == [("pool-a-00000", "a", ["dev-0"])]
    assert _shape(await slices_of(api, "pool-b")) == [("pool-b-00000", "b", ["dev-0", "dev-1"])]
    before_b = (await slices_of(api, "pool-b"))[0]["metadata"]

    async def settled() -> dict[str, dict[str, Any]] | None:
        health = {shard: _health(kubedra, port) for shard, port in ports.items()}
        return health if all(h.get("cachesReady") and h.get("inventoriesBusy") == 0
                             and h.get("inventoriesReconciled", 0) >= 1
                             for h in health.values()) else None
    health = await eventually(settled, timeout=60, what="both operators idle")
    assert health is not None
    # one slice write per pool, by the operator that owns it
    assert (health["a"]["sliceWrites"], health["b"]["sliceWrites"]) == (2, 1)

    # an inventory of a's deleted: a withdraws its slice; b's slice stays as it was
    await client.CustomObjectsApi(api).delete_cluster_custom_object(*INVENTORIES, "pool-a2")

    async def withdrawn() -> bool:
        return await slices_of(api, "pool-a2") == []
    await eventually(withdrawn, timeout=90, what="the slice of deleted pool-a2 deleted")
    # b's inventory changed: b republishes it, a does not touch it
    await client.CustomObjectsApi(api).patch_cluster_custom_object(
        *INVENTORIES, "pool-b", {"spec": {"devices": [{"name": "dev-0"}]}},
        _content_type="application/merge-patch+json")

    async def republished() -> bool:
        return _shape(await slices_of(api, "pool-b")) == [("pool-b-00000", "b", ["dev-0"])]
    await eventually(republished, timeout=60, what="pool-b republished by b")
    health = await eventually(settled, timeout=60, what="both operators idle again")
    assert health is not None
    # each device leaving a pool drains first (tainted: one update), then goes (a's delete,
    # b's update without it)
    assert (health["a"]["sliceWrites"], health["b"]["sliceWrites"]) == (4, 3)
    after_b = (await slices_of(api, "pool-b"))[0]["metadata"]
    assert after_b["uid"] == before_b["uid"]  # updated in place, never deleted
    assert _shape(await slices_of(api, "pool-a")) == [("pool-a-00000", "a", ["dev-0"])]
