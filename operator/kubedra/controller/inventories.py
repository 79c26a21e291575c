"""Reconcile one DeviceInventory: publish its pool as ResourceSlices and write its status.

Order of decisions:

1. The inventory must parse; otherwise ``Ready=False`` (``InvalidInventory``) naming the field,
   and the slices already published stay as they are.
2. A node-local inventory whose agent has reported (``status.discovered`` is set) is published
   only while the agent's Lease is live; when it expires the pool is withdrawn (its slices are
   deleted, as the kubelet also does for a driver that went away) and ``Published=False``
   (``AgentLeaseExpired``); it comes back when the Lease is renewed. A node-local inventory
   with neither declared devices nor a report waits for its agent (``WaitingForAgent``) rather
   than publishing an empty pool.
3. The pool must validate (:func:`kubedra.publishing.pool.build_pool`); otherwise as in 1.
4. The planned slice writes are made in order (deletes, updates, creates); API errors leave
   ``Published=False`` (``PublishFailed``) and the inventory is retried with back-off.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiException
from pydantic import ValidationError

from kubedra import kube
from kubedra.api.inventory import (
    OPERATOR_FIELD_MANAGER,
    DeviceInventory,
    InventoryDevice,
    agent_lease_name,
)
from kubedra.api.resource import OwnerReference, ResourceSlice
from kubedra.controller.conditions import get_condition, set_condition
from kubedra.controller.state import OperatorState, PublishedPool, timestamp, utcnow
from kubedra.logging import get_logger
from kubedra.publishing.pool import (
    DesiredPool,
    build_pool,
    keep_allocated_devices,
    pool_name,
)
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import SyncPlan, plan_sync

log = get_logger(__name__)
COMPONENT = "kubedra-operator"


class _Outcome:
    """What this reconcile did, for the status: published, withdrawn, or failed with reason."""

    def __init__(self, ok: bool, reason: str, message: str, *, plan: SyncPlan | None = None,
                 devices: int = 0, withdrawn: bool = False,
                 draining: dict[str, str] | None = None, retry: bool = False) -> None:
        self.ok, self.reason, self.message = ok, reason, message
        self.plan, self.devices, self.withdrawn = plan, devices, withdrawn
        self.draining = draining or {}
        self.retry = retry


def validation_field(err: ValidationError) -> str:
    """The JSON path of the first error pydantic reports, e.g. ``spec.devices[0].name``."""
    first = err.errors()[0]
    path = ""
    for part in first["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return f"{path}: {first['msg']}"


async def reconcile_inventory(state: OperatorState, name: str) -> None:
    """Bring inventory ``name``'s slices and status in line with its spec and discovery.

    Raises:
        ApiException: a write failed in a way worth retrying (the caller backs off).
    """
    raw = state.view.inventory(name)
    if raw is None:
        state.overlay.forget(name)
        state.pools.pop(name, None)
        return  # the garbage collector deletes the slices through their owner reference
    try:
        inventory = DeviceInventory.from_api(raw)
    except ValidationError as err:
        await _write_status(state, raw, _Outcome(False, "InvalidInventory", validation_field(err)))
        return
    outcome, pool = await _publish(state, raw, inventory)
    if outcome.reason == "PoolConflict":
        state.pools.pop(name, None)
    elif pool is not None:
        health = {d.name: (d.health, d.health_message) for d in inventory_devices(inventory)}
        state.pools[name] = PublishedPool(pool=pool, health=health, withdrawn=outcome.withdrawn,
                                          draining=outcome.draining)
    await _write_status(state, raw, outcome)
    if outcome.retry:
        raise RuntimeError(outcome.message)


async def _publish(state: OperatorState, raw: dict[str, Any], inventory: DeviceInventory
                   ) -> tuple[_Outcome, DesiredPool | None]:
    name = inventory.metadata.name or ""
    existing = [ResourceSlice.from_api(s)
                for s in state.overlay.merge(name, state.view.slices_of(name))]
    node = inventory.spec.node_name
    has_agent = bool(inventory.status and inventory.status.discovered is not None)
    if node and has_agent and state.leases.state(node, utcnow()) != "live":
        for current in existing:
            await _delete(state, name, current)
        lease = agent_lease_name(node)
        return _Outcome(False, "AgentLeaseExpired",
                        f"agent Lease {state.settings.namespace}/{lease} of node {node} is not "
                        f"renewed; pool {pool_name(inventory)} withdrawn until the agent returns",
                        withdrawn=True), build_pool(inventory)
    if node and not has_agent and not inventory.spec.devices:
        return _Outcome(False, "WaitingForAgent",
                        f"no devices declared and the node agent of {node} has not reported "
                        "yet; nothing is published"), None
    pool = build_pool(inventory)
    rival = _pool_owner(state, raw, pool.driver, pool.name)
    if rival != name:
        for current in existing:
            await _delete(state, name, current)
        return _Outcome(False, "PoolConflict",
                        f"pool {pool.name} of driver {pool.driver} is published by "
                        f"DeviceInventory {rival}, created earlier; this inventory publishes "
                        "nothing while that one exists", withdrawn=True), None
    held = {u.device for u in state.view.uses_of(pool.driver, pool.name)}
    remembered = state.last_published.get((pool.driver, pool.name))
    previous = [d for s in existing for d in s.spec.devices or []]
    previous_sets = [c for s in existing for c in s.spec.shared_counters or []]
    if remembered is not None:  # also after a withdrawal, or the inventory's deletion and return
        previous = [*remembered.devices, *previous]
        previous_sets = [*remembered.counter_sets, *previous_sets]
    pool, draining = keep_allocated_devices(pool, held, _first_by_name(previous),
                                            _first_by_name(previous_sets))
    owner = OwnerReference(api_version=inventory.api_version, kind=inventory.kind, name=name,
                           uid=inventory.metadata.uid or "", controller=True)
    last = inventory.status.pool if inventory.status and inventory.status.pool else None
    published_generation = last.generation if last and last.name == pool.name else 0
    plan = plan_sync(name, owner, pool, split_pool(pool), existing, published_generation)
    try:
        for write in plan.writes:
            if write.verb == "delete":
                await kube.delete_resource_slice(state.api, write.name, write.resource_version)
                state.overlay.record(name, write.name, None)
            elif write.verb == "update":
                assert write.body is not None
                stored = await kube.replace_resource_slice(state.api, write.name, write.body)
                state.overlay.record(name, write.name, stored)
            else:
                assert write.body is not None
                stored = await kube.create_resource_slice(state.api, write.body)
                state.overlay.record(name, write.name, stored)
            state.slice_writes += 1
    except ApiException as err:
        return _Outcome(False, "PublishFailed",
                        f"{write.verb} ResourceSlice {write.name}: {kube.api_error_message(err)}",
                        plan=plan, devices=len(pool.devices), retry=_retryable(err)), pool
    state.last_published[(pool.driver, pool.name)] = pool
    if plan.writes:
        log.info("published", inventory=name, pool=pool.name, generation=plan.pool.generation,
                 slices=len(plan.slice_names), writes=len(plan.writes))
    message = (f"{_count(len(pool.devices), 'device')} in "
               f"{_count(len(plan.slice_names), 'ResourceSlice')} "
               f"(pool {pool.name}, generation {plan.pool.generation})")
    unhealthy = [d.name for d in inventory_devices(inventory) if d.health == "Unhealthy"]
    if unhealthy:
        message += f"; unhealthy, tainted NoSchedule: {', '.join(sorted(unhealthy))}"
    if draining:
        message += ("; still allocated, so kept published with a NoSchedule taint until "
                    f"released: {', '.join(f'{d} ({why})' for d, why in draining.items())}")
    return _Outcome(True, "SlicesPublished", message, plan=plan, devices=len(pool.devices),
                    draining=draining), pool


def _first_by_name(items: list[Any]) -> list[Any]:
    """The first item of each name, in order."""
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(item.name, item)
    return list(seen.values())


def _retryable(err: ApiException) -> bool:
    """Conflicts, throttling and server errors pass; other client errors (an invalid slice)
    need a change of the inventory, which triggers a reconcile anyway."""
    return err.status in (409, 429) or (err.status or 500) >= 500


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def inventory_devices(inventory: DeviceInventory) -> list[InventoryDevice]:
    """Declared and discovered devices of an inventory, overrides not applied."""
    discovered = inventory.status.discovered if inventory.status else None
    return [*(inventory.spec.devices or []), *(discovered.devices if discovered else [])]


def raw_pool_key(raw: dict[str, Any]) -> tuple[str, str]:
    """(driver, pool name) of a raw inventory, as :func:`pool_name` computes it."""
    spec = raw.get("spec") or {}
    return (spec.get("driver", ""),
            spec.get("pool") or spec.get("nodeName") or raw["metadata"]["name"])


def _pool_owner(state: OperatorState, raw: dict[str, Any], driver: str, pool: str) -> str:
    """The inventory that publishes pool (driver, pool): of all inventories naming it, the one
    created first (then by name). Two publishers of one pool would hide each other's slices,
    since consumers use only the highest generation of a pool."""
    rivals = [other for other in (state.view.inventory(n) for n in
                                  state.view.inventories_of_pool(driver, pool)) if other]
    rivals.append(raw)
    first = min(rivals, key=lambda r: (r["metadata"].get("creationTimestamp") or "",
                                       r["metadata"]["name"]))
    return str(first["metadata"]["name"])


async def _delete(state: OperatorState, inventory: str, current: ResourceSlice) -> None:
    name = current.metadata.name or ""
    await kube.delete_resource_slice(state.api, name, current.metadata.resource_version)
    state.overlay.record(inventory, name, None)
    state.slice_writes += 1


def _allocations(state: OperatorState, raw: dict[str, Any], outcome: _Outcome
                 ) -> list[dict[str, str]]:
    """The claims holding devices of this inventory's pool, sorted by device and claim (none
    for an inventory that does not own its pool)."""
    if outcome.reason == "PoolConflict":
        return []
    uses = state.view.uses_of(*raw_pool_key(raw))
    return sorted(({"device": u.device, "claim": f"{u.namespace}/{u.name}", "claimUID": u.uid,
                    "request": u.request} for u in uses),
                  key=lambda a: (a["device"], a["claim"], a["request"]))


async def _write_status(state: OperatorState, raw: dict[str, Any], outcome: _Outcome) -> None:
    """Apply the operator's status fields if they changed; post an Event on a transition."""
    current = raw.get("status") or {}
    now = timestamp(utcnow())
    generation = raw["metadata"].get("generation")
    conditions = current.get("conditions")
    conditions = set_condition(conditions, type_="Published", status=outcome.ok,
                               reason=outcome.reason, message=outcome.message, now=now,
                               observed_generation=generation)
    conditions = set_condition(conditions, type_="Ready", status=outcome.ok,
                               reason="Published" if outcome.ok else outcome.reason,
                               message=outcome.message, now=now, observed_generation=generation)
    allocations = _allocations(state, raw, outcome)
    status: dict[str, Any] = {
        "conditions": conditions,
        "observedGeneration": generation,
        "allocations": allocations,
        "allocatedCount": len({a["device"] for a in allocations}),
    }
    if outcome.plan is not None and outcome.ok:
        status["pool"] = outcome.plan.pool.to_api()
        status["slices"] = outcome.plan.slice_names
        status["deviceCount"] = outcome.devices
    elif outcome.withdrawn:
        status["slices"] = []
        status["deviceCount"] = 0
    else:  # invalid or failed: the slices published before stay; report what exists
        name = raw["metadata"]["name"]
        existing = sorted(state.overlay.merge(name, state.view.slices_of(name)),
                          key=lambda s: s["metadata"]["name"])
        status["slices"] = [s["metadata"]["name"] for s in existing]
        status["deviceCount"] = sum(len(s["spec"].get("devices") or []) for s in existing)
        if "pool" in current and existing:
            status["pool"] = current["pool"]
    if any(current.get(k) != v for k, v in status.items()):
        await kube.apply_inventory_status(state.api, raw["metadata"]["name"], status,
                                          OPERATOR_FIELD_MANAGER)
    await _announce(state, raw, outcome, get_condition(current.get("conditions"), "Published"))


async def _announce(state: OperatorState, raw: dict[str, Any], outcome: _Outcome,
                    before: dict[str, Any] | None) -> None:
    """Post an Event when the Published condition changes reason, or slices were written."""
    key = ("DeviceInventory", raw["metadata"]["name"])
    wrote = outcome.plan is not None and bool(outcome.plan.writes) and outcome.ok
    signature = f"{outcome.reason}: {outcome.message}"
    if not wrote and state.announced.get(key) == signature:
        return
    if not wrote and before is not None and before.get("reason") == outcome.reason \
            and before.get("message") == outcome.message:
        state.announced[key] = signature
        return
    state.announced[key] = signature
    if outcome.reason == "WaitingForAgent":
        return  # a new node-local inventory waits a moment for its first report: not news
    reasons = {"SlicesPublished": "Published", "AgentLeaseExpired": "PoolWithdrawn"}
    message = outcome.message
    if wrote and outcome.plan is not None:
        verbs = [w.verb for w in outcome.plan.writes]
        done = {"create": "created", "update": "updated", "delete": "deleted"}
        message += ": " + ", ".join(f"{verbs.count(v)} {done[v]}" for v in done if v in verbs)
    await kube.post_event(state.api, raw, event_type="Normal" if outcome.ok else "Warning",
                          reason=reasons.get(outcome.reason, outcome.reason),
                          message=message, component=COMPONENT)
