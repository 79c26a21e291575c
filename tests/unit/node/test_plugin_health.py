"""The DRAResourceHealth stream (KEP-4680) over the plugin's real DRA socket, in both API
versions the kubelet knows, and the feed behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import grpc
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from kubedra.api.inventory import InventoryDevice
from kubedra.node.health import (
    HealthFeed,
    health_message,
    health_timeout,
    stamp_health_transitions,
)
from kubedra.node.proto import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
)
from tests.support.plugin_node import PluginNode

VERSIONS: dict[str, tuple[ModuleType, ModuleType]] = {
    "v1": (dra_health_v1_pb2, dra_health_v1_pb2_grpc),
    "v1alpha1": (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc),
}


XID_MESSAGE = "XID 79: GPU has fallen off the bus"


def gpu(name: str, health: str = "Healthy", message: str | None = None) -> InventoryDevice:
    return InventoryDevice.model_validate({"name": name, "health": health,
                                           "healthMessage": message})


def entries(response: Any) -> list[tuple[str, str, int, int, int, str]]:
    return [(d.device.pool_name, d.device.device_name, d.health, d.last_updated_time,
             d.health_check_timeout_seconds, d.message) for d in response.devices]


@pytest.fixture
async def node() -> AsyncIterator[PluginNode]:
    n = PluginNode()
    yield n
    n.remove()


@pytest.mark.parametrize("version", ["v1", "v1alpha1"])
async def test_stream_sends_every_device_then_each_change(node: PluginNode,
                                                          version: str) -> None:
    pb2, pb2_grpc = VERSIONS[version]
    feed = HealthFeed(lambda: "node-1", 90)
    api = ApiClient(Configuration(host="http://127.0.0.1:9"))
    plugin = node.plugin(api, health=feed)
    await plugin.start()
    channel = grpc.aio.insecure_channel(f"unix://{plugin.dra_socket}")
    try:
        feed.report([gpu("gpu-1"), gpu("gpu-0")], 1_700_000_000.7)
        stream = pb2_grpc.DRAResourceHealthStub(channel).NodeWatchResources(
            pb2.NodeWatchResourcesRequest())
        first = await asyncio.wait_for(stream.read(), 10)
        assert entries(first) == [
            ("node-1", "gpu-0", pb2.HEALTHY, 1_700_000_000, 90, ""),
            ("node-1", "gpu-1", pb2.HEALTHY, 1_700_000_000, 90, "")]
        assert plugin.health.kubelet_apis == {"DRAResourceHealth": version}

        assert feed.report([gpu("gpu-0", "Unhealthy", XID_MESSAGE),
                            gpu("gpu-1")], 1_700_000_002)
        second = await asyncio.wait_for(stream.read(), 10)
        assert entries(second) == [
            ("node-1", "gpu-0", pb2.UNHEALTHY, 1_700_000_002, 90, XID_MESSAGE),
            ("node-1", "gpu-1", pb2.HEALTHY, 1_700_000_002, 90, "")]
        await plugin.stop()
        assert await asyncio.wait_for(stream.read(), 10) == grpc.aio.EOF
        assert await stream.code() == grpc.StatusCode.OK
    finally:
        await channel.close()
        await plugin.stop()
        await api.close()


async def test_heartbeat_repeats_the_snapshot_with_the_newest_scan_time() -> None:
    feed = HealthFeed(lambda: "node-1", 30)
    feed.report([gpu("gpu-0")], 100)
    watch = feed.watch(heartbeat=0.05)
    first = await anext(watch)
    assert not feed.report([gpu("gpu-0")], 101)  # nothing changed: no wake-up
    beat = await asyncio.wait_for(anext(watch), 5)
    assert (first.updated, beat.updated) == (100, 101)
    assert beat.devices == first.devices
    await watch.aclose()


async def test_watch_waits_for_the_first_scan() -> None:
    feed = HealthFeed(lambda: "node-1", 30)
    watch = feed.watch(heartbeat=0.05)
    pending = asyncio.ensure_future(anext(watch))
    await asyncio.sleep(0.1)
    assert not pending.done()
    feed.report([gpu("gpu-0", "Unknown")], 5)
    snapshot = await asyncio.wait_for(pending, 5)
    assert [(e.device, e.health) for e in snapshot.devices] == [("gpu-0", "Unknown")]
    await watch.aclose()


def test_message_is_cut_like_the_kubelet_cuts_it() -> None:
    assert health_message(None) == ""
    assert health_message("x" * 1024) == "x" * 1024
    assert health_message("x" * 1025) == "x" * 1021 + "..."


@pytest.mark.parametrize(("rescan", "timeout"), [(2.0, 30), (30.0, 90), (10.5, 32)])
def test_timeout_covers_three_scans_and_at_least_the_kubelets_default(rescan: float,
                                                                       timeout: int) -> None:
    assert health_timeout(rescan) == timeout


def test_transition_time_is_stamped_on_a_change_and_kept_otherwise() -> None:
    before = [gpu("gpu-0"), gpu("gpu-1", "Unhealthy", XID_MESSAGE).model_copy(
        update={"health_transition_time": "2026-11-30T10:00:00Z"})]
    now = [gpu("gpu-0", "Unhealthy", XID_MESSAGE), gpu("gpu-1", "Unhealthy", XID_MESSAGE),
           gpu("gpu-2")]
    stamped = stamp_health_transitions(now, before, "2026-11-30T11:00:00Z")
    assert [(d.name, d.health, d.health_transition_time) for d in stamped] == [
        ("gpu-0", "Unhealthy", "2026-11-30T11:00:00Z"),  # changed now
        ("gpu-1", "Unhealthy", "2026-11-30T10:00:00Z"),  # unchanged: kept
        ("gpu-2", "Healthy", None)]                      # first seen: no transition
    recovered = stamp_health_transitions([gpu("gpu-1")], stamped, "2026-11-30T12:00:00Z")
    assert recovered[0].health_transition_time == "2026-11-30T12:00:00Z"
