"""Click options shared by the commands: the kubeconfig, and what every long-running command
takes (kubeconfig, namespace, logging). Each option defaults to ``None`` ("not given"), so that
:func:`kubedra.settings.settings_from_flags` falls back to the environment, then the defaults."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

kubeconfig_option = click.option(
    "--kubeconfig", type=click.Path(path_type=Path), default=None,
    help="Kubeconfig file [env KUBEDRA_KUBECONFIG; default in-cluster, then $KUBECONFIG or "
         "~/.kube/config]")
"""The ``--kubeconfig`` option of every command that talks to the API server."""


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Click options every long-running command takes: kubeconfig, namespace, logging."""
    for option in reversed([
        kubeconfig_option,
        click.option("--namespace", default=None,
                     help="Namespace of the operator and agent Leases "
                          "[env KUBEDRA_NAMESPACE; default kubedra-system]"),
        click.option("--log-format", type=click.Choice(["json", "console"]), default=None,
                     help="Log renderer [env KUBEDRA_LOG_FORMAT; default console]"),
        click.option("--log-level", default=None,
                     help="Log level [env KUBEDRA_LOG_LEVEL; default INFO]"),
    ]):
        command = option(command)
    return command
