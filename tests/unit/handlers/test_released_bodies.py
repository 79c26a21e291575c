"""What kopf holds of a listed object while it waits for every index: kopf's own processing of
one listed DeviceInventory (``kopf._core.reactor.processing.process_resource_event``, the
operator's registry) while another object keeps the indexes unfilled. The inventory's status
(the agent's report, the operator's status) and its managedFields are freed as soon as it is
indexed, not when every other object of every kind is; the index and the event handler after
the wait get what they read (``bench/RESULTS.md``, scale, round 20)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from types import SimpleNamespace
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.structs import references
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

from kubedra.api import inventory as inv
from kubedra.controller.kept import KeptObject
from kubedra.controller.queue import WorkQueue
from kubedra.controller.state import StatusOverlay
from kubedra.handlers import operator as _handlers  # noqa: F401  (registers the event handlers)
from kubedra.handlers import resources
from kubedra.handlers.indexes import cluster_view

INVENTORIES = references.Resource(group=inv.GROUP, version=inv.VERSION, plural=inv.PLURAL,
                                  kind="DeviceInventory", namespaced=False,
                                  verbs=["list", "watch"])
CLAIMS = references.Resource(group="resource.k8s.io", version="v1", plural="resourceclaims",
                             kind="ResourceClaim", namespaced=True, verbs=["list", "watch"])


class _Tracked(dict[str, Any]):
    """A part of a raw body whose freeing a test can see (a plain dict takes no weak
    reference)."""


def _managed_fields() -> list[_Tracked]:
    return [_Tracked(manager="kubedra-agent", operation="Apply", fieldsType="FieldsV1",
                     fieldsV1={"f:status": {"f:discovered": {}}})]


def _inventory() -> dict[str, Any]:
    return {
        "apiVersion": f"{inv.GROUP}/{inv.VERSION}", "kind": "DeviceInventory",
        "metadata": {"name": "node-1-gpu", "uid": "uid-1", "resourceVersion": "41",
                     "managedFields": _managed_fields()},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-1"},
        "status": _Tracked(discovered={"devices": [{"name": f"gpu-{i}"} for i in range(8)]},
                           observedGeneration=1),
    }


def _claim() -> dict[str, Any]:
    result = {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "node-1", "device": "gpu-0"}
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "uid-c", "resourceVersion": "7",
                     "managedFields": _managed_fields()},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


class _Indexed(aiotoggles.ToggleSet):
    """kopf's set of index toggles, telling when an object's worker waits for it to be on."""

    def __init__(self) -> None:
        super().__init__(all)
        self.waited = asyncio.Event()

    async def wait_for(self, value: bool) -> None:
        self.waited.set()
        await super().wait_for(value)


def _indexers() -> indexing.OperatorIndexers:
    indexers = indexing.OperatorIndexers()
    indexers.ensure(resources.registry._indexing.get_all_handlers())
    return indexers


async def _listed(raw: dict[str, Any], resource: references.Resource,
                  indexers: indexing.OperatorIndexers, memo: Any,
                  operator_indexed: _Indexed) -> asyncio.Task[Any]:
    """kopf's worker processing of ``raw`` as listed at start (event type None), started and
    now in kopf's wait for every index."""
    resource_indexed = await operator_indexed.make_toggle(name=raw["metadata"]["name"])
    task = asyncio.create_task(processing.process_resource_event(
        lifecycle=lifecycles.all_at_once, indexers=indexers, registry=resources.registry,
        settings=kopf.OperatorSettings(), memories=inventory.ResourceMemories(),
        memobase=memo, resource=resource, raw_event={"type": None, "object": raw},
        event_queue=asyncio.Queue(), stream_pressure=asyncio.Event(),
        resource_indexed=resource_indexed, operator_indexed=operator_indexed))
    await asyncio.wait_for(operator_indexed.waited.wait(), timeout=5)
    return task


def _plain(index: Any) -> dict[Any, list[Any]]:
    """A kopf index as a dict of lists (its values are kopf ``Store``s)."""
    return {key: list(store) for key, store in index.items()}


async def test_a_listed_inventory_gives_up_its_status_before_the_indexes_are_filled() -> None:
    indexers = _indexers()
    operator_indexed = _Indexed()
    others = await operator_indexed.make_toggle(name="the other kinds, still listing")
    state = SimpleNamespace(inventory_overlay=StatusOverlay[str](),
                            inventory_queue=WorkQueue[str](),
                            view=cluster_view(indexers.indices))
    memo = kopf.Memo(runtime=SimpleNamespace(state=state))
    raw = _inventory()
    status, managed = weakref.ref(raw["status"]), weakref.ref(raw["metadata"]["managedFields"][0])
    task = await _listed(raw, INVENTORIES, indexers, memo, operator_indexed)
    gc.collect()

    assert not task.done()
    assert (status(), managed()) == (None, None)  # freed: nothing else held them
    assert raw == {"apiVersion": f"{inv.GROUP}/{inv.VERSION}", "kind": "DeviceInventory",
                   "metadata": {"name": "node-1-gpu", "uid": "uid-1", "resourceVersion": "41"},
                   "spec": {"driver": "gpu.kubedra.io", "nodeName": "node-1"}}
    kept = next(iter(indexers.indices["inventories"]["node-1-gpu"]))
    assert isinstance(kept, KeptObject)
    assert kept.body()["status"] == {"discovered": {"devices": [{"name": f"gpu-{i}"}
                                                                for i in range(8)]},
                                     "observedGeneration": 1}
    assert _plain(indexers.indices["inventory_pools"]) == {
        ("gpu.kubedra.io", "node-1"): ["node-1-gpu"]}
    assert _plain(indexers.indices["node_inventories"]) == {"node-1": ["node-1-gpu"]}

    await operator_indexed.drop_toggle(others)  # every index filled: the handler runs
    await asyncio.wait_for(task, timeout=5)
    assert await asyncio.wait_for(state.inventory_queue.get(), timeout=5) == "node-1-gpu"
    assert len(state.inventory_queue) == 0  # the pool names this inventory only


async def test_a_listed_claim_gives_up_its_managed_fields_before_the_indexes_are_filled() -> None:
    indexers = _indexers()
    operator_indexed = _Indexed()
    await operator_indexed.make_toggle(name="the other kinds, still listing")
    raw = _claim()
    managed = weakref.ref(raw["metadata"]["managedFields"][0])
    task = await _listed(raw, CLAIMS, indexers, kopf.Memo(), operator_indexed)
    gc.collect()

    assert not task.done()
    assert managed() is None
    assert "managedFields" not in raw["metadata"]
    assert raw["status"] == _claim()["status"]  # the claim's event handler reads its allocation
    assert [use.device for uses in indexers.indices["claim_uses"][("gpu.kubedra.io", "node-1")]
            for use in uses] == ["gpu-0"]
    task.cancel()
