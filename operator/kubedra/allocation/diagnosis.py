"""Why a claim does not fit on a node: per request, how many devices pass each check.

Computed only on demand (after a failure, or for ``kubedra explain``), with the same checks the
search uses, in the order it applies them. Each count is of devices that passed every earlier
check, so the first count that drops below what the request needs names the obstacle:

``devices`` (in the node's usable pools) → ``in_class`` (class selectors) → ``match_request``
(request selectors, per-device node selection, binding conditions) → ``free`` (not allocated)
→ ``capacity`` (can hold the requested capacity) → ``counters`` (the pool's shared counters
left) → ``untainted`` (no untolerated taint). When enough devices pass all checks, the claim's
constraints (or other requests competing for the same devices) are what failed; ``constraints``
then says, per constraint, how many of those devices can go together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubedra.allocation.constraints import MISSING, DistinctAttribute, lookup_attribute
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.pools import DeviceEntry, Pool
from kubedra.allocation.requests import RequestData
from kubedra.allocation.selectors import SelectorError, SelectorSet

if TYPE_CHECKING:
    from kubedra.allocation.allocator import _Search

STAGES = ("devices", "in_class", "match_request", "free", "capacity", "counters", "untainted")
"""The checks in search order; a device's verdict is the first it fails (or ``fits``)."""


@dataclass(slots=True)
class RequestDiagnosis:
    """The funnel of one request (or subrequest) on one node.

    Attributes:
        counts: devices passing each stage of :data:`STAGES` (and all stages before it).
        verdicts: per device (``driver/pool/device``), the first stage it fails, or ``fits``.
        constraints: per claim constraint covering this request, the largest number of fitting
            devices that satisfy it together (``matchAttribute``: the biggest group sharing a
            value; ``distinctAttribute``: the number of distinct values).
        unusable_pools: pools the search skips, with why (``incomplete (1 of 2 slices
            published)``, ``invalid: ...``, ``being updated (...)``).
        errors: selector or node selector errors seen while checking.
    """

    claim: str
    request: str
    node: str
    needed: int
    counts: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    constraints: dict[str, int] = field(default_factory=dict)
    unusable_pools: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def fitting(self) -> int:
        """Devices that pass every check."""
        return self.counts.get(STAGES[-1], 0)


def _passes(selectors: SelectorSet, device: DeviceEntry, errors: list[str]) -> bool:
    outcome = selectors.outcome(device)
    if isinstance(outcome, SelectorError):
        errors.append(f"device {device}: {outcome}")
        return False
    return outcome


def _verdict(search: _Search, data: RequestData, ci: int, device: DeviceEntry, pool: Pool,
             class_only: SelectorSet, request_only: SelectorSet, errors: list[str]) -> str:
    features = search.features
    if not _passes(class_only, device, errors):
        return "in_class"
    if not features.device_binding_and_status and device.binding_conditions:
        return "match_request"
    if not _passes(request_only, device, errors):
        return "match_request"
    try:
        if device.slice.per_device and not device.node_selection.matches(search.node):
            return "match_request"
    except AllocationError as err:
        errors.append(f"device {device}: {err}")
        return "match_request"
    if search.in_use(data, device.id, ci):
        return "free"
    if features.consumable_capacity:
        try:
            if not search.capacity_fits(data, device):
                return "capacity"
        except AllocationError as err:
            errors.append(str(err))
            return "capacity"
    shared = features.consumable_capacity and device.allow_multiple
    if device.consumes_counters and not (shared and search.allocated.has_shares(device.id)):
        # a further share of an allocated device consumes no more counters (_allocate_device)
        if not features.partitionable_devices:
            return "counters"
        available, overdrawn = search.allocator.available_counters(pool)
        if overdrawn or any(amount > available.get(set_name, {}).get(name, amount)
                            for set_name, counters in device.consumes
                            for name, amount in counters):
            return "counters"
    if features.device_taints and any(True for _ in device.blocking_taints()) \
            and search.tainted(data, device):
        return "untainted"
    return "fits"


def diagnose_request(search: _Search, ci: int, data: RequestData) -> RequestDiagnosis:
    """The funnel of one request of claim ``ci`` (the search must have been prepared)."""
    inventory = search.inventory
    class_only = inventory.selector_set(data.selectors.expressions[:data.selectors.class_count],
                                        ())
    request_only = inventory.selector_set(
        (), data.selectors.expressions[data.selectors.class_count:])
    result = RequestDiagnosis(claim=data.claim_label, request=data.full_name,
                              node=search.node.name, needed=data.count)
    for pool in search.pools.pools:
        if pool.incomplete:
            result.unusable_pools[str(pool)] = (
                f"incomplete ({pool.published_slices} of {pool.slice_count} slices published)")
        elif pool.invalid:
            result.unusable_pools[str(pool)] = f"invalid: {pool.invalid_reason}"
    for name, generation in search.pools.obsolete.items():
        result.unusable_pools[name] = (f"being updated (its slices for the node are of "
                                       f"generation {generation}, a newer one is published)")
    counts = dict.fromkeys(STAGES, 0)
    fitting = []
    for device, pool in zip(search.pools.devices, search.pools.device_pools, strict=True):
        verdict = _verdict(search, data, ci, device, pool, class_only, request_only,
                           result.errors)
        result.verdicts[repr(device)] = verdict
        for stage in STAGES:
            if stage == verdict:
                break
            counts[stage] += 1
        if verdict == "fits":
            fitting.append(device)
    result.counts = counts
    subrequest = data.name if data.parent is not None else None
    for constraint in search.constraints[ci]:
        if not constraint.applies_to(data.base_name, subrequest):
            continue
        keys = [lookup_attribute(d, constraint.attribute) for d in fitting]
        keys = [k for k in keys if k is not MISSING]
        kind = "distinctAttribute" if isinstance(constraint, DistinctAttribute) \
            else "matchAttribute"
        if isinstance(constraint, DistinctAttribute):
            together = len({k for k in keys if k is not None}) + (None in keys)
        else:
            sizes: dict[object, int] = {}
            for key in keys:
                sizes[key] = sizes.get(key, 0) + 1
            together = max((1 if key is None else n for key, n in sizes.items()), default=0)
        result.constraints[f"{kind} {constraint.attribute}"] = together
    return result


def diagnose_search(search: _Search) -> list[RequestDiagnosis]:
    """The funnel of every request and subrequest of every claim of a prepared search."""
    return [diagnose_request(search, ci, data)
            for ci, claim_requests in enumerate(search.requests)
            for alternatives in claim_requests for data in alternatives]


def diagnose_claim(search: _Search) -> list[RequestDiagnosis]:
    """Prepare a fresh search and diagnose all its requests.

    Raises:
        AllocationError: the claims are invalid (as :meth:`Allocator.allocate` would).
    """
    search.prepare()
    return diagnose_search(search)
