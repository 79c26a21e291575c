"""The state of one search over one node and the checks it makes of each device, written once.

The search (:mod:`kubedra.allocation.allocator`) and its diagnosis
(:mod:`kubedra.allocation.diagnosis`) both call these checks. The search applies them cheapest
first, as upstream's ``allocateOne``/``allocateDevice`` do (in use, selectable, capacity, then
counters, taints and constraints when the device is picked); a device fits only when it passes
all of them, so the order changes no decision, only which error surfaces first, and that is
upstream's order. The diagnosis applies them in funnel order (:func:`first_failed_stage`, the
stages of :mod:`kubedra.allocation.funnel`), so that each count of its funnel is of devices that
passed every check before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubedra.allocation.capacity import CapacityError, Consumption, fits, static_consumption
from kubedra.allocation.constraints import Constraint
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.funnel import FITS, Stage
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.pools import DeviceEntry, NodePools, Pool
from kubedra.allocation.quantities import Number
from kubedra.allocation.requests import RequestData
from kubedra.allocation.results import Pick
from kubedra.allocation.selectors import SelectorError, SelectorSet
from kubedra.allocation.snapshot import ResourceSnapshot
from kubedra.allocation.state import AllocatedState, DeviceID
from kubedra.allocation.taints import tolerated
from kubedra.allocation.versions import (
    CAPACITY_AMOUNTS_CHECKED,
    CAPACITY_NAMES_QUALIFIED,
    NEGATIVE_CAPACITY_REQUEST_IS_ERROR,
    SHARE_WITHOUT_CAPACITY_IS_IN_USE,
    SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY,
    SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE,
)
from kubedra.api.resource import ResourceClaim

CounterSets = dict[str, dict[str, Number]]
"""Counter set name → counter name → amount."""

class SearchState:
    """What one search over one node knows and has picked so far, and the per-device checks.

    Args:
        snapshot: slices, classes and taint rules.
        allocated: devices in use by allocated claims.
        available_counters: a pool's counters left after the allocated devices, and whether any
            is negative (the allocator's cache, see :meth:`Allocator.available_counters`).
        node: the node searched.
        claims: the claims to allocate together, in order.
    """

    def __init__(self, snapshot: ResourceSnapshot, allocated: AllocatedState,
                 available_counters: Callable[[Pool], tuple[CounterSets, bool]],
                 node: NodeInfo, claims: Sequence[ResourceClaim]) -> None:
        self.snapshot = snapshot
        self.features = snapshot.features
        self.allocated = allocated
        self.shares_without_capacity = snapshot.features.version.follows(
            SHARE_WITHOUT_CAPACITY_IS_IN_USE)
        """Whether shares without consumed capacity make a device in use (the minor's rule)."""
        self.shared_not_exclusive = snapshot.features.version.follows(
            SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY)
        """Whether a device with shares is refused to a request that would take it exclusively
        (the minor's rule)."""
        self.qualified_capacity = snapshot.features.version.follows(CAPACITY_NAMES_QUALIFIED)
        """Whether capacity names resolve to fully qualified names (the minor's rule)."""
        self.negative_refused = snapshot.features.version.follows(
            NEGATIVE_CAPACITY_REQUEST_IS_ERROR)
        self.skipping_not_allocatable = snapshot.features.variant == "incubating" and \
            snapshot.features.version.follows(SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE)
        """Whether a device of a slice with ``skipNodeOperations`` is refused (the minor's
        rule, where the incubating variant is named: 1.38's default is the stable one)."""
        self.available_counters = available_counters
        self.node = node
        self.claims = list(claims)
        self.pools: NodePools = snapshot.node_pools(node)
        self.requests: list[list[list[RequestData]]] = []
        """Per claim, per request, the request or its subrequests (``firstAvailable``)."""
        self.constraints: list[list[Constraint]] = []
        self.picks: list[list[Pick]] = [[] for _ in self.claims]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Number]] = {}
        self.consumed_counters: dict[tuple[str, str], CounterSets] = {}

    def selectable(self, data: RequestData, device: DeviceEntry) -> bool:
        """Selectors, binding conditions and per-device node selection (``isSelectable``).

        Raises:
            AllocationError: a selector or node selector fails.
        """
        found = data.selectable.get(device.uid)
        if found is not None:
            return found
        if not self.features.device_binding_and_status and device.binding_conditions:
            data.selectable[device.uid] = False
            return False
        outcome = data.selectors.outcome(device)
        if isinstance(outcome, SelectorError):
            raise outcome.in_context(data.class_name, data.claim_label, device)
        if outcome and device.slice.per_device:
            outcome = device.node_selection.matches(self.node)
        data.selectable[device.uid] = outcome
        return outcome

    def consumption(self, data: RequestData, device: DeviceEntry) -> Consumption | None:
        """What the request would consume from the device's capacities (static part).

        Raises:
            AllocationError: an unrepresentable or negative amount.
        """
        cached = data.consumption
        if device.uid in cached:  # a miss (the first claim's every device) raises nothing
            return cached[device.uid]
        try:
            found = static_consumption(
                data.capacity, device.capacity, self.features.fractional_capacity_range,
                checked=self.features.version.follows(CAPACITY_AMOUNTS_CHECKED),
                driver=device.driver if self.qualified_capacity else None,
                negative_refused=self.negative_refused)
        except CapacityError as err:
            raise data.capacity_error(device, err) from None
        cached[device.uid] = found
        return found

    def capacity_fits(self, data: RequestData, device: DeviceEntry) -> bool:
        """``CmpRequestOverCapacity``: static consumption plus what is in use.

        Raises:
            AllocationError: an unrepresentable or negative amount.
        """
        cached = data.consumption
        consumption = cached[device.uid] if device.uid in cached else \
            self.consumption(data, device)
        if consumption is None:
            return False
        if not consumption:
            return True
        return fits(consumption, self.allocated.consumed_capacity.get(device.id),
                    self.allocating_capacity.get(device.id),
                    driver=device.driver if self.qualified_capacity else None)

    def has_shares(self, device_id: DeviceID) -> bool:
        """``deviceCapacityInUse``: shares of the device are allocated (those without consumed
        capacity counted as the minor's rule says) or being allocated in this search."""
        return device_id in self.allocating_capacity or self.allocated.has_shares(
            device_id, without_capacity=self.shares_without_capacity)

    def in_use(self, data: RequestData, device_id: DeviceID, ci: int) -> bool:
        """The cheap "in use" test of the device loop."""
        if data.admin_access:
            claims = self.allocating.get(device_id)
            return claims is not None and ci in claims
        return device_id in self.allocated.devices or bool(self.allocating.get(device_id))

    def reserve_counters(self, device: DeviceEntry, pool: Pool) -> bool:
        """Take the device's counters from its pool for this search; False (nothing taken)
        when they are not left."""
        available, overdrawn = self.available_counters(pool)
        consumed = self.consumed_counters.setdefault(pool.key, {})
        for set_name, counters in device.consumes:
            used = consumed.setdefault(set_name, {})
            for name, amount in counters:
                used[name] = used.get(name, 0) + amount
        ok = not overdrawn
        if ok:
            for set_name, counters in device.consumes:
                left, used = available.get(set_name), consumed[set_name]
                if left is not None and any(name in left and used[name] > left[name]
                                            for name, _ in counters):
                    ok = False
                    break
        if not ok:
            self.release_counters(device, pool)
        return ok

    def release_counters(self, device: DeviceEntry, pool: Pool) -> None:
        """Give back what :meth:`reserve_counters` took."""
        consumed = self.consumed_counters[pool.key]
        for set_name, counters in device.consumes:
            used = consumed[set_name]
            for name, amount in counters:
                used[name] -= amount

    def tainted(self, data: RequestData, device: DeviceEntry) -> bool:
        """Whether the device has a ``NoSchedule``/``NoExecute`` taint the request does not
        tolerate."""
        return any(not tolerated(taint, data.tolerations) for taint in device.blocking_taints())


def _passes(selectors: SelectorSet, data: RequestData, device: DeviceEntry,
            errors: list[str]) -> bool:
    """Whether the device passes ``selectors``; an error is recorded as upstream words it,
    a compile error (the selector's, not the device's) only once."""
    outcome = selectors.outcome(device)
    if isinstance(outcome, SelectorError):
        text = str(outcome.in_context(data.class_name, data.claim_label, device))
        if text not in errors:
            errors.append(text)
        return False
    return outcome


def first_failed_stage(search: SearchState, data: RequestData, ci: int, device: DeviceEntry,
                       pool: Pool, class_only: SelectorSet, request_only: SelectorSet,
                       errors: list[str]) -> Stage | str:
    """The first stage (:class:`~kubedra.allocation.funnel.Stage`) that ``device`` fails for
    request ``data`` of claim ``ci``, or :data:`~kubedra.allocation.funnel.FITS`. Errors
    (selector, node selector, capacity) count as failing that stage and are appended to
    ``errors``.

    ``class_only`` and ``request_only`` split the request's selectors, so that the class and the
    request's own selectors are told apart.
    """
    features = search.features
    if not _passes(class_only, data, device, errors):
        return Stage.IN_CLASS
    if not features.device_binding_and_status and device.binding_conditions:
        return Stage.MATCH_REQUEST
    if search.skipping_not_allocatable and device.slice.skips_node_operations:
        return Stage.MATCH_REQUEST  # a feature the scheduler has off, as binding conditions
    if not _passes(request_only, data, device, errors):
        return Stage.MATCH_REQUEST
    try:
        if device.slice.per_device and not device.node_selection.matches(search.node):
            return Stage.MATCH_REQUEST
    except AllocationError as err:
        errors.append(f"device {device}: {err}")
        return Stage.MATCH_REQUEST
    if search.in_use(data, device.id, ci):
        return Stage.FREE
    shared = features.consumable_capacity and device.allow_multiple
    if not (data.admin_access or shared) and search.shared_not_exclusive \
            and search.has_shares(device.id):
        return Stage.FREE
    if features.consumable_capacity:
        try:
            if not search.capacity_fits(data, device):
                return Stage.CAPACITY
        except AllocationError as err:
            errors.append(str(err))
            return Stage.CAPACITY
    if device.consumes_counters and not (shared and search.allocated.has_shares(device.id)):
        # a further share of an allocated device consumes no more counters (_allocate_device)
        if not features.partitionable_devices:
            return Stage.COUNTERS
        available, overdrawn = search.available_counters(pool)
        if overdrawn or any(amount > available.get(set_name, {}).get(name, amount)
                            for set_name, counters in device.consumes
                            for name, amount in counters):
            return Stage.COUNTERS
    if features.device_taints and any(True for _ in device.blocking_taints()) \
            and search.tainted(data, device):
        return Stage.UNTAINTED
    return FITS
