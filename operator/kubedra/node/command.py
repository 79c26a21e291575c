"""``kubedra agent``: the node agent (discovery, Lease, DeviceInventory status)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from kubedra.logging import configure_logging
from kubedra.node.agent import run_agent
from kubedra.settings import common_options, settings_from_flags


@click.command("agent")
@common_options
@click.option("--node-name", default=None, help="This node [env KUBEDRA_NODE_NAME]")
@click.option("--driver", default=None,
              help="Driver name [env KUBEDRA_DRIVER; default gpu.kubedra.io]")
@click.option("--backend", default=None,
              help="Discovery backend: pci, nvml, snapshot:<folder>, static "
                   "[env KUBEDRA_BACKEND; default pci]")
@click.option("--sysfs-root", type=click.Path(path_type=Path), default=None,
              help="sysfs mount [env KUBEDRA_SYSFS_ROOT; default /sys]")
@click.option("--rescan-interval", type=float, default=None,
              help="Seconds between scans [env KUBEDRA_RESCAN_INTERVAL; default 30]")
@click.option("--lease-duration", type=int, default=None,
              help="Lease validity in seconds [env KUBEDRA_LEASE_DURATION; default 40]")
def agent_command(**flags: object) -> None:
    """Run the node agent: discover devices, report them, renew the agent Lease."""
    settings = settings_from_flags(**flags)
    configure_logging(settings.log_format, settings.log_level)
    asyncio.run(run_agent(settings))
