"""The ``kubedra`` command line (also ``python -m kubedra``).

Each subsystem defines its own click command next to its code; this module only assembles them.
"""

from __future__ import annotations

import click

from kubedra import __version__
from kubedra.api.crd import crd_command
from kubedra.discovery.command import discover_command
from kubedra.explain.command import explain_command, simulate_command
from kubedra.handlers.command import operator_command
from kubedra.node.command import agent_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kubedra")
def main() -> None:
    """kubedra: GPUs, MIG partitions and PCI devices for Kubernetes through DRA."""


main.add_command(crd_command)
main.add_command(discover_command)
main.add_command(operator_command)
main.add_command(agent_command)
main.add_command(explain_command)
main.add_command(simulate_command)
