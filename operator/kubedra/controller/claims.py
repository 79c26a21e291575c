"""What to write into one ResourceClaim: the state of the devices of kubedra's drivers in its
allocation — decided by pure functions; :mod:`.executor` acts.

For each allocated device of a pool that a DeviceInventory publishes, the operator writes a
``status.devices`` entry (server-side apply, field manager ``kubedra-operator``) with a
``Ready`` condition (KEP-4817, ``DRAResourceClaimDeviceStatus``):

* ``True``, reason ``Allocated``: the device is published and healthy;
* ``False``, reason ``DeviceNotFound``: the pool no longer has the device (or is withdrawn),
  or the cluster cannot carry it and it is left out of the slices (the message says why);
* ``False``, reason ``DeviceDisabled``: an override disables the device;
* ``False``, reason ``DeviceUnhealthy``: the agent reports the device unhealthy.

A device with binding conditions (KEP-5007; network-attached pools) also gets, after the
operator's attach step (:mod:`kubedra.binding.attach`), its ``bindingConditions`` ``True``
(attached) or its ``bindingFailureConditions`` ``True`` (failed), which kube-scheduler waits
for in PreBind. A ``False`` ``Ready`` condition also gets a Warning Event on the claim. The
node agent writes its own ``Prepared`` condition on the same entries with another field
manager; neither touches the other's fields. kube-scheduler and kube-controller-manager own
``allocation`` and ``reservedFor``; kubedra never writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubedra.api.resource import AllocatedDeviceStatus, Condition
from kubedra.binding.attach import (
    AttachResult,
    BindingCondition,
    binding_conditions,
    binding_types,
)
from kubedra.controller.conditions import get_condition, set_condition
from kubedra.controller.state import PublishedPool, stable_metadata

DeviceReason = Literal["Allocated", "DeviceNotFound", "DeviceDisabled", "DeviceUnhealthy"]
"""Reasons of a device's ``Ready`` condition."""

EVENT_REASON = "DeviceNotReady"
"""Reason of the Warning Event posted when a device of the claim is not ready."""

LEAVING_WHY: Mapping[str, str] = {
    "gone": "the node agent no longer reports it",
    "deleted": "the DeviceInventory is deleted",
    "withdrawn": "the pool is withdrawn",
}
"""Why a device a claim holds left its pool, by the value of its ``kubedra.io/draining`` taint
(``disabled`` has a reason of its own, ``DeviceDisabled``)."""

DeviceKey = tuple[str, str, str, str | None]
"""(driver, pool, device, shareID) of an allocated device."""

PoolLookup = Callable[[str, str], tuple[str | None, PublishedPool | None]]
"""(driver, pool) → the inventory that publishes it and what it last published."""


@dataclass(frozen=True)
class DeviceCondition:
    """The ``Ready`` condition of one allocated device."""

    ok: bool
    reason: DeviceReason
    message: str


@dataclass(frozen=True)
class ClaimDecision:
    """The ``status.devices`` entries to apply (None: nothing changed, no write) and the
    problems to announce in one Warning Event (empty: none)."""

    entries: list[AllocatedDeviceStatus] | None
    problems: list[str]

    @property
    def event_message(self) -> str:
        """The Warning Event's message: the problems, joined."""
        return "; ".join(self.problems)


def device_condition(result: Mapping[str, Any], inventory: str | None,
                     published: PublishedPool | None) -> DeviceCondition:
    """The condition of one allocation result of a kubedra pool, published by ``inventory``
    (``published``: what it last published; None when nothing)."""
    device = result["device"]
    if published is None or published.withdrawn:
        return DeviceCondition(
            False, "DeviceNotFound",
            f"pool {result['pool']} of {result['driver']} is not published; device {device} "
            "cannot be used until its node agent reports again")
    draining = published.draining.get(device)
    left_out = published.left_out.get(device) if device in published.disabled else None
    if draining == "disabled" or left_out:  # left out: where the cluster drops device taints
        kept = ("it stays published, tainted, until released" if draining else
                f"it is left out of the slices ({left_out})")
        return DeviceCondition(
            False, "DeviceDisabled",
            f"device {device} of pool {result['pool']} is disabled by an override in "
            f"DeviceInventory {inventory}; {kept}")
    health, health_message = published.health.get(device, ("Missing", None))
    if draining or health == "Missing":
        kept = (f" ({LEAVING_WHY.get(draining, draining)}); it stays published, tainted, until "
                "released" if draining else "")
        return DeviceCondition(
            False, "DeviceNotFound",
            f"pool {result['pool']} (DeviceInventory {inventory}) no longer has device "
            f"{device}{kept}")
    if health == "Unhealthy":  # published tainted, or left out where taints are not kept
        return DeviceCondition(
            False, "DeviceUnhealthy",
            f"device {device} in pool {result['pool']} is unhealthy: "
            f"{health_message or 'reported by the node agent'}")
    if device in published.left_out and device not in published.devices:
        return DeviceCondition(  # a refused taint effect None, or counters not kept
            False, "DeviceNotFound",
            f"device {device} of pool {result['pool']} (DeviceInventory {inventory}) is left "
            f"out of the slices ({published.left_out[device]})")
    if device not in published.devices:
        return DeviceCondition(
            False, "DeviceNotFound",
            f"pool {result['pool']} (DeviceInventory {inventory}) no longer has device "
            f"{device}")
    return DeviceCondition(
        True, "Allocated",
        f"device {device} of pool {result['pool']} (DeviceInventory {inventory}) is allocated "
        f"to request {result['request']}")


def decide_claim(claim: Mapping[str, Any], results: Sequence[Mapping[str, Any]],
                 lookup: PoolLookup, now: str,
                 attached: Mapping[DeviceKey, AttachResult] | None = None) -> ClaimDecision:
    """The ``Ready`` condition of every allocation result in ``results`` (those of kubedra's
    pools) of ``claim`` (raw), and the binding conditions of the results the attach step
    answered (``attached``, by device key), written only when one changed status, reason or
    message. Binding conditions set before stay.

    ``now`` is a ``metav1.Time`` string.
    """
    existing = {(d["driver"], d["pool"], d["device"], d.get("shareID")): d
                for d in (claim.get("status") or {}).get("devices") or []}
    entries, changed, problems = [], False, []
    for result in results:
        key = (result["driver"], result["pool"], result["device"], result.get("shareID"))
        condition = device_condition(result, *lookup(result["driver"], result["pool"]))
        types = {"Ready", *binding_types(result)}
        ours = [Condition.from_api(c) for c in existing.get(key, {}).get("conditions") or []
                if c["type"] in types]
        wanted = [BindingCondition("Ready", condition.reason, condition.message)]
        outcome = (attached or {}).get(key)
        if outcome is not None:
            wanted += binding_conditions(result, outcome)
        conditions = ours
        for want in wanted:
            ok = condition.ok if want.type == "Ready" else True
            before = get_condition(conditions, want.type)
            conditions = set_condition(conditions, type_=want.type, status=ok,
                                       reason=want.reason, message=want.message, now=now)
            if before is None or (before.status, before.reason, before.message) != (
                    "True" if ok else "False", want.reason, want.message):
                changed = True
        entries.append(AllocatedDeviceStatus(driver=key[0], pool=key[1], device=key[2],
                                             share_id=key[3] or None, conditions=conditions))
        if not condition.ok:
            problems.append(condition.message)
    return ClaimDecision(entries if changed else None, problems)


def same_inputs(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether claim ``after`` (the object the operator's ``status.devices`` write returned)
    holds what claim ``before`` (the one the reconcile decided from) held of everything but
    ``status.devices``: metadata but its resourceVersion and managedFields, ``spec``, and the
    rest of ``status`` (``allocation``, ``reservedFor``, what kube-scheduler and
    kube-controller-manager write). Then the watch event of ``after`` has nothing to reconcile:
    its allocation, hence the inventories' ``status.allocations``, is unchanged, and its
    ``Ready`` conditions are the ones just decided."""
    def status(obj: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (obj.get("status") or {}).items() if k != "devices"}
    return (stable_metadata(before) == stable_metadata(after)
            and before.get("spec") == after.get("spec") and status(before) == status(after))
