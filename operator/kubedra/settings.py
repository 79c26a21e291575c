"""Settings shared by the operator and the node agent.

Every setting comes from a command-line flag, else the environment (``KUBEDRA_<NAME>``, e.g.
``KUBEDRA_NAMESPACE``), else the default here. pydantic-settings does the environment part;
:mod:`kubedra.cli` passes flags in as keyword arguments, which win.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from kubedra.logging import LogFormat


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
    driver: str = "gpu.kubedra.io"
    backend: str = "pci"
    """Discovery backend: ``pci``, ``nvml``, ``snapshot:<folder>`` or ``static``."""
    sysfs_root: Path = Path("/sys")
    rescan_interval: float = 30.0
    lease_duration: int = 40
    """Seconds an agent Lease stays valid without renewal."""
    metrics_port: int = 8080
    """Port of ``/metrics`` and ``/healthz``; 0 disables the endpoint."""

    # operator
    lease_check_interval: float = 5.0
    """How often the operator checks agent Leases for expiry."""
