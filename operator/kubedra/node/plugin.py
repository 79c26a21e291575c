"""The kubelet DRA plugin: two grpc.aio servers on unix sockets inside the node agent.

- Registration socket (:func:`kubedra.node.sockets.registration_socket`), service
  ``pluginregistration.Registration``: GetInfo answers type ``DRAPlugin``, the driver name,
  the DRA socket path and the services served there (``v1.DRAPlugin``,
  ``v1beta1.DRAPlugin``; the kubelet prefers v1; and the device health stream
  ``v1.DRAResourceHealth``, ``v1alpha1.DRAResourceHealth``, :mod:`kubedra.node.health`).
  NotifyRegistrationStatus is the kubelet's verdict; it is logged and kept in
  :class:`PluginHealth`. The kubelet chooses one version of each service from that list and
  says nowhere which (``validateSupportedServices`` and ``pickHealthService`` in
  pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go): the plugin learns it from the calls, and
  :attr:`PluginHealth.kubelet_apis` keeps the version of each service the kubelet last
  called.
- DRA socket (:func:`kubedra.node.sockets.dra_socket`), service ``DRAPlugin`` in both API
  versions: NodePrepareResources and NodeUnprepareResources, answered by
  :class:`kubedra.node.prepare.ClaimPreparer`. Request names in the answer are base request
  names (upstream's helper strips ``/<subrequest>`` too). ``DRAResourceHealth`` in v1 and
  v1alpha1: NodeWatchResources streams the agent's :class:`kubedra.node.health.HealthFeed`.

Usage (the agent)::

    plugin = kubelet_plugin(settings, api, node_name=..., pool=..., devices=..., metrics=...)
    await plugin.start()      # DRA socket first, then the registration socket
    ...
    await plugin.stop()       # registration socket first; both socket files removed

The kubelet removes the driver's ResourceSlices 30 s after the registration socket goes away
unless a plugin registers again within that time.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
from kubernetes_asyncio.client import ApiClient

from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import CounterSet
from kubedra.logging import get_logger
from kubedra.node.health import HEALTH_SERVICES, HealthFeed, HealthService, health_timeout
from kubedra.node.metrics import PluginMetrics
from kubedra.node.mig import MigPartitioner
from kubedra.node.prepare import ClaimPreparer, ClaimRef, PluginPaths
from kubedra.node.proto import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)
from kubedra.node.sockets import dra_socket, plugin_data_dir, registration_socket
from kubedra.settings import Settings

log = get_logger(__name__)

PLUGIN_TYPE = "DRAPlugin"
SUPPORTED_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin", *HEALTH_SERVICES)
"""GetInfo's ``supported_versions`` (k8s.io/kubelet pkg/apis/dra ``DRAPluginService``,
pkg/apis/dra-health ``DRAResourceHealthService``)."""
STOP_GRACE = 5.0
"""Seconds running calls get to finish when the plugin stops."""


@dataclass
class PluginHealth:
    """What the agent's ``/healthz`` shows about the plugin.

    ``registered``: None until the kubelet calls NotifyRegistrationStatus, then its verdict;
    ``registration_error``: the kubelet's error when it refused; ``serving``: both sockets are
    up; ``checkpoint_problem``: why the checkpoint was rebuilt at start, if it was;
    ``kubelet_apis``: service (``DRAPlugin``, ``DRAResourceHealth``) → the API version the
    kubelet called it in last (``v1``, ``v1beta1``, ``v1alpha1``), for the services it called.
    """

    serving: bool = False
    registered: bool | None = None
    registration_error: str | None = None
    checkpoint_problem: str | None = None
    kubelet_apis: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Serving and not refused by the kubelet."""
        return self.serving and self.registered is not False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``/healthz``."""
        return {"ok": self.ok, "serving": self.serving, "registered": self.registered,
                "registrationError": self.registration_error,
                "checkpointProblem": self.checkpoint_problem,
                "kubeletAPIs": dict(self.kubelet_apis)}


class RegistrationService:
    """``pluginregistration.Registration`` for one driver."""

    def __init__(self, driver: str, endpoint: Path, health: PluginHealth,
                 metrics: PluginMetrics) -> None:
        self._driver = driver
        self._endpoint = endpoint
        self._health = health
        self._metrics = metrics

    async def GetInfo(self, request: Any, context: Any) -> Any:
        """Identify the plugin to the kubelet."""
        return pluginregistration_v1_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self._driver, endpoint=str(self._endpoint),
            supported_versions=list(SUPPORTED_SERVICES))

    async def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        """Record the kubelet's verdict on the registration."""
        self._health.registered = request.plugin_registered
        self._health.registration_error = request.error or None
        self._metrics.registered.set(1 if request.plugin_registered else 0)
        if request.plugin_registered:
            log.info("registered with the kubelet", driver=self._driver)
        else:
            log.error("the kubelet refused the registration", driver=self._driver,
                      error=request.error)
        return pluginregistration_v1_pb2.RegistrationStatusResponse()


class DRAService:
    """``DRAPlugin`` of one API version (``pb2`` is its generated message module)."""

    def __init__(self, preparer: ClaimPreparer, pb2: ModuleType, api: str,
                 metrics: PluginMetrics, health: PluginHealth) -> None:
        self._preparer = preparer
        self._pb2 = pb2
        self._api = api
        self._metrics = metrics
        self._health = health

    async def NodePrepareResources(self, request: Any, context: Any) -> Any:
        """Prepare the claims; every claim of the request gets an entry."""
        method = "NodePrepareResources"
        self._metrics.requests.labels(method, self._api).inc()
        self._health.kubelet_apis["DRAPlugin"] = self._api
        started = time.monotonic()
        results = await self._preparer.prepare(_refs(request))
        response = self._pb2.NodePrepareResourcesResponse()
        for uid, result in results.items():
            entry = response.claims[uid]
            entry.error = result.error
            for d in result.devices:
                device = entry.devices.add(request_names=d.request_names, pool_name=d.pool_name,
                                           device_name=d.device_name,
                                           cdi_device_ids=d.cdi_device_ids)
                if d.share_id is not None and self._api == "v1":
                    device.share_id = d.share_id
        self._metrics.duration.labels(method).observe(time.monotonic() - started)
        return response

    async def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        """Unprepare the claims; every claim of the request gets an entry."""
        method = "NodeUnprepareResources"
        self._metrics.requests.labels(method, self._api).inc()
        self._health.kubelet_apis["DRAPlugin"] = self._api
        started = time.monotonic()
        results = await self._preparer.unprepare(_refs(request))
        response = self._pb2.NodeUnprepareResourcesResponse()
        for uid, error in results.items():
            response.claims[uid].error = error
        self._metrics.duration.labels(method).observe(time.monotonic() - started)
        return response


def _refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid) for c in request.claims]


def _remove_socket(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class KubeletPlugin:
    """Serves the registration and DRA sockets for ``preparer``'s driver.

    Args:
        preparer: does the work (its ``start`` is called by :meth:`start`).
        driver: the DRA driver name.
        registry_dir: the kubelet's plugin registry directory.
        plugins_dir: the kubelet's plugins directory (the DRA socket goes in ``<driver>/``).
        metrics: the plugin's metrics.
        pod_uid: the agent pod's UID to use rolling-update socket names, or None.
        health: the device health the DRAResourceHealth stream sends.
    """

    def __init__(self, preparer: ClaimPreparer, *, driver: str, registry_dir: Path,
                 plugins_dir: Path, metrics: PluginMetrics, health: HealthFeed,
                 pod_uid: str | None = None) -> None:
        self.preparer = preparer
        self.device_health = health
        self.health = PluginHealth()
        self.registration_socket = registration_socket(registry_dir, driver, pod_uid)
        self.dra_socket = dra_socket(plugins_dir, driver, pod_uid)
        self._driver = driver
        self._metrics = metrics
        self._servers: list[tuple[grpc.aio.Server, Path]] = []
        self._health_services: list[HealthService] = []

    async def start(self) -> None:
        """Load the preparer's state, then serve the DRA socket, then the registration socket
        (stale socket files of an earlier run are replaced).

        Raises:
            OSError: a directory cannot be created; RuntimeError: gRPC cannot bind a socket.
        """
        await self.preparer.start()
        self.health.checkpoint_problem = self.preparer.checkpoint_problem
        dra = grpc.aio.server()
        for pb2, pb2_grpc, api in ((dra_v1_pb2, dra_v1_pb2_grpc, "v1"),
                                   (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, "v1beta1")):
            pb2_grpc.add_DRAPluginServicer_to_server(
                DRAService(self.preparer, pb2, api, self._metrics, self.health), dra)
        for pb2, pb2_grpc, api in ((dra_health_v1_pb2, dra_health_v1_pb2_grpc, "v1"),
                                   (dra_health_v1alpha1_pb2, dra_health_v1alpha1_pb2_grpc,
                                    "v1alpha1")):
            service = HealthService(self.device_health, pb2, on_watch=functools.partial(
                self.health.kubelet_apis.__setitem__, "DRAResourceHealth", api))
            pb2_grpc.add_DRAResourceHealthServicer_to_server(service, dra)
            self._health_services.append(service)
        await self._serve(dra, self.dra_socket)
        registration = grpc.aio.server()
        pluginregistration_v1_pb2_grpc.add_RegistrationServicer_to_server(
            RegistrationService(self._driver, self.dra_socket, self.health, self._metrics),
            registration)
        await self._serve(registration, self.registration_socket)
        self.health.serving = True
        log.info("kubelet plugin serving", registration=str(self.registration_socket),
                 dra=str(self.dra_socket))

    async def _serve(self, server: grpc.aio.Server, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_socket(path)
        server.add_insecure_port(f"unix://{path}")
        await server.start()
        self._servers.append((server, path))

    async def stop(self) -> None:
        """End the health streams, stop serving (registration first, so the kubelet stops
        calling) and remove the socket files. Idempotent."""
        self.health.serving = False
        for service in self._health_services:
            service.stop()
        self._health_services.clear()
        for server, path in reversed(self._servers):
            await server.stop(STOP_GRACE)
            _remove_socket(path)
        self._servers.clear()
        log.info("kubelet plugin stopped", driver=self._driver)


def kubelet_plugin(settings: Settings, api: ApiClient, *, node_name: str,
                   pool: Callable[[], str], devices: Callable[[], Mapping[str, InventoryDevice]],
                   metrics: PluginMetrics, mig: MigPartitioner | None = None,
                   health: HealthFeed | None = None,
                   counter_sets: Callable[[], list[CounterSet]] = list) -> KubeletPlugin:
    """The agent's plugin as ``settings`` place it: driver, kubelet registry and plugins
    directories, CDI directory, boot ID file and (rolling updates) the pod UID.

    Args:
        settings: the agent's settings.
        api: client with the agent's service account (see manifests/node-plugin-rbac.yaml).
        node_name: this node.
        pool: returns this node's pool (``spec.pool`` of its inventory, else the node name).
        devices: returns the node's current devices by name: declared in its inventory's
            ``spec.devices`` and discovered.
        metrics: e.g. ``PluginMetrics(kubedra.metrics.REGISTRY)``.
        mig: creates MIG instances; give :class:`kubedra.node.mig.NvmlMigPartitioner` when the
            inventory publishes MIG placements (``discovery.mig: partitions``).
        health: the feed discovery reports device health to (:class:`HealthFeed`); a new,
            empty one if None (the stream then waits for a first report).
        counter_sets: returns the pool's shared counter sets (declared, then discovered),
            for the prepare-time exclusivity rule (:mod:`kubedra.node.exclusivity`).
    """
    preparer = ClaimPreparer(
        api=api, driver=settings.driver, node_name=node_name, pool=pool, devices=devices,
        paths=PluginPaths(data_dir=plugin_data_dir(settings.kubelet_plugins_dir,
                                                   settings.driver),
                          cdi_dir=settings.cdi_dir, boot_id=settings.boot_id_path,
                          device_root=settings.device_root),
        metrics=metrics, mig=mig, counter_sets=counter_sets)
    return KubeletPlugin(preparer, driver=settings.driver,
                         registry_dir=settings.kubelet_registry_dir,
                         plugins_dir=settings.kubelet_plugins_dir, metrics=metrics,
                         health=health or HealthFeed(pool, health_timeout(
                             settings.rescan_interval)),
                         pod_uid=settings.pod_uid)
