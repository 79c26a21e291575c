"""``kubedra discover``: print what a discovery backend finds, without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml
from pydantic import ValidationError

from kubedra.api.base import validation_errors
from kubedra.api.inventory import DiscoverySettings, PCIDiscovery
from kubedra.discovery.backends import discover
from kubedra.discovery.errors import DiscoveryError
from kubedra.logging import configure_logging


@click.command("discover", short_help="Print the devices and counter sets a backend finds.")
@click.option("--backend", envvar="KUBEDRA_BACKEND", default="pci", show_default=True,
              help="pci, nvml, snapshot:<capture folder> or static.")
@click.option("--mig", type=click.Choice(["none", "partitions"]), default="none",
              show_default=True, help="Also publish every MIG placement (NVIDIA backends).")
@click.option("--sysfs-root", envvar="KUBEDRA_SYSFS_ROOT", default=Path("/sys"),
              show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where sysfs is mounted (pci and nvml backends).")
@click.option("--pci-vendor", "vendors", multiple=True,
              help="Report only this PCI vendor ID, e.g. 0x10de (repeatable; pci backend).")
@click.option("--pci-class", "classes", multiple=True,
              help="Report only PCI classes starting so, e.g. 0x0302 (repeatable; pci backend).")
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), default="json",
              show_default=True)
def discover_command(backend: str, mig: str, sysfs_root: Path, vendors: tuple[str, ...],
                     classes: tuple[str, ...], output: str) -> None:
    """Print the DiscoveryResult (devices, counter sets, and what the API server would refuse)
    of a backend as API JSON or YAML.

    Exits 1 with the reason when the backend fails (unknown name, unreadable source).
    """
    configure_logging("console", "WARNING")  # warnings to stderr; stdout is the result only
    try:
        settings = DiscoverySettings(
            mig=mig,
            pci=PCIDiscovery(vendors=list(vendors) or None, classes=list(classes) or None),
        )
    except ValidationError as err:
        error = err.errors()[0]
        flag, values = ("--pci-vendor", vendors) if error["loc"][0] == "vendors" else \
            ("--pci-class", classes)
        raise click.ClickException(f"{flag} {values[int(error['loc'][1])]!r}: "
                                   f"{validation_errors(err, 'pci')[0]}") from None
    try:
        result = discover(backend, settings, sysfs_root).to_api()
    except DiscoveryError as err:
        raise click.ClickException(str(err)) from err
    if output == "yaml":
        click.echo(yaml.safe_dump(result, sort_keys=False), nl=False)
    else:
        click.echo(json.dumps(result, indent=2))
