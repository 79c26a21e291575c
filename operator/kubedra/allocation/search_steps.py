"""How many steps upstream's search takes, counted without a clock.

kube-scheduler cuts its device search at the filter timeout (``DRASchedulerFilterTimeout``,
10 s in v1.37.2, ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``) and
then reports ``node <name>: timed out trying to allocate devices`` as an error for the pod. Its
search is exhaustive (kubernetes#131730): when a request lacks one device, it tries every subset
of the devices it could take before the request before it moves on, so the steps double with
each device. kubedra's own search cuts such branches (``_cannot_complete``,
``later_claim_impossible`` in :mod:`kubedra.allocation.allocator`) and finishes in
milliseconds; this module counts what upstream does instead.

One *step* is one call of upstream's ``allocateOne``
(``structured/internal/incubating/allocator_incubating.go``, v0.37.2), the unit of upstream's own
statistic ``Stats.NumAllocateOneInvocations``: the search visits claims, requests and devices in
kubedra's order, which is upstream's (pool, slice, device order; each next device of a request
after the previous one), with kubedra's shortcuts off. ``hack/allocator`` reports upstream's
count, and the differential tests compare the two on every scenario upstream finishes.

Counting every step one by one would take Python minutes where Go takes seconds, so one kind of
branch is counted in closed form: a request that still needs ``k`` devices where only ``m < k``
devices from the current position could serve it, and nothing else ties those devices together
(no constraint applies to the request, no counters, no shared capacity, no ``adminAccess``).
Upstream then visits every subset of those ``m`` devices once — ``2**m`` steps, the current one
included — and fails, whatever follows. Other branches are walked step by step (28,000 to
100,000 steps a second in Python), so the walk has a limit of its own.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from kubedra.allocation.allocator import Allocator, Outcome, _Search
from kubedra.allocation.errors import AllocationError, AllocationFailed
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.requests import RequestData
from kubedra.api.resource import ResourceClaim


@dataclass(frozen=True)
class DeadEnd:
    """The first branch counted in closed form: request ``request`` of claim ``claim`` needs
    ``needed`` more devices, only ``usable`` are left for it after ``taken`` (``(claim,
    request, device)`` picked before it, in this claim and the claims before), so upstream
    tries all ``2**usable`` subsets."""

    claim: str
    request: str
    needed: int
    usable: int
    taken: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class SearchSteps:
    """The steps upstream's search takes on one node.

    Attributes:
        steps: ``allocateOne`` calls counted; when ``finished`` is False, at least this many.
        finished: the search ends within the limits the count was asked for.
        dead_end: the first branch counted in closed form, if any.
    """

    steps: int
    finished: bool
    dead_end: DeadEnd | None = None


class _LimitReached(Exception):
    """The count passed its limit."""


class _UpstreamSearch(_Search):
    """Upstream's search order without kubedra's shortcuts, counting steps up to ``limit``
    and walking at most ``walk_limit`` of them."""

    def __init__(self, allocator: Allocator, node: NodeInfo, claims: Sequence[ResourceClaim],
                 limit: int | None, walk_limit: int) -> None:
        super().__init__(allocator, node, claims)
        self.limit = limit if limit is not None else sys.maxsize
        self.walk_limit = walk_limit
        self.counted = 0
        """Steps counted in closed form (the rest of :attr:`steps` were walked)."""
        self.dead_end: DeadEnd | None = None

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool,
                      start: int) -> Outcome:
        if self.steps >= self.limit or self.steps - self.counted >= self.walk_limit:
            raise _LimitReached
        return super()._allocate_one(ci, ri, si, di, in_sub, start)

    def later_claim_impossible(self) -> bool:
        """Upstream has no such shortcut."""
        return False

    def _cannot_complete(self, ci: int, data: RequestData, di: int, start: int) -> bool:
        """Count a hopeless branch of a request that nothing ties to others in closed form
        (see the module's docstring); otherwise, let the search walk it."""
        if data.admin_access:
            return False
        subrequest = data.name if data.parent is not None else None
        if any(c.applies_to(data.base_name, subrequest) for c in self.constraints[ci]):
            return False
        consumable = self.features.consumable_capacity
        usable = 0
        try:
            for device in self.candidates(ci, data, start):
                if device.consumes_counters or (consumable and device.allow_multiple):
                    return False
                usable += 1
        except AllocationError:
            return False  # upstream raises it on the way: walk the branch
        if usable >= data.count - di:
            return False
        self.steps += 2 ** usable - 1  # this call is counted already
        self.counted += 2 ** usable - 1
        if self.dead_end is None:
            self.dead_end = DeadEnd(data.claim_label, data.full_name, data.count - di, usable,
                                    tuple((p.request.claim_label, p.request.full_name,
                                           p.device.name)
                                          for picks in self.picks[:ci + 1] for p in picks))
        if self.steps > self.limit:
            raise _LimitReached
        return True


def upstream_steps(allocator: Allocator, node: NodeInfo, claims: Sequence[ResourceClaim],
                   limit: int | None, walk_limit: int) -> SearchSteps:
    """The steps upstream's allocator takes to allocate ``claims`` on ``node`` (or to find that
    they do not fit, or to hit an error), counted up to ``limit`` (``None``: no limit), of
    which at most
    ``walk_limit`` are walked one by one (the rest are counted in closed form).

    Returns:
        the exact count when the search ends within both limits; else ``finished=False`` and
        the steps counted when a limit was reached (upstream takes more).
    """
    try:
        search = _UpstreamSearch(allocator, node, claims, limit, walk_limit)
    except (AllocationError, AllocationFailed):
        return SearchSteps(0, finished=True)  # upstream fails before its search starts
    try:
        search.prepare()
        search._allocate_one(0, 0, 0, 0, False, 0)
    except _LimitReached:
        return SearchSteps(search.steps, False, search.dead_end)
    except (AllocationError, AllocationFailed):
        # upstream stops at the error too, and where a request does not fit on the node
        # before the search (from 1.38, an All request over an unusable pool:
        # ALL_UNUSABLE_POOL_FAILS_ON_NODE)
        pass
    return SearchSteps(search.steps, True, search.dead_end)


FILTER_TIMEOUT_SECONDS = 10
"""kube-scheduler's default ``DynamicResourcesArgs.filterTimeout`` with the feature gate
``DRASchedulerFilterTimeout`` on (the default in v1.37.2;
``pkg/scheduler/apis/config/types_pluginargs.go``)."""

FINISHES_WITHIN = 200_000
"""Steps that upstream's search finishes within its 10 s even when each step is slow and the
scheduler shares its core. The cost of a step depends on the claims (devices looked at,
constraints, selectors): the v1.37.2 allocator measured 126,000 steps per CPU second on the
slowest scenario found (three claims with ``firstAvailable``, ``adminAccess`` and
``distinctAttribute``) and up to 720,000 on kubernetes#131730's shape, on this project's
machine (``bench/search_steps.py``; bench/RESULTS.md, "How long upstream's search takes"). At
the slowest rate this many take 1.6 CPU seconds, under 5 s with a third of a core. Also the
most steps explain walks one by one (Python walks 28,000 to 100,000 steps a second, so up to
about 7 s on a loaded machine)."""

TIMES_OUT_AFTER = 30_000_000
"""Steps that take upstream's search past 10 s even on a fast, idle scheduler: at the fastest
rate measured (720,000 steps per CPU second) this many take 42 CPU seconds here, and more than
10 s on a core 4 times as fast."""


class SearchTime(enum.Enum):
    """What upstream's search does within the scheduler's filter timeout."""

    FINISHES = "Finishes"
    """At most :data:`FINISHES_WITHIN` steps."""
    MAY_TIME_OUT = "MayTimeOut"
    """Between the bounds: on a busy or slow scheduler it times out, on a fast one it finishes.
    Also when the steps walked one by one reached :data:`FINISHES_WITHIN` first."""
    TIMES_OUT = "TimesOut"
    """More than :data:`TIMES_OUT_AFTER` steps."""


def scheduler_search_time(allocator: Allocator, node: NodeInfo,
                          claims: Sequence[ResourceClaim]) -> tuple[SearchTime, SearchSteps]:
    """Whether kube-scheduler's search for ``claims`` on ``node`` ends within its filter
    timeout, judged by the steps it takes (:func:`upstream_steps`, walking at most
    :data:`FINISHES_WITHIN` of them) against the calibrated bounds :data:`FINISHES_WITHIN` and
    :data:`TIMES_OUT_AFTER`; no clock is read."""
    steps = upstream_steps(allocator, node, claims, None, FINISHES_WITHIN)
    if steps.steps > TIMES_OUT_AFTER:
        return SearchTime.TIMES_OUT, steps
    if steps.finished and steps.steps <= FINISHES_WITHIN:
        return SearchTime.FINISHES, steps
    return SearchTime.MAY_TIME_OUT, steps
