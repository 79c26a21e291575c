"""bench/cache_memory: what the operator's caches hold per node, side by side.

For ``--nodes`` nodes of 8 H200 (``--mig``: with every MIG placement, the compact form the
agent reports), each node's DeviceInventory as the API server lists it (managedFields included,
as ``bench/decode.py`` builds it) and the ResourceSlices kubedra publishes for it, every object
decoded from its JSON as the caches do and kept, measured with ``tracemalloc`` (bytes the
kept objects hold, the interpreter and the input bytes left out):

* ``inventories_kopf``: an inventory as main's kopf index kept it (``json`` then
  :func:`kubedra.handlers.resources.plain`: no managedFields, device values shared), the
  agent's report and the operator's status (conditions, slices, ``publishedFrom``) in it;
* ``inventories_records``: the same as the index keeps it now, a
  :class:`kubedra.controller.kept.KeptObject`;
* ``claims_kopf`` and ``claims_records``: a one-GPU claim allocated on each node (a pod's
  claim from a template, its status as kube-scheduler, the operator and the agent leave it),
  as main's index kept it and as a record;
* ``claim_uses``: what the ``claim_uses`` index keeps of that claim (its devices as
  :class:`kubedra.controller.state.ClaimUse`);
* ``slices_kopf``: a slice the same way (how main kept every slice, in kopf's ``all_slices``);
* ``slices_records``: a slice as :class:`kubedra.controller.slices.SliceDecoder` keeps it.

Prints one JSON object: MiB in all and KiB per node for each, with the JSON bytes per node,
and the microseconds one record takes to make (in the index function) and to open (at each
reconcile that reads it), fewest of 3 passes.

Usage::

    PYTHONPATH=.:operator .venv/bin/python -m bench.cache_memory --nodes 1000 [--mig]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import kopf

from bench.decode import _managed_fields
from bench.scale import h200_node, inventory_body, node_name, published_slices
from kubedra.controller.kept import Packer
from kubedra.controller.slices import SliceDecoder
from kubedra.handlers.indexes import claim_uses
from kubedra.handlers.resources import plain

OPERATOR_TIME = "2026-12-02T10:00:00Z"


def _objects(nodes: int, mig: bool, mig_form: str = "compact"
             ) -> tuple[list[bytes], list[bytes]]:
    """(inventory JSON, slice watch-event JSON lines) of ``nodes`` nodes, the agents' reports
    in ``mig_form`` (:func:`bench.scale.h200_node`)."""
    inventories, slices = [], []
    for i in range(nodes):
        node = node_name(i)
        discovered = h200_node(i, mig, mig_form)
        body = inventory_body(node)
        body["metadata"].update(uid=f"{i:036d}", resourceVersion=str(1000 + i),
                                labels={"kubedra.io/node": node},
                                managedFields=_managed_fields(discovered))
        inventories.append(json.dumps({**body, "status": {
            "discovered": discovered, **_operator_status(body["metadata"]["name"])}}).encode())
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


def _operator_status(name: str) -> dict[str, Any]:
    """``status`` but ``discovered`` as the operator writes it for a published 8-GPU pool."""
    slice_name = f"{name}-00000"
    return {"conditions": [{"type": kind, "status": "True", "reason": "Published",
                            "message": f"pool {name} published as 1 ResourceSlice with 8 "
                                       "devices", "observedGeneration": 1,
                            "lastTransitionTime": OPERATOR_TIME}
                           for kind in ("Ready", "Published")],
            "observedGeneration": 1, "pool": {"name": name, "generation": 1,
                                              "resourceSliceCount": 1},
            "slices": [slice_name], "deviceCount": 8, "allocatedCount": 1,
            "allocations": [{"device": "gpu-0", "claims": [f"demo/pod-{name}-gpu"]}],
            "publishedFrom": {"inputs": hashlib.sha256(name.encode()).hexdigest()[:32],
                              "slices": {slice_name: str(60000 + len(name))}}}


def _claims(nodes: int) -> list[bytes]:
    """One allocated one-GPU claim per node, as listed (managedFields of its three writers)."""
    claims = []
    for i in range(nodes):
        node, pod = node_name(i), f"pod-{i:05d}"
        ready = {"type": "Ready", "status": "True", "reason": "Allocated",
                 "message": f"device gpu-0 of pool {node} (DeviceInventory {node}-gpu) is "
                            "allocated to request gpu", "lastTransitionTime": OPERATOR_TIME}
        claims.append(json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": f"{pod}-gpu-x7k2q", "namespace": "demo", "uid": f"{i:036d}",
                "resourceVersion": str(90000 + i), "creationTimestamp": OPERATOR_TIME,
                "generateName": f"{pod}-gpu-",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                     "uid": f"p{i:035d}", "controller": True,
                                     "blockOwnerDeletion": True}],
                "managedFields": [{"manager": m, "operation": "Apply", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:devices": {}}}}
                                  for m in ("kube-controller-manager", "kube-scheduler",
                                            "kubedra-operator", "kubedra-agent")]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.kubedra.io", "allocationMode": "ExactCount",
                "count": 1}}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": "gpu.kubedra.io",
                                             "pool": node, "device": "gpu-0"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                    "allocationTimestamp": OPERATOR_TIME},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": f"p{i:035d}"}],
                "devices": [{"driver": "gpu.kubedra.io", "pool": node, "device": "gpu-0",
                             "conditions": [ready, {**ready, "type": "Prepared",
                                                    "reason": "Prepared",
                                                    "message": "CDI spec written"}]}]}}
        ).encode())
    return claims


def _claim_uses(loop: asyncio.AbstractEventLoop) -> Callable[[bytes], Any]:
    """What the ``claim_uses`` index function returns for a claim's watch event (run in
    ``loop``, one for all, as kopf does)."""
    def keep(line: bytes) -> Any:
        body = json.loads(line)
        meta = body["metadata"]
        return loop.run_until_complete(claim_uses(
            namespace=meta["namespace"], name=meta["name"], uid=meta["uid"],
            body=kopf.Body(body)))
    return keep


def _microseconds(lines: list[bytes], packer: Packer) -> tuple[float, float]:
    """(make, open) µs per record of ``lines``' objects, fewest of 3 passes."""
    objects = [json.loads(line) for line in lines]
    makes, opens = [], []
    for _ in range(3):
        started = time.perf_counter()
        records = [packer.keep(o) for o in objects]
        makes.append(time.perf_counter() - started)
        started = time.perf_counter()
        for record in records:
            record.body()
        opens.append(time.perf_counter() - started)
    return (round(min(makes) / len(lines) * 1e6, 1), round(min(opens) / len(lines) * 1e6, 1))


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
    claims = _claims(args.nodes)
    decoder = SliceDecoder()
    inventory_packer, claim_packer = Packer(), Packer()
    loop = asyncio.new_event_loop()
    held = {
        "inventories_kopf": _kept(inventories, lambda b: plain(json.loads(b))),
        "inventories_records": _kept(inventories, lambda b: inventory_packer.keep(
            json.loads(b))),
        "claims_kopf": _kept(claims, lambda b: plain(json.loads(b))),
        "claims_records": _kept(claims, lambda b: claim_packer.keep(json.loads(b))),
        "claim_uses": _kept(claims, _claim_uses(loop)),
        "slices_kopf": _kept(slices, lambda b: plain(json.loads(b)["object"])),
        "slices_records": _kept(slices, lambda b: decoder.event(b).record),
    }
    result: dict[str, Any] = {
        "nodes": args.nodes, "mig": args.mig,
        "json_kib_per_node": {"inventory": round(sum(map(len, inventories)) / args.nodes / 1024, 1),
                              "slices": round(sum(map(len, slices)) / args.nodes / 1024, 1),
                              "claim": round(sum(map(len, claims)) / args.nodes / 1024, 1)},
        "record_us_make_open": {"inventory": _microseconds(inventories, Packer()),
                                "claim": _microseconds(claims, Packer())}}
    for name, size in held.items():
        result[name] = {"mib": round(size / 2**20, 1),
                        "kib_per_node": round(size / args.nodes / 1024, 1)}
    loop.close()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
