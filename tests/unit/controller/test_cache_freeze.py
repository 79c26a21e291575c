"""The operator freezes its caches for the cyclic collector once the first pass over the
inventories is done, not at the first event: frozen then, every listed object's kopf body
(a reference cycle, held by its worker until every index was filled) was never freed, one raw
inventory per node for the life of the process (``bench/RESULTS.md``, scale, round 15)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from types import SimpleNamespace

import kopf
import pytest

from kubedra.controller import runtime
from kubedra.controller.queue import WorkQueue
from kubedra.controller.state import ClusterView
from kubedra.settings import Settings


class _Raw(dict[str, object]):
    """A raw event body whose freeing a test can see (a plain dict takes no weak reference)."""


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


def _runtime() -> runtime.Runtime:
    caches = SimpleNamespace(by_inventory={}, by_pool={}, all={})
    return runtime.Runtime(settings=Settings(), leases=SimpleNamespace(),  # type: ignore[arg-type]
                           nodes=SimpleNamespace(), slices=caches)  # type: ignore[arg-type]


def test_a_listed_body_is_freed_once_its_worker_let_go(unfrozen: None) -> None:
    raw = _Raw(kind="DeviceInventory", metadata={"name": "n-gpu"})
    freed = weakref.ref(raw)
    body = kopf.Body(raw)  # the listed object's body, held by its worker at the first event
    del raw
    state = _runtime().begin(ClusterView(inventories={"n-gpu": ()}, pools={},
                                         node_inventories={}, slices={}, claims={},
                                         claim_uses={}))
    del body  # the worker's handler returned: the body is cyclic garbage
    assert state.caches_frozen is False
    state.inventory_queue.add("n-gpu")  # the first pass: one inventory, one reconcile
    runtime.freeze_after_first_pass(state)
    assert state.caches_frozen is False  # not reconciled yet
    state.inventories_reconciled = 1
    state.inventory_queue = WorkQueue[str]()  # drained
    runtime.freeze_after_first_pass(state)
    assert (state.caches_frozen, freed()) == (True, None)


def test_the_caches_are_frozen_once(unfrozen: None) -> None:
    state = SimpleNamespace(caches_frozen=True, inventory_queue=WorkQueue[str](),
                            inventories_reconciled=5, view=SimpleNamespace(inventories={}))
    count = gc.get_freeze_count()
    runtime.freeze_after_first_pass(state)  # type: ignore[arg-type]
    assert gc.get_freeze_count() == count
