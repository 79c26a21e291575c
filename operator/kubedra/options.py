"""Click options shared by the commands: the kubeconfig, and what every long-running command
takes (kubeconfig, namespace, logging, how the metrics port is secured). Each option defaults
to ``None`` ("not given"), so that :func:`kubedra.settings.settings_from_flags` falls back to
the environment, then the defaults."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

kubeconfig_option = click.option(
    "--kubeconfig", type=click.Path(path_type=Path), default=None, envvar="KUBEDRA_KUBECONFIG",
    help="Kubeconfig file [env KUBEDRA_KUBECONFIG; default in-cluster, then $KUBECONFIG or "
         "~/.kube/config]")
"""The ``--kubeconfig`` option of every command that talks to the API server; click reads
``$KUBEDRA_KUBECONFIG`` when it is not given, as :class:`kubedra.settings.Settings` would (so the
command line's explain need not import the settings)."""

kubectl_kubeconfig_option = click.option(
    "--kubeconfig", type=click.Path(path_type=Path), default=None, envvar="KUBEDRA_KUBECONFIG",
    help="Kubeconfig file [env KUBEDRA_KUBECONFIG; default kubectl's: $KUBECONFIG, then "
         "~/.kube/config, then in-cluster]")
"""The ``--kubeconfig`` option of the commands that read the cluster through kubectl
(explain, simulate, dump, status: :class:`kubedra.explain.kubectl.Kubectl`), which finds
the configuration in kubectl's order, not in :data:`kubeconfig_option`'s."""


def missing_kubeconfig(kubeconfig: Path | None) -> str | None:
    """Why no kubeconfig is there, or None: ``kubeconfig`` (``--kubeconfig``), else each file of
    ``$KUBECONFIG`` (a list), else ``~/.kube/config``, does not exist (``no kubeconfig found:
    /x does not exist …``). Outside a pod, kubectl and the clients then fall back to
    ``localhost:8080`` or fail with a message that does not say so; in a pod, to the in-cluster
    service account (the caller checks that first)."""
    where = str(kubeconfig) if kubeconfig is not None else \
        os.environ.get("KUBECONFIG") or "~/.kube/config"
    if any(Path(p).expanduser().exists() for p in where.split(os.pathsep) if p):
        return None
    return (f"no kubeconfig found: {where} does not exist (give --kubeconfig, "
            "KUBEDRA_KUBECONFIG or KUBECONFIG, or run in a pod)")


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Click options every long-running command takes: kubeconfig, namespace, logging, how
    the metrics port is secured."""
    for option in reversed([
        kubeconfig_option,
        click.option("--namespace", default=None,
                     help="Namespace of the operator and agent Leases "
                          "[env KUBEDRA_NAMESPACE; default kubedra-system]"),
        click.option("--log-format", type=click.Choice(["json", "console"]), default=None,
                     help="Log renderer [env KUBEDRA_LOG_FORMAT; default console]"),
        click.option("--log-level", default=None,
                     help="Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL "
                          "[env KUBEDRA_LOG_LEVEL; default INFO]"),
        click.option("--metrics-secure", type=click.BOOL, default=None,
                     help="Serve /metrics over HTTPS to scrapers the API server authenticates "
                          "and authorizes (get on the non-resource URL /metrics); false: "
                          "plain HTTP to anyone, for local development only "
                          "[env KUBEDRA_METRICS_SECURE; default true]"),
        click.option("--metrics-cert-dir", type=click.Path(path_type=Path, file_okay=False),
                     default=None,
                     help="Directory of the metrics port's tls.crt and tls.key, reloaded when "
                          "they change [env KUBEDRA_METRICS_CERT_DIR; default a self-signed "
                          "certificate made at start]"),
    ]):
        command = option(command)
    return command
