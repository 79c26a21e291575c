"""Plan the API writes that make a pool's ResourceSlices match the desired contents.

This follows the contract of upstream's resourceslice controller (``syncPool`` in
``k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go``, v0.37.2):

* the current generation is the highest generation among the pool's slices;
* slices of an older generation, of another pool, or whose name matches no desired slice are
  obsolete and deleted first;
* the generation stays when no slice is missing and at most one existing slice changes (one
  API call keeps the pool consistent); otherwise it goes up by one and every slice is
  rewritten with it, so consumers never mix old and new slices;
* ``resourceSliceCount`` is the number of desired slices;
* slices that did not change and need no new generation are not written at all.

kubedra names slices deterministically, ``<inventory>-<index as 5 hex digits>``, so a slice
deleted by hand is recreated under its name and slices sort in publishing order within a pool.
Device taint ``timeAdded`` values set by the API server are carried over, as upstream does,
from whichever slice of the pool holds the device now.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from kubedra.api.resource import (
    Device,
    ObjectMeta,
    OwnerReference,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from kubedra.publishing.pool import DesiredPool
from kubedra.publishing.slices import SliceContent

INVENTORY_LABEL = "kubedra.io/inventory"
"""Label on every slice kubedra publishes: the name of its DeviceInventory."""
MANAGED_BY = {"app.kubernetes.io/managed-by": "kubedra"}
_NAME_MAX = 253
_INDEX_DIGITS = 5


@dataclass(frozen=True)
class SliceWrite:
    """One API call: ``create`` or ``update`` of ``slice``, or ``delete`` of ``name`` guarded by
    ``resource_version``."""

    verb: Literal["create", "update", "delete"]
    name: str
    slice: ResourceSlice | None = None
    resource_version: str | None = None

    @property
    def body(self) -> dict[str, Any] | None:
        """``slice`` as the API's JSON, in dicts and lists (None for a delete)."""
        return self.slice.to_api() if self.slice is not None else None

    @property
    def payload(self) -> bytes | None:
        """``slice`` as the bytes of the request's JSON body (None for a delete): pydantic
        writes them in one pass, where building :attr:`body` and the API client's walk and
        ``json.dumps`` of it took 16.2 ms of CPU per MIG node against 1.8 ms
        (bench/RESULTS.md, scale, round 19)."""
        return self.slice.to_json() if self.slice is not None else None


@dataclass(frozen=True)
class SyncPlan:
    """The writes (deletes, then updates, then creates) and the pool they publish."""

    pool: ResourcePool
    slice_names: list[str]
    writes: list[SliceWrite] = field(default_factory=list)


def slice_name(inventory_name: str, index: int) -> str:
    """``<inventory>-<index>``; long inventory names are shortened with a hash to fit 253."""
    suffix = f"-{index:0{_INDEX_DIGITS}x}"
    base = inventory_name
    if len(base) + len(suffix) > _NAME_MAX:
        digest = hashlib.sha256(base.encode()).hexdigest()[:10]
        base = f"{base[:_NAME_MAX - len(suffix) - 11]}-{digest}"
    return base + suffix


TaintTimes = dict[tuple[str, str, str | None, str], str | None]
"""(device, taint key, value, effect) → the taint's ``timeAdded`` as published."""


def _taint_times(slices: list[ResourceSlice]) -> TaintTimes:
    """The ``timeAdded`` of every taint published in ``slices`` (the API server sets it when a
    taint first appears), by device and taint — whichever slice the device is in, so that a
    device moved to another slice keeps its times (a drain grace counts from one)."""
    return {(d.name, t.key, t.value, t.effect): t.time_added
            for s in slices for d in s.spec.devices or [] for t in d.taints or []
            if t.time_added}


def _with_taint_times(desired: tuple[Device, ...], times: TaintTimes) -> list[Device]:
    """Copy ``timeAdded`` of taints that are published already on the same device."""
    result = []
    for device in desired:
        if device.taints and any(not t.time_added for t in device.taints):
            taints = [t.model_copy(update={"time_added": times.get(
                (device.name, t.key, t.value, t.effect))}) if not t.time_added else t
                for t in device.taints]
            device = device.model_copy(update={"taints": taints})
        result.append(device)
    return result


def _spec(pool: DesiredPool, content: SliceContent, resource_pool: ResourcePool,
          times: TaintTimes) -> ResourceSliceSpec:
    return ResourceSliceSpec(
        driver=pool.driver,
        pool=resource_pool,
        node_name=pool.node_name,
        node_selector=pool.node_selector,
        all_nodes=True if pool.all_nodes else None,
        # None, not [], for a slice without devices: the API server omits an empty list, and
        # [] would differ from every stored copy (an update on each reconcile of an empty pool)
        devices=(_with_taint_times(content.devices, times)
                 or None if not content.counter_sets else None),
        shared_counters=list(content.counter_sets) or None,
        skip_node_operations=list(pool.skip_node_operations) or None,
    )


def plan_sync(inventory_name: str, owner: OwnerReference, pool: DesiredPool,
              contents: list[SliceContent], existing: list[ResourceSlice],
              published_generation: int = 0) -> SyncPlan:
    """Compare ``existing`` slices (all slices labelled with this inventory) with the desired
    ``contents`` of ``pool`` and return the writes that publish it.

    ``published_generation`` is the generation last published (from the inventory's status).
    It is a floor for the current generation, so that generations never go back even when
    every slice of the pool was deleted; upstream's controller would restart at 1 then.
    ``owner`` is every slice's only owner reference; a slice with other owner references, or
    with labels other than the operator's and ``pool.labels``, is updated (without a new
    generation: only its metadata changes).
    Raises nothing; with no slice and no history the first generation is 1.
    """
    names = [slice_name(inventory_name, i) for i in range(len(contents))]
    wanted = {name: i for i, name in enumerate(names)}
    generation = max((s.spec.pool.generation for s in existing
                      if s.spec.pool.name == pool.name and s.spec.driver == pool.driver),
                     default=published_generation)
    generation = max(generation, published_generation)
    times = _taint_times([s for s in existing if s.spec.pool.name == pool.name
                          and s.spec.driver == pool.driver])
    matched: dict[int, ResourceSlice] = {}
    obsolete: list[ResourceSlice] = []
    for current in existing:
        index = wanted.get(current.metadata.name or "")
        if (index is None or current.spec.pool.generation < generation
                or current.spec.pool.name != pool.name or current.spec.driver != pool.driver
                or current.spec.node_name != pool.node_name):
            obsolete.append(current)
        else:
            matched[index] = current

    def spec_at(index: int, gen: int) -> ResourceSliceSpec:
        resource_pool = ResourcePool(name=pool.name, generation=gen,
                                     resource_slice_count=len(contents))
        return _spec(pool, contents[index], resource_pool, times)

    changed = {i for i, current in matched.items() if current.spec != spec_at(i, generation)}
    missing = [i for i in range(len(contents)) if i not in matched]
    if missing or len(changed) > 1:
        generation += 1
        changed = set(matched)
    labels = {**pool.labels, INVENTORY_LABEL: inventory_name, **MANAGED_BY}
    changed |= {i for i, current in matched.items()
                if current.metadata.owner_references != [owner]
                or (current.metadata.labels or {}) != labels}
    resource_pool = ResourcePool(name=pool.name, generation=generation,
                                 resource_slice_count=len(contents))

    def body(index: int, resource_version: str | None) -> ResourceSlice:
        meta = ObjectMeta(name=names[index], resource_version=resource_version,
                          labels=labels,
                          owner_references=[owner])
        return ResourceSlice(metadata=meta, spec=spec_at(index, generation))

    writes = [SliceWrite("delete", s.metadata.name or "",
                         resource_version=s.metadata.resource_version)
              for s in sorted(obsolete, key=lambda s: s.metadata.name or "")]
    writes += [SliceWrite("update", names[i], body(i, matched[i].metadata.resource_version))
               for i in sorted(changed)]
    writes += [SliceWrite("create", names[i], body(i, None)) for i in missing]
    return SyncPlan(pool=resource_pool, slice_names=names, writes=writes)
