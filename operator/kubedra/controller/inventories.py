"""What to do about one DeviceInventory: publish its pool as ResourceSlices, withdraw it, or
report why not — decided by pure functions from the cached objects; :mod:`.executor` acts.

Order of decisions (:func:`decide_inventory`):

1. The inventory must parse; otherwise ``Ready=False`` (``InvalidInventory``) naming the field,
   and the slices already published stay as they are.
2. A node-local inventory whose Node does not exist is not published (``NodeNotFound``, a
   Warning Event): its slices would name a node no pod can run on, and an inventory typed
   with a wrong node name must not look published. Its held devices are kept as in 3.
3. A node-local inventory whose agent has reported (``status.discovered`` is set) is published
   only while the agent's Lease is live; when it expires the pool is withdrawn (its slices are
   deleted, as the kubelet also does for a driver that went away, but for the devices claims
   hold: those stay, tainted, see :func:`_withdraw`) and ``Published=False``
   (``AgentLeaseExpired``); it comes back when the Lease is renewed. A node-local inventory
   with neither declared devices nor a report waits for its agent (``WaitingForAgent``) rather
   than publishing an empty pool.
4. The pool is built (:func:`kubedra.publishing.pool.build_pool`): what the API server would
   refuse costs only its own device (or a counter set and the devices consuming it), which is
   left out; the Published reason is then ``DevicesLeftOut`` (still published), naming each
   and why. A pool with no device at all is ``EmptyPool`` (still published), naming the
   agent's discovery backend and its settings. Both post a Warning Event.
5. Of the inventories naming one pool, the one created first publishes it; the others
   withdraw theirs (``PoolConflict``).
6. Devices that claims hold stay published, tainted, though the inventory dropped them
   (:func:`kubedra.publishing.pool.keep_dropped_devices`); so does, for the drain grace
   (``drain_grace``), every other published device the pool no longer offers: a device never
   leaves a published pool in one step (:func:`kubedra.publishing.pool.drain_deadlines`). The
   planned slice writes are made in order (deletes, updates, creates).

Nothing of this lives only in the operator's memory, so an operator restart or a leader
change cannot free a held device's counters: a dropped device is kept from the published
slices, and its drain grace counts from its taint's ``timeAdded`` there; while a pool is
withdrawn its held devices are kept in ``status.retained`` (:func:`retained_devices`); a
deleted inventory's slices outlive it (:func:`decide_deleted`):
they are owned by the DeviceInventory CRD, not by the inventory, so the operator trims them
to the held devices and deletes them once no claim holds one — and uninstalling kubedra
(deleting the CRD) lets the garbage collector take them all, with no finalizer to wait on.
An API error makes it ``PublishFailed`` (:meth:`InventoryDecision.publish_failed`), retried
with back-off when retrying can help.

The status (:func:`inventory_status`) and the Event (:func:`inventory_event`) follow from the
decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from kubedra.api.base import validation_field
from kubedra.api.inventory import (
    DeviceAllocation,
    DeviceInventory,
    DeviceInventoryStatus,
    DiscoveryResult,
    InventoryDevice,
    RetainedDevices,
    agent_lease_name,
)
from kubedra.api.resource import (
    Condition,
    CounterSet,
    Device,
    NodeAllocatableOverhead,
    OwnerReference,
    ResourcePool,
    ResourceSlice,
)
from kubedra.api.time import timestamp, utcnow
from kubedra.controller.conditions import get_condition, set_condition
from kubedra.controller.leases import LeaseState
from kubedra.controller.state import ClaimUse
from kubedra.publishing.features import ServedFeatures, fit_pool, pool_off
from kubedra.publishing.pool import (
    RECOVERED_TAINT_VALUE,
    DesiredPool,
    build_pool,
    discovered_devices,
    drain_deadlines,
    keep_dropped_devices,
    pool_name,
)
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import SliceWrite, SyncPlan, plan_sync

Reason = Literal["SlicesPublished", "DevicesLeftOut", "FeatureOff", "EmptyPool",
                 "InvalidInventory",
                 "AgentLeaseExpired", "WaitingForAgent",
                 "PoolConflict", "PublishFailed", "Released", "NodeNotFound"]
"""Reasons of the ``Published`` condition (``Ready`` says ``Published`` when it is True)."""

PUBLISHED: frozenset[str] = frozenset({"SlicesPublished", "DevicesLeftOut", "FeatureOff",
                                       "EmptyPool"})
"""Reasons with which the pool is published (``Published=True``)."""
WARNINGS: frozenset[str] = frozenset({"DevicesLeftOut", "FeatureOff", "EmptyPool"})
"""Reasons with which the pool is published, but whose Event is a Warning: something the admin
must look at."""
MAX_NAMED = 10
"""Devices a condition message names one by one, per list; the rest are counted (a MIG node
switched off leaves about 200 devices at once)."""

EVENT_REASONS: Mapping[str, str] = {"SlicesPublished": "Published",
                                    "AgentLeaseExpired": "PoolWithdrawn"}
"""Event reason per condition reason where they differ."""


@dataclass(frozen=True)
class InventoryInputs:
    """What a decision about one inventory reads.

    Attributes:
        raw: the DeviceInventory as watched.
        existing: its slices (the watched ones, corrected by the operator's own recent writes).
        lease: the state of its node's agent Lease now, or None for a pool without node.
        namespace: the operator's namespace (where agent Leases live).
        rivals: the raw inventories that name the same pool (this one may be among them).
        uses: the allocated devices of the pool, with their claims.
        now: the current time (for hold-downs; None: the clock's).
        hold_down: seconds a recovered device stays tainted (``health_hold_down``).
        node_exists: whether the Node of a node-local inventory exists (True for others).
        node_features: the features that Node's kubelet declares (``status.declaredFeatures``).
        owner: the owner reference of every slice (:func:`kubedra.kube.slice_owner`: the
            DeviceInventory CRD).
        drain_grace: seconds a published device the pool no longer offers stays published,
            tainted, before it is taken out (``drain_grace``; see
            :func:`kubedra.publishing.pool.drain_deadlines`).
        deleted: names of deleted inventories whose slices still publish devices of this
            pool that claims hold (:func:`decide_deleted`).
        served: what the cluster keeps of a slice; what it cannot carry is left out
            (:func:`kubedra.publishing.features.fit_pool`).
        pool_labels: the labels its slices carry besides the operator's own
            (:attr:`kubedra.publishing.pool.DesiredPool.labels`).
    """

    raw: Mapping[str, Any]
    existing: Sequence[ResourceSlice]
    lease: LeaseState | None
    namespace: str
    owner: OwnerReference
    drain_grace: float
    rivals: Sequence[Mapping[str, Any]] = ()
    uses: Sequence[ClaimUse] = ()
    now: datetime | None = None
    hold_down: float = 0.0
    node_exists: bool = True
    node_features: frozenset[str] = frozenset()
    deleted: Sequence[str] = ()
    served: ServedFeatures = field(default_factory=ServedFeatures)
    pool_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def off(self) -> tuple[str, ...]:
        """What the decision depends on of the cluster's features, for the fingerprint
        (:func:`kubedra.publishing.features.pool_off`)."""
        node = (self.raw.get("spec") or {}).get("nodeName")
        return pool_off(self.served, self.node_features if node else None)

    @property
    def name(self) -> str:
        """The inventory's name."""
        return str(self.raw["metadata"]["name"])


@dataclass(frozen=True)
class InventoryDecision:
    """What to do and what to report.

    Attributes:
        reason, message: of the ``Published`` condition (True only for ``SlicesPublished``).
        delete: slices to delete first (withdrawing the pool).
        plan: the slice writes that publish the pool, with the pool they publish.
        pool: the pool to remember for claim checks, or None to leave what is remembered
            (``forget`` drops it).
        health: device name → (health, message) of every device of the inventory.
        draining: devices kept published though dropped, tainted: name → why
            (``disabled``, ``gone``, ``withdrawn``, ``deleted``) — those claims hold, and those
            in ``leaving``.
        leaving: of those, the ones no claim holds: name → when their drain grace ends (the
            inventory is reconciled again then, see :attr:`drain_until`).
        withdrawn: the pool's slices are (being) deleted.
        forget: this inventory publishes nothing (it lost a pool conflict).
        retry: an API error that retrying may fix (the executor signals a retry).
        retained: what ``status.retained`` becomes (see :func:`retained_devices`); None
            clears it, unless ``keep_retained``.
        keep_retained: leave ``status.retained`` as it is (the pool was neither published
            nor withdrawn).
    """

    reason: Reason
    message: str
    delete: tuple[ResourceSlice, ...] = ()
    plan: SyncPlan | None = None
    pool: DesiredPool | None = None
    health: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    draining: Mapping[str, str] = field(default_factory=dict)
    leaving: Mapping[str, datetime] = field(default_factory=dict)
    withdrawn: bool = False
    forget: bool = False
    retry: bool = False
    retained: RetainedDevices | None = None
    keep_retained: bool = False

    @property
    def ok(self) -> bool:
        """Whether the pool is published (perhaps without the devices left out)."""
        return self.reason in PUBLISHED

    @property
    def publish_result(self) -> str:
        """What the slice writes came to (the ``result`` of
        ``kubedra_operator_publish_duration_seconds``, :mod:`kubedra.controller.histograms`):
        ``failed`` (the API server refused one: :meth:`publish_failed`), ``written`` (a slice
        deleted or written) or ``unchanged``."""
        if self.reason == "PublishFailed":
            return "failed"
        return "written" if self.delete or (self.plan and self.plan.writes) else "unchanged"

    @property
    def drain_until(self) -> datetime | None:
        """When the first drain grace of ``leaving`` ends (the slices change then), or None."""
        return min(self.leaving.values(), default=None)

    def publish_failed(self, write: SliceWrite, error: str, *, retry: bool) -> InventoryDecision:
        """The decision after the API refused ``write`` with ``error``."""
        return dataclasses.replace(self, reason="PublishFailed", retry=retry, draining={},
                                   leaving={}, keep_retained=True,
                                   message=f"{write.verb} ResourceSlice {write.name}: {error}")


def inventory_devices(inventory: DeviceInventory, discovered: DiscoveryResult | None = None
                      ) -> list[InventoryDevice]:
    """Declared and discovered devices of an inventory, overrides not applied; ``discovered``:
    the report written out already (:func:`~kubedra.publishing.pool.discovered_devices`), read
    from the inventory if not given."""
    discovered = discovered if discovered is not None else discovered_devices(inventory)
    return [*(inventory.spec.devices or []), *(discovered.devices if discovered else [])]


def pool_owner(inputs: InventoryInputs) -> str:
    """The inventory that publishes the pool: of all inventories naming it, the one created
    first (then by name). Two publishers of one pool would hide each other's slices, since
    consumers use only the highest generation of a pool."""
    first = min([*inputs.rivals, inputs.raw],
                key=lambda r: (r["metadata"].get("creationTimestamp") or "",
                               r["metadata"]["name"]))
    return str(first["metadata"]["name"])


def decide_inventory(inputs: InventoryInputs) -> InventoryDecision:
    """Decide what to do about one inventory (see the module docstring for the order)."""
    try:
        inventory = DeviceInventory.from_api(inputs.raw)
    except ValidationError as err:
        return InventoryDecision("InvalidInventory", validation_field(err), keep_retained=True)
    name = inputs.name
    discovered = discovered_devices(inventory)  # written out once per decision
    devices = inventory_devices(inventory, discovered)
    health = {d.name: (d.health, d.health_message) for d in devices}
    node = inventory.spec.node_name
    has_agent = bool(inventory.status and inventory.status.discovered is not None)
    if node and not inputs.node_exists:
        return _withdraw(inputs, inventory, discovered, health, "NodeNotFound",
                         f"node {node} does not exist; pool {pool_name(inventory)} is not "
                         "published until it does")
    if node and has_agent and inputs.lease != "live":
        return _withdraw(inputs, inventory, discovered, health, "AgentLeaseExpired",
                         f"agent Lease {inputs.namespace}/{agent_lease_name(node)} of node "
                         f"{node} is not renewed; pool {pool_name(inventory)} withdrawn until "
                         "the agent returns")
    if node and not has_agent and not inventory.spec.devices:
        return InventoryDecision(
            "WaitingForAgent", f"no devices declared and the node agent of {node} has not "
                               "reported yet; nothing is published")
    pool = dataclasses.replace(build_pool(inventory, now=inputs.now, hold_down=inputs.hold_down,
                                          discovered=discovered), labels=inputs.pool_labels)
    owner = pool_owner(inputs)
    if owner != name:
        return InventoryDecision(
            "PoolConflict", f"pool {pool.name} of driver {pool.driver} is published by "
                            f"DeviceInventory {owner}, created earlier; this inventory publishes "
                            "nothing while that one exists",
            delete=tuple(inputs.existing), withdrawn=True, forget=True)
    if inputs.deleted:
        return InventoryDecision(
            "PoolConflict", f"pool {pool.name} of driver {pool.driver} still has devices of "
                            f"deleted DeviceInventory {', '.join(sorted(inputs.deleted))} that "
                            "claims hold or whose drain grace is not over; this inventory "
                            "publishes nothing until they are gone",
            delete=tuple(inputs.existing), withdrawn=True, forget=True)
    pool, draining, leaving = _keep_dropped(inputs, inventory, pool)
    pool = fit_pool(pool, inputs.served, inputs.node_features)
    if inputs.served.off:  # a draining device left out is no longer kept
        published = {d.name for d in pool.devices}
        draining = {d: why for d, why in draining.items() if d in published}
        leaving = {d: end for d, end in leaving.items() if d in published}
    plan = plan_sync(name, inputs.owner, pool, split_pool(pool), list(inputs.existing),
                     _published_generation(inventory, pool))
    message = _published_message(devices, pool, plan, draining, leaving)
    reason: Reason = "SlicesPublished"
    if pool.left_out:
        reason, message = "DevicesLeftOut", f"{message}; {left_out_message(pool)}"
    elif pool.withheld:  # every device published, without what this cluster cannot keep
        reason = "FeatureOff"
    elif not devices and not pool.counter_sets:  # not: all disabled
        reason, message = "EmptyPool", f"{message}: {empty_pool_message(inventory)}"
    return InventoryDecision(reason, message, plan=plan, pool=pool, health=health,
                             draining=draining, leaving=leaving)


def left_out_message(pool: DesiredPool) -> str:
    """What ``pool.left_out`` names, for the condition: ``left out, as the API server would
    refuse them: gpu-1 (devices[gpu-1].attributes[productName].string: 70 bytes …)``; the
    first :data:`MAX_NAMED`, then how many more."""
    return "left out, as the API server would refuse them: " + named_devices(
        [f"{r.name} ({r.field}: {r.message})" for r in pool.left_out], "; ")


def named_devices(names: Sequence[str], separator: str = ", ") -> str:
    """``names`` joined, the first :data:`MAX_NAMED` of them, then ``and N more``."""
    shown = separator.join(names[:MAX_NAMED])
    more = len(names) - MAX_NAMED
    return f"{shown}{separator}and {more} more" if more > 0 else shown


def empty_pool_message(inventory: DeviceInventory) -> str:
    """Why a published pool has no device: what the agent's backend found with which settings,
    or that nothing is declared (issue 16, item 7: ``kubectl describe dinv`` must answer "why
    is my pool empty")."""
    discovered = inventory.status.discovered if inventory.status else None
    if discovered is None:
        return "no devices are declared in spec.devices and no node agent reports any"
    settings = inventory.spec.discovery
    filters = [f"discovery.mig: {settings.mig}"]
    if settings.pci is not None:
        filters += [f"discovery.pci.{name}: {', '.join(values)}"
                    for name, values in (("vendors", settings.pci.vendors),
                                         ("classes", settings.pci.classes)) if values]
    return (f"the node agent's discovery backend {discovered.backend or 'unknown'} found no "
            f"devices ({'; '.join(filters)}), and spec.devices declares none")


def _keep_dropped(inputs: InventoryInputs, inventory: DeviceInventory, pool: DesiredPool
                  ) -> tuple[DesiredPool, dict[str, str], dict[str, datetime]]:
    """The pool with the devices claims hold kept (as the slices publish them, else as
    ``status.retained`` kept them across a withdrawal), and the published devices it no
    longer offers kept until their drain grace ends; with the ``draining`` and ``leaving``
    of :class:`InventoryDecision`."""
    previous, previous_sets = _published_before(inputs, inventory)
    held = {u.device for u in inputs.uses}
    leaving = drain_deadlines(pool, _published_now(inputs.existing), held,
                              inputs.now or utcnow(), inputs.drain_grace)
    kept, draining = keep_dropped_devices(pool, held | set(leaving), previous, previous_sets)
    return kept, draining, {d: end for d, end in leaving.items() if d in draining}


def _withdraw(inputs: InventoryInputs, inventory: DeviceInventory,
              discovered: DiscoveryResult | None,
              health: Mapping[str, tuple[str, str | None]], reason: Reason, message: str
              ) -> InventoryDecision:
    """Withdraw the pool: delete its slices, but for the devices claims hold (kept published,
    tainted ``draining=withdrawn``, until released: a slice outlives its inventory, so they
    stay counted even if the inventory is deleted meanwhile, see :func:`decide_deleted`) and
    the other published devices until their drain grace ends (tainted the same way)."""
    pool = dataclasses.replace(build_pool(inventory, discovered=discovered),
                               labels=inputs.pool_labels)
    devices, sets = _published_before(inputs, inventory)
    kept, left_out = _kept_only(inputs.name, pool, devices, sets, inputs.uses, inputs.existing,
                                inputs.owner, "withdrawn", now=inputs.now or utcnow(),
                                drain_grace=inputs.drain_grace, served=inputs.served)
    retained = retained_devices(inputs, inventory)
    message += left_out
    if kept is None:
        return InventoryDecision(reason, message, delete=tuple(inputs.existing), pool=pool,
                                 health=health, withdrawn=True, retained=retained)
    plan, draining, leaving = kept
    return InventoryDecision(reason, f"{message}; {_kept_message(draining, leaving)}",
                             plan=plan, pool=pool, health=health, withdrawn=True,
                             retained=retained, draining=draining, leaving=leaving)


def decide_deleted(name: str, existing: Sequence[ResourceSlice], uses: Sequence[ClaimUse],
                   owner: OwnerReference, *, now: datetime, drain_grace: float,
                   served: ServedFeatures | None = None,
                   pool_labels: Mapping[str, str] | None = None) -> InventoryDecision:
    """What to do about the slices of a deleted inventory ``name`` (labelled with its name,
    ``existing``): publish only the devices that claims hold (``uses``: the allocated devices
    of the slices' pool), as they were published, tainted ``kubedra.io/draining=deleted``
    with the counter sets they consume, and the others until their drain grace
    (``drain_grace`` seconds from their taint's ``timeAdded``; ``now`` is the current time;
    see :func:`kubedra.publishing.pool.drain_deadlines`) ends — or delete every slice once
    nothing is kept. Where the cluster does not keep device taints (``served``; None: it
    does), nothing can be kept tainted, so every slice is deleted at once. ``pool_labels``:
    as :attr:`InventoryInputs.pool_labels` (the deleted inventory's, as its slices carry them).

    The slices are owned by the DeviceInventory CRD (``owner``), not by the inventory, so they
    outlive it: an inventory deleted right after kube-scheduler allocated one of its devices,
    or while the operator was down, or while its pool was withdrawn, still keeps that device's
    counters counted (the rule of :func:`kubedra.publishing.pool.keep_dropped_devices`). A
    finalizer on the inventory would do the same but would block ``kubectl delete -k
    manifests/``, which deletes the operator together with the CRD; deleting the CRD deletes
    every inventory, and then the garbage collector deletes the slices (as the kubelet wipes a
    node's slices of a DRA driver whose plugin went away: uninstalling a driver withdraws its
    devices).

    Returns:
        ``SlicesPublished`` with the plan, or ``Released`` deleting every slice (``forget``).
    """
    newest = sorted(existing, key=lambda s: -s.spec.pool.generation)
    first = newest[0].spec
    pool = DesiredPool(driver=first.driver, name=first.pool.name, node_name=first.node_name,
                       node_selector=first.node_selector, all_nodes=bool(first.all_nodes),
                       skip_node_operations=tuple(first.skip_node_operations or ()),
                       labels=dict(pool_labels or {}))
    devices = _first_by_name([d for s in newest for d in s.spec.devices or []])
    sets = _first_by_name([c for s in newest for c in s.spec.shared_counters or []])
    kept, left_out = _kept_only(name, pool, devices, sets, uses, existing, owner, "deleted",
                                now=now, drain_grace=drain_grace,
                                served=served or ServedFeatures())
    if kept is None:
        why = left_out or ", and no claim holds a device of its slices"
        return InventoryDecision("Released", f"DeviceInventory {name} is deleted{why}",
                                 delete=tuple(existing), withdrawn=True, forget=True)
    plan, draining, leaving = kept
    return InventoryDecision(
        "SlicesPublished", f"DeviceInventory {name} is deleted; "
                           f"{_kept_message(draining, leaving)}{left_out}",
        plan=plan, pool=pool, draining=draining, leaving=leaving)


def _kept_only(name: str, pool: DesiredPool, devices: Sequence[Device],
               sets: Sequence[CounterSet], uses: Sequence[ClaimUse],
               existing: Sequence[ResourceSlice], owner: OwnerReference, why: str, *,
               now: datetime, drain_grace: float, served: ServedFeatures
               ) -> tuple[tuple[SyncPlan, dict[str, str], dict[str, datetime]] | None, str]:
    """The plan that publishes, of ``pool``, only the devices claims hold (as published
    before: ``devices``, ``sets``) and those of ``existing`` whose drain grace has not ended,
    tainted ``draining=<why>``; with the ``draining`` and ``leaving`` of
    :class:`InventoryDecision` (None when nothing is kept), and what the condition adds
    about the devices that would be kept but that ``served`` cannot carry tainted
    (:func:`~kubedra.publishing.features.fit_pool`: left out at once; "" when none). Without
    this a cluster that drops device taints would get the taint written again on every
    reconcile, never seeing it stored, and a leaving device's drain grace would never
    start."""
    empty = dataclasses.replace(pool, devices=[], counter_sets=[], disabled={}, left_out=[],
                                held_until=None)
    held = {u.device for u in uses}
    leaving = drain_deadlines(empty, _published_now(existing), held, now, drain_grace)
    kept, draining = keep_dropped_devices(empty, held | set(leaving), devices, sets,
                                          dropped=why)
    kept = fit_pool(kept, served)
    left_out = f"; {left_out_message(kept)}" if kept.left_out else ""
    published = {d.name for d in kept.devices}
    draining = {d: reason for d, reason in draining.items() if d in published}
    if not draining:
        return None, left_out
    return (plan_sync(name, owner, kept, split_pool(kept), list(existing)), draining,
            {d: end for d, end in leaving.items() if d in draining}), left_out


def _kept_message(draining: Mapping[str, str], leaving: Mapping[str, datetime]) -> str:
    """What the condition says of the devices kept though dropped: those claims hold, then
    those leaving (within their drain grace)."""
    def named(devices: list[str]) -> str:
        return named_devices([f"{d} ({draining[d]})" for d in devices])
    held = sorted(d for d in draining if d not in leaving)
    parts = [f"still allocated, so kept published with a NoSchedule taint until released: "
             f"{named(held)}"] if held else []
    if leaving:
        parts.append("leaving the pool, so published with a NoSchedule taint until the drain "
                     f"grace ends: {named(sorted(leaving))}")
    return "; ".join(parts)


def _published_now(existing: Sequence[ResourceSlice]) -> list[Device]:
    """The devices in ``existing`` (the first of each name, newest generation first)."""
    newest = sorted(existing, key=lambda s: -s.spec.pool.generation)
    return _first_by_name([d for s in newest for d in s.spec.devices or []])


def _published_before(inputs: InventoryInputs, inventory: DeviceInventory
                      ) -> tuple[list[Device], list[CounterSet]]:
    """Devices and counter sets as published before: the slices first, then
    ``status.retained`` (the first of each name)."""
    retained = inventory.status.retained if inventory.status else None
    devices = [d for s in inputs.existing for d in s.spec.devices or []]
    sets = [c for s in inputs.existing for c in s.spec.shared_counters or []]
    if retained is not None:
        devices += retained.devices
        sets += retained.shared_counters
    return _first_by_name(devices), _first_by_name(sets)


def retained_devices(inputs: InventoryInputs, inventory: DeviceInventory
                     ) -> RetainedDevices | None:
    """What ``status.retained`` keeps of a pool being withdrawn: the held devices as
    published before (:func:`_published_before`), every device consuming a counter set they
    consume, and those counter sets — what :func:`keep_dropped_devices` needs to publish
    them again. None when no claim holds a device of the pool."""
    held = {u.device for u in inputs.uses}
    devices, sets = _published_before(inputs, inventory)
    kept = [d for d in devices if d.name in held]
    if not kept:
        return None
    used = {c.counter_set for d in kept for c in d.consumes_counters or []}
    sharing = [d for d in devices if d.name not in held
               and used & {c.counter_set for c in d.consumes_counters or []}]
    return RetainedDevices(devices=sorted([*kept, *sharing], key=lambda d: d.name),
                           shared_counters=[c for c in sets if c.name in used])


def _first_by_name(items: list[Any]) -> list[Any]:
    """The first item of each name, in order."""
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(item.name, item)
    return list(seen.values())


def _published_generation(inventory: DeviceInventory, pool: DesiredPool) -> int:
    """The generation last published for this pool, from the status (0 if none)."""
    last = inventory.status.pool if inventory.status and inventory.status.pool else None
    return last.generation if last and last.name == pool.name else 0


def _published_message(reported: Sequence[InventoryDevice], pool: DesiredPool, plan: SyncPlan,
                       draining: Mapping[str, str], leaving: Mapping[str, datetime]) -> str:
    message = (f"{_count(len(pool.devices), 'device')} in "
               f"{_count(len(plan.slice_names), 'ResourceSlice')} "
               f"(pool {pool.name}, generation {plan.pool.generation})")
    left_out = {r.name for r in pool.left_out}
    unhealthy = [d.name for d in reported
                 if d.health == "Unhealthy" and d.name not in left_out]
    if unhealthy:
        message += f"; unhealthy, tainted NoSchedule: {named_devices(sorted(unhealthy))}"
    recovered = [d.name for d in pool.devices
                 if any(t.value == RECOVERED_TAINT_VALUE for t in d.taints or [])]
    if recovered and pool.held_until is not None:
        message += (f"; healthy again, kept tainted NoSchedule for the hold-down time (the "
                    f"first until {timestamp(pool.held_until)}): {named_devices(recovered)}")
    if draining:
        message += f"; {_kept_message(draining, leaving)}"
    disabled = sorted(set(pool.disabled) - set(draining) - left_out)
    if disabled:
        message += f"; disabled by an override, not published: {named_devices(disabled)}"
    if pool.skip_node_operations:  # kept by this cluster (fit_pool), so in effect
        message += ("; the kubelet skips node operations for its devices (skipNodeOperations: "
                    f"{', '.join(pool.skip_node_operations)})")
    if pool.node_allocatable_overhead:  # likewise
        message += f"; {overhead_message(pool.node_allocatable_overhead)}"
    for sentence in pool.withheld:
        message += f"; {sentence}"
    return message


def overhead_message(overhead: Mapping[str, NodeAllocatableOverhead]) -> str:
    """The condition's words for a pool's ``nodeAllocatableResources`` overhead in effect:
    ``each pod using its devices is charged besides them (nodeAllocatableResources): memory
    256Mi per pod and 64Mi per container``."""
    costs = []
    for name, cost in overhead.items():
        parts = [f"{q.canonical()} per {unit}" for q, unit in
                 ((cost.per_pod, "pod"), (cost.per_container, "container")) if q is not None]
        costs.append(f"{name} {' and '.join(parts)}")
    return ("each pod using its devices is charged besides them (nodeAllocatableResources): "
            f"{', '.join(costs)}")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def inventory_status(inputs: InventoryInputs, decision: InventoryDecision, now: str,
                     slices_now: Sequence[Mapping[str, Any]] = ()) -> DeviceInventoryStatus:
    """The operator's part of the inventory's status after ``decision`` was carried out.

    ``now`` is a ``metav1.Time`` string; ``slices_now`` the inventory's slices after the
    writes, used where the status reports what exists (invalid or failed: the slices
    published before stay).
    """
    raw = inputs.raw
    current = raw.get("status") or {}
    generation = raw["metadata"].get("generation")
    conditions = [Condition.from_api(c) for c in current.get("conditions") or []]
    conditions = set_condition(conditions, type_="Published", status=decision.ok,
                               reason=decision.reason, message=decision.message, now=now,
                               observed_generation=generation)
    conditions = set_condition(conditions, type_="Ready", status=decision.ok,
                               reason="Published" if decision.ok else decision.reason,
                               message=decision.message, now=now, observed_generation=generation)
    allocations = [] if decision.forget else status_allocations(inputs.uses)
    status = DeviceInventoryStatus(conditions=conditions, observed_generation=generation,
                                   allocations=allocations,
                                   allocated_count=len({a.device for a in allocations}))
    if decision.keep_retained:
        status.retained = _current_retained(current)
    else:
        status.retained = decision.retained
    if decision.plan is not None and decision.ok:
        status.pool = decision.plan.pool
        status.slices = decision.plan.slice_names
        status.device_count = len(decision.pool.devices) if decision.pool else 0
    elif decision.withdrawn:  # but for the held devices (see _withdraw)
        status.slices = decision.plan.slice_names if decision.plan else []
        status.device_count = len(decision.draining)
    else:  # invalid or failed: the slices published before stay; report what exists
        existing = sorted(slices_now, key=lambda s: s["metadata"]["name"])
        status.slices = [s["metadata"]["name"] for s in existing]
        status.device_count = sum(len(s["spec"].get("devices") or []) for s in existing)
        if "pool" in current and existing:
            status.pool = ResourcePool.from_api(current["pool"])
    return status


def status_allocations(uses: Sequence[ClaimUse]) -> list[DeviceAllocation]:
    """``status.allocations`` for the devices claims hold, sorted by device, claim, request."""
    return sorted((DeviceAllocation(device=u.device, claim=f"{u.namespace}/{u.name}",
                                    claim_uid=u.uid, request=u.request) for u in uses),
                  key=lambda a: (a.device, a.claim, a.request))


def _current_retained(current: Mapping[str, Any]) -> RetainedDevices | None:
    """``status.retained`` as it is, or None when absent or unreadable."""
    try:
        return RetainedDevices.from_api(current["retained"]) if current.get("retained") else None
    except ValidationError:
        return None


def status_changed(raw: Mapping[str, Any], status: DeviceInventoryStatus) -> bool:
    """Whether any field of ``status`` differs from the inventory's current status."""
    current = raw.get("status") or {}
    return any(current.get(k) != v for k, v in status.to_api().items())


@dataclass(frozen=True)
class Event:
    """A core/v1 Event to post about the object reconciled."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def inventory_event(inputs: InventoryInputs, decision: InventoryDecision,
                    announced: str | None) -> tuple[str | None, Event | None]:
    """Whether to post an Event: when the ``Published`` condition changes reason or message,
    or slices were written (an Event marks a transition, not every reconcile).

    Args:
        announced: what was last announced for this inventory (``reason: message``), or None.

    Returns:
        What to remember as announced (None: leave it), and the Event to post, if any.
    """
    plan = decision.plan
    wrote = plan is not None and bool(plan.writes) and decision.ok
    signature = f"{decision.reason}: {decision.message}"
    if not wrote and announced == signature:
        return None, None
    before = get_condition([Condition.from_api(c) for c in
                            (inputs.raw.get("status") or {}).get("conditions") or []],
                           "Published")
    if not wrote and before is not None and (before.reason, before.message) == (
            decision.reason, decision.message):
        return signature, None
    if decision.reason == "WaitingForAgent":
        return signature, None  # a new node-local inventory waits for its first report: not news
    if decision.reason == "AgentLeaseExpired" and not inputs.existing and (
            before is None or before.status != "True"):
        return signature, None  # nothing was published (an agent's first start): not withdrawn
    message = decision.message
    if wrote and plan is not None:
        verbs = [w.verb for w in plan.writes]
        done = {"create": "created", "update": "updated", "delete": "deleted"}
        message += ": " + ", ".join(f"{verbs.count(v)} {done[v]}" for v in done if v in verbs)
    normal = decision.ok and decision.reason not in WARNINGS
    return signature, Event("Normal" if normal else "Warning",
                            EVENT_REASONS.get(decision.reason, decision.reason), message)
