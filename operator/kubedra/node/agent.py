"""The node agent's discovery loop and Lease.

One agent runs per node and driver. It creates its DeviceInventory
(``<node>-<driver>``, ``spec.nodeName`` = the node) if it is missing, discovers devices with the
chosen backend and the inventory's ``spec.discovery`` settings, writes ``status.discovered`` by
server-side apply (field manager ``kubedra-agent``) only when the result changed, and renews the
Lease ``kubedra-agent-<node>`` in the operator's namespace so that the operator knows the pool is
still backed by a live agent. On a clean stop (SIGTERM) it gives the Lease up, so that the
operator withdraws the pool at once. While the kubelet plugin serves, it checks every
``cdi_check_interval`` seconds (and at start) that the files prepare wrote for each prepared
claim (its CDI spec, each request's device metadata CDI spec and file) are on disk, and writes
missing ones again.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient, ApiException
from pydantic import ValidationError

from kubedra import __version__, kube
from kubedra.api.base import validation_field
from kubedra.api.inventory import (
    API_VERSION,
    KIND,
    DeviceInventory,
    DiscoveredState,
    DiscoverySettings,
    InventoryDevice,
    agent_lease_name,
)
from kubedra.api.mig import compact, expand
from kubedra.api.resource import CounterSet
from kubedra.api.time import timestamp, utcnow
from kubedra.discovery import DiscoveryError, discover
from kubedra.logging import get_logger
from kubedra.metrics import REGISTRY, start_metrics_server
from kubedra.metrics_auth import secure_serving
from kubedra.node.checkpoint import read_boot_id
from kubedra.node.exclusivity import node_devices
from kubedra.node.health import HealthFeed, health_timeout, stamp_health_transitions
from kubedra.node.metrics import PluginMetrics
from kubedra.node.mig import NvmlMigPartitioner
from kubedra.node.plugin import kubelet_plugin
from kubedra.node.prepare import ClaimPreparer
from kubedra.publishing.pool import pool_name
from kubedra.settings import Settings

log = get_logger(__name__)

RELEASE_TIMEOUT = 5.0
"""Seconds a stopping agent waits to give its Lease up."""


def inventory_name(node_name: str, driver: str) -> str:
    """The DeviceInventory an agent owns: ``<node>-<driver>``, e.g. ``demo-h200-gpu.kubedra.io``."""
    return f"{node_name}-{driver}"


class Agent:
    """The discovery loop and Lease renewal of one node agent.

    Attributes:
        discovered: the last discovery result, in the full form (every MIG partition listed;
            the report written is its compact form, :func:`kubedra.api.mig.compact`); None
            before the first scan.
        health: every successful scan's device health, for the kubelet's health stream.
    """

    def __init__(self, settings: Settings, api: ApiClient) -> None:
        if not settings.node_name:
            raise ValueError("the agent needs a node name (--node-name or KUBEDRA_NODE_NAME)")
        self.settings = settings
        self.api = api
        self.node_name: str = settings.node_name
        self.name = inventory_name(self.node_name, settings.driver)
        self.discovered: DiscoveredState | None = None
        self.inventory: DeviceInventory | None = None
        self.lease: dict[str, Any] | None = None
        """The agent Lease as last renewed (None before the first renewal)."""
        self.scanned = asyncio.Event()
        self.health = HealthFeed(self.pool, health_timeout(settings.rescan_interval))
        self.kubelet_apis: Mapping[str, str] = {}
        """The kubelet plugin's :attr:`~kubedra.node.plugin.PluginHealth.kubelet_apis` (set
        by :func:`run_agent`), reported as ``kubeletPluginAPIs``."""

    def boot_id(self) -> str | None:
        """The node's boot ID, or None where it cannot be read."""
        try:
            return read_boot_id(self.settings.boot_id_path) or None
        except OSError:
            return None

    def devices(self) -> dict[str, InventoryDevice]:
        """Every device the node's pool may publish, by name: those the inventory declares
        (``spec.devices``, first, as the operator merges them) and those of the last report.
        What the kubelet plugin may prepare."""
        declared = self.inventory.spec.devices or [] if self.inventory else []
        found = self.discovered.devices if self.discovered else []
        return node_devices(declared, found)

    def counter_sets(self) -> list[CounterSet]:
        """The pool's shared counter sets: those the inventory declares (``spec.counterSets``,
        first, as the operator merges them) and those of the last report. What the devices'
        ``consumesCounters`` draw from (:mod:`kubedra.node.exclusivity`)."""
        declared = self.inventory.spec.counter_sets or [] if self.inventory else []
        found = self.discovered.counter_sets or [] if self.discovered else []
        return [*declared, *found]

    def pool(self) -> str:
        """The node's pool name: the inventory's ``spec.pool``, else the node name
        (:func:`kubedra.publishing.pool.pool_name`, as the operator names it)."""
        return pool_name(self.inventory) if self.inventory else self.node_name

    async def ensure_inventory(self) -> DeviceInventory:
        """Read the agent's inventory, creating it for this node and driver if missing (with
        ``discovery.mig`` from the setting ``mig``, if set), owned by the Node (deleted with it
        by the garbage collector)."""
        raw = await kube.get_inventory(self.api, self.name)
        if raw is None:
            owner = await self.node_owner()
            metadata = {"name": self.name, **({"ownerReferences": [owner]} if owner else {})}
            mig = self.settings.mig
            body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata,
                    "spec": {"driver": self.settings.driver, "nodeName": self.node_name,
                             **({"discovery": {"mig": mig}} if mig else {})}}
            try:
                raw = await kube.create_inventory(self.api, body)
                log.info("created DeviceInventory", inventory=self.name)
            except ApiException as err:
                if err.status != 409:
                    raise
                raw = await kube.get_inventory(self.api, self.name)
                assert raw is not None
        return DeviceInventory.from_api(raw)

    async def scan(self) -> bool:
        """Discover once and write ``status.discovered`` if it changed; True if written.

        Raises:
            DiscoveryError: the backend failed (the previous report stays).
            ApiException: reading or writing the inventory failed.
            pydantic.ValidationError: the inventory read is not valid (its spec).
        """
        inventory = await self.ensure_inventory()
        self.inventory = inventory
        discovery: DiscoverySettings = inventory.spec.discovery
        result = await asyncio.to_thread(discover, self.settings.backend, discovery,
                                         self.settings.sysfs_root)
        self.health.report(result.devices, time.time())
        current = inventory.status.discovered if inventory.status else None
        now = timestamp(utcnow())
        devices = stamp_health_transitions(
            result.devices, expand(current).devices if current else [], now)
        found = result.model_copy(update={"devices": devices})
        report = compact(found).model_copy(update={
            "backend": self.settings.backend.split(":", 1)[0], "agent_version": __version__,
            "kubelet_plugin_apis": dict(sorted(self.kubelet_apis.items())) or None,
            "boot_id": self.boot_id(), "observed_time": now})
        # the kubelet plugin uses it even if the report fails
        self.discovered = report.model_copy(update={
            "devices": devices, "counter_sets": result.counter_sets or None, "mig_models": None,
            "device_models": None})
        if current is not None and _same(current, report):
            return False
        self.scanned.set()
        for rejected in result.rejected:
            log.warning("left out of the report: the API server would refuse it",
                        device=rejected.name, field=rejected.field, error=rejected.message)
        await kube.apply_discovered(self.api, self.name, report.to_api())
        log.info("reported devices", inventory=self.name, devices=len(devices),
                 counter_sets=len(result.counter_sets), listed=len(report.devices),
                 mig_models=len(report.mig_models or []),
                 device_models=len(report.device_models or []))
        return True

    async def run_discovery(self) -> None:
        """Scan every ``rescan_interval`` seconds, forever; failures are logged and retried."""
        while True:
            try:
                await self.scan()
                self.scanned.set()
            except DiscoveryError as err:
                log.warning("discovery failed; keeping the last report", error=str(err))
            except ValidationError as err:  # the API server kept what kubedra's models refuse
                log.warning("the DeviceInventory is not valid; keeping the last report (its "
                            "InvalidInventory condition names the field); will retry",
                            inventory=self.name, error=validation_field(err))
            except ApiException as err:
                log.warning("reading or reporting to the DeviceInventory failed; will retry",
                            inventory=self.name, error=kube.api_error_message(err))
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                log.warning("the API server is unreachable; will retry", error=str(err))
            await asyncio.sleep(self.settings.rescan_interval)

    async def node_owner(self) -> dict[str, Any] | None:
        """An owner reference to this agent's Node, or None when it cannot be read now (the
        Lease is renewed without one rather than not at all)."""
        try:
            return await kube.node_owner_reference(self.api, self.node_name)
        except ApiException as err:
            log.warning("reading the Node failed", node=self.node_name,
                        error=kube.api_error_message(err))
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            log.warning("reading the Node failed: the API server is unreachable",
                        node=self.node_name, error=str(err))
        return None

    async def run_lease(self) -> None:
        """Renew the agent Lease three times per lease duration, forever; the Lease is owned by
        the Node (deleted with it by the garbage collector)."""
        name = agent_lease_name(self.node_name)
        owner: dict[str, Any] | None = None
        while True:
            try:
                owner = owner or await self.node_owner()
                self.lease = await kube.renew_lease(
                    self.api, self.settings.namespace, name, self.node_name,
                    self.settings.lease_duration, owner)
            except ApiException as err:
                log.warning("lease renewal failed", lease=name,
                            error=kube.api_error_message(err))
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                log.warning("lease renewal failed: the API server is unreachable", lease=name,
                            error=str(err))
            await asyncio.sleep(self.settings.lease_duration / 3)


    async def release_lease(self) -> None:
        """Give the Lease up on a clean stop, so that the operator withdraws the node's pool
        at once instead of after the Lease expires (:func:`kubedra.kube.release_lease`: not
        if a newer agent renewed it since). Failures are logged: the Lease then expires."""
        if self.lease is None:
            return
        try:
            await kube.release_lease(self.api, self.lease)
            log.info("lease released", lease=self.lease["metadata"]["name"])
        except ApiException as err:
            log.warning("lease not released; it expires instead",
                        error=kube.api_error_message(err))
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            log.warning("lease not released: the API server is unreachable; it expires instead",
                        error=str(err))
        self.lease = None


async def run_cdi_check(preparer: ClaimPreparer, interval: float) -> None:
    """Write again the missing files of prepared claims (CDI specs, device metadata) now and
    every ``interval`` seconds, forever (:meth:`ClaimPreparer.restore_missing_files`)."""
    while True:
        try:
            await preparer.restore_missing_files()
        except OSError as err:
            log.warning("checking the files of prepared claims failed; will retry",
                        error=str(err))
        await asyncio.sleep(interval)


def _same(current: DiscoveredState, new: DiscoveredState) -> bool:
    """Equal apart from the scan time."""
    ignore = {"observed_time"}
    return current.model_dump(exclude=ignore) == new.model_dump(exclude=ignore)


async def run_agent(settings: Settings) -> None:
    """Run the agent until cancelled: discovery loop, Lease renewal, the kubelet DRA plugin
    (after the first scan, so that it knows the node's devices) and, unless
    ``metrics_port`` is 0, ``/metrics`` and ``/healthz`` on ``metrics_address``."""
    api = await kube.make_api_client(settings.kubeconfig)
    async with api:
        agent = Agent(settings, api)
        mig = NvmlMigPartitioner() if settings.backend == "nvml" else None
        plugin = kubelet_plugin(settings, api, node_name=agent.node_name, pool=agent.pool,
                                devices=agent.devices, metrics=PluginMetrics(REGISTRY), mig=mig,
                                health=agent.health, counter_sets=agent.counter_sets)
        agent.kubelet_apis = plugin.health.kubelet_apis
        metrics = (await start_metrics_server(settings.metrics_port, plugin.health.to_dict,
                                              hosts=settings.metrics_hosts,
                                              secure=secure_serving(api, settings))
                   if settings.metrics_port else None)
        loops = [asyncio.create_task(agent.run_discovery()),
                 asyncio.create_task(agent.run_lease())]
        # SIGTERM (how the kubelet stops a DaemonSet pod) stops cleanly: sockets removed
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        try:
            await agent.scanned.wait()
            await plugin.start()
            loops.append(asyncio.create_task(
                run_cdi_check(plugin.preparer, settings.cdi_check_interval)))
            await asyncio.gather(*loops)
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(agent.release_lease(), RELEASE_TIMEOUT)
            await plugin.stop()
            if metrics is not None:
                await metrics.cleanup()
            log.info("agent stopped", node=agent.node_name)
