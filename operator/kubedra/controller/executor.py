"""The one place where the reconcilers act: read the cached view, ask the pure decision
functions (:mod:`kubedra.controller.inventories`, :mod:`kubedra.controller.claims`) what to do,
make the API calls, and remember what was published.

A write that retrying may fix raises (:class:`~kubernetes_asyncio.client.ApiException`, or
:class:`~kubedra.controller.queue.Retry` after the status was written); the work queue retries
the key with back-off.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from kubernetes_asyncio.client import ApiException

from kubedra import kube
from kubedra.api.inventory import OPERATOR_COMPONENT, OPERATOR_FIELD_MANAGER
from kubedra.api.resource import OwnerReference, ResourceSlice
from kubedra.api.selector import pool_labels
from kubedra.api.time import timestamp, utcnow
from kubedra.binding.attach import AttachRequest, AttachResult, attach_decided
from kubedra.controller import fingerprint
from kubedra.controller.claims import EVENT_REASON, DeviceKey, decide_claim
from kubedra.controller.claims import same_inputs as claim_inputs_unchanged
from kubedra.controller.inventories import (
    InventoryDecision,
    InventoryInputs,
    decide_deleted,
    decide_inventory,
    inventory_event,
    inventory_status,
    status_changed,
)
from kubedra.controller.queue import Retry
from kubedra.controller.state import (
    OperatorState,
    PublishedPool,
    allocation_results,
    pool_key,
)
from kubedra.logging import get_logger
from kubedra.publishing.features import pool_off

log = get_logger(__name__)


async def reconcile_inventory(state: OperatorState, name: str) -> None:
    """Bring inventory ``name``'s slices and status in line with its spec and discovery.

    Raises:
        ApiException: deleting a slice of a withdrawn pool, or the status write, failed.
        Retry: a slice write failed in a way worth retrying (the status says why).
    """
    started = time.monotonic()
    raw = state.inventory_overlay.merge(name, state.view.inventory(name))
    if raw is None:
        await _reconcile_deleted(state, name)
        return
    if await _verify_unchanged(state, raw):
        state.metrics.published("unchanged", started)
        return
    inputs = await _inventory_inputs(state, raw)
    decision = decide_inventory(inputs)
    if decision.withdrawn and decision.retained is not None:
        # what keeps the held devices must be in the API before their slices go
        await _write_status(state, inputs, decision)
    decision = await _write_slices(state, name, decision)
    state.metrics.published(decision.publish_result, started)
    if decision.forget:
        state.pools.pop(name, None)
    elif decision.pool is not None:
        state.pools[name] = PublishedPool.of(decision.pool, decision.health,
                                             withdrawn=decision.withdrawn,
                                             draining=decision.draining)
    held_until = decision.pool.held_until if decision.ok and decision.pool else None
    _wake_up(state, name, held_until, decision.drain_until)
    await _write_status(state, inputs, decision)
    key = ("DeviceInventory", name)
    announced, event = inventory_event(inputs, decision, state.announced.get(key))
    if announced is not None:
        state.announced[key] = announced
    if event is not None:
        await kube.post_event(state.api, raw, event_type=event.type, reason=event.reason,
                              message=event.message, component=OPERATOR_COMPONENT)
    if decision.retry:
        raise Retry(decision.message)


async def _verify_unchanged(state: OperatorState, raw: dict[str, Any]) -> bool:
    """Whether the inventory's pool is as its ``status.publishedFrom`` recorded it (then its
    ``status.allocations`` are brought up to date, and nothing else is to do), from the raw
    cached objects (:func:`kubedra.controller.fingerprint.unchanged_pool`).

    Raises:
        ApiException: reading the CRD, or the status write, failed.
    """
    status = raw.get("status") or {}
    if not status.get("publishedFrom"):
        return False
    name = raw["metadata"]["name"]
    view = state.view
    driver, pool = pool_key(raw)
    node = (raw.get("spec") or {}).get("nodeName")
    found = fingerprint.unchanged_pool(
        raw, state.overlay.merge(name, view.slices_of(name)),
        lease=state.leases.state(node, utcnow()) if node else None,
        node_exists=view.node_exists(node) if node else True,
        pool_inventories=view.inventories_of_pool(driver, pool),
        deleted=view.deleted_inventories_of_pool(driver, pool), uses=view.uses_of(driver, pool),
        owner_uid=(await _slice_owner(state)).uid, hold_down=state.settings.health_hold_down,
        off=pool_off(state.served, view.node_features(node) if node else None),
        labels=_pool_labels(state, raw))
    if found is None:
        return False
    if found.allocations is not None:
        written = {k: v for k, v in status.items() if k != "discovered"}
        written["allocations"] = [a.to_api() for a in found.allocations]
        written["allocatedCount"] = len({a.device for a in found.allocations})
        stored = await kube.apply_inventory_status(state.api, name, written,
                                                   OPERATOR_FIELD_MANAGER)
        state.inventory_overlay.record(name, stored, quiet=fingerprint.same_inputs(raw, stored))
    state.pools[name] = PublishedPool(driver=driver, name=pool, devices=found.devices,
                                      health=found.health)
    state.wake_ups.pop(name, None)
    state.inventories_unchanged += 1
    return True


async def _reconcile_deleted(state: OperatorState, name: str) -> None:
    """The slices of deleted inventory ``name``: only the held devices stay published, until
    released (:func:`~kubedra.controller.inventories.decide_deleted`).

    Raises:
        ApiException: a slice delete, or reading the CRD, failed.
        Retry: a slice write failed in a way worth retrying.
    """
    existing = [ResourceSlice.from_api(s)
                for s in state.overlay.merge(name, state.view.slices_of(name))]
    if not existing:
        state.overlay.forget(name)
        state.pools.pop(name, None)
        state.wake_ups.pop(name, None)
        return
    first = existing[0].spec
    decision = decide_deleted(name, existing, state.view.uses_of(first.driver, first.pool.name),
                              await _slice_owner(state), now=utcnow(),
                              drain_grace=state.settings.drain_grace, served=state.served,
                              pool_labels=pool_labels(state.settings.pool_selector,
                                                      existing[0].metadata.labels))
    decision = await _write_slices(state, name, decision)
    _wake_up(state, name, decision.drain_until)
    if decision.forget:
        state.pools.pop(name, None)
        log.info("released", inventory=name, slices=len(decision.delete))
    elif decision.pool is not None and decision.ok:
        state.pools[name] = PublishedPool.of(decision.pool, {}, draining=decision.draining)
    if decision.retry:
        raise Retry(decision.message)


def _wake_up(state: OperatorState, name: str, *moments: datetime | None) -> None:
    """Have the tick queue inventory ``name`` again at the earliest of ``moments`` (when a
    health hold-down or a drain grace ends), or at none."""
    when = min((m for m in moments if m is not None), default=None)
    if when is not None:
        state.wake_ups[name] = when
    else:
        state.wake_ups.pop(name, None)


async def _write_slices(state: OperatorState, name: str, decision: InventoryDecision
                        ) -> InventoryDecision:
    """Delete the slices ``decision`` withdraws, then make its planned writes; the decision
    as it stands after them (:meth:`InventoryDecision.publish_failed` when a write failed).

    Raises:
        ApiException: a delete failed.
    """
    for current in decision.delete:
        await _write(state, name, "delete", current.metadata.name or "",
                     resource_version=current.metadata.resource_version)
    if decision.plan is not None:
        decision = await _publish(state, name, decision)
    return decision


async def _slice_owner(state: OperatorState) -> OwnerReference:
    """The owner reference of every slice (:func:`kubedra.kube.slice_owner`), read once.

    Raises:
        ApiException: reading the CRD failed.
    """
    if state.slice_owner is None:
        state.slice_owner = await kube.slice_owner(state.api)
    return state.slice_owner


async def _write_status(state: OperatorState, inputs: InventoryInputs,
                        decision: InventoryDecision) -> None:
    """Apply the operator's part of the inventory's status, if any field changed."""
    name = inputs.name
    slices_now = state.overlay.merge(name, state.view.slices_of(name))
    reports_existing = not decision.ok and not decision.withdrawn
    status = inventory_status(inputs, decision, timestamp(utcnow()),
                              slices_now if reports_existing else [])
    status.published_from = fingerprint.record(inputs.raw, decision, inputs.uses, slices_now,
                                               inputs.owner.uid, inputs.hold_down,
                                               inputs.off)
    if status_changed(inputs.raw, status):
        state.inventory_overlay.record(name, await kube.apply_inventory_status(
            state.api, name, status.to_api(), OPERATOR_FIELD_MANAGER))


async def _inventory_inputs(state: OperatorState, raw: dict[str, Any]) -> InventoryInputs:
    """What :func:`decide_inventory` reads, from the caches; the agent Lease of a reporting
    node is read again from the API server when the cache says it is not live, since a
    withdrawal must not rest on a lagging watch (:meth:`LeaseCache.confirm`).

    Raises:
        ApiException: that Lease could not be read.
    """
    name = raw["metadata"]["name"]
    driver, pool = pool_key(raw)
    node = (raw.get("spec") or {}).get("nodeName")
    view = state.view
    lease = state.leases.state(node, utcnow()) if node else None
    if node and lease != "live" and (raw.get("status") or {}).get("discovered") is not None:
        lease = await state.leases.confirm(node, utcnow())
    return InventoryInputs(
        raw=raw,
        existing=[ResourceSlice.from_api(s)
                  for s in state.overlay.merge(name, view.slices_of(name))],
        lease=lease,
        namespace=state.settings.namespace, owner=await _slice_owner(state),
        drain_grace=state.settings.drain_grace,
        deleted=[other for other in view.deleted_inventories_of_pool(driver, pool)
                 if other != name],
        rivals=[other for other in map(view.inventory, view.inventories_of_pool(driver, pool))
                if other],
        uses=view.uses_of(driver, pool),
        now=utcnow(), hold_down=state.settings.health_hold_down,
        node_exists=view.node_exists(node) if node else True,
        node_features=view.node_features(node) if node else frozenset(), served=state.served,
        pool_labels=_pool_labels(state, raw))


def _pool_labels(state: OperatorState, raw: dict[str, Any]) -> dict[str, str]:
    """The labels the slices of inventory ``raw`` carry besides the operator's own."""
    return pool_labels(state.settings.pool_selector, raw["metadata"].get("labels"))


async def _publish(state: OperatorState, name: str, decision: InventoryDecision
                   ) -> InventoryDecision:
    """Make the planned slice writes in order; the decision as it stands after them."""
    plan, pool = decision.plan, decision.pool
    if plan is None or pool is None:
        return decision
    for write in plan.writes:
        try:
            await _write(state, name, write.verb, write.name, write.payload,
                         resource_version=write.resource_version)
        except ApiException as err:
            if err.status in STALE:
                state.overlay.discard(name, write.name)
            return decision.publish_failed(write, kube.api_error_message(err),
                                           retry=_retryable(err))
    if plan.writes:
        log.info("published", inventory=name, pool=pool.name, generation=plan.pool.generation,
                 slices=len(plan.slice_names), writes=len(plan.writes))
    return decision


async def _write(state: OperatorState, inventory: str, verb: str, name: str,
                 body: bytes | None = None, *, resource_version: str | None = None
                 ) -> None:
    """One slice write, remembered in the overlay until the watch sees it.

    Raises:
        ApiException: the API server refused it.
        ValueError: a create or update without a body.
    """
    if verb == "delete":
        await kube.delete_resource_slice(state.api, name, resource_version)
        state.overlay.record(inventory, name, None)
    elif body is None:
        raise ValueError(f"{verb} of ResourceSlice {name} without a body")
    elif verb == "update":
        state.overlay.record(inventory, name,
                             await kube.replace_resource_slice(state.api, name, body))
    else:
        state.overlay.record(inventory, name, await kube.create_resource_slice(state.api, body))
    state.slice_writes += 1


STALE = (404, 409)
"""Answers to a slice write that mean the operator's view of the slice was stale (it is gone,
or changed): the next reconcile, from the watched state, fixes it."""


def _retryable(err: ApiException) -> bool:
    """Stale views (404, 409), throttling and server errors pass; other client errors (an
    invalid slice) need a change of the inventory, which triggers a reconcile anyway."""
    return err.status in (*STALE, 429) or (err.status or 500) >= 500


async def _attach(state: OperatorState, claim: dict[str, Any],
                  results: list[dict[str, Any]]) -> dict[DeviceKey, AttachResult]:
    """Run the attach step for every result with binding conditions it has not answered yet
    (KEP-5007). An answer is remembered per allocation (``allocationTimestamp``): the cached
    claim may not show the conditions just written, and asking the attacher again could then
    replace a failure by a later success in the same write, hiding it from kube-scheduler."""
    meta = claim["metadata"]
    allocation = (claim.get("status") or {}).get("allocation") or {}
    allocated_at = str(allocation.get("allocationTimestamp") or "")
    remembered = state.attach_outcomes.setdefault((meta["namespace"], meta["name"]), {})
    for stale in [m for m in remembered if m[0] != allocated_at]:
        del remembered[stale]  # a new allocation: attach again
    existing = {(d["driver"], d["pool"], d["device"], d.get("shareID")): d.get("conditions")
                for d in (claim.get("status") or {}).get("devices") or []}
    attached: dict[DeviceKey, AttachResult] = {}
    for r in results:
        key: DeviceKey = (r["driver"], r["pool"], r["device"], r.get("shareID"))
        known = remembered.get((allocated_at, *key))
        if known is not None and known.state != "Pending":
            attached[key] = known
            continue
        if not r.get("bindingConditions") or attach_decided(r, existing.get(key) or []):
            continue
        attached[key] = await state.attacher.attach(AttachRequest(
            namespace=meta["namespace"], claim=meta["name"], claim_uid=meta["uid"],
            request=r["request"], driver=r["driver"], pool=r["pool"], device=r["device"]))
        remembered[(allocated_at, *key)] = attached[key]
        log.info("attach step", claim=f"{meta['namespace']}/{meta['name']}",
                 device=f"{r['pool']}/{r['device']}", state=attached[key].state,
                 message=attached[key].message)
    return attached


async def reconcile_claim(state: OperatorState, namespace: str, name: str) -> None:
    """Write the ``Ready`` condition of every kubedra device in the claim's allocation.

    Raises:
        ApiException: the status write failed (the caller retries with back-off).
    """
    claim = state.claim_overlay.merge((namespace, name), state.view.claim(namespace, name))
    if claim is None:  # deleted or deallocated (only allocated claims are cached)
        state.refused_claims = {k for k in state.refused_claims if k[:2] != (namespace, name)}
        state.attach_outcomes.pop((namespace, name), None)
        return
    results = [r for r in allocation_results(claim)
               if state.inventory_for_pool(r["driver"], r["pool"])]
    refusal_key = (namespace, name, claim["metadata"].get("uid", ""))
    if not results or refusal_key in state.refused_claims:
        return

    def lookup(driver: str, pool: str) -> tuple[str | None, PublishedPool | None]:
        inventory = state.inventory_for_pool(driver, pool)
        return inventory, state.pools[inventory] if inventory else None

    attached = await _attach(state, claim, results)
    decision = decide_claim(claim, results, lookup, timestamp(utcnow()), attached)
    pending = [f"{k[1]}/{k[2]}" for k, outcome in attached.items() if outcome.state == "Pending"]
    if decision.entries is None:
        if pending:
            raise Retry(f"attaching {', '.join(pending)}")
        return
    try:
        stored = await kube.apply_claim_device_status(state.api, namespace, name,
                                                      [e.to_api() for e in decision.entries],
                                                      OPERATOR_FIELD_MANAGER)
    except ApiException as err:
        if not kube.refuses_claim_status_writes(err):
            raise
        log.warning("the API server refuses status writes to this claim (its opaque config is "
                    "not canonical JSON); status.devices left unchanged",
                    claim=f"{namespace}/{name}")
        state.refused_claims.add(refusal_key)  # no write can succeed while the claim exists
        return
    state.claim_overlay.record((namespace, name), stored,
                               quiet=claim_inputs_unchanged(claim, stored))
    if pending:  # check on the attach step again, with back-off
        raise Retry(f"attaching {', '.join(pending)}")
    key = ("ResourceClaim", f"{namespace}/{name}")
    if decision.problems and state.announced.get(key) != decision.event_message:
        state.announced[key] = decision.event_message
        await kube.post_event(state.api, claim, event_type="Warning", reason=EVENT_REASON,
                              message=decision.event_message, component=OPERATOR_COMPONENT)
