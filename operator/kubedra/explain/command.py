"""``kubedra explain`` and ``kubedra simulate``, also the kubectl plugin ``kubectl dra``.

``kubectl-dra`` (a console script of the package, :func:`kubedra.cli.kubectl_plugin`) is found
by kubectl on ``PATH``, so ``kubectl dra explain resourceclaim NAME -n NS`` runs
:data:`explain_command`. kubectl passes no flags of its own to a plugin; the plugin reads
``$KUBECONFIG`` (or ``--kubeconfig``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from pydantic import ValidationError

from kubedra.api.resource import ResourceClaim
from kubedra.explain.claims import explain_claim
from kubedra.explain.model import ClaimExplanation
from kubedra.explain.pods import PodExplanation, explain_pod
from kubedra.explain.render import render_explanation, render_pod_explanation, render_simulation
from kubedra.explain.simulate import (
    MAX_COPIES,
    ClaimFileError,
    Simulation,
    claim_from_documents,
    simulate_claim,
)
from kubedra.explain.snapshot import PodPlacement
from kubedra.explain.sources import (
    ClusterObjects,
    DumpError,
    dump_text,
    pods_using,
    read_cluster,
    read_dump,
)
from kubedra.options import kubeconfig_option

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiException

CLAIM_KINDS = ("resourceclaim", "resourceclaims", "claim")
POD_KINDS = ("pod", "pods", "po")

_namespace_option = click.option(
    "-n", "--namespace", default=None,
    help="Namespace of the claim [default: the kubeconfig context's, else default]")
_output_option = click.option("-o", "--output", type=click.Choice(["table", "json"]),
                              default="table", show_default=True, help="Output format")
_node_option = click.option("--node", "nodes", multiple=True, metavar="NODE",
                            help="Evaluate only this node (repeatable) [default: all]")
_all_option = click.option(
    "--all", "every_node", is_flag=True,
    help="Show every node on its own [default: nodes that fail the same way are grouped]")
_from_option = click.option(
    "--from", "dumps", multiple=True, metavar="PATH", type=click.Path(path_type=Path),
    help="Read the cluster from a dump instead: a file or directory of YAML/JSON as `kubectl "
         "get resourceslices,deviceclasses,devicetaintrules,resourceclaims,nodes,pods -A -o "
         "yaml` or `kubedra dump` writes (repeatable)")


def _api_error(err: ApiException, what: str) -> click.ClickException:
    if err.status == 404:
        return click.ClickException(f"{what} not found")
    if err.status == 403:
        return click.ClickException(f"forbidden: {what} (explain needs get on the claim and list "
                                    "on resourceslices, deviceclasses, devicetaintrules, "
                                    "resourceclaims, nodes and pods)")
    return click.ClickException(f"{what}: {err.status} {err.reason}")


def _run_live(kubeconfig: Path | None, what: str, read: Any) -> Any:
    """Run ``read(api)`` against the cluster; API errors become a message naming ``what``.

    The Kubernetes client is imported here, so that a dump is explained without it.
    """
    from kubernetes_asyncio.client import ApiException

    from kubedra import kube
    from kubedra.settings import settings_from_flags

    async def run() -> Any:
        api = await kube.make_api_client(settings_from_flags(kubeconfig=kubeconfig).kubeconfig)
        async with api:
            return await read(api)

    try:
        return asyncio.run(run())
    except ApiException as err:
        raise _api_error(err, what) from None


def _default_namespace(namespace: str | None, kubeconfig: Path | None, dumps: tuple[Path, ...]
                       ) -> str:
    if namespace:
        return namespace
    if dumps:
        return "default"
    from kubedra import kube
    from kubedra.settings import settings_from_flags
    return kube.context_namespace(settings_from_flags(kubeconfig=kubeconfig).kubeconfig)


def _read_dump(dumps: tuple[Path, ...]) -> ClusterObjects:
    try:
        return read_dump(dumps)
    except DumpError as err:
        raise click.ClickException(str(err)) from None


def _explain(kubeconfig: Path | None, dumps: tuple[Path, ...], namespace: str, name: str,
             nodes: tuple[str, ...]) -> ClaimExplanation:
    what = f'resourceclaim "{name}" in namespace "{namespace}"'
    if dumps:
        objects = _read_dump(dumps)
        found = objects.claim(namespace, name)
        if found is None:
            raise click.ClickException(f"{what} not found")
        claim = found
    else:
        async def read(api: Any) -> tuple[ResourceClaim, ClusterObjects]:
            from kubedra import kube
            return (await kube.get_resource_claim(api, namespace, name),
                    await read_cluster(api, namespace))
        claim, objects = _run_live(kubeconfig, what, read)
    return explain_claim(objects.snapshot(), claim, pods_using(claim, objects.pods),
                         nodes=nodes or None)


def _explain_pod(kubeconfig: Path | None, dumps: tuple[Path, ...], namespace: str, name: str,
                 nodes: tuple[str, ...]) -> PodExplanation:
    what = f'pod "{name}" in namespace "{namespace}"'
    if dumps:
        objects = _read_dump(dumps)
    else:
        objects = _run_live(kubeconfig, what, lambda api: read_cluster(api, namespace))
    pod = next((p for p in objects.pods if (p.get("metadata") or {}).get("namespace")
                == namespace and (p.get("metadata") or {}).get("name") == name), None)
    if pod is None:
        raise click.ClickException(f"{what} not found")
    placement = PodPlacement.from_api(pod)
    claims = [c for c in (objects.claim(namespace, n) for n in placement.claims) if c is not None]
    return explain_pod(objects.snapshot(), placement, claims, nodes=nodes or None)


def _simulate(kubeconfig: Path | None, dumps: tuple[Path, ...], claim: ResourceClaim,
              nodes: tuple[str, ...], max_copies: int) -> Simulation:
    if dumps:
        objects = _read_dump(dumps)
    else:
        objects = _run_live(kubeconfig, "reading the cluster",
                            lambda api: read_cluster(api, None, with_pods=False))
    return simulate_claim(objects.snapshot(), claim, nodes=nodes or None, max_copies=max_copies)


def _print(data: dict[str, Any] | None, text: str | None) -> None:
    if data is not None:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(text, nl=False)


@click.command("explain", short_help="Why a ResourceClaim is pending, or why its devices fit.")
@click.argument("kind", type=click.Choice(CLAIM_KINDS + POD_KINDS, case_sensitive=False),
                metavar="resourceclaim|pod")
@click.argument("name")
@_namespace_option
@_output_option
@_node_option
@_all_option
@_from_option
@kubeconfig_option
def explain_command(kind: str, name: str, namespace: str | None, output: str,
                    nodes: tuple[str, ...], every_node: bool, dumps: tuple[Path, ...],
                    kubeconfig: Path | None) -> None:
    """Why is ResourceClaim (or Pod) NAME pending (or what was allocated, and why it fits)?

    For each node the claim's pods may run on, and each request: how many devices are in
    the class, match the request's selectors, are free, have capacity and shared counters
    left, are not tainted; then, for the check that failed, why each device failed it.
    For a pod: all of its claims together on each node, as the scheduler allocates them.

    \b
    Examples:
      kubedra explain resourceclaim too-big-gpu-x7k2p -n demo
      kubectl dra explain resourceclaim too-big-gpu-x7k2p -n demo -o json
      kubectl dra explain resourceclaim too-big-gpu-x7k2p -n demo --from dump.yaml
      kubectl dra explain pod too-big -n demo
    """
    namespace = _default_namespace(namespace, kubeconfig, dumps)
    if kind.lower() in POD_KINDS:
        pod = _explain_pod(kubeconfig, dumps, namespace, name, nodes)
        _print(pod.to_json() if output == "json" else None, render_pod_explanation(pod))
        return
    explanation = _explain(kubeconfig, dumps, namespace, name, nodes)
    _print(explanation.to_json() if output == "json" else None,
           render_explanation(explanation, every_node=every_node))


@click.command("simulate", short_help="Where a claim would fit now, and how many copies fit.")
@click.option("-f", "--filename", type=click.File("r"), required=True,
              help="YAML file with a ResourceClaim or ResourceClaimTemplate ('-': stdin)")
@_namespace_option
@_output_option
@_node_option
@click.option("--max-copies", type=click.IntRange(min=0), default=MAX_COPIES,
              show_default=True, help="Stop counting copies here")
@_all_option
@_from_option
@kubeconfig_option
def simulate_command(filename: Any, namespace: str | None, output: str,
                     nodes: tuple[str, ...], max_copies: int, every_node: bool,
                     dumps: tuple[Path, ...], kubeconfig: Path | None) -> None:
    """On which nodes would this claim fit now, and how many copies of it fit?

    Reads the cluster, explains the claim on every node (as explain does), then allocates
    copies of it one after another, each on the first node (by name) where it still fits,
    until none fits. Nothing is written to the cluster.

    \b
    Examples:
      kubedra simulate -f claim.yaml
      kubectl dra simulate -f template.yaml -o json
    """
    try:
        claim = claim_from_documents(yaml.safe_load_all(filename), namespace)
    except (ClaimFileError, ValidationError, yaml.YAMLError) as err:
        raise click.ClickException(f"{filename.name}: {err}") from None
    simulation = _simulate(kubeconfig, dumps, claim, nodes, max_copies)
    _print(simulation.to_json() if output == "json" else None,
           render_simulation(simulation, every_node=every_node))


@click.command("dump", short_help="Write what explain needs from the cluster to a file.")
@click.option("-o", "--output", "path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="File to write [default: standard output]")
@kubeconfig_option
def dump_command(path: Path | None, kubeconfig: Path | None) -> None:
    """Write the objects explain and simulate read, for `--from` (e.g. in a support request).

    One YAML List of every ResourceSlice, DeviceClass, DeviceTaintRule, ResourceClaim, Node and
    Pod, with only the fields explain reads: a pod's name, namespace, uid, node name, node
    selector, node affinity and claims (never its containers or their environment); a node's
    name and labels. Secrets, ConfigMaps and everything else are never read.

    \b
    Examples:
      kubectl dra dump -o cluster.yaml
      kubectl dra explain resourceclaim my-claim -n my-namespace --from cluster.yaml
    """
    objects = _run_live(kubeconfig, "reading the cluster",
                        lambda api: read_cluster(api, None))
    text = dump_text(objects)
    if path is None:
        sys.stdout.write(text)
    else:
        path.write_text(text)
