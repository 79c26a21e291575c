"""Allocation results, as upstream's ``Allocate`` writes them once the search succeeded.

From ``structured/internal/incubating/allocator_incubating.go`` (v0.37.2):

- one result per device, in the order the devices were picked, naming the request
  (``req`` or ``req/sub``), copying the request's tolerations, ``adminAccess: true`` for admin
  requests, the device's binding conditions (when that feature is on) and, for a share of a
  device, its ``shareID`` and the capacity it consumes;
- configuration: each DeviceClass's config once (``FromClass``) for all requests using that
  class, then the claim's config entries (``FromClaim``) that name a request or the chosen
  subrequest, or name none. A ``requests`` list that covers every request is dropped ("all");
  before 1.37 it stays, and a claim's config is copied once per request it names
  (:mod:`kubedra.allocation.versions`);
- node selector: ``metadata.name`` of the node when any device is node-local or binds to the
  node; else the requirements of the devices' node selectors merged into one term; else none.
"""

from __future__ import annotations

from typing import NamedTuple

from kubedra.allocation.errors import AllocationError
from kubedra.allocation.pools import DeviceEntry
from kubedra.allocation.requests import RequestData
from kubedra.allocation.versions import (
    CLAIM_CONFIG_ONCE,
    CONFIG_FOR_ALL_REQUESTS_NAMES_NONE,
    DEFAULT_VERSION,
    TOLERATIONS_IN_RESULTS,
    KubeVersion,
)
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClaim,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
)


class Pick(NamedTuple):
    """One device chosen for a request; ``share_id`` and ``consumed`` for a shared device."""

    request: RequestData
    device: DeviceEntry
    share_id: str | None
    consumed: dict[str, Quantity] | None


def _device_result(pick: Pick, binding: bool,
                   version: KubeVersion) -> DeviceRequestAllocationResult:
    device = pick.device
    tolerations = pick.request.tolerations if version.follows(TOLERATIONS_IN_RESULTS) else None
    return DeviceRequestAllocationResult(
        request=pick.request.full_name, driver=device.driver, pool=device.id[1],
        device=device.name, admin_access=True if pick.request.admin_access else None,
        tolerations=tolerations,
        binding_conditions=device.binding_conditions if binding else None,
        binding_failure_conditions=device.binding_failure_conditions if binding else None,
        share_id=pick.share_id, consumed_capacity=pick.consumed)


def _chosen(requests: list[list[RequestData]]) -> list[RequestData]:
    """Per request of the claim, the request or the subrequest the search chose."""
    return [alternatives[alternatives[0].selected_sub] for alternatives in requests]


def _configs(spec: DeviceClaim, chosen: list[RequestData],
             version: KubeVersion) -> list[DeviceAllocationConfiguration]:
    configs: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, tuple[int, int]] = {}
    for data in chosen:
        span = by_class.get(data.class_name)
        if span is not None:
            for config in configs[span[0]:span[1]]:
                config.requests = [*(config.requests or ()), data.full_name]
            continue
        first = len(configs)
        for class_config in data.device_class.spec.config or ():
            configs.append(DeviceAllocationConfiguration(
                source="FromClass", requests=[data.full_name], opaque=class_config.opaque))
        by_class[data.class_name] = (first, len(configs))
    once = version.follows(CLAIM_CONFIG_ONCE)
    for claim_config in spec.config or ():
        names = claim_config.requests
        matches = sum(d.base_name in names or (d.parent is not None and d.full_name in names)
                      for d in chosen) if names else 1
        for _ in range(min(matches, 1) if once else matches):
            configs.append(DeviceAllocationConfiguration(
                source="FromClaim", requests=list(names) if names else names,
                opaque=claim_config.opaque))
    if not version.follows(CONFIG_FOR_ALL_REQUESTS_NAMES_NONE):
        return configs
    for config in configs:
        if config.requests and all(d.base_name in config.requests or (
                d.parent is not None and d.full_name in config.requests) for d in chosen):
            config.requests = None
    return configs


def _requirements_add(into: list[NodeSelectorRequirement],
                      requirements: list[NodeSelectorRequirement] | None) -> None:
    for req in requirements or ():
        values = set(req.values or ())
        if not any(have.key == req.key and have.operator == req.operator
                   and set(have.values or ()) == values for have in into):
            into.append(req)


def _node_selector(picks: list[Pick], node_name: str,
                   binds_to_node: bool) -> NodeSelector | None:
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for pick in picks:
        device = pick.device
        selection = device.node_selection if device.slice.per_device else \
            device.slice.node_selection
        if selection.node_name is not None or (binds_to_node and device.binds_to_node):
            return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[
                NodeSelectorRequirement(key="metadata.name", operator="In", values=[node_name])])])
        selector = selection.node_selector
        if selector is None:
            continue
        terms = selector.node_selector_terms
        if len(terms) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        if terms:
            _requirements_add(fields, terms[0].match_fields)
            _requirements_add(expressions, terms[0].match_expressions)
    if not fields and not expressions:
        return None
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(
        match_fields=fields or None, match_expressions=expressions or None)])


def build_allocation(claim: ResourceClaim, requests: list[list[RequestData]], picks: list[Pick],
                     node_name: str, *, binding: bool, binds_to_node: bool = True,
                     version: KubeVersion = DEFAULT_VERSION) -> AllocationResult:
    """The allocation result of ``claim`` after a successful search on node ``node_name``:
    ``requests`` are the claim's requests (each with its subrequests, the chosen one marked),
    ``picks`` the devices chosen; ``binding``: the ``DRADeviceBindingConditions`` feature;
    ``binds_to_node``: whether the variant reads ``bindsToNode``
    (:attr:`~kubedra.allocation.features.AllocatorFeatures.binds_to_node`);
    ``version``: the minor whose configuration rules apply (:mod:`kubedra.allocation.versions`).

    Raises:
        AllocationError: a device's node selector has more than one term.
    """
    results = [_device_result(pick, binding, version) for pick in picks]
    configs = _configs(claim.spec.devices, _chosen(requests), version)
    try:
        node_selector = _node_selector(picks, node_name, binds_to_node)
    except AllocationError as err:
        raise AllocationError(f"create NodeSelector for claim {claim.metadata.name}: {err}") \
            from None
    return AllocationResult(
        devices=DeviceAllocationResult(results=results, config=configs or None),
        node_selector=node_selector)
