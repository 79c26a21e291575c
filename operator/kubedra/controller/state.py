"""What the operator knows: cached objects, work queues and the last published pools.

The caches are kopf indexes (filled before any handler runs, see :mod:`kubedra.handlers`),
plus :class:`SliceOverlay`, which remembers the operator's own slice writes until the watch
catches up, so that a reconcile right after a write neither recreates nor overwrites with a
stale resourceVersion (the role of the mutation cache in upstream's resourceslice controller),
and :class:`StatusOverlay`, the same for its status writes to claims and inventories.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kubernetes_asyncio.client import ApiClient

from kubedra.api.resource import OwnerReference
from kubedra.binding.attach import Attacher, AttachResult, ImmediateAttacher
from kubedra.controller.explain_state import ExplainState
from kubedra.controller.histograms import OperatorHistograms
from kubedra.controller.kept import LEFT_OUT_METADATA, KeptObject, Packer, opened
from kubedra.controller.leases import LeaseCache
from kubedra.controller.nodes import declared_features
from kubedra.controller.queue import WorkQueue
from kubedra.explain.status import Rows
from kubedra.publishing.features import ServedFeatures
from kubedra.publishing.pool import DesiredPool, name_pool
from kubedra.settings import Settings

K = TypeVar("K")


class Store(Protocol):
    """A kopf index value: an iterable of the values indexed under one key."""

    def __iter__(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """One device of a claim's allocation result, as the claim index stores it (driver,
    pool and request names interned: every claim of a pool repeats them)."""

    namespace: str
    name: str
    uid: str
    request: str
    driver: str
    pool: str
    device: str


@dataclass
class ClusterView:
    """Read-only access to the kopf indexes by meaning.

    ``inventories``: name → DeviceInventory (a :class:`~kubedra.controller.kept.KeptObject`,
    opened by :meth:`inventory`); ``pools``: (driver, pool) → inventory names;
    ``node_inventories``: node name → names of its node-local inventories; ``slices``:
    inventory name → names of its slices; ``all_slices``: every raw ResourceSlice by name
    (each body is kept once); ``claims``: (namespace, name) → allocated claim (a
    ``KeptObject``, opened by :meth:`claim`); ``claim_uses``: (driver, pool) → ClaimUse. For
    explanations: ``device_classes``, ``taint_rules`` and ``nodes`` (by name),
    ``pending_claims`` (the unallocated claims, ``KeptObject`` records) and
    ``unschedulable_pods`` (pods kube-scheduler gave up on because of their claims), both by
    (namespace, name); ``slice_pools``: (driver, pool) → the inventory names its slices are
    labelled with.
    """

    inventories: Mapping[str, Store]
    pools: Mapping[tuple[str, str], Store]
    node_inventories: Mapping[str, Store]
    slices: Mapping[str, Store]
    claims: Mapping[tuple[str, str], Store]
    claim_uses: Mapping[tuple[str, str], Store]
    all_slices: Mapping[str, Store] = field(default_factory=dict)
    device_classes: Mapping[str, Store] = field(default_factory=dict)
    taint_rules: Mapping[str, Store] = field(default_factory=dict)
    nodes: Mapping[str, Store] = field(default_factory=dict)
    pending_claims: Mapping[tuple[str, str], Store] = field(default_factory=dict)
    unschedulable_pods: Mapping[tuple[str, str], Store] = field(default_factory=dict)
    slice_pools: Mapping[tuple[str, str], Store] = field(default_factory=dict)

    @staticmethod
    def values(index: Mapping[Any, Store]) -> list[Any]:
        """Every value of an index (a copy of the list; the objects are not copied, nor
        records opened: :func:`~kubedra.controller.kept.opened`)."""
        return [value for store in list(index.values()) for value in store]

    def pending_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The unallocated claim (plain dicts, a copy), or None."""
        return _opened(self.pending_claims.get((namespace, name), ()))

    def unschedulable_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod, if kube-scheduler reports it unschedulable because of its claims."""
        return next(iter(self.unschedulable_pods.get((namespace, name), ())), None)

    def inventory(self, name: str) -> dict[str, Any] | None:
        """Inventory ``name`` (plain dicts, a copy) or None."""
        return _opened(self.inventories.get(name, ()))

    def has_inventory(self, name: str) -> bool:
        """Whether inventory ``name`` exists (its record is not opened)."""
        return bool(self.inventories.get(name))

    def inventory_names(self) -> list[str]:
        """All inventory names."""
        return list(self.inventories)

    def node_exists(self, name: str) -> bool:
        """Whether Node ``name`` exists."""
        return name in self.nodes

    def node_features(self, name: str) -> frozenset[str]:
        """The features Node ``name``'s kubelet declares (``status.declaredFeatures``; none
        when the Node does not exist)."""
        return declared_features(next(iter(self.nodes.get(name, ())), None))

    def inventories_on_node(self, node_name: str) -> list[str]:
        """Names of the node-local inventories of ``node_name``."""
        return list(self.node_inventories.get(node_name, ()))

    def inventories_of_pool(self, driver: str, pool: str) -> list[str]:
        """Names of the inventories that name pool (driver, pool)."""
        return list(self.pools.get((driver, pool), ()))

    def slices_of(self, inventory_name: str) -> list[dict[str, Any]]:
        """Raw slices labelled with ``inventory_name`` (``slices`` holds their names, the
        bodies are kept once, in ``all_slices``)."""
        return [body for name in self.slices.get(inventory_name, ())
                for body in self.all_slices.get(name, ())]

    def deleted_inventories_of_pool(self, driver: str, pool: str) -> list[str]:
        """Names of deleted inventories whose slices of pool (driver, pool) still exist."""
        return sorted({name for name in self.slice_pools.get((driver, pool), ())
                       if not self.has_inventory(name)})

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The allocated claim (plain dicts, a copy) or None."""
        return _opened(self.claims.get((namespace, name), ()))

    def uses_of(self, driver: str, pool: str) -> list[ClaimUse]:
        """Every allocated device of pool ``(driver, pool)`` with its claim."""
        return list(self.claim_uses.get((driver, pool), ()))


def _opened(store: Store) -> dict[str, Any] | None:
    """The first value of an index key's store, opened (None when there is none)."""
    value = next(iter(store), None)
    return None if value is None else opened(value)


def pool_key(raw: Mapping[str, Any]) -> tuple[str, str]:
    """(driver, pool name) of a raw DeviceInventory, without parsing it (see
    :func:`kubedra.publishing.pool.name_pool`)."""
    spec = raw.get("spec") or {}
    return (spec.get("driver", ""),
            name_pool(spec.get("pool"), spec.get("nodeName"), raw["metadata"]["name"]))


def allocation_results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``status.allocation.devices.results`` of a raw ResourceClaim (empty when unallocated)."""
    status = claim.get("status") or {}
    return ((status.get("allocation") or {}).get("devices") or {}).get("results") or []


_VOLATILE_METADATA = frozenset({"resourceVersion", *LEFT_OUT_METADATA})
"""Metadata :func:`stable_metadata` leaves out: the version, which every write changes, and
what the cached records leave out (managedFields, annotations: no decision reads them)."""


def stable_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` of a raw object but its resourceVersion, managedFields and annotations
    (the cached object the write was decided from holds neither of the last two): what a
    status write's answer must share with that object for its watch event to be an echo
    (:meth:`StatusOverlay.is_quiet_echo`)."""
    return {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in _VOLATILE_METADATA}


def _rv(obj: Mapping[str, Any]) -> int:
    return _version((obj.get("metadata") or {}).get("resourceVersion"))


def _version(resource_version: str | None) -> int:
    """A resourceVersion as a number (etcd's revision; 0 when absent or not a number)."""
    try:
        return int(resource_version or 0)
    except ValueError:
        return 0


@dataclass
class SliceOverlay:
    """The operator's own slice writes not yet seen through the watch, per inventory.

    ``written[inventory][slice name]`` is the object the API returned (None after a delete).
    An entry is dropped once the watched copy is at least as new, once the watch delivers an
    event of that slice that has gone past it (:meth:`observe`: the slice may be gone), or
    when the API server contradicts it (:meth:`discard`).
    """

    written: dict[str, dict[str, dict[str, Any] | None]] = field(default_factory=dict)
    seen: int = 0
    """The newest resourceVersion :meth:`observe` was told of: the watch has delivered every
    event up to it (a watch delivers a collection's events in resourceVersion order)."""

    def record(self, inventory: str, name: str, obj: dict[str, Any] | None) -> None:
        """Remember a create/update result, or a delete (``obj`` None).

        A create or update whose version the watch has already gone past is not kept: its
        answer came after the watch's events of it (the two arrive on separate connections,
        in either order), so the watched state, the slice's newer version or its delete, is
        the truth. Kept, it would stand for a slice deleted meanwhile for good (issue 16,
        item 1: the slice was never recreated).
        """
        mine = self.written.setdefault(inventory, {})
        if obj is not None and 0 < _rv(obj) <= self.seen:
            mine.pop(name, None)
            return
        mine[name] = obj

    def merge(self, inventory: str, watched: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The watched slices corrected by recent writes."""
        mine = self.written.get(inventory, {})
        result: dict[str, dict[str, Any]] = {s["metadata"]["name"]: s for s in watched}
        for name, obj in list(mine.items()):
            seen = result.get(name)
            if obj is None:
                if seen is None:
                    del mine[name]  # the watch saw the delete too
                else:
                    result.pop(name)
            elif seen is not None and _rv(seen) >= _rv(obj):
                del mine[name]
            else:
                result[name] = obj
        return list(result.values())

    def observe(self, inventory: str, name: str, resource_version: str | None, *,
                deleted: bool) -> None:
        """A watch event of slice ``name`` of ``inventory`` (any type; ``deleted`` for DELETED,
        whose ``resource_version`` is that of the delete). A recorded create or update that
        the event is at least as new as is dropped, and a recorded delete on DELETED, so that
        the watched state is the truth from now, even if the slice is gone.

        Without this, a slice deleted before the watch showed the operator's own update
        stayed in the overlay for good: never recreated, and the next update failed with 404
        (issue 16, item 1). The event's version also moves :attr:`seen` on, for
        :meth:`record`.
        """
        version = _version(resource_version)
        self.seen = max(self.seen, version)
        mine = self.written.get(inventory, {})
        if name not in mine:
            return
        written = mine[name]
        if written is None:
            if deleted:
                del mine[name]
        elif version >= _rv(written):
            del mine[name]

    def discard(self, inventory: str, name: str) -> None:
        """Drop what is recorded for slice ``name``: the API server refused a write to it
        (404, 409), so the recorded state is wrong and the watched one is the truth."""
        self.written.get(inventory, {}).pop(name, None)

    def forget(self, inventory: str) -> None:
        """Drop everything about a deleted inventory."""
        self.written.pop(inventory, None)


@dataclass
class StatusOverlay(Generic[K]):
    """The operator's own status writes not yet seen through the watch, by object key (a
    claim's (namespace, name), an inventory's name): a reconcile right after a write (a slice
    or Lease event, another event of the object) would otherwise find the old status in the
    cached object and write it again, with a new transition time. An entry is dropped once the
    watched object is at least as new, is another object (UID), or is gone: when the watch
    event shows it (:meth:`observe`), or at the next :meth:`merge`.

    The object a write returned is kept as a :class:`~kubedra.controller.kept.KeptObject`
    record, as the indexes keep the watched one (no managedFields, packed): an 8-H200
    inventory's answer is 44 KiB as dicts and 0.9 KiB as a record, and while publishing a
    fleet every inventory has one such answer waiting for its watch event and its next
    reconcile (``bench/RESULTS.md``, scale, round 15)."""

    written: dict[K, KeptObject] = field(default_factory=dict)
    quiet: dict[K, int] = field(default_factory=dict)
    """Key → resourceVersion of a write whose watch event needs no reconcile
    (:meth:`is_quiet_echo`)."""
    packer: Packer = field(default_factory=Packer)
    """Makes the records of :attr:`written` (one preset dictionary for the kind)."""

    def record(self, key: K, obj: dict[str, Any], *, quiet: bool = False) -> None:
        """Remember the object the status write returned (as a record: ``obj`` is not
        kept); ``quiet``: the object differs from what the reconcile that wrote it decided
        from only in what it wrote, so the watch event of this very version has nothing to
        reconcile."""
        self.written[key] = self.packer.keep(obj)
        version = _rv(obj)
        if quiet and version:
            self.quiet[key] = version
        else:
            self.quiet.pop(key, None)

    def is_quiet_echo(self, key: K, watched: Mapping[str, Any]) -> bool:
        """Whether ``watched`` (a watch event's object) is exactly the version of a quiet
        write (:meth:`record`): the same resourceVersion. Asked once per write: the entry is
        dropped either way when a version is seen at or past it."""
        version = self.quiet.get(key)
        if version is None:
            return False
        seen = _rv(watched)
        if seen >= version:
            del self.quiet[key]
        return seen == version

    def observe(self, key: K, watched: Mapping[str, Any]) -> None:
        """A watch event of the object (``watched``: its object, of a DELETED event the last
        state): a write the event is at least as new as, or of another object, is dropped
        now. The index already holds the event's object (kopf fills indexes before it calls
        event handlers), so a reconcile reads at least that version without it; kept until
        the next :meth:`merge`, each answer stayed while the reconcile queue was drained."""
        mine = self.written.get(key)
        if mine is not None and self._superseded(mine, watched):
            del self.written[key]

    def merge(self, key: K, watched: dict[str, Any] | None) -> dict[str, Any] | None:
        """The watched object, or the one last written if that is newer (a fresh copy of it,
        without managedFields and annotations, as the indexes give objects)."""
        mine = self.written.get(key)
        if mine is None:
            return watched
        if watched is None or self._superseded(mine, watched):
            del self.written[key]
            return watched
        return mine.body()

    @staticmethod
    def _superseded(mine: KeptObject, watched: Mapping[str, Any]) -> bool:
        """Whether ``watched`` is another object than the one written, or at least as new."""
        return (watched["metadata"].get("uid") != mine.uid
                or _rv(watched) >= _version(mine.resource_version))


@dataclass(frozen=True)
class PublishedPool:
    """What claim checks need of the pool an inventory last published: its identity, the
    names of its devices and their health. The operator keeps one per inventory, so it holds
    names, not the devices (a :class:`~kubedra.publishing.pool.DesiredPool` of 8 H200 is about
    80 KiB of pydantic models: 400 MiB at 5,000 nodes)."""

    driver: str
    name: str
    devices: frozenset[str]
    """Names of the devices published."""
    health: Mapping[str, tuple[str, str | None]]
    """Device name → (health, message) of every device in the inventory (published or not)."""
    withdrawn: bool = False
    draining: Mapping[str, str] = field(default_factory=dict)
    """Allocated devices kept published though dropped: name → ``disabled`` or ``gone``."""
    disabled: frozenset[str] = frozenset()
    """Names of the devices an override disables (published only while a claim holds one,
    and only where the cluster keeps device taints)."""
    left_out: Mapping[str, str] = field(default_factory=dict)
    """Devices left out of the slices: name → why (``DesiredPool.left_out``)."""

    @classmethod
    def of(cls, pool: DesiredPool, health: Mapping[str, tuple[str, str | None]], *,
           withdrawn: bool = False, draining: Mapping[str, str] | None = None
           ) -> PublishedPool:
        """What to remember of ``pool``."""
        return cls(driver=pool.driver, name=pool.name,
                   devices=frozenset(d.name for d in pool.devices), health=health,
                   withdrawn=withdrawn, draining=draining or {},
                   disabled=frozenset(pool.disabled),
                   left_out={r.name: r.message for r in pool.left_out})


@dataclass
class OperatorState:
    """Everything the reconcilers share; one per operator process."""

    api: ApiClient
    settings: Settings
    view: ClusterView
    leases: LeaseCache
    inventory_queue: WorkQueue[str] = field(default_factory=WorkQueue)
    claim_queue: WorkQueue[tuple[str, str]] = field(default_factory=WorkQueue)
    explain_queue: WorkQueue[tuple[str, str]] = field(default_factory=WorkQueue)
    """Pods (namespace, name) whose claims to explain."""
    explain: ExplainState = field(default_factory=ExplainState)
    overlay: SliceOverlay = field(default_factory=SliceOverlay)
    claim_overlay: StatusOverlay[tuple[str, str]] = field(default_factory=StatusOverlay)
    inventory_overlay: StatusOverlay[str] = field(default_factory=StatusOverlay)
    pools: dict[str, PublishedPool] = field(default_factory=dict)
    """Inventory name → what it last published."""
    announced: dict[tuple[str, str], str] = field(default_factory=dict)
    """(kind, key) → last Event reason+message posted, so Events mark transitions only."""
    lease_states: dict[str, str] = field(default_factory=dict)
    attacher: Attacher = field(default_factory=ImmediateAttacher)
    """The attach step of devices with binding conditions."""
    attach_outcomes: dict[tuple[str, str], dict[tuple[str, str, str, str, str | None],
                                                 AttachResult]] = field(default_factory=dict)
    """Claim (namespace, name) → (allocationTimestamp, driver, pool, device, shareID) → what
    the attach step answered for that allocation."""
    wake_ups: dict[str, datetime.datetime] = field(default_factory=dict)
    """Inventory → when its slices change with time alone (the first health hold-down or
    drain grace ends): the tick queues it then. Derived from the API (health transition
    times, taint times) at each reconcile, so it is rebuilt after a restart."""
    served: ServedFeatures = field(default_factory=ServedFeatures)
    """What the cluster keeps of a slice (:mod:`kubedra.controller.features`), learnt before
    the workers start and again every ``feature_detection_interval``; until then (and where
    the first detection fails) the defaults of :class:`ServedFeatures` are assumed."""
    feature_detections: int = 0
    """Detections of what the cluster serves since start, the first included (for tests)."""
    slice_owner: OwnerReference | None = None
    """The owner reference of every slice (the DeviceInventory CRD), read once."""
    refused_claims: set[tuple[str, str, str]] = field(default_factory=set)
    """(namespace, name, uid) of claims whose status the API server refuses to update (see
    :func:`kubedra.kube.refuses_claim_status_writes`)."""
    slice_writes: int = 0
    """API writes to ResourceSlices since start (for benchmarks and tests)."""
    inventories_reconciled: int = 0
    """Successful inventory reconciles since start (``bench/scale.py`` waits for every
    inventory to be verified after a restart)."""
    inventories_unchanged: int = 0
    """Of those, the ones that found the pool as ``status.publishedFrom`` recorded it
    (:mod:`kubedra.controller.fingerprint`)."""
    caches_frozen: bool = False
    """Whether what the caches hold was frozen after the first pass over the inventories
    (:func:`kubedra.controller.runtime.freeze_after_first_pass`)."""
    metrics: OperatorHistograms = field(default_factory=OperatorHistograms)
    """How long reconciles and publishes take (served on ``/metrics``)."""
    fleet: Rows | None = None
    """The fleet's devices per driver and model as ``kubedra status`` counts them, last
    counted by :func:`kubedra.controller.fleet.count_fleet` (None until then)."""

    def explain_again(self) -> None:
        """Queue every unschedulable pod (pods whose inputs did not change are skipped)."""
        for key in list(self.view.unschedulable_pods):
            self.explain_queue.add(key)

    def inventory_for_pool(self, driver: str, pool: str) -> str | None:
        """The inventory that publishes pool ``(driver, pool)``: of those naming it (an index
        lookup, not a scan), the one with a published pool — losers of a PoolConflict have none;
        else a deleted inventory whose slices still publish the pool's held devices."""
        names = [*self.view.inventories_of_pool(driver, pool),
                 *self.view.deleted_inventories_of_pool(driver, pool)]
        return next((name for name in names if name in self.pools), None)

