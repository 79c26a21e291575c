"""``kubedra status``: the fleet at a glance, as the scheduler's allocator sees it.

Every count comes from the same :class:`~kubedra.explain.snapshot.ClusterSnapshot` that
explain allocates from, so it agrees with kube-scheduler (v1.37.2):

- a pool counts only as the allocator sees it from the nodes (``GatherPools``: the slices of
  its newest generation; an incomplete or invalid pool is *unusable*, its devices counted
  apart); a pool that no node sees (its ``nodeName`` is not a Node) is counted apart too;
- a device is *allocated* when an allocated claim holds it, exclusively or a share of it
  (``adminAccess`` results do not count, as in ``allocateddevices.go``);
- it is *free* when a claim that tolerates no taint could be given it now: not allocated, no
  ``NoSchedule``/``NoExecute`` taint (its own or a DeviceTaintRule's), and, for a device that
  consumes shared counters (a MIG partition), enough left of every counter after what the
  allocated devices of its pool consume (``checkAvailableCounters``: a partition whose GPU is
  allocated whole is not free);
- *unhealthy* and *draining* are devices with kubedra's taints ``kubedra.io/unhealthy`` and
  ``kubedra.io/draining`` (allocated or not); *withdrawn* are the allocated devices of a pool
  that is withdrawn or deleted, kept published (``kubedra.io/draining=withdrawn|deleted``)
  until their claims release them.

So ``published = allocated + free + (not allocated and not free: tainted, or their counters
are used by an allocated partition of the same GPU)``.

Pending claims (unallocated) are explained one by one (:func:`explain_claim`) and grouped by
verdict and the check that stopped them on the nodes where they came closest.

Upstream's answer, KEP-5677 ``ResourcePoolStatusRequest`` (``resource.k8s.io/v1alpha3``,
gate ``DRAResourcePoolStatus``, alpha and off by default in v1.37.2), is computed by
kube-controller-manager (``pkg/controller/resourcepoolstatusrequest/controller.go``) and
differs by definition: its ``unavailableDevices`` counts every device with a
``NoSchedule``/``NoExecute`` taint, allocated or not, and ``availableDevices = total -
allocated - unavailable`` (floored at 0) ignores shared counters (those appear only in its
``partitionSummary``). The two agree on ``totalDevices`` (= published of a usable pool) and
``allocatedDevices`` (= allocated); ``free`` here equals ``availableDevices`` only for a pool
with no tainted allocated devices and no shared counters. ``e2e/test_pool_status.py`` runs
both on one v1.37.2 control plane with the gate on and asserts exactly that.

The JSON form (``-o json``) is stable within ``apiVersion: kubedra.io/v1alpha1``::

    {"apiVersion": "kubedra.io/v1alpha1", "kind": "FleetStatus",
     "kubeVersion": "1.37",    # the minor whose scheduler the pending claims are judged as
     "nodes": {"total", "withDevices"},
     "devices": [Row],                          # per driver and model, fleet-wide
     "unusablePools": [{"driver", "pool", "node", "reason", "devices"}],
     "poolsOnNoNode": [{"driver", "pool", "node", "devices"}],
     "byNode": [{"node", "devices": [Row]}],    # with --by node (node "": pools of no node)
     "byPool": [{"driver", "pool", "node", "generation", "slices", "devices": [Row]}],
     "pending": [{"verdict",                    # explain's, for each pending claim
                  "failedAt": null | "deviceClass" | "noDevices" | a funnel stage |
                              "constraints" | "together",
                  "claims": ["ns/name", ...], "message"}]}   # message: the first claim's
    Row: {"driver", "model", "profile", "published", "allocated", "claims", "free",
          "unhealthy", "draining", "withdrawn"}

``model`` is the device's ``productName`` (else ``vendorID:deviceID``, else ``-``),
``profile`` its MIG profile (``3g.71gb``) or ``null``; ``claims`` the number of distinct
claims holding devices of the row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubedra.allocation import (
    AllocationError,
    Allocator,
    DeviceEntry,
    Pool,
    SliceEntry,
    newest_slices,
)
from kubedra.explain.claims import explain_claim, missing_class
from kubedra.explain.model import API_VERSION, FUNNEL_NAMES, ClaimExplanation
from kubedra.explain.snapshot import ClusterSnapshot
from kubedra.explain.sources import pods_using
from kubedra.publishing.pool import DRAINING_TAINT_KEY, UNHEALTHY_TAINT_KEY

KIND = "FleetStatus"
WITHDRAWN_VALUES = frozenset({"withdrawn", "deleted"})
"""Values of ``kubedra.io/draining`` on a device kept only because claims hold it while its
pool is withdrawn or its DeviceInventory deleted (:mod:`kubedra.publishing.pool`)."""

GROUPINGS = ("model", "node", "pool")
"""The views of ``--by``."""

ModelKey = tuple[str, str, str | None]
"""``(driver, model, profile)``."""


def _attribute(device: DeviceEntry, name: str) -> str | None:
    """A string attribute by its short name (or qualified with the device's driver)."""
    found = device.attributes.get(name) or device.attributes.get(f"{device.driver}/{name}")
    return found.string_value if found is not None else None


def device_model(device: DeviceEntry) -> ModelKey:
    """What a device is, for counting: ``(driver, model, profile)``.

    ``model`` is the ``productName`` attribute (kubedra's GPUs), else ``vendorID:deviceID``
    (kubedra's PCI functions), else ``-``; ``profile`` is the MIG profile attribute
    (``profile``, e.g. ``3g.71gb``) of a partition, else ``None``.
    """
    model = _attribute(device, "productName")
    if model is None:
        vendor, product = _attribute(device, "vendorID"), _attribute(device, "deviceID")
        model = f"{vendor}:{product}" if vendor and product else "-"
    return device.driver, model, _attribute(device, "profile")


@dataclass
class Counts:
    """Devices of one row (see the module docstring for what each count means)."""

    published: int = 0
    allocated: int = 0
    claims: set[str] = field(default_factory=set)
    free: int = 0
    unhealthy: int = 0
    draining: int = 0
    withdrawn: int = 0

    def add(self, other: Counts) -> None:
        """Add ``other``'s devices to these."""
        self.published += other.published
        self.allocated += other.allocated
        self.claims |= other.claims
        self.free += other.free
        self.unhealthy += other.unhealthy
        self.draining += other.draining
        self.withdrawn += other.withdrawn

    def numbers(self) -> tuple[int, ...]:
        """The counts in column order (the claims as their number)."""
        return (self.published, self.allocated, len(self.claims), self.free, self.unhealthy,
                self.draining, self.withdrawn)


Rows = dict[ModelKey, Counts]


def row_json(key: ModelKey, counts: Counts) -> dict[str, Any]:
    """The JSON form of one row."""
    driver, model, profile = key
    published, allocated, claims, free, unhealthy, draining, withdrawn = counts.numbers()
    return {"driver": driver, "model": model, "profile": profile, "published": published,
            "allocated": allocated, "claims": claims, "free": free, "unhealthy": unhealthy,
            "draining": draining, "withdrawn": withdrawn}


def _rows_json(rows: Rows) -> list[dict[str, Any]]:
    return [row_json(key, rows[key]) for key in sorted(rows, key=_model_order)]


def _model_order(key: ModelKey) -> tuple[str, str, bool, str]:
    driver, model, profile = key
    return driver, model, profile is not None, profile or ""


@dataclass
class PoolStatus:
    """One pool as the allocator sees it (``node`` is its ``nodeName``, ``""`` for a pool of
    no single node); ``reason`` says why the scheduler cannot use it (else ``None``)."""

    driver: str
    pool: str
    node: str
    generation: int
    slices: int
    rows: Rows
    reason: str | None = None

    @property
    def devices(self) -> int:
        """How many devices the pool publishes."""
        return sum(c.published for c in self.rows.values())


@dataclass
class PendingGroup:
    """Pending claims with the same verdict and, for unschedulable ones, the same check
    that stopped them where they came closest (:func:`_failed_at`)."""

    verdict: str
    failed_at: str | None
    claims: list[str] = field(default_factory=list)
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"verdict": self.verdict, "failedAt": self.failed_at, "claims": self.claims,
                "message": self.message}


@dataclass
class FleetStatus:
    """Everything ``kubedra status`` says: the fleet's devices and its pending claims."""

    nodes: int
    nodes_with_devices: int
    pools: list[PoolStatus]
    pools_on_no_node: list[PoolStatus]
    pending: list[PendingGroup]
    kube_version: str = ""
    """The Kubernetes minor whose scheduler the pending claims are explained as (``1.37``)."""

    def totals(self) -> Rows:
        """Per driver and model, over every usable pool."""
        totals: Rows = {}
        for pool in self.pools:
            if pool.reason is None:
                _merge(totals, pool.rows)
        return totals

    def by_node(self) -> dict[str, Rows]:
        """Per node (``""``: pools of no single node), per driver and model; nodes by name."""
        found: dict[str, Rows] = {}
        for pool in self.pools:
            if pool.reason is None:
                _merge(found.setdefault(pool.node, {}), pool.rows)
        return dict(sorted(found.items()))

    def unusable(self) -> list[PoolStatus]:
        """The pools the scheduler cannot use (incomplete or invalid)."""
        return [p for p in self.pools if p.reason is not None]

    def to_json(self, by: str = "model") -> dict[str, Any]:
        """The JSON form documented in this module (``by``: also ``byNode`` or ``byPool``)."""
        found: dict[str, Any] = {
            "apiVersion": API_VERSION, "kind": KIND, "kubeVersion": self.kube_version,
            "nodes": {"total": self.nodes, "withDevices": self.nodes_with_devices},
            "devices": _rows_json(self.totals()),
            "unusablePools": [{"driver": p.driver, "pool": p.pool, "node": p.node,
                               "reason": p.reason, "devices": p.devices}
                              for p in self.unusable()],
            "poolsOnNoNode": [{"driver": p.driver, "pool": p.pool, "node": p.node,
                               "devices": p.devices} for p in self.pools_on_no_node],
            "pending": [g.to_json() for g in self.pending]}
        if by == "node":
            found["byNode"] = [{"node": node, "devices": _rows_json(rows)}
                               for node, rows in self.by_node().items()]
        elif by == "pool":
            found["byPool"] = [{"driver": p.driver, "pool": p.pool, "node": p.node,
                                "generation": p.generation, "slices": p.slices,
                                "devices": _rows_json(p.rows)}
                               for p in self.pools if p.reason is None]
        return found


def _merge(into: Rows, rows: Mapping[ModelKey, Counts]) -> None:
    for key, counts in rows.items():
        into.setdefault(key, Counts()).add(counts)


def _taint_values(device: DeviceEntry, key: str) -> list[str]:
    return [t.value or "" for t in device.taints if t.key == key]


def _counters_left(allocator: Allocator, pool: Pool, device: DeviceEntry) -> bool:
    """Whether what the device consumes of its pool's counters is left after the allocated
    devices (the allocator's own tally, ``available_counters``)."""
    if not device.consumes:
        return True
    available, overdrawn = allocator.available_counters(pool)
    if overdrawn:
        return False
    for set_name, counters in device.consumes:
        left = available.get(set_name)
        if left is not None and any(name in left and amount > left[name]
                                    for name, amount in counters):
            return False
    return True


def pool_rows(snapshot: ClusterSnapshot, allocator: Allocator, pool: Pool) -> Rows:
    """The devices of one pool (as a node sees it), counted per driver and model."""
    allocated = snapshot.allocated
    holders = snapshot.holders
    rows: Rows = {}
    for entry in pool.slices:
        for device in entry.devices:
            counts = rows.setdefault(device_model(device), Counts())
            counts.published += 1
            held = device.id in allocated.devices or device.id in allocated.shared_devices
            draining = _taint_values(device, DRAINING_TAINT_KEY)
            if held:
                counts.allocated += 1
                counts.claims.update(h.claim for h in holders.get(device.id, ()))
                counts.withdrawn += any(v in WITHDRAWN_VALUES for v in draining)
            elif not any(device.blocking_taints()) and _counters_left(allocator, pool, device):
                counts.free += 1
            counts.unhealthy += bool(_taint_values(device, UNHEALTHY_TAINT_KEY))
            counts.draining += bool(draining)
    return rows


def _published_rows(entries: Iterable[SliceEntry]) -> Rows:
    """Devices of the slices, counted as published only (none of them free)."""
    rows: Rows = {}
    for entry in entries:
        for device in entry.devices:
            rows.setdefault(device_model(device), Counts()).published += 1
    return rows


def _pool_status(snapshot: ClusterSnapshot, allocator: Allocator, pool: Pool,
                 newest: list[SliceEntry]) -> PoolStatus:
    """One pool a node sees; ``newest``: the pool's slices of its newest generation."""
    node = next((e.node_selection.node_name for e in newest if e.node_selection.node_name),
                None) or ""
    reason = f"incomplete: {pool.incomplete_detail}" if pool.incomplete else pool.invalid_reason
    rows = pool_rows(snapshot, allocator, pool) if reason is None else _published_rows(newest)
    return PoolStatus(pool.driver, pool.name, node, newest[0].generation, len(newest), rows,
                      reason)


CHECK_ORDER = (*FUNNEL_NAMES.values(), "constraints", "together")
"""Where a request can fail, in the order the allocator checks (explain's ``failedAt``)."""


def _failed_at(explanation: ClaimExplanation, class_missing: bool) -> str | None:
    """For an unschedulable claim, the check it failed on the nodes where it came closest
    (the latest in :data:`CHECK_ORDER`), ``deviceClass`` when a request's DeviceClass does
    not exist (``class_missing``: kube-scheduler evaluates no node, :func:`missing_class`),
    or ``noDevices`` when no node has devices for it."""
    if explanation.verdict != "Unschedulable":
        return None
    if class_missing:
        return "deviceClass"
    if not explanation.candidates:
        return "noDevices"
    found = [CHECK_ORDER.index(r.failed_at) for c in explanation.candidates
             for r in c.deciding() if r.failed_at in CHECK_ORDER]
    return CHECK_ORDER[max(found)] if found else None


def pending_groups(snapshot: ClusterSnapshot, pods: Sequence[Mapping[str, Any]]
                   ) -> list[PendingGroup]:
    """The unallocated claims, explained (:func:`explain_claim`, each narrowed to the nodes
    its pods may run on) and grouped by verdict and failed checks; the largest groups
    first, claims by name."""
    groups: dict[tuple[str, str | None], PendingGroup] = {}
    claims = sorted((c for c in snapshot.claims if c.status.allocation is None),
                    key=lambda c: (c.metadata.namespace or "", c.metadata.name or ""))
    for claim in claims:
        explanation = explain_claim(snapshot, claim, pods_using(claim, pods))
        key = (explanation.verdict,
               _failed_at(explanation, missing_class(snapshot, [claim]) is not None))
        group = groups.get(key)
        if group is None:
            group = groups[key] = PendingGroup(*key, message=explanation.message)
        group.claims.append(f"{explanation.namespace}/{explanation.name}")
    return sorted(groups.values(), key=lambda g: (-len(g.claims), g.verdict, g.failed_at or ""))


def fleet_devices(snapshot: ClusterSnapshot) -> FleetStatus:
    """The fleet's devices from ``snapshot``, without the pending claims (``pending`` is
    empty: explaining them is the costly part of :func:`fleet_status`).

    A node whose slices do not parse (a node selector the allocator rejects) has its pools
    left out.
    """
    allocator = snapshot.allocator()
    newest = newest_slices(snapshot.resources.slices.all)
    seen: dict[tuple[str, str], PoolStatus] = {}
    with_devices = 0
    for node in snapshot.nodes:
        try:
            node_pools = snapshot.resources.node_pools(node)
        except AllocationError:
            continue
        with_devices += bool(node_pools.pools)
        for pool in node_pools.pools:
            if pool.key not in seen:
                seen[pool.key] = _pool_status(snapshot, allocator, pool, newest[pool.key])
    on_no_node = [PoolStatus(*key, entries[0].node_selection.node_name or "",
                             entries[0].generation, len(entries), _published_rows(entries))
                  for key, entries in sorted(newest.items()) if key not in seen]
    return FleetStatus(
        nodes=len(snapshot.nodes), nodes_with_devices=with_devices,
        pools=sorted(seen.values(), key=lambda p: (p.driver, p.pool)),
        pools_on_no_node=on_no_node, pending=[],
        kube_version=str(snapshot.resources.features.version))


def fleet_status(snapshot: ClusterSnapshot, pods: Iterable[Mapping[str, Any]] = ()
                 ) -> FleetStatus:
    """The fleet's devices (:func:`fleet_devices`) and pending claims, from ``snapshot`` and
    the cluster's pods (plain Pod objects; they narrow where a pending claim is explained)."""
    found = fleet_devices(snapshot)
    found.pending = pending_groups(snapshot, list(pods))
    return found
