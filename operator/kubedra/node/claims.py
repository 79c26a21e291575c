"""Checks a fetched ResourceClaim before this node prepares it: the node's last line of defence.

The kubelet sends only a claim's namespace, name and UID; the plugin reads the claim and checks
that it is allocated, that it is the same object (UID) the kubelet means, and that every
allocation result of our driver names a healthy device in this node's pool. Results of other
drivers are left to them. The kubeletplugin helper of k8s.io/dynamic-resource-allocation
(``kubeletplugin/draplugin.go``, ``getResourceClaims``) does the first two checks for a whole
call at once; kubedra does them per claim, so one bad claim fails alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import DeviceRequestAllocationResult, ResourceClaim

MAX_LISTED_DEVICES = 8
"""How many of the node's device names an "unknown device" error lists."""


class ClaimError(Exception):
    """A claim cannot be prepared or unprepared. ``reason`` is a CamelCase word for metrics
    (``NotFound``, ``Replaced``, ``NotAllocated``, ``NoDeviceOfDriver``, ``WrongPool``,
    ``UnknownDevice``, ``UnhealthyDevice``, ``InvalidConfig``, ``InvalidDevice``, ``MIG``,
    ``DeviceNodeMissing``, ``DeviceInUse``, ``CDIWrite``, ``StatusWrite``, ``APIError``,
    ``Internal``); the message is for people and goes back to the kubelet as the claim's
    error."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class AllocatedDevice:
    """One allocation result of our driver and the node's device it names."""

    result: DeviceRequestAllocationResult
    device: InventoryDevice


def claim_key(namespace: str, name: str) -> str:
    """``<namespace>/<name>``, as messages show a claim."""
    return f"{namespace}/{name}"


def allocated_devices(claim: ResourceClaim, uid: str, driver: str, pool: str,
                      devices: Mapping[str, InventoryDevice]) -> list[AllocatedDevice]:
    """The results of ``driver`` in ``claim``, each with the node's device, in result order.

    Args:
        claim: the claim as just read from the API server.
        uid: the UID the kubelet asked for.
        driver: our driver name.
        pool: this node's pool name.
        devices: the node's devices by name.

    Raises:
        ClaimError: ``Replaced`` (UID differs), ``NotAllocated``, ``NoDeviceOfDriver`` (no
            result of ours), or for the first bad result ``WrongPool``, ``UnknownDevice`` or
            ``UnhealthyDevice``; the message lists every bad result.
    """
    key = claim_key(claim.metadata.namespace or "", claim.metadata.name or "")
    if claim.metadata.uid != uid:
        raise ClaimError("Replaced", f"claim {key} has UID {claim.metadata.uid}, not {uid}: "
                         "it was deleted and created again")
    allocation = claim.status.allocation
    if allocation is None:
        raise ClaimError("NotAllocated", f"claim {key} is not allocated")
    results = allocation.devices.results if allocation.devices else None
    ours = [r for r in results or [] if r.driver == driver]
    if not ours:
        others = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for r in results or []) or "none"
        raise ClaimError("NoDeviceOfDriver",
                         f"claim {key} has no device of driver {driver} (allocated: {others})")
    found: list[AllocatedDevice] = []
    problems: list[tuple[str, str]] = []
    for r in ours:
        where = f"device {r.pool}/{r.device} (request {r.request}) of claim {key}"
        device = devices.get(r.device)
        if r.pool != pool:
            problems.append(("WrongPool", f"{where} is not on this node, whose pool is {pool}"))
        elif device is None:
            names = sorted(devices)
            listed = ", ".join(names[:MAX_LISTED_DEVICES]) + (
                ", ..." if len(names) > MAX_LISTED_DEVICES else "")
            problems.append(("UnknownDevice", f"{where} does not exist on this node "
                             f"({len(names)} devices: {listed or 'none'})"))
        elif device.health != "Healthy":
            why = f": {device.health_message}" if device.health_message else ""
            problems.append(("UnhealthyDevice", f"{where} is {device.health}{why}"))
        else:
            found.append(AllocatedDevice(r, device))
    if problems:
        raise ClaimError(problems[0][0], "; ".join(message for _, message in problems))
    return found
