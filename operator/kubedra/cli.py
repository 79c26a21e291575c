"""The ``kubedra`` command line (also ``python -m kubedra``) and the kubectl plugin ``kubectl dra``.

Each subsystem defines its own click command next to its code; this module only assembles
them, lazily: a subcommand's module (and the Kubernetes client, kopf, the allocator it
imports) is loaded only when that subcommand runs, so ``kubedra --help`` and ``kubectl dra
--help`` start in the time of Python and click (``bench/cli.py`` measures it). The short help
of each subcommand is written here for the listing; a unit test keeps it equal to the
command's own.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from kubedra import __version__

_HELP = {"help_option_names": ["-h", "--help"]}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use.

    ``lazy`` maps a subcommand's name to ``("module:attribute", short help)``.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand, without importing any."""
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return subcommand ``cmd_name`` (None when there is none)."""
        if cmd_name not in self.lazy:
            return None
        module, _, attribute = self.lazy[cmd_name][0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The ``Commands:`` listing from the short help written here (no imports)."""
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_EXPLAIN = ("kubedra.explain.command:explain_command",
            "Why a ResourceClaim is pending, or why its devices fit.")
_SIMULATE = ("kubedra.explain.command:simulate_command",
             "Where a claim would fit now, and how many copies fit.")
_DUMP = ("kubedra.explain.command:dump_command",
         "Write what explain needs from the cluster to a file.")
_STATUS = ("kubedra.explain.status_command:status_command",
           "What is free where: devices and pending claims.")


@click.group(cls=LazyGroup, context_settings=_HELP, lazy={
    "crd": ("kubedra.api.crd:crd_command",
            "Print the DeviceInventory CustomResourceDefinition (YAML)."),
    "discover": ("kubedra.discovery.command:discover_command",
                 "Print the devices and counter sets a backend finds."),
    "operator": ("kubedra.handlers.command:operator_command",
                 "Run the operator (publish slices, reconcile claims)."),
    "agent": ("kubedra.node.command:agent_command",
              "Run the node agent (discovery, kubelet DRA plugin)."),
    "explain": _EXPLAIN,
    "simulate": _SIMULATE,
    "dump": _DUMP,
    "status": _STATUS,
    "probe": ("kubedra.probe:probe_command",
              "Ask a kubedra process for /healthz over its Unix socket."),
})
@click.version_option(__version__, prog_name="kubedra")
def main() -> None:
    """kubedra: GPUs, MIG partitions and PCI devices for Kubernetes through DRA."""


@click.group("dra", cls=LazyGroup, context_settings=_HELP,
             lazy={"explain": _EXPLAIN, "simulate": _SIMULATE, "dump": _DUMP,
                   "status": _STATUS})
def kubectl_dra() -> None:
    """kubectl dra: why ResourceClaims are pending, and what would fit (kubedra).

    Reads ResourceSlices, DeviceClasses, DeviceTaintRules, ResourceClaims, nodes and pods
    with the kubeconfig of $KUBECONFIG (or --kubeconfig after the subcommand), or from a
    dump of them (--from), and runs kubedra's allocator, which decides as the
    kube-scheduler of the cluster's Kubernetes minor does (1.34 to 1.38; --kube-version
    chooses another).

    \b
    Examples:
      kubectl dra explain resourceclaim my-claim -n my-namespace
      kubectl dra explain resourceclaim my-claim -o json
      kubectl dra simulate -f claim.yaml
      kubectl dra dump -o cluster.json
      kubectl dra status --by node
    """


OWN_PROCESS = {"ownProcess": True}
"""The click context object of a command line that has its process to itself (the
executables, ``python -m kubedra``): a one-shot command may then end the process as soon as it
has written its output (:func:`kubedra.explain.command.done`). Commands run otherwise (click's
test runner, another program) get none and return."""


def run() -> None:
    """Entry point of the ``kubedra`` executable and of ``python -m kubedra``."""
    main(obj=OWN_PROCESS)


def kubectl_plugin() -> None:
    """Entry point of the ``kubectl-dra`` executable (kubectl runs it for ``kubectl dra``)."""
    kubectl_dra(prog_name="kubectl dra", args=sys.argv[1:], obj=OWN_PROCESS)
