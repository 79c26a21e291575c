"""Requests and subrequests of the claims being allocated, checked before the search.

Follows ``Allocate`` and ``validateDeviceRequest`` in
``structured/internal/incubating/allocator_incubating.go`` (v0.37.2): a request is one
``exactly`` request or the ordered alternatives of ``firstAvailable``; API defaults apply
(``allocationMode: ExactCount``, ``count: 1``); every selector must be CEL; the class must exist;
``adminAccess``, ``firstAvailable`` and capacity requests need their features; ``derivedAttributes``
are an error (the incubating variant cannot handle them, whatever the gate; before 1.37 the
field is not known and ignored). An ``All`` request
fixes its devices up front (every device of the node's pools that passes the selectors and,
with consumable capacity, could hold the request on an idle device) and fails hard when a pool
is incomplete or invalid. A claim whose smallest choice needs more than 32 devices is an error.

Upstream checks all this again for every node. Everything but the ``All`` devices and the
32-device limit (which depends on them) does not depend on the node, so a :class:`ClaimPlan`
holds it, errors included, and every node replays it in upstream's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedra.allocation.capacity import CapacityError, Consumption
from kubedra.allocation.constraints import Constraint, MatchAttribute, distinct_attribute
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.features import AllocatorFeatures
from kubedra.allocation.selectors import SelectorSet
from kubedra.allocation.snapshot import ResourceSnapshot
from kubedra.allocation.versions import DERIVED_ATTRIBUTES_REFUSED, KubeVersion
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
)

ALLOCATION_RESULTS_MAX_SIZE = 32
"""Devices one claim may get (``resourceapi.AllocationResultsMaxSize``)."""


def claim_label(claim: ResourceClaim) -> str:
    """``namespace/name`` of a claim, as upstream logs it."""
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name or ""


class RequestTemplate:
    """What the search needs of a request (or one subrequest), independent of the node.

    Attributes:
        name: the request's or subrequest's own name.
        parent: the parent request's name for a subrequest, else ``None``.
        full_name: ``req`` or ``req/sub``, as in allocation results and constraints.
        count: devices needed (``ExactCount``); ``is_all`` for ``All``.
        consumption: static capacity consumption per device uid, filled as devices are tried
            (shared by all requests asking for the same amounts).
    """

    __slots__ = ("admin_access", "capacity", "claim_label", "class_name", "consumption",
                 "count", "device_class", "full_name", "is_all", "name", "parent", "selectors",
                 "tolerations")

    def __init__(self, claim_label: str, name: str, parent: str | None,
                 device_class: DeviceClass, selectors: SelectorSet, count: int, is_all: bool,
                 admin_access: bool, tolerations: list[DeviceToleration] | None,
                 capacity: dict[str, Quantity] | None,
                 consumption: dict[int, Consumption | None]) -> None:
        self.claim_label = claim_label
        self.name = name
        self.parent = parent
        self.full_name = f"{parent}/{name}" if parent is not None else name
        self.device_class = device_class
        self.class_name = device_class.metadata.name or ""
        self.selectors = selectors
        self.count = count
        self.is_all = is_all
        self.admin_access = admin_access
        self.tolerations = tolerations
        self.capacity = capacity
        self.consumption = consumption


class RequestData:
    """A request (or subrequest) in one search: its template plus per-node state.

    Attributes:
        count: devices needed (for ``All``: the devices fixed up front).
        all_devices: for ``All``, positions of its devices in the node's device list.
        selected_sub: on a request's first entry, the subrequest the search chose.
        selectable: outcome of the selection checks per device uid (this node only).
    """

    __slots__ = ("admin_access", "all_devices", "base_name", "capacity", "claim_label",
                 "class_name", "consumption", "count", "device_class", "full_name", "name",
                 "parent", "selectable", "selected_sub", "selectors", "tolerations")

    def __init__(self, template: RequestTemplate) -> None:
        self.claim_label = template.claim_label
        self.name = template.name
        self.parent = template.parent
        self.base_name = template.parent if template.parent is not None else template.name
        self.full_name = template.full_name
        self.device_class = template.device_class
        self.class_name = template.class_name
        self.selectors = template.selectors
        self.count = template.count
        self.admin_access = template.admin_access
        self.tolerations = template.tolerations
        self.capacity = template.capacity
        self.consumption = template.consumption
        self.all_devices: list[int] | None = [] if template.is_all else None
        self.selected_sub = 0
        self.selectable: dict[int, bool] = {}

    def capacity_error(self, device: object, err: CapacityError) -> AllocationError:
        """A capacity error as upstream words it."""
        return AllocationError(f"claim {self.claim_label}, request {self.name}: checking capacity "
                               f"for device {device}: {err}")


def _cel_expressions(owner: str, selectors: list[DeviceSelector] | None) -> tuple[str, ...]:
    expressions = []
    for i, selector in enumerate(selectors or ()):
        if selector.cel is None:
            raise AllocationError(f"{owner}, selector #{i}: CEL expression empty (unsupported "
                                  "selector type?)")
        expressions.append(selector.cel.expression)
    return tuple(expressions)


def _template(snapshot: ResourceSnapshot, label: str, name: str, parent: str | None,
              part: ExactDeviceRequest | DeviceSubRequest) -> RequestTemplate:
    where = f"claim {label}, request {name}"
    if part.derived_attributes and snapshot.features.version.follows(DERIVED_ATTRIBUTES_REFUSED):
        raise AllocationError(f"{where}: cannot handle request with derived attributes, the "
                              "feature is disabled")
    request_exprs = _cel_expressions(where, part.selectors)
    admin = part.admin_access if isinstance(part, ExactDeviceRequest) else None
    if admin is not None and not snapshot.features.admin_access:
        raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
    if not part.device_class_name:
        raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
    device_class = snapshot.classes.get(part.device_class_name)
    if device_class is None:
        raise AllocationError(f"{where}: could not retrieve device class "
                              f"{part.device_class_name}: not found")
    class_exprs = _cel_expressions(f"class {part.device_class_name}", device_class.spec.selectors)
    mode = part.allocation_mode or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise AllocationError(f"{where}: unsupported count mode {mode}")
    is_all = mode == "All"
    count = 0 if is_all else part.count or 1
    capacity = part.capacity.requests if part.capacity is not None \
        and not snapshot.features.runs_stable else None
    return RequestTemplate(label, name, parent, device_class,
                           snapshot.selector_set(class_exprs, request_exprs), count, is_all,
                           bool(admin), part.tolerations, capacity,
                           snapshot.consumptions(capacity))


def _request_alternatives(snapshot: ResourceSnapshot, label: str, request: DeviceRequest,
                          features: AllocatorFeatures
                          ) -> list[RequestTemplate | AllocationError] | AllocationError:
    where = f"claim {label}, request {request.name}"
    if request.first_available and not features.prioritized_list:
        return AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature is "
                               "disabled")
    parts: list[ExactDeviceRequest | DeviceSubRequest]
    if request.first_available:
        parts = list(request.first_available)
    elif request.exactly is not None:
        parts = [request.exactly]
    else:
        return AllocationError(f"{where}: unsupported request type")
    if not features.consumable_capacity and not features.runs_stable \
            and any(p.capacity is not None for p in parts):
        return AllocationError(f"{where}: has capacity requests, but the DRAConsumableCapacity "
                               "feature is disabled")
    alternatives: list[RequestTemplate | AllocationError] = []
    for part in parts:
        try:
            if isinstance(part, DeviceSubRequest):
                template = _template(snapshot, label, part.name, request.name, part)
            else:
                template = _template(snapshot, label, request.name, None, part)
            alternatives.append(template)
        except AllocationError as err:
            alternatives.append(err)
            break
    return alternatives


@dataclass(slots=True)
class ConstraintSpec:
    """A claim constraint, to instantiate for each search."""

    match: bool
    attribute: str
    requests: list[str] | None
    version: KubeVersion

    def new(self) -> Constraint:
        """A fresh constraint with no devices recorded, as ``version`` decides it."""
        if self.match:
            return MatchAttribute(self.attribute, self.requests)
        return distinct_attribute(self.version, self.attribute, self.requests)


@dataclass(slots=True)
class ClaimPlan:
    """The node-independent checks of one claim, in upstream's order.

    ``requests[i]`` is the first error of request ``i`` or its alternatives, where an entry is a
    template or the error its validation raised (later alternatives are not checked).
    """

    claim: ResourceClaim
    label: str
    requests: list[list[RequestTemplate | AllocationError] | AllocationError]
    constraints: list[ConstraintSpec] | AllocationError

    @classmethod
    def build(cls, claim: ResourceClaim, snapshot: ResourceSnapshot) -> ClaimPlan:
        """Check a claim's requests and constraints."""
        label = claim_label(claim)
        requests = [_request_alternatives(snapshot, label, request, snapshot.features)
                    for request in claim.spec.devices.requests or ()]
        specs: list[ConstraintSpec] = []
        for i, constraint in enumerate(claim.spec.devices.constraints or ()):
            if constraint.match_attribute is not None:
                specs.append(ConstraintSpec(True, constraint.match_attribute,
                                            constraint.requests, snapshot.features.version))
            elif constraint.distinct_attribute is not None and not snapshot.features.runs_stable:
                specs.append(ConstraintSpec(False, constraint.distinct_attribute,
                                            constraint.requests, snapshot.features.version))
            else:
                return cls(claim, label, requests, AllocationError(
                    f"claim {label}, constraint #{i}: empty constraint (unsupported constraint "
                    "type?)"))
        return cls(claim, label, requests, specs)
