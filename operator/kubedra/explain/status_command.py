"""``kubedra status`` and ``kubectl dra status``: the fleet at a glance.

Like :mod:`kubedra.explain.command`, it starts reading the cluster (or a dump, ``--from``)
before it imports the allocator, and reads what explain reads (:func:`read_cluster`, pods of
every namespace).
"""

from __future__ import annotations

from pathlib import Path

import click

from kubedra.explain.command import (
    _cluster,
    _from_option,
    _kube_version_option,
    _output_option,
    _print,
    _read,
    _snapshot,
    done,
    one_shot,
    parsing,
)
from kubedra.options import kubectl_kubeconfig_option


@click.command("status", short_help="What is free where: devices and pending claims.")
@click.option("--by", type=click.Choice(["model", "node", "pool"]), default="model",
              show_default=True, help="Count devices per model, per node or per pool")
@_output_option
@click.option("--all", "every_node", is_flag=True,
              help="With --by node or pool: each on its own [default: those that read the "
                   "same but for their names are grouped]")
@_from_option
@_kube_version_option
@kubectl_kubeconfig_option
@one_shot
def status_command(by: str, output: str, every_node: bool, dumps: tuple[Path, ...],
                   kube_version: str | None, kubeconfig: Path | None) -> None:
    """The fleet at a glance, as kube-scheduler's allocator sees it.

    Per driver and device model (or MIG profile): devices published, allocated (and by how
    many claims), free, unhealthy (taint kubedra.io/unhealthy), draining (kubedra.io/draining)
    and held for a withdrawn pool; then the pending claims, explained and grouped by verdict
    and the check they failed, as the cluster's Kubernetes minor decides (or --kube-version's).
    A device is free when a claim that tolerates no taint could get it now (a MIG partition
    whose GPU is allocated is not).

    \b
    Examples:
      kubectl dra status
      kubectl dra status --by node
      kubedra status --by pool -o json --from cluster.json
    """
    with _cluster(kubeconfig, dumps) as proxy:
        objects = _read(proxy, dumps, "reading the cluster", None)
    from kubedra.explain.status import fleet_status
    from kubedra.explain.status_render import render_status

    snapshot = _snapshot(objects, kube_version)
    with parsing():
        status = fleet_status(snapshot, objects.pods)
    _print(status.to_json(by) if output == "json" else None,
           render_status(status, by=by, every=every_node))
    done()
