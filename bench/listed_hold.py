"""What kopf holds per DeviceInventory listed at a restart while it waits for every index.

kopf keeps each object listed at start in the object's worker (its event, its ``Body``, the
worker's task and queue) until every index of every kind is filled
(``kopf/_core/reactor/processing.py``); at a restart every inventory of the fleet is listed
before any is handled. This runs kopf's own processing (``process_resource_event``, the
operator's registry, as ``tests/unit/handlers/test_released_bodies.py`` does for one) for
``--nodes`` listed 8-H200 inventories decoded from JSON as the API server lists them
(managedFields of the agent and the operator, the agent's report of ``bench.scale.h200_node``,
the operator's status), with the indexes held unfilled, and prints the memory traced
(``tracemalloc``, one frame) per inventory while they all wait. Run it with the tree to
measure first on ``PYTHONPATH``::

    PYTHONPATH=TREE:TREE/operator .venv/bin/python -m bench.listed_hold --nodes 1000

(``bench/RESULTS.md``, scale, round 20.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tracemalloc
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.structs import references
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

from bench.scale import DRIVER, h200_node, node_name
from kubedra.api import inventory as inv
from kubedra.handlers import operator as _handlers  # noqa: F401  (registers the event handlers)
from kubedra.handlers import resources

INVENTORIES = references.Resource(group=inv.GROUP, version=inv.VERSION, plural=inv.PLURAL,
                                  kind="DeviceInventory", namespaced=False,
                                  verbs=["list", "watch"])


class Indexed(aiotoggles.ToggleSet):
    """kopf's set of index toggles, telling when ``expected`` workers wait for it."""

    def __init__(self, expected: int) -> None:
        super().__init__(all)
        self.expected, self.all_waiting = expected, asyncio.Event()

    async def wait_for(self, value: bool) -> None:
        self.expected -= 1
        if self.expected == 0:
            self.all_waiting.set()
        await super().wait_for(value)


def listed_text(index: int) -> str:
    """Node ``index``'s inventory as listed: JSON with managedFields and both statuses."""
    node, at = node_name(index), "2026-12-03T10:00:00Z"
    name = f"{node}-{DRIVER}"
    conditions = [{"type": kind, "status": "True", "reason": "Published",
                   "message": f"pool {name} published: 8 devices in 1 slice",
                   "lastTransitionTime": at, "observedGeneration": 1}
                  for kind in ("Ready", "Published")]
    managed = [{"manager": "kubedra-agent", "operation": "Apply", "subresource": "status",
                "apiVersion": f"{inv.GROUP}/{inv.VERSION}", "time": at, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:discovered": {}, "f:agentVersion": {},
                                          "f:bootID": {}}}},
               {"manager": "kubedra-operator", "operation": "Apply", "subresource": "status",
                "apiVersion": f"{inv.GROUP}/{inv.VERSION}", "time": at, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {
                    "f:conditions": {f'k:{{"type":"{c["type"]}"}}': {
                        ".": {}, **{f"f:{k}": {} for k in c}} for c in conditions},
                    "f:observedGeneration": {}, "f:publishedFrom": {}, "f:slices": {}}}}]
    return json.dumps({
        "apiVersion": f"{inv.GROUP}/{inv.VERSION}", "kind": "DeviceInventory",
        "metadata": {"name": name, "uid": f"{index:08x}-0000-4000-8000-000000000000",
                     "resourceVersion": str(1000 + index), "generation": 1,
                     "creationTimestamp": at, "managedFields": managed},
        "spec": {"driver": DRIVER, "nodeName": node},
        "status": {"discovered": h200_node(index, False), "agentVersion": "0.1.0",
                   "bootID": f"boot-{index}", "conditions": conditions,
                   "observedGeneration": 1, "publishedFrom": f"{index:064x}",
                   "slices": [f"{name}-0"]}})


async def held(nodes: int) -> dict[str, Any]:
    """Traced bytes while ``nodes`` listed inventories wait for the indexes."""
    texts = [listed_text(i) for i in range(nodes)]
    indexers = indexing.OperatorIndexers()
    indexers.ensure(resources.registry._indexing.get_all_handlers())
    indexed = Indexed(nodes)
    await indexed.make_toggle(name="the other kinds, still listing")
    memories, settings = inventory.ResourceMemories(), kopf.OperatorSettings()
    events: asyncio.Queue[Any] = asyncio.Queue()  # kopf's one queue of k8s Events
    gc.collect()
    tracemalloc.start(1)
    start = tracemalloc.get_traced_memory()[0]
    workers = []
    for text in texts:
        raw = json.loads(text)
        toggle = await indexed.make_toggle(name=raw["metadata"]["uid"])
        workers.append(asyncio.create_task(processing.process_resource_event(
            lifecycle=lifecycles.all_at_once, indexers=indexers, registry=resources.registry,
            settings=settings, memories=memories, memobase=kopf.Memo(), resource=INVENTORIES,
            raw_event={"type": None, "object": raw}, event_queue=events,
            stream_pressure=asyncio.Event(), resource_indexed=toggle,
            operator_indexed=indexed)))
        del raw
        await asyncio.sleep(0)  # the worker indexes its object before the next is listed
    await asyncio.wait_for(indexed.all_waiting.wait(), timeout=600)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    waiting = sum(not w.done() for w in workers)
    for worker in workers:
        worker.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    return {"nodes": nodes, "listed_json_bytes": len(texts[0]), "waiting": waiting,
            "traced_mib": round(traced / 2**20, 1),
            "traced_kib_per_inventory": round(traced / nodes / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(held(args.nodes))))


if __name__ == "__main__":
    main()
