"""bench/cache_memory: what the operator's caches hold per node, side by side.

For ``--nodes`` nodes of 8 H200 (``--mig``: with every MIG placement, the compact form the
agent reports), each node's DeviceInventory as the API server lists it (managedFields included,
as ``bench/decode.py`` builds it) and the ResourceSlices kubedra publishes for it, every object
decoded from its JSON as the caches do and kept, measured with ``tracemalloc`` (bytes the
kept objects hold, the interpreter and the input bytes left out):

* ``inventories_kopf``: the kopf index value of an inventory (``json`` then
  :func:`kubedra.handlers.resources.plain`: no managedFields, device values shared);
* ``slices_kopf``: a slice the same way (how main kept every slice, in kopf's ``all_slices``);
* ``slices_records``: a slice as :class:`kubedra.controller.slices.SliceDecoder` keeps it.

Prints one JSON object: MiB in all and KiB per node for each, with the JSON bytes per node.

Usage::

    PYTHONPATH=.:operator .venv/bin/python -m bench.cache_memory --nodes 1000 [--mig]
"""

from __future__ import annotations

import argparse
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench.decode import _managed_fields
from bench.scale import h200_node, inventory_body, node_name, published_slices
from kubedra.controller.slices import SliceDecoder
from kubedra.handlers.resources import plain


def _objects(nodes: int, mig: bool) -> tuple[list[bytes], list[bytes]]:
    """(inventory JSON, slice watch-event JSON lines) of ``nodes`` nodes."""
    inventories, slices = [], []
    for i in range(nodes):
        node = node_name(i)
        discovered = h200_node(i, mig)
        body = inventory_body(node)
        body["metadata"].update(uid=f"{i:036d}", resourceVersion=str(1000 + i),
                                labels={"kubedra.io/node": node},
                                managedFields=_managed_fields(discovered))
        inventories.append(json.dumps({**body, "status": {"discovered": discovered}}).encode())
        specs = published_slices(node, discovered)
        for n, spec in enumerate(specs):
            obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": f"{node}-{n:05d}", "uid": f"{i:030d}{n:06d}",
                                "resourceVersion": str(50000 + i), "generation": 1,
                                "labels": {"kubedra.io/inventory": body["metadata"]["name"],
                                           "app.kubernetes.io/managed-by": "kubedra"},
                                "ownerReferences": [{"apiVersion": "apiextensions.k8s.io/v1",
                                                     "kind": "CustomResourceDefinition",
                                                     "name": "deviceinventories.kubedra.io",
                                                     "uid": "c" * 36, "controller": True}],
                                "managedFields": [{"manager": "kubedra-operator",
                                                   "operation": "Update",
                                                   "fieldsType": "FieldsV1",
                                                   "fieldsV1": {"f:spec": {"f:devices": {}}}}]},
                   "spec": {"driver": "gpu.kubedra.io", "nodeName": node,
                            "pool": {"name": node, "generation": 1,
                                     "resourceSliceCount": len(specs)}, **spec}}
            slices.append(json.dumps({"type": "ADDED", "object": obj}).encode())
    return inventories, slices


def _kept(lines: list[bytes], keep: Callable[[bytes], Any]) -> int:
    """Bytes held by what ``keep`` makes of every line."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [keep(line) for line in lines]
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    return held


def main() -> None:
    """Parse the options, measure, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--mig", action="store_true")
    args = parser.parse_args()
    inventories, slices = _objects(args.nodes, args.mig)
    decoder = SliceDecoder()
    held = {
        "inventories_kopf": _kept(inventories, lambda b: plain(json.loads(b))),
        "slices_kopf": _kept(slices, lambda b: plain(json.loads(b)["object"])),
        "slices_records": _kept(slices, lambda b: decoder.event(b).record),
    }
    result: dict[str, Any] = {
        "nodes": args.nodes, "mig": args.mig,
        "json_kib_per_node": {"inventory": round(sum(map(len, inventories)) / args.nodes / 1024, 1),
                              "slices": round(sum(map(len, slices)) / args.nodes / 1024, 1)}}
    for name, size in held.items():
        result[name] = {"mib": round(size / 2**20, 1),
                        "kib_per_node": round(size / args.nodes / 1024, 1)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
