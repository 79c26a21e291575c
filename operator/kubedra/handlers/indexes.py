"""The operator's caches: kopf indexes of the objects it reads, by the keys it looks them up by
(Nodes and ResourceSlices are in lean caches of the operator's own,
:mod:`kubedra.controller.nodes` and :mod:`kubedra.controller.slices`, which
:meth:`kubedra.controller.runtime.Runtime.begin` adds to the view).

kopf fills every index before any event handler runs and passes them to handlers as keyword
arguments named after the index functions; :func:`cluster_view` gives them meaning
(:class:`~kubedra.controller.state.ClusterView`). Inventories and claims are kept as
:class:`~kubedra.controller.kept.KeptObject` records, made here from the event's body, so the
index holds nothing raw (``bench/cache_memory.py``: an 8-H200 inventory 17.1 KiB as a
compacted dict, 0.6 to 0.9 KiB as a record).

Once kept, the event's own object gives up what nothing after the indexes reads
(:func:`release`): an inventory its ``status`` and ``managedFields``, a claim its
``managedFields``. kopf keeps every object listed at start, its event and its ``Body``, in the
object's worker until every index of every kind is filled (``kopf/_core/reactor/processing.py``,
``operator_indexed.wait_for``), so at a restart every inventory of the fleet was held whole at
once: that was the operator's peak (``bench/RESULTS.md``, scale, rounds 15 and 20).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any, cast

import kopf

from kubedra.controller.explanations import unschedulable_for_claims
from kubedra.controller.kept import KeptObject, Packer
from kubedra.controller.state import ClaimUse, ClusterView, Store, allocation_results, pool_key
from kubedra.handlers import resources

_inventories = Packer()
"""Records of DeviceInventories (one preset dictionary for them all)."""
_claims = Packer()
"""Records of ResourceClaims, allocated or not."""


INVENTORY_RELEASED = ("status",)
"""Top-level fields of an inventory's event object given up once it is kept: the agent's report
and the operator's status, read by reconciles from the record; what kopf and
:func:`kubedra.handlers.operator.on_inventory` read after the indexes (the metadata, ``spec``
for :func:`~kubedra.controller.state.pool_key` and ``node_inventories``) stays."""


def release(body: kopf.Body, fields: tuple[str, ...] = ()) -> None:
    """Drop ``fields`` and ``metadata.managedFields`` from the event's own object that ``body``
    wraps (kopf 1.45.2: ``Body`` is a view of the raw dict the watch decoded, in its
    ``_src``; the object's worker and kopf's handler call hold that dict, not a copy), so
    that what kopf holds of it while it waits for the other indexes is small. Call only
    after the record is kept, and only for fields no other index function and no event
    handler reads (``tests/unit/handlers/test_released_bodies.py`` runs kopf's own
    processing of a listed object)."""
    raw = cast(dict[str, Any], body._src)
    for name in fields:
        raw.pop(name, None)
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


@kopf.index(*resources.INVENTORIES, registry=resources.registry)
async def inventories(name: str, body: kopf.Body, **_: Any) -> dict[str, KeptObject]:
    """Inventory name → the inventory's record (the event's object then gives up its status:
    :func:`release`)."""
    kept = _inventories.keep(body)
    release(body, INVENTORY_RELEASED)
    return {name: kept}


@kopf.index(*resources.INVENTORIES, registry=resources.registry)
async def inventory_pools(name: str, body: kopf.Body, **_: Any) -> dict[tuple[str, str], str]:
    """(driver, pool) → names of the inventories that name it (normally one)."""
    return {pool_key(body): name}


@kopf.index(*resources.INVENTORIES, registry=resources.registry)
async def node_inventories(name: str, spec: kopf.Spec, **_: Any) -> dict[str, str]:
    """Node name → names of the node-local inventories of that node."""
    node = spec.get("nodeName")
    return {node: name} if node else {}


@kopf.index(*resources.CLAIMS, registry=resources.registry)
async def claims(namespace: str | None, name: str, body: kopf.Body, **_: Any
                 ) -> dict[tuple[str, str], KeptObject]:
    """(namespace, name) → allocated claim's record (unallocated claims are not indexed;
    the event's object then gives up its managedFields: :func:`release`)."""
    if not (body.get("status") or {}).get("allocation"):
        return {}
    kept = _claims.keep(body)
    release(body)
    return {(namespace or "", name): kept}


@kopf.index(*resources.CLAIMS, registry=resources.registry)
async def claim_uses(namespace: str | None, name: str, uid: str, body: kopf.Body, **_: Any
                     ) -> dict[tuple[str, str], list[ClaimUse]]:
    """(driver, pool) → the allocated devices of that pool, with their claims (one list per
    claim; :class:`PoolUses` presents them flat)."""
    uses: dict[tuple[str, str], list[ClaimUse]] = {}
    for r in allocation_results(body):
        driver, pool = sys.intern(r["driver"]), sys.intern(r["pool"])
        uses.setdefault((driver, pool), []).append(ClaimUse(
            namespace=namespace or "", name=name, uid=uid, request=sys.intern(r["request"]),
            driver=driver, pool=pool, device=sys.intern(r["device"])))
    return uses


@kopf.index(*resources.CLAIMS, registry=resources.registry)
async def pending_claims(namespace: str | None, name: str, body: kopf.Body, **_: Any
                         ) -> dict[tuple[str, str], KeptObject]:
    """(namespace, name) → unallocated claim's record (for explanations; the event's object
    then gives up its managedFields: :func:`release`)."""
    if (body.get("status") or {}).get("allocation"):
        return {}
    kept = _claims.keep(body)
    release(body)
    return {(namespace or "", name): kept}


@kopf.index(*resources.CLASSES, registry=resources.registry)
async def device_classes(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """DeviceClass name → the class."""
    return {name: resources.plain(body)}


@kopf.index(*resources.TAINT_RULES, registry=resources.registry)
async def taint_rules(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
    """DeviceTaintRule name → the rule."""
    return {name: resources.plain(body)}


@kopf.index(*resources.PODS, registry=resources.registry)
async def unschedulable_pods(namespace: str | None, name: str, body: kopf.Body, **_: Any
                             ) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) → pod that kube-scheduler reports unschedulable because of its
    claims (the watch sees only pods not bound to a node)."""
    pod = resources.plain(body)
    return {(namespace or "", name): pod} if unschedulable_for_claims(pod) else {}


class PoolUses(Mapping[tuple[str, str], list[ClaimUse]]):
    """The ``claim_uses`` index with one flat list of uses per pool (the index keeps one list
    per claim)."""

    def __init__(self, index: Mapping[tuple[str, str], Store]) -> None:
        self._index = index

    def __getitem__(self, key: tuple[str, str]) -> list[ClaimUse]:
        return [use for uses in self._index[key] for use in uses]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def cluster_view(indexes: Mapping[str, Any]) -> ClusterView:
    """The kopf indexes that a handler received as keyword arguments, by meaning."""
    return ClusterView(
        inventories=indexes["inventories"], pools=indexes["inventory_pools"],
        node_inventories=indexes["node_inventories"], slices={},
        claims=indexes["claims"], claim_uses=PoolUses(indexes["claim_uses"]),
        device_classes=indexes["device_classes"], taint_rules=indexes["taint_rules"],
        pending_claims=indexes["pending_claims"],
        unschedulable_pods=indexes["unschedulable_pods"])
