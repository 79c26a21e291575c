"""Settings shared by the operator and the node agent.

Every setting comes from a command-line flag, else the environment (``KUBEDRA_<NAME>``, e.g.
``KUBEDRA_NAMESPACE``), else the default here. pydantic-settings does the environment part;
:mod:`kubedra.cli` passes flags in as keyword arguments, which win.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any

import click
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kubedra.api.inventory import MigMode
from kubedra.api.names import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN
from kubedra.api.selector import selector_keys
from kubedra.logging import LogFormat

DEFAULT_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")
"""The kubelet's plugin registration directory."""
DEFAULT_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
"""The kubelet's plugins directory."""
DEFAULT_CDI_DIR = Path("/var/run/cdi")
"""The CDI dynamic spec directory, where DRA drivers write (CDI ``DefaultDynamicDir``)."""
DEFAULT_BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
"""The kernel's boot ID file."""

MAX_SECONDS = 365 * 24 * 3600
"""The longest duration a setting may have (one year): longer means nothing for a grace, an
interval or a Lease, and a time that far off is still a valid ``datetime`` (``now`` plus an
unbounded float overflows it, or is infinite, and every reconcile that adds it fails)."""

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
"""A duration in seconds: finite, 0 to :data:`MAX_SECONDS`; 0 turns the wait off."""
Interval = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
"""Seconds between two runs of a loop: finite, above 0 (0 would spin the loop), at most
:data:`MAX_SECONDS`."""
MIN_PERIOD = 1.0
"""Seconds: the shortest period of a loop that calls the API server (:data:`Period`)."""


def _off_or_at_least_min_period(value: float) -> float:
    if 0 < value < MIN_PERIOD:
        raise ValueError(f"must be 0 (off) or at least {MIN_PERIOD:g} s: a loop that "
                         "calls the API server more often would load it for nothing")
    return value


Period = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False),
                   AfterValidator(_off_or_at_least_min_period)]
"""Seconds between two runs of a loop that calls the API server: 0 turns it off, else at least
:data:`MIN_PERIOD`, at most :data:`MAX_SECONDS`."""
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The log levels a process takes (stdlib logging's names)."""
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
"""A DNS label (RFC 1123, at most 63 characters): what a namespace name must be."""
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
"""A DNS subdomain (RFC 1123): what a node's and a driver's name must be."""
Port = Annotated[int, Field(ge=0, le=65535)]
"""A TCP port, 0 for none."""


class Settings(BaseSettings):
    """Process settings. Durations are seconds; paths are absolute on the node."""

    model_config = SettingsConfigDict(env_prefix="KUBEDRA_", extra="ignore")

    namespace: str = "kubedra-system"
    """Namespace of the operator and of the agents' Leases."""
    kubeconfig: Path | None = None
    """Kubeconfig file; unset = in-cluster service account, then ``~/.kube/config``."""
    log_format: LogFormat = "console"
    log_level: str = "INFO"

    # node agent
    node_name: str | None = None
    """The node this agent runs on (the DaemonSet sets it from ``spec.nodeName``)."""
    driver: str = ""
    """Driver name; by default ``pci.kubedra.io`` for the ``pci`` and ``static`` backends and
    ``gpu.kubedra.io`` for ``nvml`` and ``snapshot`` (NVIDIA captures)."""
    backend: str = "pci"
    """Discovery backend: ``pci``, ``nvml``, ``snapshot:<folder>`` or ``static``."""
    sysfs_root: Path = Path("/sys")
    rescan_interval: Interval = 30.0
    lease_duration: Annotated[int, Field(ge=1, le=MAX_SECONDS)] = 40
    """Seconds an agent Lease stays valid without renewal. The agent renews it every third of
    that and gives it up on a clean stop; after a crash the operator withdraws the node's pool
    between 2/3 of it and it plus ``lease_check_interval`` later."""
    cdi_check_interval: Interval = 30.0
    """Seconds between checks that the files prepare wrote for every prepared claim (its CDI
    spec, each request's device metadata CDI spec and file) are still on disk."""
    metrics_port: Port = 8080
    """Port of ``/metrics`` and ``/healthz``; 0 disables the endpoint."""
    metrics_address: str = "127.0.0.1"
    """The IP addresses ``/metrics`` and ``/healthz`` listen on, comma-separated (empty
    entries are skipped). Loopback by default, as the kubelet's and kube-proxy's health and
    metrics ports: an agent started by hand or in a host-network pod exposes nothing to other
    hosts. The shipped DaemonSet adds the pod's own address (``status.podIP``), where its
    probes and Prometheus reach it; ``0.0.0.0`` is every interface."""
    metrics_secure: bool = True
    """Serve ``/metrics`` over HTTPS to scrapers the API server authenticates (TokenReview)
    and authorizes (SubjectAccessReview of ``get`` on the non-resource URL ``/metrics``), as
    :mod:`kubedra.metrics_auth` describes; ``/healthz`` is served over the same HTTPS port
    without a token. False: plain HTTP, and anyone who reaches the port reads the metrics:
    for local development only (operator and agent alike)."""
    metrics_cert_dir: Path | None = None
    """A directory with the metrics port's ``tls.crt`` and ``tls.key`` (a ``kubernetes.io/tls``
    Secret mounted there), read again when they change; unset: a self-signed certificate made
    at start."""
    kubelet_registry_dir: Path = DEFAULT_REGISTRY_DIR
    """The kubelet's plugin registration directory: the registration socket goes here."""
    kubelet_plugins_dir: Path = DEFAULT_PLUGINS_DIR
    """The kubelet's plugins directory: DRA socket, checkpoint and lock go in ``<driver>/``."""
    cdi_dir: Path = DEFAULT_CDI_DIR
    """Where the plugin writes CDI specs (the container runtime's dynamic CDI directory)."""
    boot_id_path: Path = DEFAULT_BOOT_ID_PATH
    """The kernel's boot ID file; prepared claims of an earlier boot are prepared again."""
    device_root: Path = Path("/")
    """Where the host's device nodes are: CDI specs name ``<device_root>/dev/...`` as the
    host path of each container's ``/dev/...`` (stand-ins for replayed hardware); ``/`` on a
    real node."""
    mig: MigMode | None = None
    """``spec.discovery.mig`` of the DeviceInventory the agent creates for its node (None:
    the CRD's default, ``none``). An existing inventory is the admin's and stays as it is."""
    pod_uid: str | None = None
    """The agent pod's UID (downward API); when set, sockets get rolling-update names."""
    pod_name: str | None = None
    """This process's pod (downward API): the operator's leader-election identity is
    ``<pod name>_<uuid>`` (``<hostname>_<uuid>`` without it)."""

    @field_validator("sysfs_root", "kubelet_registry_dir", "kubelet_plugins_dir", "cdi_dir",
                     "boot_id_path", "device_root")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        """Node paths are made absolute against the working directory: gRPC cannot bind a
        relative ``unix://`` address, and the kubelet dials the socket path the agent registers
        from its own working directory, so a relative path would mean nothing to it."""
        return path.absolute()

    @field_validator("metrics_address")
    @classmethod
    def _ip_addresses(cls, value: str) -> str:
        """Each entry an IP address, written as :mod:`ipaddress` writes it; at least one."""
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        if not entries:
            raise ValueError("at least one IP address is needed")
        try:
            return ",".join(str(ipaddress.ip_address(entry)) for entry in entries)
        except ValueError as err:
            raise ValueError(f"{err} (give IP addresses, comma-separated)") from None

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        """A level name of stdlib logging, in any case (``debug``), upper-cased."""
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"not a log level: give {', '.join(LOG_LEVELS[:-1])} or "
                             f"{LOG_LEVELS[-1]}")
        return value.upper()

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        """A namespace name: a DNS label (RFC 1123), as the API server requires."""
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ValueError("not a namespace name: at most 63 lower-case letters, digits or "
                             "'-', starting and ending with a letter or digit")
        return value

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        """One of the discovery backends (:func:`kubedra.discovery.backends.discover`'s)."""
        if value in ("pci", "nvml", "static") or (
                value.startswith("snapshot:") and value != "snapshot:"):
            return value
        raise ValueError("not a discovery backend: give pci, nvml, snapshot:<folder> or static")

    @field_validator("driver")
    @classmethod
    def _driver(cls, value: str) -> str:
        """Empty (the backend's default) or a driver name, as ResourceSlices need it."""
        if value and (len(value) > 63 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError("not a driver name: a DNS subdomain of at most 63 characters "
                             "(lower-case letters, digits, '-' and '.'), e.g. gpu.kubedra.io")
        return value

    @field_validator("node_name")
    @classmethod
    def _node_name(cls, value: str | None) -> str | None:
        """A Node's name: a DNS subdomain."""
        if value is not None and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError("not a node name: a DNS subdomain of at most 253 characters "
                             "(lower-case letters, digits, '-' and '.')")
        return value

    @field_validator("pool_selector")
    @classmethod
    def _label_selector(cls, value: str) -> str:
        """A label selector (its keys are the labels slices carry)."""
        selector_keys(value)
        return value.strip()

    @property
    def metrics_hosts(self) -> list[str]:
        """:attr:`metrics_address` as a list."""
        return self.metrics_address.split(",")

    @model_validator(mode="after")
    def _driver_for_backend(self) -> Settings:
        if not self.driver:
            kind = self.backend.split(":", 1)[0]
            self.driver = "pci.kubedra.io" if kind in {"pci", "static"} else "gpu.kubedra.io"
        return self

    # operator
    pool_selector: str = ""
    """The pools this operator process owns: a label selector over DeviceInventories (empty:
    every pool), applied by the API server to the inventories and slices it caches and
    carried onto the slices it publishes (:mod:`kubedra.api.selector`)."""
    lease_check_interval: Interval = 5.0
    """How often the operator checks agent Leases for expiry."""
    explain_event_interval: Seconds = 60.0
    """Seconds between two explaining Events (``CannotAllocate``) on the same claim, at least."""
    fleet_metrics_interval: Seconds = 30.0
    """Seconds between two counts of the fleet's devices per model, at least (the
    ``kubedra_operator_fleet_devices_*`` gauges, :mod:`kubedra.controller.fleet`); 0: never
    (no such gauges, and no parsed copy of the slices kept for them: 42 MiB at 2,000 nodes
    of 8 H200)."""
    feature_detection_interval: Period = 300.0
    """Seconds between two detections of what the cluster serves (a dry-run probe,
    :mod:`kubedra.controller.features`): an API server upgraded, or restarted with a feature
    gate flipped, is noticed within this time and the pools it changes are published again;
    0: only at start."""
    attacher: str = "immediate"
    """The attach step for devices with binding conditions (KEP-5007): ``immediate`` or
    ``<module>:<class>`` (see :mod:`kubedra.binding.attach`)."""
    health_hold_down: Seconds = 300.0
    """Seconds a device that is healthy again keeps its ``kubedra.io/unhealthy`` NoSchedule
    taint (value ``recovered-hold-down``), so that one transient fault neither takes it out
    until a restart nor puts new claims on a device that fails again at once; 0: none."""
    drain_grace: Seconds = 30.0
    """Seconds a published device that leaves its pool (disabled by an override, no longer
    reported, its pool withdrawn or its inventory deleted) and that no claim holds stays
    published with the ``kubedra.io/draining`` NoSchedule taint before it is taken out. It
    must outlast how far kube-scheduler's view of the slices can lag: a device taken out in
    one step can be allocated from a stale view while its counters look free (issue 13);
    0 takes it out at once."""
    allocations_delay: Seconds = 1.0
    """Seconds an inventory's ``status.allocations`` may lag its claims: a claim allocated
    or released queues its inventory within this time, not at once, so a burst of claims on
    one node costs one status write, not one each (counted from the first claim: a steady
    stream of claims never holds the write back longer); 0: at once."""
    leader_lease_duration: Annotated[int, Field(ge=1, le=MAX_SECONDS)] = 15
    """Seconds the operator's leader-election Lease stays valid without renewal (client-go's
    default, as kube-controller-manager uses it)."""
    leader_renew_deadline: Annotated[float, Field(ge=1, le=MAX_SECONDS, allow_inf_nan=False)] = 10.0
    """Seconds the leader may go without a successful renewal before it stops (exits);
    below ``leader_lease_duration``, at least 1 (kubernetes-asyncio's ``electionconfig``)."""
    leader_retry_period: Annotated[float, Field(ge=1, le=MAX_SECONDS, allow_inf_nan=False)] = 2.0
    """Seconds between two tries to take or renew the leader Lease; below
    ``leader_renew_deadline``, at least 1."""

    @model_validator(mode="after")
    def _election_order(self) -> Settings:
        """client-go's rule (``leaderelection.NewLeaderElector``): lease duration > renew
        deadline > retry period (the library takes its jitter of 1.2 into account too)."""
        if not self.leader_lease_duration > self.leader_renew_deadline \
                > self.leader_retry_period * 1.2:
            raise ValueError(
                "leader election needs leader_lease_duration > leader_renew_deadline > "
                f"1.2 * leader_retry_period (got {self.leader_lease_duration}, "
                f"{self.leader_renew_deadline:g}, {self.leader_retry_period:g})")
        return self


def settings_from_flags(**flags: Any) -> Settings:
    """Settings from the environment, overridden by the command-line ``flags`` that were given
    (``None`` means "not given").

    Raises:
        click.ClickException: a value does not parse; the message names the flag or the
            environment variable it came from, the value and why (``KUBEDRA_METRICS_PORT='x':
            Input should be a valid integer, …``).
    """
    given = {k: v for k, v in flags.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        source = (f"--{name.replace('_', '-')}" if name in given else
                  f"KUBEDRA_{name.upper()}" if name else "settings")
        value = f"={first['input']!r}" if name else ""
        raise click.ClickException(f"invalid {source}{value}: {first['msg']}") from None

