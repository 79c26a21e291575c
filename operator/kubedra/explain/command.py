"""``kubedra explain`` and ``kubedra simulate``, also the kubectl plugin ``kubectl dra``.

``kubectl-dra`` (a console script of the package, :func:`kubedra.cli.kubectl_plugin`) is found
by kubectl on ``PATH``, so ``kubectl dra explain resourceclaim NAME -n NS`` runs
:data:`explain_command`. kubectl passes no flags of its own to a plugin; the plugin reads the
cluster by running kubectl (:mod:`kubedra.explain.kubectl`), which reads ``$KUBECONFIG`` (or the
plugin's ``--kubeconfig``).

This module imports only click and the kubectl reader at the top: a command starts kubectl
first (:func:`_cluster`) and imports the allocator, the models, CEL and the renderer inside
the functions that use them, so the two overlap (bench/cli.py).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from kubedra.explain.kubectl import Kubectl, KubectlError, KubectlMissing, KubectlProxy
from kubedra.explain.model import MAX_COPIES
from kubedra.options import kubectl_kubeconfig_option

if TYPE_CHECKING:
    from kubedra.api.resource import ResourceClaim
    from kubedra.explain.model import ClaimExplanation
    from kubedra.explain.pods import PodExplanation
    from kubedra.explain.simulate import Simulation
    from kubedra.explain.snapshot import ClusterSnapshot
    from kubedra.explain.sources import ClusterObjects

_P = ParamSpec("_P")
_R = TypeVar("_R")

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


def _parse_kube_version(_ctx: click.Context, _param: click.Parameter,
                        value: str | None) -> str | None:
    """``--kube-version``'s minor, checked; the allocator is imported only when one is given
    (click calls this while it parses the command line, before kubectl starts: importing it
    there held kubectl proxy back by the whole import, 0.8 s of a live explain at load 7,
    bench/RESULTS.md "… branch `explain4`")."""
    if not value:
        return None
    from kubedra.allocation import KubeVersion, UnknownKubeVersionError

    try:
        return str(KubeVersion.parse(value))
    except UnknownKubeVersionError as err:
        raise click.BadParameter(str(err)) from None


_kube_version_option = click.option(
    "--kube-version", metavar="MINOR", default=None, callback=_parse_kube_version,
    help="Decide as this Kubernetes minor's scheduler (1.34 to 1.38: its default feature gates "
         "and allocator rules) [default: the cluster's, or the version a `kubedra dump` "
         "recorded; 1.37 for a dump without one]")


def one_shot(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``command`` (a whole explain, simulate, status or dump) with Python's cyclic
    garbage collector off, and on again after it.

    These commands build the whole cluster once (the decoded objects, the models of every
    device) and keep it until they end: millions of containers that live to the end, not
    cycles. CPython collects its oldest generation whenever the objects made since its last
    collection exceed a quarter of those it holds, and each such collection walks them all:
    on the 2,000-node dump that walking was most of the command's CPU (5.7 s of which 3.5 s,
    bench/RESULTS.md, round 6). Reference counting still frees everything that is not a
    cycle, and the process's end frees the rest.

    The operator runs each evaluation of its explainer so too (in its explainer thread; the
    collector is off for the whole process meanwhile, and finds any cycle at its next run):
    the full collections an evaluation set off walked every object of the operator's caches
    and snapshot, most of a question's CPU at 2,000 nodes (bench/RESULTS.md, "Live explain
    at 2,000 kwok nodes").
    """
    @functools.wraps(command)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return run


def done() -> None:
    """End the process now, without freeing what the command built, when the command line
    has the process to itself (:data:`kubedra.cli.OWN_PROCESS`); else return.

    Freeing the objects of a 2,000-node cluster one by one took 0.4 to 0.5 s of CPU, a fifth
    of the command (bench/RESULTS.md, round 6); the operating system reclaims the memory at
    once. Standard output and error are flushed first; a command calls this only after its
    last write and with every file and child process closed (kubectl's proxy is stopped when
    :func:`_cluster` exits). mypy ends its process the same way (``mypy.util.hard_exit``).
    """
    context = click.get_current_context(silent=True)
    root = context.find_root().obj if context is not None else None
    if isinstance(root, dict) and root.get("ownProcess"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _kubectl_error(err: KubectlError, what: str) -> click.ClickException:
    if err.reason == "Forbidden":
        return click.ClickException(f"forbidden: {what} (explain needs list on "
                                    "resourceslices, deviceclasses, devicetaintrules, "
                                    f"resourceclaims, nodes and pods): {err.message}")
    if isinstance(err, KubectlMissing):
        return click.ClickException(err.message)
    return click.ClickException(f"{what}: {err.message}")


@contextlib.contextmanager
def _cluster(kubeconfig: Path | None, dumps: tuple[Path, ...]) -> Iterator[KubectlProxy | None]:
    """The live cluster's reader, started first (``None`` when reading ``dumps``): kubectl
    proxy starts while the allocator, the models and CEL are imported, which the functions
    below import only when called."""
    if dumps:
        yield None
        return
    try:
        proxy = Kubectl(kubeconfig).proxy()
    except KubectlError as err:
        raise click.ClickException(err.message) from None
    with proxy:
        yield proxy


def _read(proxy: KubectlProxy | None, dumps: tuple[Path, ...], what: str,
          pods_namespace: str | None, *, with_pods: bool = True, parse_slices: bool = True,
          nodes: tuple[str, ...] = ()) -> ClusterObjects:
    """The objects explain reads: :func:`_reading` at once."""
    return _reading(proxy, dumps, what, pods_namespace, with_pods=with_pods,
                    parse_slices=parse_slices, nodes=nodes)()


def _reading(proxy: KubectlProxy | None, dumps: tuple[Path, ...], what: str,
             pods_namespace: str | None, *, with_pods: bool = True, parse_slices: bool = True,
             nodes: tuple[str, ...] = ()) -> Callable[[], ClusterObjects]:
    """Start reading the objects explain reads; the function returned waits for them. From
    ``dumps`` when given (read when waited for), else from the live cluster
    (:class:`~kubedra.explain.sources.ClusterReading`, pods of ``pods_namespace``) in
    threads that start now, so that the API server lists while the caller imports the
    allocator, the models and CEL (the threads wait on their sockets most of the time, and
    imports hold the interpreter); waiting, the function parses the slices page by page as
    they come, unless not ``parse_slices``. Errors become a message naming ``what``, and so
    does a node of ``nodes`` (``--node``) that does not exist."""
    from kubedra.explain.sources import ClusterReading, DumpError, read_dump

    listing = None if proxy is None else ClusterReading(proxy, pods_namespace,
                                                         with_pods=with_pods)

    def objects_read() -> ClusterObjects:
        if listing is None:
            try:
                objects = read_dump(dumps)
            except DumpError as err:
                raise click.ClickException(str(err)) from None
        else:
            try:
                objects = listing.objects(parse_slices=parse_slices)
            except KubectlError as err:
                raise _kubectl_error(err, what) from None
        known = {(n.get("metadata") or {}).get("name") for n in objects.nodes}
        if missing := [n for n in nodes if n not in known]:
            raise click.ClickException("--node: " + ", ".join(
                f'node "{n}" does not exist' for n in missing))
        return objects

    return objects_read


def _default_namespace(namespace: str | None, kubeconfig: Path | None, dumps: tuple[Path, ...]
                       ) -> str:
    if namespace:
        return namespace
    if dumps:
        return "default"
    try:
        return Kubectl(kubeconfig).context_namespace()
    except KubectlError as err:
        raise click.ClickException(err.message) from None


@contextlib.contextmanager
def parsing() -> Iterator[None]:
    """An object that does not parse (a dump edited by hand or written by another tool) is
    an error naming it and each field, not a traceback."""
    from kubedra.explain.snapshot import ObjectError

    try:
        yield
    except ObjectError as err:
        raise click.ClickException(f"cannot read {err}") from None


def _snapshot(objects: ClusterObjects, kube_version: str | None) -> ClusterSnapshot:
    """The allocator's view of ``objects``, deciding as ``kube_version``'s scheduler
    (``--kube-version``), else as the cluster's (the version read or recorded in the dump);
    a note on standard error where that is not known or not fully followed, and for dumps
    the version they record.

    Raises:
        click.ClickException: dumps record different minors and no ``kube_version`` chooses;
            an object does not parse (:func:`parsing`).
    """
    from kubedra.allocation import KubeVersion, features_for, features_of_server

    if kube_version:
        features, note = features_for(KubeVersion.parse(kube_version)), ""
    elif objects.mixed_minors():
        raise click.ClickException(
            f"--from: the dumps are of different Kubernetes versions: {objects.versions_text()}; "
            "choose the one to decide as with --kube-version")
    else:
        features, note = features_of_server(objects.server_version)
        if not note and objects.recorded_versions:
            many = len(objects.recorded_versions) > 1
            note = (f"deciding as Kubernetes {features.version}'s scheduler, the version the "
                    f"dump{'s' if many else ''} record{'' if many else 's'}: "
                    f"{objects.versions_text()}")
    if note:
        click.echo(f"note: {note} (choose with --kube-version)", err=True)
    if features.pools_in_random_order:
        click.echo(f"note: Kubernetes {features.version}'s scheduler tries resource pools in an "
                   "order that differs run by run; where several pools could serve a request "
                   "it may pick other devices than shown", err=True)
    with parsing():
        return objects.snapshot(features)


def _explain(proxy: KubectlProxy | None, dumps: tuple[Path, ...], namespace: str, name: str,
             nodes: tuple[str, ...], kube_version: str | None) -> ClaimExplanation:
    what = f'resourceclaim "{name}" in namespace "{namespace}"'
    reading = _reading(proxy, dumps, what, namespace, nodes=nodes)
    from kubedra.explain.claims import explain_claim
    from kubedra.explain.sources import pods_using

    objects = reading()
    with parsing():
        claim = objects.claim(namespace, name)
    if claim is None:
        raise click.ClickException(f"{what} not found")
    snapshot = _snapshot(objects, kube_version)
    with parsing():
        pods = pods_using(claim, objects.pods)
    return explain_claim(snapshot, claim, pods, nodes=nodes or None)


def _explain_pod(proxy: KubectlProxy | None, dumps: tuple[Path, ...], namespace: str,
                 name: str, nodes: tuple[str, ...], kube_version: str | None) -> PodExplanation:
    what = f'pod "{name}" in namespace "{namespace}"'
    reading = _reading(proxy, dumps, what, namespace, nodes=nodes)
    from kubedra.api.resource import DeviceClass
    from kubedra.explain.extended import extended_resource_claim
    from kubedra.explain.pods import explain_pod
    from kubedra.explain.snapshot import PodPlacement, parsed

    objects = reading()
    pod = next((p for p in objects.pods if (p.get("metadata") or {}).get("namespace")
                == namespace and (p.get("metadata") or {}).get("name") == name), None)
    if pod is None:
        raise click.ClickException(f"{what} not found")
    with parsing():
        placement = PodPlacement.from_api(pod)
        claims = [c for c in (objects.claim(namespace, n) for n in placement.claims)
                  if c is not None]
        if not (pod.get("status") or {}).get("extendedResourceClaimStatus"):
            # extended resources (KEP-5004): the claim kube-scheduler would make for the pod
            made = extended_resource_claim(pod, [parsed("DeviceClass", DeviceClass.from_api, c)
                                                 for c in objects.classes])
            claims += [made] if made is not None else []
    return explain_pod(_snapshot(objects, kube_version), placement, claims,
                       nodes=nodes or None)


def _claim_documents(file: Any) -> list[Any]:
    """The YAML documents of simulate's ``-f`` file."""
    import yaml

    from kubedra.explain.sources import unreadable

    try:
        return list(yaml.safe_load_all(file))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise click.ClickException(unreadable(file.name, err)) from None


def _claim_file(name: str, documents: list[Any], namespace: str | None, *,
                effect_none: bool = True) -> ResourceClaim:
    """The claim of simulate's ``-f`` file ``name`` (a ResourceClaim or
    ResourceClaimTemplate), checked as the API server of Kubernetes 1.35 or later checks it,
    or with ``effect_none=False`` as 1.34's (``TAINT_EFFECT_NONE``)."""
    from kubedra.explain.simulate import ClaimFileError, claim_from_documents

    try:
        return claim_from_documents(documents, namespace, effect_none=effect_none)
    except ClaimFileError as err:
        raise click.ClickException(f"{name}: {err}") from None


def _simulate(proxy: KubectlProxy | None, dumps: tuple[Path, ...], file: Any,
              namespace: str | None, nodes: tuple[str, ...], max_copies: int,
              kube_version: str | None) -> Simulation:
    """Check the claim of ``file`` (before the cluster is read, so that a bad file costs no
    call), read the cluster, check the claim again as that cluster's minor if its rules are
    older, and simulate it."""
    from kubedra.allocation import TAINT_EFFECT_NONE
    from kubedra.explain.simulate import simulate_claim

    documents = _claim_documents(file)
    claim = _claim_file(file.name, documents, namespace)
    objects = _read(proxy, dumps, "reading the cluster", None, with_pods=False, nodes=nodes)
    snapshot = _snapshot(objects, kube_version)
    if not snapshot.resources.features.version.follows(TAINT_EFFECT_NONE):
        claim = _claim_file(file.name, documents, namespace, effect_none=False)
    return simulate_claim(snapshot, claim, nodes=nodes or None, max_copies=max_copies)


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
@_kube_version_option
@kubectl_kubeconfig_option
@one_shot
def explain_command(kind: str, name: str, namespace: str | None, output: str,
                    nodes: tuple[str, ...], every_node: bool, dumps: tuple[Path, ...],
                    kube_version: str | None, kubeconfig: Path | None) -> None:
    """Why is ResourceClaim (or Pod) NAME pending (or what was allocated, and why it fits)?

    For each node the claim's pods may run on, and each request: how many devices are in
    the class, match the request's selectors, are free, have capacity and shared counters
    left, are not tainted; then, for the check that failed, why each device failed it.
    For a pod: all of its claims together on each node, as the scheduler allocates them.

    \b
    Examples:
      kubedra explain resourceclaim too-big-gpu-x7k2p -n demo
      kubectl dra explain resourceclaim too-big-gpu-x7k2p -n demo -o json
      kubectl dra explain resourceclaim too-big-gpu-x7k2p -n demo --from dump.json
      kubectl dra explain resourceclaim too-big-gpu-x7k2p --from dump.json --kube-version 1.35
      kubectl dra explain pod too-big -n demo
    """
    with _cluster(kubeconfig, dumps) as proxy:
        namespace = _default_namespace(namespace, kubeconfig, dumps)
        if kind.lower() in POD_KINDS:
            pod = _explain_pod(proxy, dumps, namespace, name, nodes, kube_version)
        else:
            explanation = _explain(proxy, dumps, namespace, name, nodes, kube_version)
    from kubedra.explain.render import render_explanation, render_pod_explanation

    if kind.lower() in POD_KINDS:
        _print(pod.to_json() if output == "json" else None, render_pod_explanation(pod))
    else:
        _print(explanation.to_json() if output == "json" else None,
               render_explanation(explanation, every_node=every_node))
    done()


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
@_kube_version_option
@kubectl_kubeconfig_option
@one_shot
def simulate_command(filename: Any, namespace: str | None, output: str,
                     nodes: tuple[str, ...], max_copies: int, every_node: bool,
                     dumps: tuple[Path, ...], kube_version: str | None,
                     kubeconfig: Path | None) -> None:
    """On which nodes would this claim fit now, and how many copies of it fit?

    Reads the cluster, explains the claim on every node (as explain does), then allocates
    copies of it one after another, each on the first node (by name) where it still fits,
    until none fits. Nothing is written to the cluster.

    \b
    Examples:
      kubedra simulate -f claim.yaml
      kubectl dra simulate -f template.yaml -o json
    """
    with _cluster(kubeconfig, dumps) as proxy:
        simulation = _simulate(proxy, dumps, filename, namespace, nodes, max_copies,
                               kube_version)
    from kubedra.explain.render import render_simulation

    _print(simulation.to_json() if output == "json" else None,
           render_simulation(simulation, every_node=every_node))
    done()


@click.command("dump", short_help="Write what explain needs from the cluster to a file.")
@click.option("-o", "--output", "path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="File to write [default: standard output]")
@kubectl_kubeconfig_option
@one_shot
def dump_command(path: Path | None, kubeconfig: Path | None) -> None:
    """Write the objects explain and simulate read, for `--from` (e.g. in a support request).

    One List of every ResourceSlice, DeviceClass, DeviceTaintRule, ResourceClaim, Node and
    Pod, as JSON (which --from reads twenty times faster than YAML, and YAML readers read too),
    with only the fields explain reads: a pod's name, namespace, uid, node name, node
    selector, node affinity and claims (never its containers or their environment); a node's
    name and labels. Secrets, ConfigMaps and everything else are never read.

    \b
    Examples:
      kubectl dra dump -o cluster.json
      kubectl dra explain resourceclaim my-claim -n my-namespace --from cluster.json
    """
    from kubedra.explain.sources import dump_text

    if path is not None and not path.parent.is_dir():  # before the cluster is read
        raise click.ClickException(f"cannot write {path}: no such directory {path.parent}")
    with _cluster(kubeconfig, ()) as proxy:
        objects = _read(proxy, (), "reading the cluster", None, parse_slices=False)
    text = dump_text(objects)
    if path is None:
        sys.stdout.write(text)
        done()
        return
    try:
        path.write_text(text)
    except OSError as err:
        raise click.ClickException(f"cannot write {path}: {err.strerror}") from None
    done()
