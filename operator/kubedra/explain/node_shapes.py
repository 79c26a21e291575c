"""Evaluate each distinct node shape once: nodes that differ only in names get one search.

On a fleet, most nodes are copies of a few: the same devices, the same values, the same
devices taken, differing only in the names of the node, its pools and slices and the claims
holding its devices. The allocator's search, its diagnosis and the count of kube-scheduler's
search steps (:func:`kubedra.explain.claims.evaluate_node`) then come out the same but for
those names, so :class:`NodeShapes` evaluates the first node of each shape and gives every
later node of that shape a copy of its outcome with the names replaced, word for word. The
copies :func:`kubedra.explain.simulate.simulate_claim` counts are placed the same way, the
copies placed so far being part of what is allocated.

A node's *shape* (:meth:`NodeShapes.shape`) is, in search order, every device's pool and slice
position, name, the values the claim's selectors read (:func:`kubedra.cel.reads.values_key`,
the device's CEL conversion error included), the values its constraints compare, its
capacities, whether it is allocated and the position and request of each claim holding it;
then each pool's driver, generation and slice count, and which of the names are equal. The
shape decides the search: devices are tried in that order and every check reads only these
(``allocator_incubating.go``: ``allocateDevice``, ``isSelectable``, the constraints'
``add``). A node is evaluated on its own whenever something else could matter: a pool without
this node's ``nodeName`` (shared by several nodes, or chosen by labels), per-device node
selection, shared counters, taints, binding conditions, shared devices or capacity, an
incomplete, invalid, obsolete or outdated pool, or a selector that reads the device in a way
:mod:`kubedra.cel.reads` cannot key.

Names are replaced as whole words (``[\\w.-]+``, as :mod:`kubedra.explain.shapes` masks
them). A name that could also stand in the text for something else is never replaced: each
word that changes must hold a letter and be none of the words of the explanation's and the
allocator's source (their sentences), of the claim, of its classes, or of the first node's
devices; otherwise the node is evaluated on its own.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import weakref
from collections.abc import Mapping
from functools import cache
from typing import Any

from kubedra.allocation import (
    AllocatedState,
    Allocator,
    DeviceEntry,
    DeviceID,
    NodeInfo,
    NodePools,
    lookup_attribute,
)
from kubedra.api.resource import ResourceClaim
from kubedra.cel.reads import reads
from kubedra.explain.findings import request_specs
from kubedra.explain.model import NodeOutcome, Renaming
from kubedra.explain.snapshot import ClusterSnapshot

_WORD = re.compile(r"[\w.-]+")
_LETTER = re.compile(r"[a-z]", re.IGNORECASE)

_SOURCES = ("explain", "allocation", "cel")
"""The packages (of ``kubedra``) whose words the text may contain."""


@cache
def source_words() -> frozenset[str]:
    """Every word of the modules that write an explanation (code, sentences, docstrings);
    empty where their sources are not installed (then no outcome is reused)."""
    root = pathlib.Path(__file__).parents[1]
    return frozenset(word for package in _SOURCES for path in (root / package).glob("*.py")
                     for word in _WORD.findall(path.read_text()))


Shape = tuple[tuple[Any, ...], tuple[str, ...]]
"""A node's shape key and its names, word by word, in the order the key places them."""

_PoolsPart = tuple[tuple[Any, ...], tuple[str, ...], tuple[tuple[Any, ...], ...]]
"""What a shape takes from the node's pools alone: each pool's key, the names of the node,
its pools and slices, and each device's key but for the claims holding it."""

_PARTS: weakref.WeakKeyDictionary[NodePools, dict[tuple[Any, ...], _PoolsPart | None]] = \
    weakref.WeakKeyDictionary()
"""Per node's pools, as long as they are kept, their :data:`_PoolsPart` per node and claim's
reads (the values its selectors and constraints read). The operator keeps every node's pools
until one of their slices changes (:meth:`kubedra.allocation.ResourceSnapshot.with_slices`),
so a later question about a claim reading the same values makes no device's key again."""

_PARTS_KEPT = 4
"""Readings kept per node's pools (the oldest is dropped)."""


class NodeShapes:
    """The outcome of the first node of each shape, for one claim against one snapshot.

    Attributes:
        evaluated: nodes whose outcome was computed (not reused); for benchmarks and tests.
    """

    def __init__(self, snapshot: ClusterSnapshot, allocator: Allocator,
                 claim: ResourceClaim) -> None:
        self.snapshot = snapshot
        self.allocator = allocator
        self.evaluated = 0
        specs = request_specs(claim, snapshot).values()
        expressions = {e for s in specs for e in (*s.class_selectors, *s.request_selectors)}
        found = [reads(e) for e in sorted(expressions)]
        self._reads: set[tuple[str, str, str]] | None = None if any(
            r is None for r in found) else {read for r in found if r is not None for read in r}
        devices = claim.spec.devices
        self._attributes = sorted({c.match_attribute or c.distinct_attribute or ""
                                   for c in (devices.constraints or () if devices else ())})
        self._signature = (tuple(sorted(self._reads or ())), tuple(self._attributes))
        """The values read, in one order (a set's order is not one): what the part of a shape
        taken from the pools alone depends on (:data:`_PARTS`)."""
        self._claim_words = frozenset(_WORD.findall(claim.model_dump_json())) | frozenset(
            word for s in specs if (c := snapshot.resources.classes.get(s.device_class))
            for word in _WORD.findall(c.model_dump_json()))
        self._first: dict[tuple[str, tuple[Any, ...]], tuple[Any, tuple[str, ...],
                                                            frozenset[str], Plan]] = {}
        self._static: dict[str, tuple[tuple[Any, ...], tuple[str, ...],
                                      list[DeviceID]] | None] = {}

    def shape(self, node: NodeInfo, pools: NodePools,
              allocated: AllocatedState | None = None) -> Shape | None:
        """The node's shape with ``allocated`` taken (default: the allocator's), or None when
        it must be evaluated on its own (module docstring)."""
        if node.name not in self._static:
            self._static[node.name] = self._node_shape(node, pools)
        static = self._static[node.name]
        if static is None:
            return None
        key, names, ids = static
        allocated = allocated if allocated is not None else self.allocator.allocated
        if any(i in allocated.shared_devices or i in allocated.consumed_capacity for i in ids):
            return None
        return (key, tuple(i in allocated.devices for i in ids)), names

    def _node_shape(self, node: NodeInfo, pools: NodePools
                    ) -> tuple[tuple[Any, ...], tuple[str, ...], list[DeviceID]] | None:
        """All of the shape but what is allocated: the key, the names, the devices in search
        order."""
        part = self._pools_part(node, pools)
        if part is None:
            return None
        pools_key, static_names, device_keys = part
        holders = self.snapshot.holders
        names = list(static_names)
        key: list[Any] = list(pools_key)
        claims: dict[str, int] = {}
        for device, device_key in zip(pools.devices, device_keys, strict=True):
            held = []
            for holder in holders.get(device.id, ()):
                if holder.claim not in claims:
                    claims[holder.claim] = len(claims)
                    names.append(holder.claim)
                held.append((claims[holder.claim], holder.request))
            key.append((device_key, tuple(held)))
        words = [_WORD.findall(name) for name in names]
        flat = [w for group in words for w in group]
        first: dict[str, int] = {}
        same = tuple(first.setdefault(w, len(first)) for w in flat)
        return ((tuple(key), tuple(len(g) for g in words), same), tuple(flat),
                [d.id for d in pools.devices])

    def _pools_part(self, node: NodeInfo, pools: NodePools) -> _PoolsPart | None:
        """What the shape takes from the node's pools alone (:data:`_PARTS`), or None when
        the node must be evaluated on its own."""
        if self._reads is None or pools.obsolete or pools.outdated:
            return None
        kept = _PARTS.get(pools)
        if kept is None:
            kept = _PARTS[pools] = {}
        signature = (node.name, self._signature)
        if signature in kept:
            return kept[signature]
        if len(kept) >= _PARTS_KEPT:
            del kept[next(iter(kept))]
        part = kept[signature] = self._new_pools_part(node, pools, self._signature[0])
        return part

    def _new_pools_part(self, node: NodeInfo, pools: NodePools,
                        read: tuple[tuple[str, str, str], ...]) -> _PoolsPart | None:
        names: list[str] = [node.name]
        key: list[Any] = []
        for pool in pools.pools:
            if (pool.incomplete or pool.invalid or pool.other_slices or pool.counter_sets
                    or any(s.node_selection.node_name != node.name or s.per_device_set
                           for s in pool.slices)):
                return None
            names.append(pool.name)
            names.extend(s.name for s in pool.slices)
            key.append((pool.driver, len(pool.slices), tuple(
                (s.generation, s.slice_count, len(s.devices)) for s in pool.slices)))
        slice_at = {s.name: i for p in pools.pools for i, s in enumerate(p.slices)}
        devices: list[tuple[Any, ...]] = []
        for device in pools.devices:
            if (device.taints or device.consumes_counters or device.allow_multiple
                    or device.binding_conditions is not None or device.binds_to_node
                    or device.node_selection.is_set):
                return None
            capacity = device.capacity or {}
            devices.append((slice_at[device.slice.name], device.name,
                            device.conversion_error(), _read_values(read, device),
                            tuple(lookup_attribute(device, a) for a in self._attributes),
                            tuple((n, id(c)) for n, c in capacity.items())))
        return tuple(key), tuple(names), tuple(devices)

    def reused(self, shape: Shape, kind: str = "outcome") -> Any:
        """What was kept (:meth:`keep`) for the first node of this shape, with this node's
        names; None when nothing was, or a name cannot be replaced safely."""
        key, names = shape
        found = self._first.get((kind, key))
        if found is None:
            return None
        value, first_names, taken, where = found
        words = {a: b for a, b in zip(first_names, names, strict=True) if a != b}
        if any(word in taken or not _LETTER.search(word) for word in words):
            return None
        copy = renamed(value, where, words)
        if isinstance(copy, NodeOutcome) and copy is not value:
            copy.renamed_from = Renaming(value, frozenset(first_names), words, taken)
        return copy

    def keep(self, shape: Shape, value: Any, pools: NodePools, kind: str = "outcome") -> None:
        """Keep what a node of this shape got (its :class:`NodeOutcome`, or for another
        ``kind`` any value :func:`renamed` can rename) for the later nodes of the shape; in
        place of what was kept when fewer of this node's names are words of the text. An
        outcome that erred is not kept: an error's text comes from outside."""
        if isinstance(value, NodeOutcome):
            self.evaluated += 1
            if value.error is not None or any(r.errors or r.compile_errors
                                              for r in value.requests):
                return
        if not source_words():  # no sources to read (a build without them): nothing is safe
            return
        key, names = shape
        found = self._first.get((kind, key))
        taken = source_words() | self._claim_words | _device_words(pools)
        # the node whose names are least often words of the text serves its shape best
        if found is None or len(taken.intersection(names)) < len(found[2].intersection(found[1])):
            self._first[kind, key] = (value, names, taken, plan(value, frozenset(names)))


def _read_values(read: tuple[tuple[str, str, str], ...], device: DeviceEntry
                 ) -> tuple[int, ...]:
    """The values of ``device`` that selectors read (as :func:`kubedra.cel.reads.values_key`
    names them: a qualified attribute, and the bare one under the device's own driver), by
    identity: :class:`~kubedra.api.slice_decoding.SliceDecoder` shares one model per distinct
    value, so equal values are one object (values equal but not shared only make more shapes).
    The driver is the pool's, in the key already."""
    attributes, capacity = device.attributes, device.capacity or {}
    found: list[int] = []
    for kind, domain, ident in read:
        values: Mapping[str, object] = attributes if kind == "attributes" else \
            capacity if kind == "capacity" else {}
        found.append(id(values.get(f"{domain}/{ident}")))
        found.append(id(values.get(ident)) if domain == device.driver else 0)
    return tuple(found)


def _device_words(pools: NodePools) -> frozenset[str]:
    """The words of the node's devices' names, attributes and capacities."""
    return frozenset(word for d in pools.devices
                     for text in (d.name, repr(d.attributes), repr(d.capacity))
                     for word in _WORD.findall(text))


Plan = Any
"""Where a value holds names (:func:`plan`): ``None`` nowhere; for a string that does, its
pieces (text between names at even positions, the names at odd ones); per list, tuple or dict
the plans of its items (by position; a dict's as ``(key plan, value plan)``); per dataclass
the plans of its fields, by name."""


def plan(value: Any, names: frozenset[str]) -> Plan:
    """Where ``value`` holds any of the words ``names``: what :func:`renamed` must copy."""
    if isinstance(value, str):
        pieces, last = [], 0
        for word in _WORD.finditer(value):
            if word[0] in names:
                pieces += [value[last:word.start()], word[0]]
                last = word.end()
        return (*pieces, value[last:]) if pieces else None
    if isinstance(value, list | tuple):
        items = [plan(v, names) for v in value]
        return items if any(p is not None for p in items) else None
    if isinstance(value, dict):
        pairs = [(plan(k, names), plan(v, names)) for k, v in value.items()]
        return pairs if any(p != (None, None) for p in pairs) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {name: p for name, field in vars(value).items()
                  if (p := plan(field, names)) is not None}
        return fields or None
    return None


def renamed(value: Any, where: Plan, words: dict[str, str]) -> Any:
    """``value`` with every whole word in ``words`` replaced in the strings ``where`` (its
    :func:`plan`) names; what holds no name is shared, not copied (outcomes are not changed
    once made). A dataclass's copy renames each field that holds a name when the field is
    first read (:class:`_Renamed`): the operator's Event reads each node's counts and its
    message's grouping, not its devices' reasons, and renaming those was most of its first
    question on 2,000 nodes (bench/RESULTS.md, "Live explain … branch `explain4`")."""
    if where is None:
        return value
    if isinstance(value, str):
        return "".join([p if i % 2 == 0 else words.get(p, p) for i, p in enumerate(where)])
    if isinstance(value, list | tuple):
        items = [renamed(v, p, words) for v, p in zip(value, where, strict=True)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {renamed(k, pk, words): renamed(v, pv, words)
                for (k, v), (pk, pv) in zip(value.items(), where, strict=True)}
    copy: Any = object.__new__(_renamed_type(type(value)))
    # the fields without names now, the others when read; object's own __setattr__: a frozen
    # dataclass refuses its own
    object.__setattr__(copy, "__dict__", {
        **{name: field for name, field in vars(value).items() if name not in where},
        _RENAMING: (value, where, words)})
    return copy


_RENAMING = "_renaming"
"""The key of a :class:`_Renamed` copy's ``__dict__`` holding (the value copied, its plan,
the words) until every field is read."""


class _Renamed:
    """A dataclass's copy (a subclass of its class, :func:`_renamed_type`) whose fields that
    hold names are renamed on first read, then kept: equal to the copy :func:`renamed` made
    at once, field by field, and to an instance of the dataclass with those fields."""

    def __getattr__(self, name: str) -> Any:
        pending = self.__dict__.get(_RENAMING)
        if pending is None or name not in pending[1]:
            raise AttributeError(name)
        value, where, words = pending
        found = self.__dict__[name] = renamed(getattr(value, name), where[name], words)
        return found

    _base: type
    """The dataclass copied."""

    def __eq__(self, other: object) -> bool:
        base = self._base
        if not isinstance(other, base):
            return NotImplemented
        compared = [f.name for f in dataclasses.fields(base) if f.compare]
        return all(getattr(self, n) == getattr(other, n) for n in compared)


_RENAMED_TYPES: dict[type, type] = {}
"""Per dataclass, its :class:`_Renamed` subclass."""


def _renamed_type(kind: type) -> type:
    """The :class:`_Renamed` subclass of dataclass ``kind`` (its ``isinstance`` checks,
    methods, fields and hash are ``kind``'s)."""
    found = _RENAMED_TYPES.get(kind)
    if found is None:
        found = _RENAMED_TYPES[kind] = type(kind.__name__, (_Renamed, kind), {
            "_base": kind, "__hash__": kind.__hash__, "__module__": kind.__module__,
            "__qualname__": kind.__qualname__})
    return found
