"""What is already allocated in the cluster, as the scheduler hands it to the allocator.

The scheduler keeps this in its ``allocatedDevices`` cache, filled by ``foreachAllocatedDevice``
(``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go``) and read by
``GatherAllocatedState`` (``dra_manager.go``):

- results with ``adminAccess: true`` do not count as allocated;
- with consumable capacity on, a result with a ``shareID`` is a share of a device (its
  ``consumedCapacity`` is summed per device); every other result takes the device exclusively;
- with consumable capacity off, every result takes its device exclusively.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubedra.allocation.quantities import Number, number
from kubedra.api.resource import AllocationResult, ResourceClaim

DeviceID = tuple[str, str, str]
"""``(driver, pool, device)``."""

_NONE: set[str] = set()


@dataclass(slots=True)
class AllocatedState:
    """Devices in use by claims that are allocated already (``structured.AllocatedState``).

    Attributes:
        devices: devices allocated exclusively.
        shared_devices: devices with at least one share (result with a ``shareID``).
        consumed_capacity: per shared device, the capacity its shares consume, summed per
            capacity name (exact numbers: bytes for memory).
        by_pool: per (driver, pool), the names of its devices that are taken or shared.
    """

    devices: set[DeviceID] = field(default_factory=set)
    shared_devices: set[DeviceID] = field(default_factory=set)
    consumed_capacity: dict[DeviceID, dict[str, Number]] = field(default_factory=dict)
    by_pool: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim], *,
                    consumable_capacity: bool = True) -> AllocatedState:
        """The state of the given claims' ``status.allocation`` (unallocated claims add nothing).

        ``consumable_capacity`` is the ``DRAConsumableCapacity`` gate of the scheduler.
        """
        state = cls()
        for claim in claims:
            state.add(claim, consumable_capacity=consumable_capacity)
        return state

    def add(self, claim: ResourceClaim, *, consumable_capacity: bool = True) -> None:
        """Record the devices of one claim's allocation."""
        if claim.status.allocation is not None:
            self.add_allocation(claim.status.allocation, consumable_capacity=consumable_capacity)

    def add_allocation(self, allocation: AllocationResult, *,
                       consumable_capacity: bool = True) -> None:
        """Record the devices of one allocation result (as :meth:`add`)."""
        if allocation.devices is None:
            return
        for result in allocation.devices.results or ():
            if result.admin_access:
                continue
            device_id = (result.driver, result.pool, result.device)
            self.by_pool.setdefault((result.driver, result.pool), set()).add(result.device)
            if consumable_capacity and result.share_id is not None:
                self.shared_devices.add(device_id)
                if result.consumed_capacity is not None:
                    consumed = self.consumed_capacity.setdefault(device_id, {})
                    for name, quantity in result.consumed_capacity.items():
                        consumed[name] = consumed.get(name, 0) + number(quantity)
                continue
            self.devices.add(device_id)

    def in_pool(self, pool: tuple[str, str]) -> set[str]:
        """Names of the devices of a pool that are taken or shared (``IsDeviceAllocated``)."""
        return self.by_pool.get(pool, _NONE)

    def has_shares(self, device_id: DeviceID, *, without_capacity: bool = True) -> bool:
        """Whether shares of the device exist already (part of ``deviceCapacityInUse``);
        ``without_capacity``: whether shares that consume no capacity count (from 1.37,
        :data:`~kubedra.allocation.versions.SHARE_WITHOUT_CAPACITY_IS_IN_USE`)."""
        return device_id in self.consumed_capacity or (
            without_capacity and device_id in self.shared_devices)
