"""Reconcile one ResourceClaim: report on the devices of kubedra's drivers in its allocation.

For each allocated device of a pool that a DeviceInventory publishes, the operator writes a
``status.devices`` entry (server-side apply, field manager ``kubedra-operator``) with a
``Ready`` condition (KEP-4817, ``DRAResourceClaimDeviceStatus``):

* ``True``, reason ``Allocated``: the device is published and healthy;
* ``False``, reason ``DeviceNotFound``: the pool no longer has the device (or is withdrawn);
* ``False``, reason ``DeviceDisabled``: an override disables the device;
* ``False``, reason ``DeviceUnhealthy``: the agent reports the device unhealthy.

A ``False`` condition also gets a Warning Event on the claim. The node agent writes its own
``Prepared`` condition on the same entries with another field manager; neither touches the
other's fields. kube-scheduler and kube-controller-manager own ``allocation`` and
``reservedFor``; kubedra never writes them.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiException

from kubedra import kube
from kubedra.api.inventory import OPERATOR_FIELD_MANAGER
from kubedra.controller.conditions import get_condition, set_condition
from kubedra.controller.state import OperatorState, allocation_results, timestamp, utcnow
from kubedra.logging import get_logger

COMPONENT = "kubedra-operator"
log = get_logger(__name__)


def _device_condition(state: OperatorState, result: dict[str, Any]) -> tuple[bool, str, str]:
    """(ok, reason, message) of one allocation result of a kubedra pool."""
    inventory = state.inventory_for_pool(result["driver"], result["pool"])
    device = result["device"]
    published = state.pools[inventory] if inventory else None
    if published is None or published.withdrawn:
        return (False, "DeviceNotFound",
                f"pool {result['pool']} of {result['driver']} is not published; device "
                f"{device} cannot be used until its node agent reports again")
    draining = published.draining.get(device)
    if draining == "disabled":
        return (False, "DeviceDisabled",
                f"device {device} of pool {result['pool']} is disabled by an override in "
                f"DeviceInventory {inventory}; it stays published, tainted, until released")
    health, health_message = published.health.get(device, ("Missing", None))
    if draining or health == "Missing" or device not in {d.name for d in published.pool.devices}:
        return (False, "DeviceNotFound",
                f"pool {result['pool']} (DeviceInventory {inventory}) no longer has device "
                f"{device}")
    if health == "Unhealthy":
        return (False, "DeviceUnhealthy",
                f"device {device} in pool {result['pool']} is unhealthy: "
                f"{health_message or 'reported by the node agent'}")
    return (True, "Allocated",
            f"device {device} of pool {result['pool']} (DeviceInventory {inventory}) is "
            f"allocated to request {result['request']}")


async def reconcile_claim(state: OperatorState, namespace: str, name: str) -> None:
    """Write the ``Ready`` condition of every kubedra device in the claim's allocation.

    Raises:
        ApiException: the status write failed (the caller retries with back-off).
    """
    claim = state.view.claim(namespace, name)
    if claim is None:  # deleted or deallocated (only allocated claims are cached)
        state.refused_claims = {k for k in state.refused_claims if k[:2] != (namespace, name)}
        return
    status = claim.get("status") or {}
    results = [r for r in allocation_results(claim)
               if state.inventory_for_pool(r["driver"], r["pool"])]
    refusal_key = (namespace, name, claim["metadata"].get("uid", ""))
    if not results or refusal_key in state.refused_claims:
        return
    existing = {(d["driver"], d["pool"], d["device"], d.get("shareID")): d
                for d in status.get("devices") or []}
    now = timestamp(utcnow())
    entries, changed, problems = [], False, []
    for result in results:
        key = (result["driver"], result["pool"], result["device"], result.get("shareID"))
        ok, reason, message = _device_condition(state, result)
        before = get_condition(existing.get(key, {}).get("conditions"), "Ready")
        ours = [c for c in existing.get(key, {}).get("conditions") or [] if c["type"] == "Ready"]
        conditions = set_condition(ours, type_="Ready", status=ok, reason=reason,
                                   message=message, now=now)
        if before is None or (before["status"], before["reason"], before["message"]) != (
                conditions[-1]["status"], reason, message):
            changed = True
        entry: dict[str, Any] = {"driver": key[0], "pool": key[1], "device": key[2],
                                 "conditions": conditions}
        if key[3]:
            entry["shareID"] = key[3]
        entries.append(entry)
        if not ok:
            problems.append(message)
    if not changed:
        return
    try:
        await kube.apply_claim_device_status(state.api, namespace, name, entries,
                                             OPERATOR_FIELD_MANAGER)
    except ApiException as err:
        if not kube.refuses_claim_status_writes(err):
            raise
        log.warning("the API server refuses status writes to this claim (its opaque config is "
                    "not canonical JSON); status.devices left unchanged",
                    claim=f"{namespace}/{name}")
        state.refused_claims.add(refusal_key)  # no write can succeed while the claim exists
        return
    signature = "; ".join(problems)
    if problems and state.announced.get(("ResourceClaim", f"{namespace}/{name}")) != signature:
        state.announced[("ResourceClaim", f"{namespace}/{name}")] = signature
        await kube.post_event(state.api, claim, event_type="Warning",
                              reason="DeviceNotReady", message=signature, component=COMPONENT)
