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

from collections.abc import Iterable, Mapping, Sequence

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
        rules = taint_rules if features.device_taint_rules else ()
        entries = []
        uid = 0
        for resource_slice in slices:
            entry = SliceEntry(resource_slice, uid,
                               _rule_taints(resource_slice, rules, features.version),
                               list_attributes=features.version.follows(
                                   LIST_ATTRIBUTES_SEEN_BY_CEL),
                               cel_multiple=features.cel_sees_allow_multiple_allocations)
            uid += len(entry.devices)
            entries.append(entry)
        self.slices = SliceIndex.build(entries)
        self._node_pools: dict[object, NodePools | AllocationError] = {}
        self._selector_sets: dict[tuple[tuple[str, ...], tuple[str, ...]], SelectorSet] = {}
        self._consumptions: dict[object, dict[int, Consumption | None]] = {}

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
