"""Resource pools as a node sees them (``GatherPools`` in
``structured/internal/incubating/pools_incubating.go``, v0.37.2).

For a node, the candidate slices are those with its ``nodeName`` plus all slices without one:

1. slices using ``perDeviceNodeSelection`` or ``sharedCounters`` are ignored when partitionable
   devices are off, and so are slices with no node selection at all (a future extension);
   slices in which a device's ``consumesCounters`` declares ``compatibilityGroups`` are always
   ignored from 1.37 (before, the field was not known; :mod:`kubedra.allocation.versions`):
   the gate ``DRADeviceCompatibilityGroups`` is off in every feature set of the
   incubating variant (``sliceUsesCompatibilityGroups``, ``compatibility_groups.go``);
2. a slice is relevant when its node selection matches the node, or, with per-device node
   selection, when any of its devices matches (before 1.37, and in the stable variant, every
   slice with shared counters is: ``COUNTER_SLICES_BY_NODE``);
3. per pool (driver, pool name) only the relevant slices of the highest generation are kept;
4. a pool is complete when it has ``resourceSliceCount`` slices. If the relevant slices are
   fewer, all slices of the pool are checked: a newer generation anywhere makes the pool
   obsolete (ignored); still too few slices, not counting those ignored for compatibility
   groups, makes it *incomplete*;
5. a pool is *invalid* when a device name repeats among its slices for the node, a counter set
   name repeats, or a device consumes an unknown counter set or counter;
6. slices are ordered by name and pools by (driver, pool name), pools with binding conditions
   last: the first-fit search follows this order (other minors' and variants' orders:
   ``AllocatorFeatures.pools_in_random_order`` and ``binding_pools_last``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kubedra.allocation.errors import AllocationError
from kubedra.allocation.features import AllocatorFeatures
from kubedra.allocation.node_selection import NodeInfo, NodeSelection
from kubedra.allocation.quantities import Number, number
from kubedra.allocation.state import DeviceID
from kubedra.allocation.versions import (
    COMPATIBILITY_GROUPS_IGNORE_SLICE,
    COUNTER_SLICES_BY_NODE,
    INCOMPLETE_POOL_SKIPPED,
)
from kubedra.api.resource import (
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceTaint,
    ResourceSlice,
)
from kubedra.cel import CELDevice
from kubedra.cel.reads import conversion_error as attribute_conversion_error

BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that prevent allocation unless tolerated (``taintPreventsAllocation``)."""

CounterConsumption = tuple[tuple[str, tuple[tuple[str, Number], ...]], ...]
"""Per counter set a device consumes from: the set name and (counter, amount) pairs."""


class DeviceEntry:
    """One device of one ResourceSlice, with what the search needs precomputed.

    ``uid`` is unique within a snapshot and keys the selector caches; ``taints`` include those
    of matching DeviceTaintRules.
    """

    __slots__ = ("_cel", "_conversion", "allow_multiple", "attributes", "binding_conditions",
                 "binding_failure_conditions", "binds_to_node", "capacity", "consumes",
                 "consumes_counters", "device", "driver", "id", "name", "node_selection",
                 "slice", "taints", "uid")

    def __init__(self, uid: int, slice_entry: SliceEntry, device: Device,
                 extra_taints: Sequence[DeviceTaint]) -> None:
        self.uid = uid
        self.slice = slice_entry
        self.device = device
        self.driver = slice_entry.driver
        self.name = device.name
        self.id: DeviceID = (slice_entry.driver, slice_entry.pool_name, device.name)
        self.attributes: dict[str, DeviceAttribute] = device.attributes or {}
        self.capacity: dict[str, DeviceCapacity] | None = device.capacity
        self.consumes_counters = bool(device.consumes_counters)
        self.consumes: CounterConsumption = tuple(
            (c.counter_set, tuple((name, number(counter.value))
                                  for name, counter in c.counters.items()))
            for c in device.consumes_counters or ())
        self.taints: tuple[DeviceTaint, ...] = (*(device.taints or ()), *extra_taints)
        self.binding_conditions = device.binding_conditions
        self.binding_failure_conditions = device.binding_failure_conditions
        self.binds_to_node = bool(device.binds_to_node)
        self.allow_multiple = bool(device.allow_multiple_allocations)
        self.node_selection = NodeSelection(device.node_name, device.all_nodes,
                                            device.node_selector)
        self._cel: CELDevice | None = None
        self._conversion: tuple[str | None] | None = None

    def conversion_error(self) -> str | None:
        """The first attribute upstream's ``DeviceMatches`` cannot convert, or None
        (:func:`kubedra.cel.reads.conversion_error`, computed once)."""
        if self._conversion is None:
            self._conversion = (attribute_conversion_error(self.driver, self.attributes,
                                                           self.slice.list_attributes),)
        return self._conversion[0]

    def blocking_taints(self) -> Iterable[DeviceTaint]:
        """Taints that prevent allocation unless a toleration matches."""
        return (t for t in self.taints if t.effect in BLOCKING_TAINT_EFFECTS)

    def cel_device(self) -> CELDevice:
        """The ``device`` variable for CEL selectors (built once)."""
        if self._cel is None:
            self._cel = CELDevice(
                self.driver, self.attributes,
                {name: cap.value for name, cap in (self.capacity or {}).items()},
                allow_multiple_allocations=self.allow_multiple and self.slice.cel_multiple,
                list_attributes=self.slice.list_attributes)
        return self._cel

    def __repr__(self) -> str:
        return "/".join(self.id)


class SliceEntry:
    """One ResourceSlice with its devices as :class:`DeviceEntry`;
    ``uses_compatibility_groups``: whether a device declares compatibility groups (then the
    allocator ignores the slice); ``list_attributes``: whether CEL sees list-typed attributes
    (:data:`~kubedra.allocation.versions.LIST_ATTRIBUTES_SEEN_BY_CEL`); ``cel_multiple``:
    whether CEL sees ``allowMultipleAllocations`` (``AllocatorFeatures.
    cel_sees_allow_multiple_allocations``)."""

    __slots__ = (
        "cel_multiple",
        "consumes_counters",
        "counter_sets",
        "devices",
        "driver",
        "duplicate_name",
        "generation",
        "has_binding_conditions",
        "has_counters",
        "list_attributes",
        "name",
        "node_selection",
        "per_device",
        "per_device_set",
        "pool_name",
        "skips_node_operations",
        "slice_count",
        "uses_compatibility_groups",
    )

    def __init__(self, resource_slice: ResourceSlice, first_uid: int,
                 extra_taints: dict[str, list[DeviceTaint]], *, list_attributes: bool,
                 cel_multiple: bool) -> None:
        spec = resource_slice.spec
        self.list_attributes = list_attributes
        self.cel_multiple = cel_multiple
        self.name = resource_slice.metadata.name or ""
        self.driver = spec.driver
        self.pool_name = spec.pool.name
        self.generation = spec.pool.generation
        self.slice_count = spec.pool.resource_slice_count
        self.node_selection = NodeSelection(spec.node_name, spec.all_nodes, spec.node_selector)
        self.per_device_set = spec.per_device_node_selection is not None
        self.per_device = bool(spec.per_device_node_selection)
        self.counter_sets: list[tuple[str, dict[str, Number]]] = [
            (cs.name, {name: number(c.value) for name, c in cs.counters.items()})
            for cs in spec.shared_counters or ()]
        self.devices = [DeviceEntry(first_uid + i, self, d, extra_taints.get(d.name, ()))
                        for i, d in enumerate(spec.devices or ())]
        self.skips_node_operations = bool(spec.skip_node_operations)
        """Whether the slice lists ``skipNodeOperations`` (then, from 1.38, its devices are not
        allocatable: :data:`~kubedra.allocation.versions.SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE`)."""
        self.uses_compatibility_groups = any(
            c.compatibility_groups for d in spec.devices or () for c in d.consumes_counters or ())
        # read for every node the slice serves, at every gathering of its pools: kept
        self.has_binding_conditions = any(d.binding_conditions is not None for d in self.devices)
        """Whether a device of the slice has binding conditions (``hasBindingConditions``)."""
        self.has_counters = bool(self.counter_sets)
        """Whether the slice publishes shared counters (``len(sharedCounters) > 0``)."""
        self.consumes_counters = any(d.consumes for d in self.devices)
        """Whether a device of the slice consumes counters (the pool checks their sets)."""
        self.duplicate_name = _first_repeated(d.name for d in self.devices)
        """The first device name that repeats within the slice (then a pool of this slice
        alone is invalid), or None."""


@dataclass(slots=True, eq=False)
class Pool:
    """A pool as seen from one node.

    Attributes:
        slices: the pool's device slices relevant for the node, by name.
        other_slices: device slices of the pool not relevant for the node (their allocated
            devices still consume counters).
        counter_sets: counter set name -> counter -> total.
    """

    driver: str
    name: str
    incomplete: bool = False
    invalid_reason: str | None = None
    published_slices: int = 0
    """For an incomplete pool: how many slices of its generation exist (of ``slice_count``)."""
    slice_count: int = 0
    ignored_slices: list[str] = field(default_factory=list)
    """For an incomplete pool: its slices of that generation the allocator ignores because a
    device declares compatibility groups (they do not count towards ``slice_count``)."""
    slices: list[SliceEntry] = field(default_factory=list)
    other_slices: list[SliceEntry] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Number]] = field(default_factory=dict)
    _consumers: dict[str, list[DeviceEntry]] | None = None

    def consumers(self) -> dict[str, list[DeviceEntry]]:
        """Devices of all the pool's slices that consume counters, by name (a name repeated
        across slices lists every device)."""
        if self._consumers is None:
            self._consumers = {}
            for entry in (*self.slices, *self.other_slices):
                for device in entry.devices:
                    if device.consumes:
                        self._consumers.setdefault(device.name, []).append(device)
        return self._consumers

    @property
    def incomplete_detail(self) -> str:
        """For an incomplete pool, what is missing, e.g. ``1 of 2 slices published``."""
        detail = f"{self.published_slices} of {self.slice_count} slices published"
        if self.ignored_slices:
            detail += (f", {len(self.ignored_slices)} of them ignored because a device declares "
                       "compatibility groups (the DRADeviceCompatibilityGroups feature is off): "
                       + ", ".join(self.ignored_slices))
        return detail

    @property
    def invalid(self) -> bool:
        """Whether the pool is invalid (see :attr:`invalid_reason`)."""
        return self.invalid_reason is not None

    @property
    def key(self) -> tuple[str, str]:
        """``(driver, pool name)``."""
        return self.driver, self.name

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(slots=True, eq=False, weakref_slot=True)
class NodePools:
    """The pools of one node, in search order, and the devices the search may pick from.

    ``devices[i]`` belongs to ``device_pools[i]``; devices of incomplete or invalid pools are
    not listed. Weakly referenceable: readers may keep what they derive from a node's pools
    for as long as the pools are kept (:mod:`kubedra.explain.node_shapes`).
    """

    pools: list[Pool]
    devices: list[DeviceEntry]
    device_pools: list[Pool]
    obsolete: dict[str, int] = field(default_factory=dict)
    """Pools whose slices for the node are left out because a newer generation of the pool
    is being published (``driver/pool`` -> that generation); the search never sees them."""
    outdated: list[tuple[SliceEntry, int]] = field(default_factory=list)
    """Slices for the node at an older generation than their pool's newest, with that newest
    generation: ``addSlice`` in ``pools_incubating.go`` drops them silently."""

    @property
    def has_invalid(self) -> bool:
        """Whether any pool is invalid."""
        return any(pool.invalid for pool in self.pools)

    @property
    def first_invalid(self) -> tuple[int, Pool] | None:
        """The first invalid pool in search order, with the position in :attr:`devices` where
        its devices would be (how many devices of the pools before it are listed)."""
        position = 0
        for pool in self.pools:
            if pool.invalid:
                return position, pool
            position += sum(1 for p in self.device_pools if p is pool)
        return None


@dataclass(slots=True)
class SliceIndex:
    """All slices of a snapshot, split as ``NewAllocator`` does."""

    all: list[SliceEntry]
    on_node: dict[str, list[SliceEntry]]
    shared: list[SliceEntry]

    @classmethod
    def build(cls, entries: list[SliceEntry]) -> SliceIndex:
        """Index slices by ``nodeName`` (slices without one are shared)."""
        on_node: dict[str, list[SliceEntry]] = {}
        shared = []
        for entry in entries:
            if entry.node_selection.node_name:
                on_node.setdefault(entry.node_selection.node_name, []).append(entry)
            else:
                shared.append(entry)
        return cls(entries, on_node, shared)


def _is_relevant(entry: SliceEntry, node: NodeInfo) -> bool | None:
    """Whether a slice serves the node; ``None`` when its node selection is unknown."""
    try:
        if entry.node_selection.is_set:
            return entry.node_selection.matches(node)
        if entry.per_device:
            return any(d.node_selection.matches(node) for d in entry.devices)
    except AllocationError as err:
        raise AllocationError(f"failed to perform node selection for slice {entry.name}: "
                              f"{err}") from None
    return None


def _first_repeated(names: Iterable[str]) -> str | None:
    """The first name that was seen before, or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _build_pool(key: tuple[str, str], slices: list[SliceEntry], features: AllocatorFeatures,
                all_slices: list[SliceEntry] | None) -> Pool:
    pool = Pool(*key)
    if len(slices) < 2:  # one slice (a node's own pool, most often): no order to make
        pass
    elif features.pools_in_random_order:  # as listed; experimental: binding conditions last
        if not features.runs_stable:
            slices = sorted(slices, key=lambda s: s.has_binding_conditions)
    else:
        slices = sorted(slices, key=lambda s: s.name)
    partitionable = features.partitionable_devices
    device_slices = [s for s in slices if not (partitionable and s.has_counters)]
    counter_slices = [s for s in slices if partitionable and s.has_counters]
    other_slices: list[SliceEntry] = []
    if all_slices is not None and len(slices) < len(all_slices):
        relevant = {s.name for s in slices}
        for entry in all_slices:
            if entry.name in relevant:
                continue
            (counter_slices if partitionable and entry.has_counters else other_slices).append(entry)

    duplicate = device_slices[0].duplicate_name if len(device_slices) == 1 else \
        _first_repeated(device.name for entry in device_slices for device in entry.devices)
    if duplicate is not None:
        pool.invalid_reason = f"duplicate device name {duplicate}"
        return pool
    if not partitionable:
        pool.slices = device_slices
        return pool

    for entry in counter_slices:
        for name, counters in entry.counter_sets:
            if name in pool.counter_sets:
                pool.invalid_reason = f"duplicate counter set name {name}"
                pool.counter_sets = {}
                return pool
            pool.counter_sets[name] = counters
    for entry in (*device_slices, *other_slices):
        if not entry.consumes_counters:
            continue
        for device in entry.devices:
            for set_name, consumed in device.consumes:
                known = pool.counter_sets.get(set_name)
                if known is None:
                    pool.invalid_reason = f"counter set {set_name} not found"
                else:
                    missing = [c for c, _ in consumed if c not in known]
                    if missing:
                        pool.invalid_reason = (f"counter {missing[0]} not found in counter set "
                                               f"{set_name}")
                if pool.invalid_reason:
                    pool.counter_sets = {}
                    return pool
    pool.slices = device_slices
    pool.other_slices = other_slices
    return pool


def _slices_of_generation(index: SliceIndex, key: tuple[str, str],
                          generation: int) -> list[SliceEntry] | None:
    """All slices of a pool with this generation, or ``None`` when a newer one exists
    (``checkSlicesInPool``)."""
    found = []
    for entry in index.all:
        if (entry.driver, entry.pool_name) != key or entry.generation < generation:
            continue
        if entry.generation > generation:
            return None
        found.append(entry)
    return found


def newest_slices(entries: Iterable[SliceEntry]) -> dict[tuple[str, str], list[SliceEntry]]:
    """Per pool (driver, pool name), the given slices of its highest generation among them,
    in the order given."""
    found: dict[tuple[str, str], list[SliceEntry]] = {}
    for entry in entries:
        key = (entry.driver, entry.pool_name)
        kept = found.get(key)
        if kept is None or entry.generation > kept[0].generation:
            found[key] = [entry]
        elif entry.generation == kept[0].generation:
            kept.append(entry)
    return found


def _one_complete_slice(entry: SliceEntry, features: AllocatorFeatures,
                        skips_incomplete: bool) -> NodePools:
    """:func:`gather_pools` where one slice is relevant for the node and its pool has one
    slice (most nodes): the general path's result without its per-pool bookkeeping (there is
    no other generation, no other pool to order and no other slice of the pool)."""
    pool = _build_pool((entry.driver, entry.pool_name), [entry], features, None)
    if (pool.incomplete and skips_incomplete) or pool.invalid:
        return NodePools([pool], [], [])
    return NodePools([pool], list(entry.devices), [pool] * len(entry.devices))


def gather_pools(index: SliceIndex, node: NodeInfo, features: AllocatorFeatures) -> NodePools:
    """The pools of a node in search order (``GatherPools``).

    Raises:
        AllocationError: a slice's or device's node selector does not parse.
    """
    groups_ignored = features.version.follows(COMPATIBILITY_GROUPS_IGNORE_SLICE)
    skips_incomplete = features.version.follows(INCOMPLETE_POOL_SKIPPED)
    relevant = [
        entry for entry in (*index.on_node.get(node.name, ()), *index.shared)
        if (features.partitionable_devices
            or not (entry.per_device_set or (skips_incomplete and entry.has_counters)))
        and not (groups_ignored and entry.uses_compatibility_groups) and _is_relevant(entry, node)]
    if features.partitionable_devices and skips_incomplete and (
            features.runs_stable or not features.version.follows(COUNTER_SLICES_BY_NODE)):
        chosen = {id(entry) for entry in relevant}  # the counter slices of every node too
        relevant += [e for e in index.all if e.has_counters and id(e) not in chosen]
    if len(relevant) == 1 and relevant[0].slice_count == 1:
        return _one_complete_slice(relevant[0], features, skips_incomplete)
    candidates = newest_slices(relevant)

    pools: list[Pool] = []
    pools_with_binding: list[Pool] = []
    obsolete: dict[str, int] = {}
    for key, slices in candidates.items():
        generation, wanted = slices[0].generation, slices[0].slice_count
        all_slices = None
        if len(slices) != wanted and not skips_incomplete:  # 1.34: searched all the same
            pool = _build_pool(key, slices, features, None)
            pool.incomplete, pool.published_slices, pool.slice_count = True, len(slices), wanted
            pools.append(pool)
            continue
        if len(slices) != wanted:
            all_slices = _slices_of_generation(index, key, generation)
            if all_slices is None:  # obsolete: a newer generation is being published
                obsolete[f"{key[0]}/{key[1]}"] = generation
                continue
            ignored = sorted(e.name for e in all_slices
                             if groups_ignored and e.uses_compatibility_groups)
            published = len(all_slices)
            all_slices = [e for e in all_slices
                          if not (groups_ignored and e.uses_compatibility_groups)]
            if len(all_slices) != wanted:
                pools.append(Pool(*key, incomplete=True, published_slices=published,
                                  slice_count=wanted, ignored_slices=ignored))
                continue
        pool = _build_pool(key, slices, features, all_slices)
        has_binding = features.binding_pools_last and any(
            s.has_binding_conditions for s in pool.slices)
        (pools_with_binding if has_binding else pools).append(pool)
    if len(pools) + len(pools_with_binding) > 1:  # one pool (most nodes): in order already
        order = {key: i for i, key in enumerate(features.pool_order)}
        pools.sort(key=lambda p: (order.get(p.key, len(order)), p.key))
        pools_with_binding.sort(key=lambda p: (order.get(p.key, len(order)), p.key))
    pools.extend(pools_with_binding)

    devices: list[DeviceEntry] = []
    device_pools: list[Pool] = []
    for pool in pools:
        if (pool.incomplete and skips_incomplete) or pool.invalid:
            continue
        for entry in pool.slices:
            devices.extend(entry.devices)
            device_pools.extend([pool] * len(entry.devices))
    outdated = [(e, candidates[key][0].generation) for e in relevant
                if (key := (e.driver, e.pool_name)) in candidates
                and e.generation < candidates[key][0].generation]
    return NodePools(pools, devices, device_pools, obsolete, outdated)
