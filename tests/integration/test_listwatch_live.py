"""The lean Node cache (:mod:`kubedra.controller.listwatch`, :mod:`kubedra.controller.nodes`)
against the real API server: the streaming list, heartbeats that cost no change, labels and
deletes reported once, the server-side selector as the set of objects owned, and the
fallback to pages on a server without the streaming list."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.wait import eventually
from kubedra.controller.listwatch import ListWatch
from kubedra.controller.nodes import NODE_DECODER, NODES_PATH
from kubedra.kube import make_api_client, serves_streaming_list

pytestmark = pytest.mark.cluster

HEARTBEATS = 20

Change = tuple[str, object, object]


@pytest.fixture
async def shard(admin_api: ApiClient) -> AsyncIterator[str]:
    """A label value no other test's Node has; the test's Nodes are deleted after it."""
    value = uuid.uuid4().hex[:8]
    yield value
    core = client.CoreV1Api(admin_api)
    await core.delete_collection_node(label_selector=f"listwatch-test={value}")


async def _create_node(api: ApiClient, name: str, labels: dict[str, str]) -> None:
    await client.CoreV1Api(api).create_node({"metadata": {"name": name, "labels": labels}})


async def _heartbeat(api: ApiClient, name: str, count: int) -> None:
    """What a kubelet's status update does: a new heartbeat on the Ready condition (the
    message counts, so that two in one second are two updates)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await client.CoreV1Api(api).patch_node_status(name, {"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": "Test", "message": f"heartbeat {count}",
        "lastHeartbeatTime": now, "lastTransitionTime": now}]}})


async def test_heartbeats_change_nothing_and_labels_and_deletes_are_reported_once(
        admin_api: ApiClient, shard: str) -> None:
    selector = f"listwatch-test={shard}"
    mine, other = f"lw-{shard}-a", f"lw-{shard}-b"
    await _create_node(admin_api, mine, {"listwatch-test": shard})
    await _create_node(admin_api, other, {"listwatch-test": "someone-else"})
    changes: list[Change] = []
    cache = ListWatch(admin_api, NODES_PATH, NODE_DECODER,
                      lambda *change: changes.append(change), selector=selector)
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.synced.wait(), timeout=30)
        assert cache.streaming is True  # v1.37.2 serves the streaming list
        record = cache.get(mine)
        assert record is not None
        assert record["metadata"]["labels"] == {"listwatch-test": shard}
        assert list(cache.records) == [mine]  # the selector: the other Node is not ours
        assert [c[0] for c in changes] == [mine]
        changes.clear()

        for count in range(HEARTBEATS):
            await _heartbeat(admin_api, mine, count)

        async def all_seen() -> bool:
            return cache.counters.events >= HEARTBEATS
        await eventually(all_seen, timeout=30, what=f"{HEARTBEATS} heartbeat events")
        assert changes == []  # (the node lifecycle controller's taints are events too)
        assert cache.get(mine) is record  # the very same cached object

        await client.CoreV1Api(admin_api).patch_node(
            mine, {"metadata": {"labels": {"zone": "a"}}})

        async def relabelled() -> list[Change]:
            return changes
        await eventually(relabelled, timeout=30, what="the label change")
        assert changes == [(mine, record, {"metadata": {
            "name": mine, "uid": record["metadata"]["uid"],
            "labels": {"listwatch-test": shard, "zone": "a"}}})]
        changes.clear()

        # leaving the selector is leaving the set: reported as removed
        await client.CoreV1Api(admin_api).patch_node(
            mine, {"metadata": {"labels": {"listwatch-test": "moved"}}})
        await eventually(relabelled, timeout=30, what="the Node leaving the selector")
        assert [(name, after) for name, _before, after in changes] == [(mine, None)]
        assert cache.records == {}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await client.CoreV1Api(admin_api).delete_node(other)
    await client.CoreV1Api(admin_api).delete_node(mine)


async def test_without_the_streaming_list_the_cache_lists_in_pages(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A server with ``WatchList`` off (as v1.33 ships): the probe says so, and the cache
    lists in pages (of 2 here: three pages for five Nodes) and is complete."""
    plane = ControlPlane(tmp_path_factory.mktemp("no-watchlist-plane"),
                         apiserver_args=["--feature-gates=WatchList=false"])
    plane.start()
    try:
        api = await make_api_client(plane.admin_kubeconfig)
        async with api:
            assert await serves_streaming_list(api, NODES_PATH) is False
            names = [f"paged-{i}" for i in range(5)]
            for name in names:
                await _create_node(api, name, {"listwatch-test": "paged"})
            cache = ListWatch(api, NODES_PATH, NODE_DECODER, lambda *_: None,
                              selector="listwatch-test=paged", page_size=2)
            task = asyncio.create_task(cache.run())
            try:
                await asyncio.wait_for(cache.synced.wait(), timeout=90)
                assert cache.streaming is False
                assert sorted(cache.records) == names
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    finally:
        plane.stop()
