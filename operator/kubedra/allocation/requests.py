"""Requests and subrequests of the claims being allocated, checked before the search.

Follows ``Allocate`` and ``validateDeviceRequest`` in
``structured/internal/incubating/allocator_incubating.go`` (v0.37.2): a request is one
``exactly`` request or the ordered alternatives of ``firstAvailable``; API defaults apply
(``allocationMode: ExactCount``, ``count: 1``); every selector must be CEL; the class must exist;
``adminAccess``, ``firstAvailable`` and capacity requests need their features. An ``All`` request
fixes its devices up front (every device of the node's pools that passes the selectors and,
with consumable capacity, could hold the request on an idle device) and fails hard when a pool
is incomplete or invalid. A claim whose smallest choice needs more than 32 devices is an error.
"""

from __future__ import annotations

from kubedra.allocation.capacity import CapacityError, Consumption
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.selectors import SelectorSet
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
)

ALLOCATION_RESULTS_MAX_SIZE = 32
"""Devices one claim may get (``resourceapi.AllocationResultsMaxSize``)."""


class RequestData:
    """A request (or one subrequest) ready for the search.

    Attributes:
        name: the request's or subrequest's own name.
        parent: the parent request's name for a subrequest, else ``None``.
        full_name: ``req`` or ``req/sub``, as in allocation results and constraints.
        count: devices needed (for ``All``: the devices fixed up front).
        all_devices: for ``All``, positions of its devices in the node's device list.
        selected_sub: on a request's first entry, the subrequest the search chose.
        selectable: outcome of the selection checks per device uid (this allocation only).
        consumption: static capacity consumption per device uid (this allocation only).
    """

    __slots__ = ("admin_access", "all_devices", "capacity", "claim_label", "class_name",
                 "consumption", "count", "device_class", "full_name", "name", "parent",
                 "selectable", "selected_sub", "selectors", "tolerations")

    def __init__(self, claim_label: str, name: str, parent: str | None,
                 device_class: DeviceClass, selectors: SelectorSet, count: int,
                 admin_access: bool, tolerations: list[DeviceToleration] | None,
                 capacity: dict[str, Quantity] | None) -> None:
        self.claim_label = claim_label
        self.name = name
        self.parent = parent
        self.full_name = f"{parent}/{name}" if parent is not None else name
        self.device_class = device_class
        self.class_name = device_class.metadata.name or ""
        self.selectors = selectors
        self.count = count
        self.admin_access = admin_access
        self.tolerations = tolerations
        self.capacity = capacity
        self.all_devices: list[int] | None = None
        self.selected_sub = 0
        self.selectable: dict[int, bool] = {}
        self.consumption: dict[int, Consumption | None] = {}

    @property
    def base_name(self) -> str:
        """The name of the claim's request this belongs to."""
        return self.parent if self.parent is not None else self.name

    def capacity_error(self, device: object, err: CapacityError) -> AllocationError:
        """A capacity error as upstream words it."""
        return AllocationError(f"claim {self.claim_label}, request {self.name}: checking capacity "
                               f"for device {device}: {err}")


def cel_expressions(owner: str, selectors: list[DeviceSelector] | None) -> tuple[str, ...]:
    """The CEL expressions of a selector list.

    Raises:
        AllocationError: a selector that is not CEL (an unknown future selector type).
    """
    expressions = []
    for i, selector in enumerate(selectors or ()):
        if selector.cel is None:
            raise AllocationError(f"{owner}, selector #{i}: CEL expression empty (unsupported "
                                  "selector type?)")
        expressions.append(selector.cel.expression)
    return tuple(expressions)


def exact_count(request: ExactDeviceRequest | DeviceSubRequest) -> tuple[bool, int]:
    """``(is_all, count)`` with API defaults; the count is meaningless for ``All``.

    Raises:
        AllocationError: an unknown allocation mode.
    """
    mode = request.allocation_mode or "ExactCount"
    if mode == "All":
        return True, 0
    if mode == "ExactCount":
        return False, request.count if request.count else 1
    raise AllocationError(f"unsupported count mode {mode}")


def request_parts(request: DeviceRequest) -> list[ExactDeviceRequest | DeviceSubRequest]:
    """The alternatives of a request: its subrequests, or its one ``exactly`` request.

    Raises:
        AllocationError: a request with neither (an unknown future request type).
    """
    if request.first_available:
        return list(request.first_available)
    if request.exactly is None:
        raise AllocationError(f"request {request.name}: unsupported request type")
    return [request.exactly]
