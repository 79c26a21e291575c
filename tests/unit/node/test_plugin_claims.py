"""The node's checks of a fetched claim, with the exact messages the kubelet gets."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import ResourceClaim
from kubedra.node.claims import ClaimError, allocated_devices

DRIVER = "gpu.kubedra.io"
DEVICES = {f"gpu-{n}": InventoryDevice(name=f"gpu-{n}") for n in range(10)}
DEVICES["gpu-5"] = InventoryDevice(name="gpu-5", health="Unhealthy",
                                   health_message="XID 79: fallen off the bus")


def claim(results: list[dict[str, str]] | None, uid: str = "u1") -> ResourceClaim:
    status: dict[str, Any] = {}
    if results is not None:
        status = {"allocation": {"devices": {"results": results}}}
    return ResourceClaim.from_api({"metadata": {"namespace": "ns", "name": "c", "uid": uid},
                                   "status": status})


def result(device: str, pool: str = "node-1", driver: str = DRIVER,
           request: str = "gpu") -> dict[str, str]:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


def test_our_results_in_order_others_skipped() -> None:
    found = allocated_devices(claim([result("gpu-1"), result("nic-0", driver="pci.kubedra.io"),
                                     result("gpu-0", request="gpu/big")]),
                              "u1", DRIVER, "node-1", DEVICES)
    assert [(a.result.device, a.result.request, a.device.name) for a in found] == [
        ("gpu-1", "gpu", "gpu-1"), ("gpu-0", "gpu/big", "gpu-0")]


@pytest.mark.parametrize(("value", "reason", "message"), [
    (claim([result("gpu-0")], uid="u2"), "Replaced",
     "claim ns/c has UID u2, not u1: it was deleted and created again"),
    (claim(None), "NotAllocated", "claim ns/c is not allocated"),
    (claim([result("nic-0", pool="node-1", driver="pci.kubedra.io")]), "NoDeviceOfDriver",
     "claim ns/c has no device of driver gpu.kubedra.io (allocated: "
     "pci.kubedra.io/node-1/nic-0)"),
    (claim([]), "NoDeviceOfDriver",
     "claim ns/c has no device of driver gpu.kubedra.io (allocated: none)"),
    (claim([result("gpu-0", pool="node-2")]), "WrongPool",
     "device node-2/gpu-0 (request gpu) of claim ns/c is not on this node, whose pool is node-1"),
    (claim([result("gpu-42")]), "UnknownDevice",
     "device node-1/gpu-42 (request gpu) of claim ns/c does not exist on this node "
     "(10 devices: gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7, ...)"),
    (claim([result("gpu-5")]), "UnhealthyDevice",
     "device node-1/gpu-5 (request gpu) of claim ns/c is Unhealthy: XID 79: fallen off the bus"),
    (claim([result("gpu-42"), result("gpu-0"), result("gpu-5", request="b")]), "UnknownDevice",
     "device node-1/gpu-42 (request gpu) of claim ns/c does not exist on this node "
     "(10 devices: gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7, ...); "
     "device node-1/gpu-5 (request b) of claim ns/c is Unhealthy: XID 79: fallen off the bus"),
])
def test_bad_claims(value: ResourceClaim, reason: str, message: str) -> None:
    with pytest.raises(ClaimError) as raised:
        allocated_devices(value, "u1", DRIVER, "node-1", DEVICES)
    assert (raised.value.reason, str(raised.value)) == (reason, message)


def test_node_without_devices() -> None:
    with pytest.raises(ClaimError) as raised:
        allocated_devices(claim([result("gpu-0")]), "u1", DRIVER, "node-1", {})
    assert str(raised.value) == ("device node-1/gpu-0 (request gpu) of claim ns/c does not "
                                 "exist on this node (0 devices: none)")
