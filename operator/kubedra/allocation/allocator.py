"""The structured allocator: first-fit depth-first search with backtracking.

Same decisions as upstream's incubating allocator (``Allocator.Allocate``, ``allocateOne`` and
``allocateDevice`` in ``structured/internal/incubating/allocator_incubating.go``, v0.37.2):

- claims in order, their requests in order, then one device after the other; devices are tried
  in pool, slice, device order, and within one request only combinations (each next device comes
  after the previous one); the first complete solution wins;
- ``firstAvailable``: subrequests in order; the first for which the *whole remaining search*
  succeeds is chosen. ``All``: exactly the devices fixed up front, or nothing;
- a device is skipped when it is in use (allocated, or being allocated in this run; with
  ``adminAccess`` only a second use within the same claim counts), does not pass the selectors
  (class, request, per-device node selection; with binding conditions while that feature is
  off), cannot hold the requested capacity, lacks counters, carries an untolerated
  ``NoSchedule``/``NoExecute`` taint, or breaks a claim constraint;
- a claim gets at most 32 devices; when a claim's remaining requests cannot fit under that
  limit, the search backs up to the last ``firstAvailable`` choice.

kubedra adds two shortcuts that do not change the first solution (see their docstrings):
before trying devices for a request it counts the devices that could still serve it (free,
selectable, capacity, and sharing the value a ``matchAttribute`` constraint fixed or could still
fix) and cuts the branch when too few remain (``_cannot_complete``); and when a search over
several claims runs long, it checks whether a later claim fits even on its own, and stops if
not (``later_claim_impossible``).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from kubedra.allocation.capacity import fits
from kubedra.allocation.checks import CounterSets, SearchState
from kubedra.allocation.constraints import (
    MISSING,
    Constraint,
    DistinctAttribute,
    MatchAttribute,
    lookup_attribute,
)
from kubedra.allocation.diagnosis import diagnose_search
from kubedra.allocation.errors import AllocationError, AllocationFailed
from kubedra.allocation.funnel import RequestDiagnosis
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.pools import DeviceEntry, Pool
from kubedra.allocation.quantities import Number
from kubedra.allocation.requests import ALLOCATION_RESULTS_MAX_SIZE, ClaimPlan, RequestData
from kubedra.allocation.results import Pick, build_allocation
from kubedra.allocation.snapshot import ResourceSnapshot
from kubedra.allocation.state import AllocatedState
from kubedra.allocation.versions import (
    ALL_KEEPS_DEVICES_WITHOUT_ROOM,
    ALL_SUBREQUEST_KEEPS_ITS_INDEX,
    ALL_UNUSABLE_POOL_FAILS_ON_NODE,
    INVALID_POOL_SKIPPED,
    VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR,
    VERSIONS_COMPARED_BY_PRECEDENCE,
)
from kubedra.api.quantity import Quantity
from kubedra.api.resource import AllocationResult, ResourceClaim


class Outcome(enum.IntEnum):
    """How one step of the search ends."""

    FAIL = 0
    """No solution in this branch."""
    DONE = 1
    """A solution: every claim has its devices."""
    TOO_MANY = 2
    """The claim would get more than 32 devices (back up to the last ``firstAvailable``)."""


class SearchPoint(NamedTuple):
    """A position in the search: claim, request, subrequest (``firstAvailable`` alternative)
    and the number of devices found for it; compared in that order, deeper is greater."""

    claim: int
    request: int
    subrequest: int
    devices: int


_FAIL, _DONE, _TOO_MANY = Outcome.FAIL, Outcome.DONE, Outcome.TOO_MANY
"""The outcomes bound to module names: the search compares them at every step, and a module
global is read faster than an enum class attribute (about 50 ns against 150 ns)."""

_HOPELESS_CHECK_AFTER = 4096
"""Search steps after which a search over several claims checks whether a later claim could
fit at all (see :meth:`_Search.later_claim_impossible`)."""

class Allocator:
    """Allocates claims from a snapshot, given what is allocated already.

    Like upstream's ``NewAllocator`` result, one Allocator serves many :meth:`allocate` calls
    (one per node) for the same allocated state; it caches the counters left in each pool.

    Args:
        snapshot: slices, classes and taint rules.
        allocated: devices in use by allocated claims (see :meth:`AllocatedState.from_claims`).
        new_share_id: makes the ``shareID`` of a share of a device (upstream: a random UUID).
    """

    def __init__(self, snapshot: ResourceSnapshot, allocated: AllocatedState | None = None, *,
                 new_share_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.snapshot = snapshot
        self.allocated = allocated if allocated is not None else AllocatedState()
        self.new_share_id = new_share_id
        self._available_counters: dict[tuple[str, str], tuple[CounterSets, bool]] = {}
        self._plans: dict[int, ClaimPlan] = {}

    def allocate(self, node: NodeInfo, claims: Sequence[ResourceClaim]) -> list[AllocationResult]:
        """Allocate all claims on ``node``: one allocation result per claim, in order.

        Raises:
            AllocationFailed: the claims do not fit on this node.
            AllocationError: the input is broken (upstream aborts the scheduling attempt).
        """
        return _Search(self, node, claims).run()

    def plan(self, claim: ResourceClaim) -> ClaimPlan:
        """The node-independent checks of a claim (cached while the claim object lives)."""
        plan = self._plans.get(id(claim))
        if plan is None or plan.claim is not claim:
            plan = self._plans[id(claim)] = ClaimPlan.build(claim, self.snapshot)
        return plan

    def available_counters(self, pool: Pool) -> tuple[CounterSets, bool]:
        """Counters of a pool left after the allocated devices, and whether any is negative
        (then no device of the pool that consumes counters fits). Cached per pool."""
        found = self._available_counters.get(pool.key)
        if found is None:
            available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            consumers = pool.consumers()
            for device_name in self.allocated.in_pool(pool.key):
                for device in consumers.get(device_name, ()):
                    for set_name, counters in device.consumes:
                        left = available.get(set_name)
                        if left is None:
                            continue
                        for name, amount in counters:
                            if name in left:
                                left[name] -= amount
            overdrawn = any(v < 0 for counters in available.values() for v in counters.values())
            found = self._available_counters[pool.key] = (available, overdrawn)
        return found

    def diagnose(self, node: NodeInfo, claim: ResourceClaim) -> list[RequestDiagnosis]:
        """Per request of ``claim`` on ``node``, how many devices pass each check
        (see :mod:`kubedra.allocation.diagnosis`)."""
        search = _Search(self, node, [claim])
        search.prepare()
        return diagnose_search(search)


class _Undo:
    """What one device pick changed, to take it back when backtracking."""

    __slots__ = ("capacity", "capacity_existed", "constraints", "counters", "device", "marked",
                 "pick", "pool", "request")

    def __init__(self, device: DeviceEntry, pool: Pool, request: str) -> None:
        self.device = device
        self.pool = pool
        self.request = request
        self.counters = False
        self.constraints: list[Constraint] = []
        self.marked = False
        self.capacity: dict[str, Number] | None = None
        self.capacity_existed = False
        self.pick: Pick | None = None


class _Search(SearchState):
    """One ``Allocate`` run: the depth-first search over one node (its state and per-device
    checks are :class:`~kubedra.allocation.checks.SearchState`'s)."""

    def __init__(self, allocator: Allocator, node: NodeInfo,
                 claims: Sequence[ResourceClaim]) -> None:
        super().__init__(allocator.snapshot, allocator.allocated, allocator.available_counters,
                         node, claims)
        self.allocator = allocator
        self.deepest: SearchPoint | None = None
        """The deepest point where no device fitted."""
        self.steps = 0
        self.hopeless = False
        self.impossible: _Search | None = None  # a later claim that does not fit even alone
        self.reached_all = False  # whether a device of an All request was tried
        # 1.34 (INVALID_POOL_SKIPPED): its device search reaches the first invalid pool, an
        # error, unless a device of the pools before it completes the claims
        self.invalid = None if self.features.version.follows(INVALID_POOL_SKIPPED) \
            else self.pools.first_invalid
        self.all_keeps_sub = self.features.version.follows(ALL_SUBREQUEST_KEEPS_ITS_INDEX)
        self.valueless_is_error = self.features.version.follows(
            VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR)
        self.versions_parsed = self.features.version.follows(VERSIONS_COMPARED_BY_PRECEDENCE)

    # --- setup (validation of requests and constraints) ------------------------------------

    def prepare(self) -> None:
        """Replay the claims' checks, fix the devices of ``All`` requests, apply the 32-device
        limit and set up the constraints.

        Raises:
            AllocationError: as upstream's validation in ``Allocate``.
        """
        for claim in self.claims:
            plan = self.allocator.plan(claim)
            min_devices = 0
            claim_requests: list[list[RequestData]] = []
            for request, alternatives in zip(claim.spec.devices.requests or (), plan.requests,
                                             strict=True):
                if isinstance(alternatives, AllocationError):
                    raise alternatives
                datas = []
                for template in alternatives:
                    if isinstance(template, AllocationError):
                        raise template
                    data = RequestData(template)
                    if data.all_devices is not None:
                        data.all_devices = self._all_devices(data)
                        data.count = len(data.all_devices)
                    datas.append(data)
                needed = min(d.count for d in datas)
                if needed > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                    raise AllocationError(
                        f"claim {plan.label}, request {request.name}: adding {needed} devices "
                        f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with "
                        f"{min_devices} already accounted for")
                min_devices += needed
                claim_requests.append(datas)
            self.requests.append(claim_requests)
            if isinstance(plan.constraints, AllocationError):
                raise plan.constraints
            self.constraints.append([spec.new() for spec in plan.constraints])

    def _all_devices(self, data: RequestData) -> list[int]:
        """The positions of the devices an ``All`` request takes.

        Raises:
            AllocationFailed: a pool of the node is incomplete or invalid (from 1.38,
                :data:`~kubedra.allocation.versions.ALL_UNUSABLE_POOL_FAILS_ON_NODE`).
            AllocationError: the same before 1.38, or a capacity check fails.
        """
        for pool in self.pools.pools:
            state = "being updated" if pool.incomplete else "invalid" if pool.invalid else None
            if state is None:
                continue
            reason = (f"claim {data.claim_label}, request {data.name}: asks for all devices, "
                      f"but resource pool {pool} is currently {state}")
            if self.features.version.follows(ALL_UNUSABLE_POOL_FAILS_ON_NODE):
                raise AllocationFailed(reason, claim=data.claim_label, request=data.full_name)
            raise AllocationError(reason)
        found = []
        static_only = self.features.version.follows(ALL_KEEPS_DEVICES_WITHOUT_ROOM)
        for position, device in enumerate(self.pools.devices):
            if not self.selectable(data, device):
                continue
            if self.features.consumable_capacity and not (
                    self._fits_statically(data, device) if static_only
                    else self._fits_now(data, device)):
                continue
            found.append(position)
        return found

    def _fits_statically(self, data: RequestData, device: DeviceEntry) -> bool:
        """For ``All`` from 1.37: the request fits the device's capacity, ignoring what is in
        use (remaining room is checked when the device is allocated, so ``All`` fails).

        Raises:
            AllocationError: an unrepresentable or negative amount.
        """
        consumption = self.consumption(data, device)
        return consumption is not None and fits(consumption, None, None)

    def _fits_now(self, data: RequestData, device: DeviceEntry) -> bool:
        """For ``All`` before 1.37: the request fits beside what is in use, and a device whose
        check fails with an error is left out (``CmpRequestOverCapacity`` in 1.36's
        ``allocator_incubating.go``)."""
        try:
            return self.capacity_fits(data, device)
        except AllocationError:
            return False

    # --- the search -----------------------------------------------------------------------

    def run(self) -> list[AllocationResult]:
        """Validate, search, and build the results.

        Raises:
            AllocationFailed, AllocationError: see :meth:`Allocator.allocate`.
        """
        self.prepare()
        if self._allocate_one(0, 0, 0, 0, False, 0) != _DONE:
            raise self._failure()
        binding = self.features.device_binding_and_status
        return [build_allocation(claim, self.requests[ci], self.picks[ci], self.node.name,
                                 binding=binding, binds_to_node=self.features.binds_to_node,
                                 version=self.features.version)
                for ci, claim in enumerate(self.claims)]

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool,
                      start: int) -> Outcome:
        if self.hopeless:
            return _FAIL
        self.steps += 1
        if self.steps == _HOPELESS_CHECK_AFTER and len(self.claims) > 1 \
                and self.later_claim_impossible():
            self.hopeless = True
            return _FAIL
        if ci >= len(self.claims):
            return _DONE
        claim_requests = self.requests[ci]
        if ri >= len(claim_requests):
            outcome = self._allocate_one(ci + 1, 0, 0, 0, False, 0)
            return _FAIL if outcome == _TOO_MANY else outcome
        alternatives = claim_requests[ri]
        data = alternatives[si]
        if not in_sub and data.parent is not None:
            all_too_many = True
            for sub in range(len(alternatives)):
                outcome = self._allocate_one(ci, ri, sub, di, True, 0)
                if outcome == _TOO_MANY:
                    continue
                all_too_many = False
                if outcome == _DONE:
                    alternatives[0].selected_sub = sub
                    return _DONE
                if self.hopeless:
                    return _FAIL
            return _TOO_MANY if all_too_many else _FAIL

        if data.all_devices is not None and not data.all_devices:
            self._note_failure(ci, ri, si, 0)
            return _FAIL
        if di >= data.count:
            return self._allocate_one(ci, ri + 1, 0, 0, False, 0)
        if data.count - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.picks[ci]):
            return _TOO_MANY

        devices = self.pools.devices
        if data.all_devices is not None:
            self.reached_all = True
            undo = self._allocate_device(ci, data, data.all_devices[di], must=True)
            if undo is None:
                self._note_failure(ci, ri, si, di)
                return _FAIL
            # before 1.36 the next device is the first subrequest's (ALL_SUBREQUEST_KEEPS_ITS_INDEX)
            outcome = self._allocate_one(ci, ri, si if self.all_keeps_sub else 0, di + 1, in_sub, 0)
            if outcome != _DONE:
                self._rollback(ci, undo)
            return outcome

        invalid = self.invalid
        end = len(devices) if invalid is None else invalid[0]
        if data.count - di > 1 and self._cannot_complete(ci, data, di, start):
            self._note_failure(ci, ri, si, di)
            return self._fail_at(invalid)
        consumable = self.features.consumable_capacity
        admin = data.admin_access
        taken, allocating = self.allocated.devices, self.allocating
        for position in range(start, end):
            device = devices[position]
            device_id = device.id
            if admin:  # the in_use test, inlined: this loop is the hot path
                claims = allocating.get(device_id)
                if claims is not None and ci in claims:
                    continue
            elif device_id in taken or allocating.get(device_id):
                continue
            if not self.selectable(data, device):
                continue
            if consumable and not self.capacity_fits(data, device):
                continue
            undo = self._allocate_device(ci, data, position, must=False)
            if undo is None:
                continue
            outcome = self._allocate_one(ci, ri, si, di + 1, in_sub, position + 1)
            if outcome == _DONE:
                return _DONE
            self._rollback(ci, undo)
            if outcome == _TOO_MANY:
                return _TOO_MANY
            if self.hopeless:
                return self._fail_at(invalid)
        self._note_failure(ci, ri, si, di)
        return self._fail_at(invalid)

    @staticmethod
    def _fail_at(invalid: tuple[int, Pool] | None) -> Outcome:
        """A device search that found nothing: a failure, or where 1.34's search would go on
        into an invalid pool, its error."""
        if invalid is not None:
            raise AllocationError(f"pool {invalid[1].name} is invalid: "
                                  f"{invalid[1].invalid_reason}")
        return _FAIL

    def _allocate_device(self, ci: int, data: RequestData, position: int,
                         must: bool) -> _Undo | None:
        device = self.pools.devices[position]
        pool = self.pools.device_pools[position]
        device_id = device.id
        features = self.features
        shared = features.consumable_capacity and device.allow_multiple
        if data.admin_access:
            if not shared and ci in self.allocating.get(device_id, ()):
                return None
        elif (device_id in self.allocated.devices or self.allocating.get(device_id)
              # from 1.38 (SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY) a device with shares, too
              or (not shared and self.shared_not_exclusive and self.has_shares(device_id))):
            return None
        if self.skipping_not_allocatable and device.slice.skips_node_operations:
            return None  # from 1.38 (SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE)
        if device.consumes_counters and not features.partitionable_devices:
            return None

        undo = _Undo(device, pool, data.base_name)
        skip_counters = shared and self.has_shares(device_id)
        if device.consumes_counters and not skip_counters:
            if not self.reserve_counters(device, pool):
                return None
            undo.counters = True
        if features.device_taints and device.taints and self.tainted(data, device):
            self._rollback(ci, undo)
            return None
        for constraint in self.constraints[ci]:
            if not constraint.applies_to(data.base_name, data.name if data.parent else None):
                continue
            key = lookup_attribute(device, constraint.attribute,
                                   versions_parsed=self.versions_parsed)
            if key is None and self.valueless_is_error:
                self._rollback(ci, undo)
                raise self._valueless(data, device, constraint)
            if not constraint.add(key, data.base_name, device_id):
                self._rollback(ci, undo)
                if must:
                    raise AllocationError(f"claim {data.claim_label}, request {data.name}: cannot "
                                          f"add device {device} because a claim constraint would "
                                          "not be satisfied")
                return None
            undo.constraints.append(constraint)
        if not shared:
            self.allocating.setdefault(device_id, set()).add(ci)
            undo.marked = True

        share_id = None
        consumed: dict[str, Quantity] | None = None
        if features.consumable_capacity:
            if not self.capacity_fits(data, device):
                self._rollback(ci, undo)
                return None
            if shared:
                consumption = self.consumption(data, device)
                if consumption is None:  # capacity_fits above returned True: it is not None
                    raise AllocationError(f"device {device}: no capacity consumption for "
                                          f"request {data.full_name} after it fitted")
                consumed = {name: amount for name, amount, _, _ in consumption}
                share_id = self.allocator.new_share_id()
                undo.capacity_existed = device_id in self.allocating_capacity
                in_flight = self.allocating_capacity.setdefault(device_id, {})
                undo.capacity = {}
                for name, _, value, _ in consumption:
                    in_flight[name] = in_flight.get(name, 0) + value
                    undo.capacity[name] = value
        undo.pick = Pick(data, device, share_id, consumed or None)
        self.picks[ci].append(undo.pick)
        return undo

    def _rollback(self, ci: int, undo: _Undo) -> None:
        device_id = undo.device.id
        if undo.pick is not None:
            self.picks[ci].pop()
        if undo.capacity is not None:
            in_flight = self.allocating_capacity[device_id]
            for name, value in undo.capacity.items():
                in_flight[name] -= value
            if not any(in_flight.values()):
                # upstream drops an all-zero entry, but keeps the marker of an earlier share
                if undo.capacity_existed:
                    self.allocating_capacity[device_id] = {}
                else:
                    del self.allocating_capacity[device_id]
        if undo.marked:
            self.allocating[device_id].discard(ci)
        for constraint in reversed(undo.constraints):
            constraint.remove(undo.request)
        if undo.counters:
            self.release_counters(undo.device, undo.pool)

    # --- failure reporting ----------------------------------------------------------------

    def _note_failure(self, ci: int, ri: int, si: int, di: int) -> None:
        point = (ci, ri, si, di)
        if self.deepest is None or point > self.deepest:
            self.deepest = SearchPoint(*point)

    def _failure(self) -> AllocationFailed:
        """Why the search found nothing: the deepest request it could not complete."""
        diagnose = self._diagnosis
        if self.impossible is not None and not self.pools.has_invalid:
            return self.impossible._failure()
        if self.pools.has_invalid:
            return AllocationFailed("invalid resource pools were encountered",
                                    invalid_pools=True, diagnose=diagnose)
        if self.deepest is None:
            return AllocationFailed(f"the claims need more than {ALLOCATION_RESULTS_MAX_SIZE} "
                                    "devices each", diagnose=diagnose)
        ci, ri, si, found = self.deepest
        data = self.requests[ci][ri][si]
        if data.all_devices is not None and not data.all_devices:
            what = "no device matches (allocationMode All)"
        elif data.all_devices is not None:
            what = f"device {self.pools.devices[data.all_devices[found]]} is not available " \
                   "(allocationMode All)"
        elif data.count == 1:
            what = "no device fits"
        elif found == 0:
            what = f"cannot find {data.count} devices that fit together"
        else:
            what = f"only {found} of {data.count} devices fit together"
        return AllocationFailed(f"claim {data.claim_label}, request {data.full_name}: {what}",
                                claim=data.claim_label, request=data.full_name,
                                diagnose=diagnose)

    def _diagnosis(self) -> list[RequestDiagnosis]:
        return diagnose_search(self)

    def later_claim_impossible(self) -> bool:
        """Whether one of the claims after the first cannot fit even on its own.

        A claim's devices must be free, have capacity and counters left, and satisfy its own
        constraints; devices other claims take only make that harder, so a claim that does not
        fit alone fits in no branch of the search, and upstream, after trying every combination
        of the claims before it (which can take minutes, see kubernetes#131730), finds nothing.
        Claim ``k`` is judged only when nothing can break that equivalence:

        - the full search could raise an error on the way through claims ``0..k``: a selector,
          node selector or capacity error of one of their requests on any device, or an
          ``All`` request that a constraint covers (a device breaking it is an error) in a
          claim before ``k``, or in claim ``k`` when claim ``k`` alone gets as far as it;
        - a shared device that consumes counters can be picked by claim ``k`` and by an earlier
          claim (a further share of a device skips the counter check, so an earlier share can
          help claim ``k``).
        """
        features = self.features
        devices = self.pools.devices
        shared_counted = [d for d in devices if features.consumable_capacity
                          and d.allow_multiple and d.consumes_counters]
        shared_taken_earlier: set[int] = set()
        all_constrained_earlier = False
        for k, claim_requests in enumerate(self.requests):
            shared_picked: set[int] = set()
            all_constrained = False
            for alternatives in claim_requests:
                for data in alternatives:
                    subrequest = data.name if data.parent is not None else None
                    all_constrained |= data.all_devices is not None and any(
                        c.applies_to(data.base_name, subrequest) for c in self.constraints[k])
                    try:
                        for device in devices:
                            if self.selectable(data, device) and features.consumable_capacity:
                                self.consumption(data, device)
                    except AllocationError:
                        return False
                    shared_picked.update(d.uid for d in shared_counted
                                         if self.selectable(data, d))
            if all_constrained_earlier:
                return False
            if k > 0 and not shared_picked & shared_taken_earlier:
                alone = _Search(self.allocator, self.node, [self.claims[k]])
                alone.prepare()
                try:
                    outcome = alone._allocate_one(0, 0, 0, 0, False, 0)
                except AllocationError:
                    return False
                # an All request under a constraint may fail with an error once reached; if
                # claim k alone never gets that far, it never does in any branch either
                if outcome != _DONE and not (all_constrained and alone.reached_all):
                    self.impossible = alone
                    return True
            shared_taken_earlier |= shared_picked
            all_constrained_earlier |= all_constrained
        return False

    def _cannot_complete(self, ci: int, data: RequestData, di: int, start: int) -> bool:
        """Whether fewer devices than still needed could serve the request in this branch.

        Counts devices from ``start`` that are free, selectable, untainted, have the capacity
        and fit the constraints' recorded values; all of these only get stricter deeper in the
        branch, so too few means no completion. Devices of one request share the value of an
        unfixed ``matchAttribute``, so they are counted per value. Any error (which the plain
        search would raise at this point) disables the shortcut, so errors surface exactly
        where upstream raises them.
        """
        needed = data.count - di
        subrequest = data.name if data.parent is not None else None
        constraints = [c for c in self.constraints[ci]
                       if c.applies_to(data.base_name, subrequest)]
        groups: dict[tuple[object, ...], int] = {}
        try:
            for device in self.candidates(ci, data, start):
                group = self._constraint_group(data, constraints, device)
                if group is None:
                    continue
                count = groups.get(group, 0) + 1
                if count >= needed:
                    return False
                groups[group] = count
        except AllocationError:
            return False
        return True

    def candidates(self, ci: int, data: RequestData, start: int) -> Iterator[DeviceEntry]:
        """The node's devices from a search position on that request ``data`` of claim ``ci``
        could take now: free, selectable, with the capacity, and without a taint it does not
        tolerate (counters and constraints are not checked).

        Raises:
            AllocationError: a selector or capacity error on the way (where the plain search
                would raise it).
        """
        consumable = self.features.consumable_capacity
        taints = self.features.device_taints
        for device in self.devices_from(start):
            if self.in_use(data, device.id, ci) or not self.selectable(data, device):
                continue
            if consumable and not self.capacity_fits(data, device):
                continue
            if taints and device.taints and self.tainted(data, device):
                continue
            yield device

    def devices_from(self, start: int) -> list[DeviceEntry]:
        """The node's devices from a search position on."""
        return self.pools.devices[start:]

    @staticmethod
    def _valueless(data: RequestData, device: DeviceEntry,
                   constraint: Constraint) -> AllocationError:
        """From 1.38 (VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR): the error of a constrained
        attribute without a scalar value, in upstream's words."""
        return AllocationError(f"claim {data.claim_label}, request {data.name}: device "
                               f"{device}: unsupported attribute value for "
                               f"{constraint.attribute}")

    def _constraint_group(self, data: RequestData, constraints: list[Constraint],
                          device: DeviceEntry) -> tuple[object, ...] | None:
        """The values that tie the device to other devices of its request, or ``None`` when the
        device cannot be one of two or more further devices of the request."""
        group: list[object] = []
        for constraint in constraints:
            key = lookup_attribute(device, constraint.attribute,
                                   versions_parsed=self.versions_parsed)
            if key is MISSING:
                return None
            if key is None and self.valueless_is_error:
                raise self._valueless(data, device, constraint)  # ends the shortcut
            if isinstance(constraint, MatchAttribute):
                # a value-less attribute can only be the one device of the constraint
                if key is None:
                    return None
                fixed = constraint.fixed_value()
                if fixed is MISSING:
                    group.append(key)
                elif key != fixed:
                    return None
            elif isinstance(constraint, DistinctAttribute) and constraint.rejects(key):
                return None
        return tuple(group)
