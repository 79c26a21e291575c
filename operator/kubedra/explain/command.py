"""``kubedra explain`` and ``kubedra simulate``, also the kubectl plugin ``kubectl dra``.

``kubectl-dra`` (a console script of the package) is found by kubectl on ``PATH``, so
``kubectl dra explain resourceclaim NAME -n NS`` runs :data:`explain_command`. kubectl passes
no flags of its own to a plugin; the plugin reads ``$KUBECONFIG`` (or ``--kubeconfig``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from kubernetes_asyncio.client import ApiException
from pydantic import ValidationError

from kubedra import kube
from kubedra.api.resource import ResourceClaim
from kubedra.explain.claims import explain_claim
from kubedra.explain.model import ClaimExplanation
from kubedra.explain.render import render_explanation, render_simulation
from kubedra.explain.simulate import (
    MAX_COPIES,
    ClaimFileError,
    Simulation,
    claim_from_documents,
    simulate_claim,
)
from kubedra.explain.snapshot import pods_using, read_snapshot
from kubedra.options import kubeconfig_option
from kubedra.settings import settings_from_flags

CLAIM_KINDS = ("resourceclaim", "resourceclaims", "claim")

_namespace_option = click.option(
    "-n", "--namespace", default=None,
    help="Namespace of the claim [default: the kubeconfig context's, else default]")
_output_option = click.option("-o", "--output", type=click.Choice(["table", "json"]),
                              default="table", show_default=True, help="Output format")
_node_option = click.option("--node", "nodes", multiple=True, metavar="NODE",
                            help="Evaluate only this node (repeatable) [default: all]")


def _api_error(err: ApiException, what: str) -> click.ClickException:
    if err.status == 404:
        return click.ClickException(f"{what} not found")
    if err.status == 403:
        return click.ClickException(f"forbidden: {what} (explain needs get on the claim and list "
                                    "on resourceslices, deviceclasses, devicetaintrules, "
                                    "resourceclaims, nodes and pods)")
    return click.ClickException(f"{what}: {err.status} {err.reason}")


async def _explain(kubeconfig: Path | None, namespace: str, name: str,
                   nodes: tuple[str, ...]) -> ClaimExplanation:
    api = await kube.make_api_client(kubeconfig)
    async with api:
        claim = await kube.get_resource_claim(api, namespace, name)
        snapshot = await read_snapshot(api)
        pods = await pods_using(api, claim)
    return explain_claim(snapshot, claim, pods, nodes=nodes or None)


async def _simulate(kubeconfig: Path | None, claim: ResourceClaim, nodes: tuple[str, ...],
                    max_copies: int) -> Simulation:
    api = await kube.make_api_client(kubeconfig)
    async with api:
        snapshot = await read_snapshot(api)
    return simulate_claim(snapshot, claim, nodes=nodes or None, max_copies=max_copies)


def _print(data: dict[str, Any] | None, text: str | None) -> None:
    if data is not None:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(text, nl=False)


@click.command("explain", short_help="Why a ResourceClaim is pending, or why its devices fit.")
@click.argument("kind", type=click.Choice(CLAIM_KINDS, case_sensitive=False),
                metavar="resourceclaim")
@click.argument("name")
@_namespace_option
@_output_option
@_node_option
@kubeconfig_option
def explain_command(kind: str, name: str, namespace: str | None, output: str,
                    nodes: tuple[str, ...], kubeconfig: Path | None) -> None:
    """Why is ResourceClaim NAME pending (or what was allocated, and why it fits)?

    For each node the claim's pods may run on, and each request: how many devices are in
    the class, match the request's selectors, are free, have capacity and shared counters
    left, are not tainted; then, for the check that failed, why each device failed it.

    \b
    Examples:
      kubedra explain resourceclaim too-big-gpu-x7k2p -n demo
      kubectl dra explain resourceclaim too-big-gpu-x7k2p -n demo -o json
    """
    settings = settings_from_flags(kubeconfig=kubeconfig)
    namespace = namespace or kube.context_namespace(settings.kubeconfig)
    try:
        explanation = asyncio.run(_explain(settings.kubeconfig, namespace, name, nodes))
    except ApiException as err:
        raise _api_error(err, f'resourceclaim "{name}" in namespace "{namespace}"') from None
    _print(explanation.to_json() if output == "json" else None, render_explanation(explanation))


@click.command("simulate", short_help="Where a claim would fit now, and how many copies fit.")
@click.option("-f", "--filename", type=click.File("r"), required=True,
              help="YAML file with a ResourceClaim or ResourceClaimTemplate ('-': stdin)")
@_namespace_option
@_output_option
@_node_option
@click.option("--max-copies", type=click.IntRange(min=0), default=MAX_COPIES,
              show_default=True, help="Stop counting copies here")
@kubeconfig_option
def simulate_command(filename: Any, namespace: str | None, output: str,
                     nodes: tuple[str, ...], max_copies: int, kubeconfig: Path | None) -> None:
    """On which nodes would this claim fit now, and how many copies of it fit?

    Reads the cluster, explains the claim on every node (as explain does), then allocates
    copies of it one after another, each on the first node (by name) where it still fits,
    until none fits. Nothing is written to the cluster.

    \b
    Examples:
      kubedra simulate -f claim.yaml
      kubectl dra simulate -f template.yaml -o json
    """
    settings = settings_from_flags(kubeconfig=kubeconfig)
    try:
        claim = claim_from_documents(yaml.safe_load_all(filename), namespace)
    except (ClaimFileError, ValidationError, yaml.YAMLError) as err:
        raise click.ClickException(f"{filename.name}: {err}") from None
    try:
        simulation = asyncio.run(_simulate(settings.kubeconfig, claim, nodes, max_copies))
    except ApiException as err:
        raise _api_error(err, "reading the cluster") from None
    _print(simulation.to_json() if output == "json" else None, render_simulation(simulation))


@click.group("dra", context_settings={"help_option_names": ["-h", "--help"]})
def kubectl_dra() -> None:
    """kubectl dra: why ResourceClaims are pending, and what would fit (kubedra).

    Reads ResourceSlices, DeviceClasses, DeviceTaintRules, ResourceClaims, nodes and pods
    with the kubeconfig of $KUBECONFIG (or --kubeconfig after the subcommand) and runs
    kubedra's allocator, which decides as the v1.37 kube-scheduler does.

    \b
    Examples:
      kubectl dra explain resourceclaim my-claim -n my-namespace
      kubectl dra explain resourceclaim my-claim -o json
      kubectl dra simulate -f claim.yaml
    """


kubectl_dra.add_command(explain_command)
kubectl_dra.add_command(simulate_command)


def kubectl_plugin() -> None:
    """Entry point of the ``kubectl-dra`` executable (kubectl runs it for ``kubectl dra``)."""
    kubectl_dra(prog_name="kubectl dra", args=sys.argv[1:])
