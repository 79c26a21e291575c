"""Device health for the kubelet: the ``DRAResourceHealth`` service (KEP-4680).

The kubelet (v1.36+, gate ``ResourceHealthStatus``, beta and on by default) opens the stream
``NodeWatchResources`` on the plugin's DRA socket when the registration lists
``v1.DRAResourceHealth`` (or ``v1alpha1.DRAResourceHealth``; it takes v1 when both are
offered, ``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go``, ``pickHealthService``). Every
response is the complete list of the driver's devices on the node; the kubelet shows each
prepared device's health in the pod's ``status.containerStatuses[].allocatedResourcesStatus``
(``pkg/kubelet/cm/dra/manager.go``, ``UpdateAllocatedResourcesStatus``), with the message
when ``ResourceHealthStatusMessage`` is on (beta, on by default in 1.37).

Where health comes from: discovery. Every successful scan of the agent reports its devices
(:meth:`HealthFeed.report`), with the health and message discovery gave each device (NVML on
the ``nvml`` backend, the capture's state on ``snapshot``). ``last_updated_time`` is the time
of the last successful scan and ``health_check_timeout_seconds`` is
:func:`health_timeout` of the rescan interval: when discovery stops succeeding for three scans
in a row, the kubelet takes the devices as ``Unknown`` (``pkg/kubelet/cm/dra/healthinfo.go``).

When responses go out: at once when the stream opens (after the first scan), on every change of
a device's health or message, and otherwise every :data:`HEARTBEAT` seconds, well inside the
kubelet's default timeout of 30 s.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kubedra.api.inventory import Health, InventoryDevice
from kubedra.logging import get_logger

log = get_logger(__name__)

HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
"""Registration names (k8s.io/kubelet ``pkg/apis/dra-health/*/types.go``,
``DRAResourceHealthService``)."""
HEARTBEAT = 10.0
"""Seconds between responses when nothing changed."""
MIN_TIMEOUT = 30
"""Seconds; the kubelet's ``DefaultHealthTimeout``, the least timeout kubedra reports."""
MESSAGE_MAX_LENGTH = 1024
"""Characters; the kubelet cuts longer messages to 1021 and ``...`` (``truncateHealthMessage``),
and so does :func:`health_message`."""


def stamp_health_transitions(devices: Sequence[InventoryDevice],
                             previous: Sequence[InventoryDevice], now: str
                             ) -> list[InventoryDevice]:
    """``devices`` with ``health_transition_time``: ``now`` (RFC 3339) for a device whose health
    differs from its ``previous`` report, the previous time when it did not change, unset for a
    device never reported before (its health did not change: it is first seen)."""
    before = {d.name: d for d in previous}
    stamped = []
    for device in devices:
        old = before.get(device.name)
        if old is None:
            stamped.append(device)
        elif old.health != device.health:
            stamped.append(device.model_copy(update={"health_transition_time": now}))
        else:
            stamped.append(device.model_copy(update={
                "health_transition_time": old.health_transition_time}))
    return stamped


def health_timeout(rescan_interval: float) -> int:
    """``health_check_timeout_seconds``: three rescan intervals (seconds, rounded up), at
    least :data:`MIN_TIMEOUT`; the agent's default of 30 s gives 90."""
    return max(MIN_TIMEOUT, math.ceil(3 * rescan_interval))


def health_message(text: str | None) -> str:
    """``text`` as the kubelet keeps it: at most 1024 characters (longer ones end in
    ``...``), "" for None."""
    text = text or ""
    if len(text) <= MESSAGE_MAX_LENGTH:
        return text
    return text[:MESSAGE_MAX_LENGTH - 3] + "..."


@dataclass(frozen=True)
class DeviceHealthReport:
    """One device's health as the stream sends it."""

    device: str
    health: Health
    message: str


@dataclass(frozen=True)
class HealthSnapshot:
    """The node's devices and when discovery last determined their health (Unix seconds)."""

    devices: tuple[DeviceHealthReport, ...]
    updated: int


class HealthFeed:
    """The latest health of one pool's devices, with a notification on every change.

    Args:
        pool: returns the pool the devices are in now (the node name for node-local pools,
            unless the inventory names another).
        timeout: ``health_check_timeout_seconds`` for every device (:func:`health_timeout`).
    """

    def __init__(self, pool: Callable[[], str], timeout: int) -> None:
        self.pool = pool
        self.timeout = timeout
        self._snapshot: HealthSnapshot | None = None
        self._changed = asyncio.Event()

    def report(self, devices: Iterable[InventoryDevice], at: float) -> bool:
        """Record a scan's ``devices`` made at Unix time ``at`` (seconds); True when a device's
        health or message changed (or it is the first report), which wakes every stream."""
        entries = tuple(sorted(
            (DeviceHealthReport(d.name, d.health, health_message(d.health_message))
             for d in devices), key=lambda e: e.device))
        changed = self._snapshot is None or self._snapshot.devices != entries
        self._snapshot = HealthSnapshot(entries, int(at))
        if changed:
            log.info("device health", pool=self.pool(),
                     unhealthy=[e.device for e in entries if e.health != "Healthy"])
            self._changed.set()
            self._changed = asyncio.Event()
        return changed

    @property
    def snapshot(self) -> HealthSnapshot | None:
        """The last report, or None before the first."""
        return self._snapshot

    async def watch(self, heartbeat: float = HEARTBEAT,
                    stop: asyncio.Event | None = None) -> AsyncIterator[HealthSnapshot]:
        """The current snapshot (after the first report), then one on every change and at
        least every ``heartbeat`` seconds; ends when ``stop`` is set (or the caller stops
        iterating)."""
        stop = stop or asyncio.Event()
        while self._snapshot is None:
            if await _first_of(self._changed, stop, None):
                return
        while True:
            changed = self._changed
            assert self._snapshot is not None
            yield self._snapshot
            if await _first_of(changed, stop, heartbeat):
                return


async def _first_of(changed: asyncio.Event, stop: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``changed`` or ``stop`` is set or ``timeout`` seconds passed; whether
    ``stop`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in (changed, stop)]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return stop.is_set()


class HealthService:
    """``DRAResourceHealth`` of one API version (``pb2`` is its generated message module).

    :meth:`stop` ends every open stream with status OK, which the kubelet takes as the end of
    the stream (it reconnects every 5 s); a server stopped under a running stream would cancel
    it, which the kubelet logs as an error."""

    def __init__(self, feed: HealthFeed, pb2: ModuleType, heartbeat: float = HEARTBEAT,
                 on_watch: Callable[[], None] | None = None) -> None:
        """``on_watch`` is called when the kubelet opens a stream (the plugin records which
        API version it chose)."""
        self._feed = feed
        self._pb2 = pb2
        self._heartbeat = heartbeat
        self._on_watch = on_watch
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """End every stream (before the server stops)."""
        self._stopping.set()

    def response(self, snapshot: HealthSnapshot) -> Any:
        """The ``NodeWatchResourcesResponse`` for ``snapshot``."""
        pb2 = self._pb2
        status = {"Healthy": pb2.HEALTHY, "Unhealthy": pb2.UNHEALTHY, "Unknown": pb2.UNKNOWN}
        pool = self._feed.pool()
        return pb2.NodeWatchResourcesResponse(devices=[pb2.DeviceHealth(
            device=pb2.DeviceIdentifier(pool_name=pool, device_name=e.device),
            health=status[e.health], last_updated_time=snapshot.updated,
            health_check_timeout_seconds=self._feed.timeout, message=e.message)
            for e in snapshot.devices])

    async def NodeWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """Stream the feed's snapshots until the kubelet goes away."""
        log.info("kubelet watches device health", pool=self._feed.pool())
        if self._on_watch is not None:
            self._on_watch()
        async for snapshot in self._feed.watch(self._heartbeat, self._stopping):
            yield self.response(snapshot)
        log.info("device health stream ended", pool=self._feed.pool())
