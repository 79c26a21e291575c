"""bench/verify_pool: verifying a published, unchanged pool — a full reconcile's decision
against the check of ``status.publishedFrom`` (:mod:`kubedra.controller.fingerprint`).

For N nodes of 8 H200 (``--mig``: every MIG placement) as ``bench/scale.py`` reports them,
publishes each pool once as the operator does (decision, slices with resourceVersions, status
with ``publishedFrom``), then times, per node, in one process, back to back:

- *full*: what a reconcile of an unchanged inventory computes — decode its slices, decide
  (decode the inventory, build, split and compare the pool), build the status and compare it;
- *fingerprint*: :func:`~kubedra.controller.fingerprint.unchanged_pool` on the raw objects.

Each node's objects are distinct (uuid, PCI bus ID), as at a restart, so the decoding caches
see what they see in the operator. Prints CPU milliseconds per node::

    PYTHONPATH=.:operator .venv/bin/python -m bench.verify_pool [--nodes 300] [--mig]
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

from bench.scale import h200_node, inventory_body, node_name
from kubedra.api.resource import OwnerReference, ResourceSlice
from kubedra.controller.compact import Compactor
from kubedra.controller.fingerprint import record, unchanged_pool
from kubedra.controller.inventories import (
    InventoryInputs,
    decide_inventory,
    inventory_status,
    status_changed,
)

OWNER = OwnerReference(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                       name="deviceinventories.kubedra.io", uid="uid-crd")
NOW = "2026-11-30T12:00:00Z"

Node = tuple[dict[str, Any], list[dict[str, Any]]]


def published(index: int, mig: bool, compactor: Compactor) -> Node:
    """Node ``index``'s inventory after its first publish, and its slices, compacted as the
    operator's caches hold them."""
    raw = {**inventory_body(node_name(index)), "status": {"discovered": h200_node(index, mig)}}
    raw["metadata"].update(generation=1, resourceVersion="1", uid=f"uid-{index}",
                           creationTimestamp="2026-01-01T00:00:00Z")
    given = InventoryInputs(raw=raw, existing=[], lease="live", namespace="kubedra-system",
                            owner=OWNER)
    decision = decide_inventory(given)
    assert decision.plan is not None
    slices = [{**w.body, "metadata": {**w.body["metadata"], "resourceVersion": str(10 + i)}}
              for i, w in enumerate(decision.plan.writes) if w.body is not None]
    status = inventory_status(given, decision, NOW)
    status.published_from = record(raw, decision, (), slices, OWNER.uid, 0.0)
    assert status.published_from is not None
    after = copy.deepcopy(raw)
    after["status"].update(status.to_api())
    return compactor.copy(after), [compactor.copy(s) for s in slices]


def full(raw: dict[str, Any], slices: list[dict[str, Any]]) -> None:
    """A full reconcile's computation of an unchanged inventory (no write follows)."""
    given = InventoryInputs(raw=raw, existing=[ResourceSlice.from_api(s) for s in slices],
                            lease="live", namespace="kubedra-system", owner=OWNER)
    decision = decide_inventory(given)
    assert decision.plan is not None
    assert not decision.plan.writes
    status = inventory_status(given, decision, NOW)
    status.published_from = record(raw, decision, (), slices, OWNER.uid, 0.0)
    assert not status_changed(raw, status)


def fingerprint(raw: dict[str, Any], slices: list[dict[str, Any]]) -> None:
    """The check of ``status.publishedFrom``."""
    found = unchanged_pool(raw, slices, lease="live", node_exists=True,
                           pool_inventories=[raw["metadata"]["name"]], deleted=[], uses=(),
                           owner_uid=OWNER.uid, hold_down=0.0)
    assert found is not None


def main() -> None:
    """Print CPU milliseconds per node of each way, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--mig", action="store_true")
    args = parser.parse_args()
    compactor = Compactor()
    nodes = [published(i, args.mig, compactor) for i in range(args.nodes)]
    times = {}
    for way in (full, fingerprint):
        start = time.process_time()
        for raw, slices in nodes:
            way(raw, slices)
        times[way.__name__] = (time.process_time() - start) * 1000 / args.nodes
    print(f"{args.nodes} nodes{' (MIG)' if args.mig else ''}: full reconcile "
          f"{times['full']:.2f} ms CPU per node, fingerprint {times['fingerprint']:.3f} ms "
          f"({times['full'] / times['fingerprint']:.0f} times less)", flush=True)


if __name__ == "__main__":
    main()
