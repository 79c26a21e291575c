"""What the allocator allocates from: ResourceSlices, DeviceClasses and DeviceTaintRules.

A :class:`ResourceSnapshot` (every driver's slices; not a DeviceInventory) is immutable. It
merges DeviceTaintRules into the devices as the scheduler's slice tracker does
(``applyPatches`` in ``k8s.io/dynamic-resource-allocation/resourceslice/tracker/tracker.go``:
a rule's taint is appended to every device its selector matches; a rule without a selector
matches nothing) and caches what does not depend on the allocated state: the pools each node
sees and the outcome of every CEL selector on every device. Build one per snapshot of the
cluster and reuse it for many :class:`~kubedra.allocation.allocator.Allocator` runs.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence

from kubedra.allocation.capacity import Consumption
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.features import DEFAULT_FEATURES, AllocatorFeatures
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.pools import NodePools, SliceEntry, SliceIndex, gather_pools
from kubedra.allocation.selectors import SelectorSet
from kubedra.allocation.versions import (
    LIST_ATTRIBUTES_SEEN_BY_CEL,
    TAINT_RULE_WITHOUT_SELECTOR_MATCHES_NONE,
    KubeVersion,
)
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaint,
    DeviceTaintRule,
    DeviceTaintSelector,
    ResourceSlice,
)


def _rule_taints(resource_slice: ResourceSlice, rules: Sequence[DeviceTaintRule],
                 version: KubeVersion) -> dict[str, list[DeviceTaint]]:
    """Taints that DeviceTaintRules add to the slice's devices, by device name; a rule without
    a selector taints none of them from 1.37, all of them before
    (:data:`~kubedra.allocation.versions.TAINT_RULE_WITHOUT_SELECTOR_MATCHES_NONE`)."""
    added: dict[str, list[DeviceTaint]] = {}
    spec = resource_slice.spec
    every = DeviceTaintSelector()
    for rule in rules:
        selector = rule.spec.device_selector
        if selector is None and version.follows(TAINT_RULE_WITHOUT_SELECTOR_MATCHES_NONE):
            continue
        selector = selector or every
        if (selector.driver is not None and selector.driver != spec.driver) \
                or (selector.pool is not None and selector.pool != spec.pool.name):
            continue
        for device in spec.devices or ():
            if selector.device is None or selector.device == device.name:
                added.setdefault(device.name, []).append(rule.spec.taint)
    return added


class ResourceSnapshot:
    """Slices, classes and taint rules, indexed for allocation.

    Args:
        slices: all ResourceSlices of the cluster (the allocator keeps those of the highest
            generation of each pool).
        classes: all DeviceClasses.
        taint_rules: DeviceTaintRules (ignored when the ``DRADeviceTaintRules`` gate is off).
        features: the scheduler's feature gates.
    """

    def __init__(self, slices: Iterable[ResourceSlice], classes: Iterable[DeviceClass],
                 taint_rules: Sequence[DeviceTaintRule] = (),
                 features: AllocatorFeatures = DEFAULT_FEATURES) -> None:
        self.features = features
        self.classes = {c.metadata.name or "": c for c in classes}
        self._rules = taint_rules if features.device_taint_rules else ()
        self._next_uid = 0
        self.slices = SliceIndex.build([self._entry(s) for s in slices])
        self._node_pools: dict[object, NodePools | AllocationError] = {}
        self._selector_sets: dict[tuple[tuple[str, ...], tuple[str, ...]], SelectorSet] = {}
        self._consumptions: dict[object, dict[int, Consumption | None]] = {}

    def _entry(self, resource_slice: ResourceSlice) -> SliceEntry:
        """The slice's entry, its devices numbered from the next unused uid."""
        features = self.features
        entry = SliceEntry(resource_slice, self._next_uid,
                           _rule_taints(resource_slice, self._rules, features.version),
                           list_attributes=features.version.follows(LIST_ATTRIBUTES_SEEN_BY_CEL),
                           cel_multiple=features.cel_sees_allow_multiple_allocations)
        self._next_uid += len(entry.devices)
        return entry

    def with_slices(self, slices: Iterable[ResourceSlice],
                    changed: Collection[str]) -> ResourceSnapshot:
        """This snapshot with the cluster's slices now ``slices`` (all of them, in the order
        a fresh snapshot would be given them), of which only those named in ``changed`` (and
        those added or gone) differ from this snapshot's: the same classes, taint rules and
        features. Equal to ``ResourceSnapshot(slices, classes, taint_rules, features)`` in
        every decision, at the cost of the changed slices: the other slices' entries (their
        devices' uids and cached selector outcomes) are kept, and so are the pools of every
        node no changed slice's pool reaches (a pool's slices on other nodes count too: an
        incomplete pool is judged by all of its slices, ``checkSlicesInPool``; a changed
        slice without ``nodeName`` may reach any node). This snapshot must not be used
        afterwards (the two share their caches)."""
        new = copy.copy(self)
        old = {e.name: e for e in self.slices.all}
        entries, made = [], []
        for resource_slice in slices:
            name = resource_slice.metadata.name or ""
            entry = old.get(name)
            if entry is None or name in changed:
                entry = new._entry(resource_slice)
                made.append(entry)
            entries.append(entry)
        new.slices = SliceIndex.build(entries)
        kept = {id(e) for e in entries}
        dropped = [e for e in self.slices.all if id(e) not in kept]
        new._node_pools = self._pools_kept(new.slices, [*dropped, *made])
        gone = [d.uid for e in dropped for d in e.devices]
        for caches in (*(s.outcomes for s in self._selector_sets.values()),
                       *self._consumptions.values()):
            for uid in gone:
                caches.pop(uid, None)  # type: ignore[attr-defined]
        return new

    def _pools_kept(self, index: SliceIndex, touched: list[SliceEntry]
                    ) -> dict[object, NodePools | AllocationError]:
        """The cached pools of the nodes none of the ``touched`` slices' pools reach."""
        pools = {(e.driver, e.pool_name) for e in touched}
        reached = [e for e in (*self.slices.all, *index.all)
                   if (e.driver, e.pool_name) in pools]
        if any(not e.node_selection.node_name for e in (*touched, *reached)):
            return {}
        nodes = {e.node_selection.node_name for e in reached}
        return {key: found for key, found in self._node_pools.items()
                if key[0] not in nodes}  # type: ignore[index]

    def node_pools(self, node: NodeInfo) -> NodePools:
        """The pools ``node`` sees, in search order (cached per node name and labels).

        Raises:
            AllocationError: a node selector in a slice does not parse.
        """
        key = node.cache_key
        pools = self._node_pools.get(key)
        if pools is None:
            try:
                pools = gather_pools(self.slices, node, self.features)
            except AllocationError as err:
                pools = err
            self._node_pools[key] = pools
        if isinstance(pools, AllocationError):
            raise pools
        return pools

    def consumptions(self, requests: Mapping[str, Quantity] | None
                     ) -> dict[int, Consumption | None]:
        """The cache, per device uid, of what a capacity request consumes (the static part of
        the capacity check; it depends only on the amounts requested and the device)."""
        key = tuple(sorted((name, q.value) for name, q in requests.items())) if requests \
            else None
        found = self._consumptions.get(key)
        if found is None:
            found = self._consumptions[key] = {}
        return found

    def selector_set(self, class_expressions: tuple[str, ...],
                     request_expressions: tuple[str, ...]) -> SelectorSet:
        """The (shared, cached) selectors of a class and request."""
        key = (class_expressions, request_expressions)
        found = self._selector_sets.get(key)
        if found is None:
            found = self._selector_sets[key] = SelectorSet(class_expressions, request_expressions)
        return found
