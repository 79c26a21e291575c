"""``kubedra agent``: the node agent (discovery, Lease, DeviceInventory status)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from kubedra.kube import KubeconfigError
from kubedra.logging import configure_logging
from kubedra.metrics_auth import CertificateError
from kubedra.node.agent import run_agent
from kubedra.options import common_options
from kubedra.settings import settings_from_flags


@click.command("agent", short_help="Run the node agent (discovery, kubelet DRA plugin).")
@common_options
@click.option("--node-name", default=None, help="This node [env KUBEDRA_NODE_NAME]")
@click.option("--driver", default=None,
              help="Driver name [env KUBEDRA_DRIVER; default pci.kubedra.io for the pci "
                   "and static backends, gpu.kubedra.io for nvml and snapshot]")
@click.option("--backend", default=None,
              help="Discovery backend: pci, nvml, snapshot:<folder>, static "
                   "[env KUBEDRA_BACKEND; default pci]")
@click.option("--sysfs-root", type=click.Path(path_type=Path), default=None,
              help="sysfs mount [env KUBEDRA_SYSFS_ROOT; default /sys]")
@click.option("--rescan-interval", type=float, default=None,
              help="Seconds between scans [env KUBEDRA_RESCAN_INTERVAL; default 30]")
@click.option("--lease-duration", type=int, default=None,
              help="Lease validity in seconds; after a crash the node's pool is withdrawn "
                   "2/3 of it to it plus the operator's lease check interval later "
                   "[env KUBEDRA_LEASE_DURATION; default 40]")
@click.option("--cdi-check-interval", type=float, default=None,
              help="Seconds between checks that prepared claims' CDI specs and device "
                   "metadata exist (missing ones are written again) "
                   "[env KUBEDRA_CDI_CHECK_INTERVAL; default 30]")
@click.option("--metrics-port", type=int, default=None,
              help="Port of /metrics and /healthz, HTTPS unless --metrics-secure=false; "
                   "0 = none [env KUBEDRA_METRICS_PORT; default 8080]")
@click.option("--metrics-address", default=None,
              help="IP addresses /metrics and /healthz listen on, comma-separated; 0.0.0.0 = "
                   "every interface [env KUBEDRA_METRICS_ADDRESS; default 127.0.0.1]")
@click.option("--kubelet-registry-dir", type=click.Path(path_type=Path), default=None,
              help="Where the kubelet looks for plugin registration sockets "
                   "[env KUBEDRA_KUBELET_REGISTRY_DIR; default /var/lib/kubelet/plugins_registry]")
@click.option("--kubelet-plugins-dir", type=click.Path(path_type=Path), default=None,
              help="Where the DRA socket and the checkpoint go "
                   "[env KUBEDRA_KUBELET_PLUGINS_DIR; default /var/lib/kubelet/plugins]")
@click.option("--cdi-dir", type=click.Path(path_type=Path), default=None,
              help="Where CDI specs are written [env KUBEDRA_CDI_DIR; default /var/run/cdi]")
@click.option("--mig", type=click.Choice(["none", "partitions"]), default=None,
              help="discovery.mig of the DeviceInventory the agent creates for its node (an "
                   "existing one is left as it is) [env KUBEDRA_MIG; default none]")
@click.option("--device-root", type=click.Path(path_type=Path), default=None,
              help="Where the host's device nodes are, for replayed hardware with stand-in "
                   "nodes [env KUBEDRA_DEVICE_ROOT; default /]")
def agent_command(**flags: object) -> None:
    """Run the node agent: discover devices, report them, renew the agent Lease, and serve
    the kubelet's DRA plugin API."""
    settings = settings_from_flags(**flags)
    if not settings.node_name:
        raise click.UsageError("the agent needs its node: --node-name or KUBEDRA_NODE_NAME")
    configure_logging(settings.log_format, settings.log_level)
    try:
        asyncio.run(run_agent(settings))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM
        pass
    except (OSError, KubeconfigError, CertificateError) as err:  # the metrics port or its
        # certificate, a socket directory
        raise click.ClickException(str(err)) from None
