"""The safety invariants of kubedra on a live cluster, read from the API (issue 13), for the
held-device tests and the fault-injection suite; on a real node also from what its agent keeps
on disk (:class:`NodeFiles`: the checkpoint of prepared claims and the CDI specs).

:func:`violations` lists what is wrong right now; :func:`converged` polls it until nothing is
(a fault may leave the cluster briefly inconsistent: the invariants hold once it converges,
except the safety ones, which must never be broken even for a moment — a device in two
claims or an over-consumed counter is reported by :func:`safety_violations`). For a fleet of
simulated nodes, :func:`pool_violations` says which of their pools have not converged.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.wait import eventually
from kubedra.api import inventory as inv
from kubedra.api.inventory import DiscoveredState, InventoryDevice
from kubedra.api.mig import expand
from kubedra.api.quantity import Quantity
from kubedra.api.resource import CounterSet
from kubedra.node.cdi import transient_spec_path
from kubedra.node.checkpoint import CHECKPOINT_FILE, PreparedClaim
from kubedra.node.claimspec import cdi_kind
from kubedra.node.exclusivity import find_conflict, node_devices, pool_counters
from kubedra.publishing.pool import pool_name

DRIVERS = ("gpu.kubedra.io", "pci.kubedra.io")


async def _items(call: Any, *args: Any, **options: Any) -> list[dict[str, Any]]:
    data = await call(*args, _preload_content=False, **options)
    body: dict[str, Any] = await data.json()
    return list(body.get("items") or [])


async def cluster_state(api: ApiClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                 list[dict[str, Any]]]:
    """(claims of every namespace, our ResourceSlices, DeviceInventories), raw."""
    claims = await _items(client.ResourceV1Api(api).list_resource_claim_for_all_namespaces)
    slices = [s for s in await _items(client.ResourceV1Api(api).list_resource_slice)
              if s["spec"]["driver"] in DRIVERS]
    inventories = await _items(client.CustomObjectsApi(api).list_cluster_custom_object,
                               inv.GROUP, inv.VERSION, inv.PLURAL)
    return claims, slices, inventories


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [r for r in (allocation.get("devices") or {}).get("results") or []
            if r["driver"] in DRIVERS]


def current_pools(slices: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(driver, pool) → the slices of the pool's highest generation (what the scheduler
    uses)."""
    pools: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in slices:
        pools[(s["spec"]["driver"], s["spec"]["pool"]["name"])].append(s)
    return {k: [s for s in v if s["spec"]["pool"]["generation"]
                == max(x["spec"]["pool"]["generation"] for x in v)] for k, v in pools.items()}


def safety_violations(claims: list[dict[str, Any]], slices: list[dict[str, Any]]) -> list[str]:
    """What must never happen, even for a moment: a device in two claims' allocations (no
    admin access, no shareID), a counter consumed beyond its capacity by allocated devices,
    or an allocated device missing from its published pool (its counters would be free)."""
    found: list[str] = []
    holders = Counter((r["driver"], r["pool"], r["device"]) for c in claims
                      for r in _results(c) if not r.get("adminAccess") and not r.get("shareID"))
    found += [f"device {'/'.join(k)} is in {n} claims' allocations"
              for k, n in holders.items() if n > 1]
    for (driver, pool), pool_slices in current_pools(slices).items():
        capacity = {(c["name"], name): Quantity(v["value"]) for s in pool_slices
                    for c in s["spec"].get("sharedCounters") or []
                    for name, v in c["counters"].items()}
        devices = {d["name"]: d for s in pool_slices for d in s["spec"].get("devices") or []}
        used: dict[tuple[str, str], Quantity] = defaultdict(lambda: Quantity(0))
        for (d, p, name), _n in holders.items():
            if (d, p) != (driver, pool):
                continue
            device = devices.get(name)
            if device is None:
                found.append(f"allocated device {driver}/{pool}/{name} is not published")
                continue
            for use in device.get("consumesCounters") or []:
                for counter, v in use["counters"].items():
                    used[(use["counterSet"], counter)] += Quantity(v["value"])
        found += [f"counter {driver}/{pool}/{k[0]}/{k[1]}: {used[k]} used of {capacity.get(k)}"
                  for k in used if k not in capacity or used[k] > capacity[k]]
    return found


def consistency_violations(slices: list[dict[str, Any]], inventories: list[dict[str, Any]],
                           allocated: Collection[tuple[str, str, str]] = ()) -> list[str]:
    """What must hold once the operator has caught up: each Ready inventory's status names
    exactly its slices, all at the pool generation and count it reports; no slice of ours
    without an inventory, unless it keeps only devices that claims hold (``allocated``:
    (driver, pool, device) of every allocation result), tainted ``draining=deleted``."""
    found: list[str] = []
    by_inventory: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in slices:
        by_inventory[s["metadata"].get("labels", {}).get("kubedra.io/inventory", "")].append(s)
    names = {i["metadata"]["name"] for i in inventories}
    found += [f"slice {s['metadata']['name']} has no DeviceInventory {owner!r}"
              for owner, ss in by_inventory.items() if owner not in names for s in ss
              if not _keeps_only_held(s, allocated)]
    for i in inventories:
        status = i.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        if not ready or ready["status"] != "True":
            continue
        mine = by_inventory.get(i["metadata"]["name"], [])
        name = i["metadata"]["name"]
        if sorted(s["metadata"]["name"] for s in mine) != sorted(status.get("slices") or []):
            found.append(f"{name}: slices {sorted(s['metadata']['name'] for s in mine)} != "
                         f"status.slices {status.get('slices')}")
        pool = status.get("pool") or {}
        wrong = [s["metadata"]["name"] for s in mine if s["spec"]["pool"] != pool]
        if wrong or (mine and pool.get("resourceSliceCount") != len(mine)):
            found.append(f"{name}: slices {wrong or len(mine)} disagree with pool {pool}")
    return found


def _keeps_only_held(slice_: dict[str, Any], allocated: Collection[tuple[str, str, str]]
                     ) -> bool:
    """Whether a deleted inventory's slice publishes only held devices, tainted as deleted
    (or only the counter sets they consume), and at least one of them."""
    spec = slice_["spec"]
    devices = spec.get("devices") or []
    held = [d for d in devices if (spec["driver"], spec["pool"]["name"], d["name"]) in allocated
            and {"key": "kubedra.io/draining", "value": "deleted", "effect": "NoSchedule"}
            in [{k: t[k] for k in ("key", "value", "effect")} for t in d.get("taints") or []]]
    return len(held) == len(devices) and bool(held or spec.get("sharedCounters"))


def claim_status_violations(claims: list[dict[str, Any]], inventories: list[dict[str, Any]]
                            ) -> list[str]:
    """Every allocated device of a pool a Ready inventory publishes has a ``status.devices``
    entry with a ``Ready`` condition (the operator's), and no inventory lost its status."""
    found = [f"DeviceInventory {i['metadata']['name']} has no status.conditions"
             for i in inventories if not (i.get("status") or {}).get("conditions")]
    ready_pools = set()
    for i in inventories:
        status = i.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        if ready and ready["status"] == "True" and status.get("pool"):
            ready_pools.add((i["spec"]["driver"], status["pool"]["name"]))
    for c in claims:
        entries = {(d["driver"], d["pool"], d["device"]): d
                   for d in (c.get("status") or {}).get("devices") or []}
        for r in _results(c):
            key = (r["driver"], r["pool"], r["device"])
            if (key[0], key[1]) not in ready_pools:
                continue
            conditions = (entries.get(key) or {}).get("conditions") or []
            if not any(x["type"] == "Ready" for x in conditions):
                found.append(f"claim {c['metadata']['namespace']}/{c['metadata']['name']}: "
                             f"no Ready condition for {'/'.join(key)}")
    return found


@dataclass
class PoolViolations:
    """What keeps the pools of :func:`pool_violations` from having converged, one list per
    kind, each entry ``(inventory name, what is wrong)``."""

    missing: list[tuple[str, str]] = field(default_factory=list)
    """No DeviceInventory, not ``Ready=True``, no ``status.pool``, or no slice of its pool."""
    stale: list[tuple[str, str]] = field(default_factory=list)
    """A slice of the pool at a generation below the one the inventory's status reports."""
    content: list[tuple[str, str]] = field(default_factory=list)
    """The devices or counter sets of the pool's current slices differ from the report."""

    def unconverged(self) -> set[str]:
        """The inventories with at least one violation."""
        return {name for kind in (self.missing, self.stale, self.content) for name, _ in kind}

    def lines(self) -> list[str]:
        """One line per violation, for :func:`violations`."""
        return [f"pool of {name}: {kind}: {what}"
                for kind, found in (("missing", self.missing), ("stale", self.stale),
                                    ("content", self.content)) for name, what in found]


def _reported(discovered: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(devices by name, counter sets by name)`` of a raw ``status.discovered``, as a pool
    publishes them: name, attributes, capacity (:class:`Quantity`); counters (the compact
    forms, MIG and device models, written out first)."""
    if discovered.get("migModels") or discovered.get("deviceModels"):
        result = expand(DiscoveredState.from_api(discovered))
        discovered = DiscoveredState(devices=result.devices,
                                     counter_sets=result.counter_sets or None).to_api()
    return ({d["name"]: _content(d) for d in discovered.get("devices") or []},
            {c["name"]: _counters(c["counters"]) for c in discovered.get("counterSets") or []})


def _content(device: dict[str, Any]) -> tuple[Any, dict[str, Quantity], Any]:
    return (device.get("attributes") or {},
            {k: Quantity(v["value"]) for k, v in (device.get("capacity") or {}).items()},
            _consumes(device.get("consumesCounters") or []))


def _consumes(uses: list[dict[str, Any]]) -> list[tuple[str, dict[str, Quantity]]]:
    return sorted(((u["counterSet"], _counters(u["counters"])) for u in uses),
                  key=lambda u: u[0])


def _counters(counters: dict[str, Any]) -> dict[str, Quantity]:
    return {k: Quantity(v["value"]) for k, v in counters.items()}


def pool_violations(slices: list[dict[str, Any]], inventories: list[dict[str, Any]],
                    pools: Collection[str]) -> PoolViolations:
    """Which pools of the inventories named in ``pools`` have not converged, by kind
    (:class:`PoolViolations`): each inventory must exist, be ``Ready=True`` with a
    ``status.pool``, have no slice of that pool below the pool's generation, and its pool's
    slices at that generation must publish exactly the devices (name, attributes, capacity,
    counters consumed) and counter sets of its ``status.discovered``. That is the whole check
    for pools whose every reported device is published as reported: no devices in the spec,
    no overrides, all devices healthy (the simulated fleet of the fault suite, whose reports
    the storm changes)."""
    found = PoolViolations()
    by_name = {i["metadata"]["name"]: i for i in inventories}
    pool_slices: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in slices:
        pool_slices[(s["spec"]["driver"], s["spec"]["pool"]["name"])].append(s)
    for name in sorted(pools):
        inventory = by_name.get(name)
        if inventory is None:
            found.missing.append((name, "no DeviceInventory"))
            continue
        status = inventory.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        pool = status.get("pool") or {}
        mine = pool_slices.get((inventory["spec"]["driver"], pool.get("name", "")), [])
        if not ready or ready["status"] != "True":
            found.missing.append((name, f"Ready is {ready['status']} ({ready.get('reason')})"
                                  if ready else "no Ready condition"))
            continue
        if not pool or not mine:
            found.missing.append((name, "no slices" if pool else "no status.pool"))
            continue
        generation = pool["generation"]
        found.stale += [(name, f"slice {s['metadata']['name']} at generation "
                               f"{s['spec']['pool']['generation']}, the pool at {generation}")
                        for s in sorted(mine, key=lambda s: str(s["metadata"]["name"]))
                        if s["spec"]["pool"]["generation"] < generation]
        current = [s for s in mine if s["spec"]["pool"]["generation"] == generation]
        devices = {d["name"]: _content(d) for s in current for d in s["spec"].get("devices") or []}
        counter_sets = {c["name"]: _counters(c["counters"]) for s in current
                        for c in s["spec"].get("sharedCounters") or []}
        want_devices, want_sets = _reported(status.get("discovered") or {})
        differ = []
        for what, have, want in (("devices", devices, want_devices),
                                 ("counter sets", counter_sets, want_sets)):
            missing = sorted(want.keys() - have.keys())
            extra = sorted(have.keys() - want.keys())
            changed = sorted(k for k in want.keys() & have.keys() if want[k] != have[k])
            differ += [f"{what} {label} {keys}" for label, keys in (
                ("unpublished", missing), ("not reported", extra), ("changed", changed)) if keys]
        if differ:
            found.content.append((name, "; ".join(differ)))
    return found


@dataclass(frozen=True)
class NodeFiles:
    """Where the agent of real node ``node`` keeps its state for driver ``driver``: the
    checkpoint in ``<root>/plugins/<driver>/`` and the claims' CDI specs in ``cdi_dir``."""

    node: str
    root: Path
    cdi_dir: Path
    driver: str = "gpu.kubedra.io"

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint's claims by UID (none before the first prepare; the file is
        replaced atomically, so it is never read half-written)."""
        path = self.root / "plugins" / self.driver / CHECKPOINT_FILE
        if not path.exists():
            return {}
        claims: dict[str, Any] = json.loads(path.read_text())["data"]["claims"]
        return claims

    def spec_uids(self) -> set[str]:
        """The claim UIDs that have a CDI spec file (``<vendor>-claim_<UID>.json``)."""
        pattern = transient_spec_path(Path(), cdi_kind(self.driver), "*").name
        prefix = pattern.split("*", 1)[0]
        return {p.name[len(prefix):-len(".json")] for p in self.cdi_dir.glob(pattern)}


def prepared_twice(files: NodeFiles, checkpoint: dict[str, Any],
                   inventory: dict[str, Any] | None = None) -> list[str]:
    """What must never happen on a node: two claims prepared (or being prepared) with the same
    device, or with devices that share hardware, by the rule the agent refuses a prepare with
    (:func:`kubedra.node.exclusivity.find_conflict`: shares of one device and admin access
    excepted; a MIG partition and its whole GPU, or overlapping partitions, overdraw a shared
    counter of the pool). ``inventory`` is the node's DeviceInventory as the API returns it
    (its devices and counter sets, the compact MIG form expanded); without it devices are
    compared by name only. One line per pair of claims, the later UID first."""
    claims = {uid: PreparedClaim.model_validate(c) for uid, c in checkpoint.items()}
    devices, counter_sets, pool = _node_devices(inventory) if inventory else ({}, [], "")
    counters = pool_counters(counter_sets)
    found = []
    for uid in sorted(claims):
        earlier = {u: c for u, c in claims.items() if u < uid}
        conflict = find_conflict(uid, claims[uid].devices, earlier, pool=pool,
                                 devices=devices, counters=counters)
        if conflict is None:
            continue
        device, held = conflict.device, conflict.held
        line = (f"node {files.node}: device {device.pool_name}/{device.device_name} of claim "
                f"{uid} and device {held.pool_name}/{held.device_name} of claim "
                f"{conflict.holder.uid} are prepared together")
        if conflict.counter is not None:
            counter_set, counter = conflict.counter
            line += (f", consuming {Quantity.from_value(conflict.wanted).canonical()} of "
                     f"counter {counter} of counter set {counter_set} "
                     f"({Quantity.from_value(conflict.value).canonical()} in all)")
        found.append(line)
    return found


def _node_devices(raw: dict[str, Any]) -> tuple[dict[str, InventoryDevice], list[CounterSet], str]:
    """A node's devices by name, its pool's shared counter sets and its pool name, as its
    agent knows them (:meth:`kubedra.node.agent.Agent.devices`): declared first, then
    discovered."""
    inventory = inv.DeviceInventory.model_validate(raw)
    found = inventory.status.discovered if inventory.status else None
    discovered = expand(found) if found else None
    devices = node_devices(inventory.spec.devices or [], discovered.devices if discovered else [])
    counter_sets = [*(inventory.spec.counter_sets or []),
                    *((discovered.counter_sets or []) if discovered else [])]
    return devices, counter_sets, pool_name(inventory)


def node_inventory(files: NodeFiles, inventories: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The DeviceInventory of ``files``' node and driver among ``inventories`` (raw), if any."""
    return next((i for i in inventories if i["spec"].get("nodeName") == files.node
                 and i["spec"].get("driver") == files.driver), None)


def node_violations(files: NodeFiles, claims: list[dict[str, Any]],
                    pods: list[dict[str, Any]],
                    inventory: dict[str, Any] | None = None) -> list[str]:
    """Every invariant of real node ``files.node`` broken now: a device prepared twice; a CDI
    spec without a prepared claim, or a prepared claim without its spec; a running pod of the
    node whose claim is not prepared; a prepared claim that no pod of the node uses any more
    (``pods``: the node's pods; ``claims``: every claim; ``inventory``: the node's, for
    :func:`prepared_twice`)."""
    checkpoint = files.checkpoint()
    specs = files.spec_uids()
    completed = {uid for uid, c in checkpoint.items() if c["state"] == "PrepareCompleted"}
    found = prepared_twice(files, checkpoint, inventory)
    found += [f"node {files.node}: CDI spec of claim {uid} without a prepared claim"
              for uid in sorted(specs - completed)]
    found += [f"node {files.node}: prepared claim {uid} has no CDI spec"
              for uid in sorted(completed - specs)]
    uids = {(c["metadata"]["namespace"], c["metadata"]["name"]): c["metadata"]["uid"]
            for c in claims}
    used: set[str] = set()
    for pod in pods:
        namespace = pod["metadata"]["namespace"]
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            uid = uids.get((namespace, status.get("resourceClaimName") or ""))
            if uid is None:
                continue
            used.add(uid)
            if (pod.get("status") or {}).get("phase") == "Running" and uid not in completed:
                found.append(f"node {files.node}: pod {namespace}/{pod['metadata']['name']} "
                             f"runs but its claim {uid} is not prepared")
    found += [f"node {files.node}: claim {uid} is prepared but no pod of the node uses it"
              for uid in sorted(set(checkpoint) - used)]
    return found


async def node_pods(api: ApiClient, node: str) -> list[dict[str, Any]]:
    """The pods bound to ``node``, raw."""
    return await _items(client.CoreV1Api(api).list_pod_for_all_namespaces,
                        field_selector=f"spec.nodeName={node}")


async def violations(api: ApiClient, nodes: Sequence[NodeFiles] = (),
                     pools: Collection[str] = ()) -> list[str]:
    """Every invariant broken now (safety, consistency, claim and inventory status; for each
    real node of ``nodes`` its prepared claims and CDI specs; the pools of the inventories
    named in ``pools`` converged, :func:`pool_violations`)."""
    claims, slices, inventories = await cluster_state(api)
    allocated = {(r["driver"], r["pool"], r["device"]) for c in claims for r in _results(c)}
    found = (safety_violations(claims, slices)
             + consistency_violations(slices, inventories, allocated)
             + claim_status_violations(claims, inventories))
    for files in nodes:
        found += node_violations(files, claims, await node_pods(api, files.node),
                                 node_inventory(files, inventories))
    if pools:
        found += pool_violations(slices, inventories, pools).lines()
    return found


async def converged(api: ApiClient, *, timeout: float = 60.0,
                    nodes: Sequence[NodeFiles] = (), pools: Collection[str] = ()) -> float:
    """Wait until no invariant is broken (:func:`violations`, ``pools`` included); the seconds
    it took.

    Raises:
        AssertionError: still broken after ``timeout`` seconds (the message lists what).
    """
    start = time.monotonic()
    seen: list[str] = []

    async def clean() -> bool:
        seen[:] = await violations(api, nodes, pools)
        return not seen
    try:
        await eventually(clean, timeout=timeout, interval=0.5, what="every invariant to hold")
    except AssertionError as err:
        raise AssertionError(f"{err}: {seen}") from None
    return time.monotonic() - start
