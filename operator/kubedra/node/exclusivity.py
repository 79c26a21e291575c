"""Which prepared claim stands in the way of preparing a device: exclusivity by what devices
share, not by their names.

The scheduler may allocate a device again as soon as a force-deleted pod's claim is gone from
the API, while the kubelet has not unprepared it yet (kubernetes#141471): the node is the last
line of defence against two workloads on one piece of hardware. Devices that are not the same
can still be the same hardware: a MIG partition and its whole GPU, or two partitions whose
placements overlap, consume the same shared counters of their pool (KEP-4815). The rule the
scheduler applies to allocation, that no counter of a counter set may be consumed beyond its
value by the allocated devices together (``checkAvailableCounters`` in
``k8s.io/dynamic-resource-allocation/structured/internal/stable/allocator_stable.go``), is the
rule applied here to what is *prepared* on this node:

- a device is refused while another claim holds the same device (pool and name), or while the
  devices other claims hold and the claim's own devices together consume more of any counter
  of the pool's shared counters than its value, when one of those holders consumes it;
- what the scheduler does not count as allocated does not hold anything here either: results
  with ``adminAccess`` (``foreachAllocatedDevice`` in
  ``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go`` skips them, and
  the allocator hands devices in use to such a request, ``allocateDevice`` in
  ``structured/internal/experimental/allocator_experimental.go``), so an admin-access device
  is never refused and an admin-access holder never refuses;
- shares of a device that allows multiple allocations (results with a ``shareID``, KEP-5075)
  coexist; the device's counters are consumed once, by the device, however many shares hold it
  (the allocator skips the counter check for a further share of a device that has shares, in
  ``allocateDevice`` of the same file).

The kubelet itself never checks this: its DRA manager (``pkg/kubelet/cm/dra/manager.go``)
prepares claims by UID and leaves devices to the driver.

Counters are those the agent publishes: the pool's shared counter sets (``spec.counterSets``
then ``status.discovered.counterSets`` of the inventory, the first of a name wins, as the
operator merges them) and each device's ``consumesCounters``. A held device that is no longer
published (its consumption unknown) is compared by name only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kubedra.api.inventory import InventoryDevice
from kubedra.api.quantity import Quantity
from kubedra.api.resource import CounterSet
from kubedra.node.checkpoint import PreparedClaim, PreparedDevice

CounterKey = tuple[str, str]
"""``(counter set, counter)``."""


@dataclass(frozen=True)
class Conflict:
    """Why ``device`` cannot be prepared now: ``holder`` still has ``held`` prepared.

    ``counter`` is ``None`` when both are the same device, else the shared counter they would
    together overdraw; ``value`` is its value in the pool and ``wanted`` how much the holders
    and the claim would consume together (units of the counter).
    """

    device: PreparedDevice
    holder: PreparedClaim
    held: PreparedDevice
    counter: CounterKey | None = None
    value: Fraction = Fraction(0)
    wanted: Fraction = Fraction(0)

    def message(self, claim: str) -> str:
        """The refusal for the kubelet (and the pod's Events), ``claim`` being
        ``<namespace>/<name>`` of the claim refused: it names the device, the holding claim
        and the device it holds, and what they share."""
        device, held = self.device, self.held
        holder = f"claim {self.holder.namespace}/{self.holder.name} (UID {self.holder.uid})"
        if self.counter is None:
            what = f"is still prepared for {holder}"
        else:
            counter_set, counter = self.counter
            what = (f"shares counter {counter} of counter set {counter_set} "
                    f"({_quantity(self.value)} in all, {_quantity(self.wanted)} wanted) with "
                    f"device {held.pool_name}/{held.device_name}, still prepared for {holder}")
        return (f"device {device.pool_name}/{device.device_name} of claim {claim} {what}; it is "
                "prepared once that claim is unprepared")


def node_devices(declared: Iterable[InventoryDevice],
                 found: Iterable[InventoryDevice]) -> dict[str, InventoryDevice]:
    """A node's devices by name: those its inventory declares (``spec.devices``) first, then
    those the agent found; of two with one name the declared one counts, as the operator
    merges them."""
    devices: dict[str, InventoryDevice] = {}
    for device in [*declared, *found]:
        devices.setdefault(device.name, device)
    return devices


def pool_counters(counter_sets: Iterable[CounterSet]) -> dict[CounterKey, Fraction]:
    """The value of every shared counter of a pool by ``(counter set, counter)``; of two sets
    with one name the first counts (spec before discovered, as the operator publishes)."""
    values: dict[CounterKey, Fraction] = {}
    seen: set[str] = set()
    for counter_set in counter_sets:
        if counter_set.name in seen:
            continue
        seen.add(counter_set.name)
        for name, counter in counter_set.counters.items():
            values[counter_set.name, name] = counter.value.value
    return values


def consumption(device: InventoryDevice | None) -> dict[CounterKey, Fraction]:
    """What a published device consumes, by ``(counter set, counter)`` (empty for None)."""
    consumed: dict[CounterKey, Fraction] = {}
    for entry in (device.consumes_counters or []) if device else []:
        for name, counter in entry.counters.items():
            key = (entry.counter_set, name)
            consumed[key] = consumed.get(key, Fraction(0)) + counter.value.value
    return consumed


def find_conflict(uid: str, wanted: list[PreparedDevice], prepared: Mapping[str, PreparedClaim],
                  *, pool: str, devices: Mapping[str, InventoryDevice],
                  counters: Mapping[CounterKey, Fraction]) -> Conflict | None:
    """The first device of claim ``uid``'s ``wanted`` devices that another prepared claim holds,
    by the rules of this module, or None when all may be prepared.

    Args:
        uid: the claim being prepared (its own record in ``prepared`` is ignored).
        wanted: its devices, in allocation order.
        prepared: the checkpoint's claims by UID (``PrepareStarted`` ones hold their devices
            too: their side effects may have begun).
        pool: this node's pool; only its devices consume its counters.
        devices: the node's published devices by name.
        counters: the pool's shared counters (:func:`pool_counters`).
    """
    holders = [(c, d) for c in prepared.values() if c.uid != uid
               for d in c.devices if not d.admin_access]
    for device in wanted:
        if device.admin_access:
            continue
        for claim, held in holders:
            if ((held.pool_name, held.device_name) == (device.pool_name, device.device_name)
                    and (held.share_id is None or device.share_id is None)):
                return Conflict(device, claim, held)
    return _overdrawn(wanted, holders, pool=pool, devices=devices, counters=counters)


def _overdrawn(wanted: list[PreparedDevice], holders: list[tuple[PreparedClaim, PreparedDevice]],
               *, pool: str, devices: Mapping[str, InventoryDevice],
               counters: Mapping[CounterKey, Fraction]) -> Conflict | None:
    """The first wanted device whose counters, with the holders' and the claim's other devices,
    exceed a counter's value that a holder consumes too (the first such counter by name). Each
    device consumes once (shares of one device included)."""
    held_by: dict[str, tuple[PreparedClaim, PreparedDevice]] = {}
    for claim, held in holders:
        if held.pool_name == pool:
            held_by.setdefault(held.device_name, (claim, held))
    used: dict[CounterKey, Fraction] = {}
    for name in held_by:
        for key, amount in consumption(devices.get(name)).items():
            used[key] = used.get(key, Fraction(0)) + amount
    mine = {d.device_name: d for d in wanted
            if not d.admin_access and d.pool_name == pool and d.device_name not in held_by}
    for name in mine:
        for key, amount in consumption(devices.get(name)).items():
            used[key] = used.get(key, Fraction(0)) + amount
    for name, device in mine.items():
        for key in sorted(consumption(devices.get(name))):
            if used[key] <= counters.get(key, Fraction(0)):
                continue
            for held_name, (claim, held) in held_by.items():
                if key in consumption(devices.get(held_name)):
                    return Conflict(device, claim, held, key, counters.get(key, Fraction(0)),
                                    used[key])
    return None


def _quantity(value: Fraction) -> str:
    return Quantity.from_value(value).canonical()
