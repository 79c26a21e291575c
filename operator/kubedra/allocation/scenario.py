"""Allocation scenarios as JSON: the exchange format with ``hack/allocator``.

A scenario is one allocation attempt with everything it depends on::

    {"name": "...", "features": {"DeviceTaints": false},       # overrides of the defaults
     "allocator": "incubating",     # optional: the variant upstream ran (else NewAllocator's)
     "kubeVersion": "1.36",         # optional: the minor whose defaults and rules apply
     "poolOrder": [["gpu.example.com", "node-1"], ...],  # optional: for kubedra only, the
                                    # order of one upstream run that ranges over a Go map
                                    # (AllocatorFeatures.pool_order)
     "node": {"name": "node-1", "labels": {...}},
     "slices": [ResourceSlice...], "classes": [DeviceClass...],
     "allocatedClaims": [ResourceClaim...], "taintRules": [DeviceTaintRule...],
     "claims": [ResourceClaim...]}

and its outcome is ``{"name", "outcome": "allocated" | "unschedulable" | "error",
"allocations": [AllocationResult...], "message"}``, exactly what ``dra-reference-allocator``
prints for upstream's allocator (which adds ``"steps"``, its search's steps, and the outcome
``"timeout"`` when a scenario's ``timeoutSeconds`` cut it). :func:`comparable` reduces an
outcome to what must be equal between the two.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kubedra.allocation.allocator import Allocator
from kubedra.allocation.errors import AllocationError, AllocationFailed
from kubedra.allocation.features import AllocatorFeatures
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.search_steps import SearchSteps, SearchTime, scheduler_search_time
from kubedra.allocation.snapshot import ResourceSnapshot
from kubedra.allocation.state import AllocatedState
from kubedra.allocation.versions import DEFAULT_VERSION, KubeVersion
from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim
from kubedra.api.slice_decoding import SliceDecoder

INVALID_POOLS_MESSAGE = "invalid resource pools were encountered"
"""Upstream's message when nothing fits and some pool of the node is invalid."""


def scenario_version(scenario: Mapping[str, Any]) -> KubeVersion:
    """The minor a scenario is decided as: its ``kubeVersion``, else 1.37.

    Raises:
        UnknownKubeVersionError: ``kubeVersion`` is not a minor kubedra decides as.
    """
    named = scenario.get("kubeVersion")
    return KubeVersion.parse(named) if named else DEFAULT_VERSION


def load_snapshot(scenario: Mapping[str, Any]) -> tuple[ResourceSnapshot, AllocatedState]:
    """The snapshot and allocated state of a scenario (or of a benchmark input); the slices
    share the models of equal attribute values and capacities (:class:`SliceDecoder`), as
    explain's do, so the differential corpus decides through that decoder too.

    Raises:
        UnsupportedFeaturesError: the scenario's features select another allocator variant,
            or name one on that its minor does not have.
        UnknownKubeVersionError: see :func:`scenario_version`.
        pydantic.ValidationError: an object does not parse.
    """
    features = AllocatorFeatures.from_gate_names(scenario.get("features") or {},
                                                 allocator=scenario.get("allocator"),
                                                 version=scenario_version(scenario))
    if order := scenario.get("poolOrder"):
        features = replace(features, pool_order=tuple((driver, pool) for driver, pool in order))
    decoder = SliceDecoder()
    snapshot = ResourceSnapshot(
        [decoder.decode(s) for s in scenario.get("slices") or ()],
        [DeviceClass.from_api(c) for c in scenario.get("classes") or ()],
        [DeviceTaintRule.from_api(r) for r in scenario.get("taintRules") or ()],
        features)
    allocated = AllocatedState.from_claims(
        (ResourceClaim.from_api(c) for c in scenario.get("allocatedClaims") or ()),
        consumable_capacity=features.consumable_capacity)
    return snapshot, allocated


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """A ``{"name", "labels"}`` node of a scenario."""
    return NodeInfo(node["name"], dict(node.get("labels") or {}))


def run_scenario(scenario: Mapping[str, Any],
                 new_share_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> dict[str, Any]:
    """Run kubedra's allocator on a scenario; the outcome in ``dra-reference-allocator``'s form."""
    name = scenario.get("name", "")
    snapshot, allocated = load_snapshot(scenario)
    claims = [ResourceClaim.from_api(c) for c in scenario.get("claims") or ()]
    allocator = Allocator(snapshot, allocated, new_share_id=new_share_id)
    try:
        results = allocator.allocate(node_info(scenario["node"]), claims)
    except AllocationFailed as failure:
        message = INVALID_POOLS_MESSAGE if failure.invalid_pools else failure.reason
        return {"name": name, "outcome": "unschedulable", "message": message}
    except AllocationError as err:
        return {"name": name, "outcome": "error", "message": str(err)}
    return {"name": name, "outcome": "allocated", "allocations": [r.to_api() for r in results]}


def scenario_search_time(scenario: Mapping[str, Any]) -> tuple[SearchTime, SearchSteps]:
    """Whether upstream's search on a scenario ends within kube-scheduler's filter timeout, and
    its steps (:func:`kubedra.allocation.search_steps.scheduler_search_time`); ``steps``
    compares with ``dra-reference-allocator``'s."""
    snapshot, allocated = load_snapshot(scenario)
    claims = [ResourceClaim.from_api(c) for c in scenario.get("claims") or ()]
    return scheduler_search_time(Allocator(snapshot, allocated), node_info(scenario["node"]),
                                 claims)


def _canonical(value: Any, key: str, share_ids: dict[str, str]) -> Any:
    if key == "consumedCapacity" and isinstance(value, dict):
        return {k: Quantity(v).canonical() for k, v in value.items()} or None
    if isinstance(value, dict):
        found = {k: _canonical(v, k, share_ids) for k, v in value.items()}
        return {k: v for k, v in found.items() if v not in (None, [], {})} or None
    if isinstance(value, list):
        return [_canonical(v, key, share_ids) for v in value] or None
    if key == "shareID":
        return share_ids.setdefault(value, f"share-{len(share_ids)}")
    return value


def comparable(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """What must be equal between kubedra's and upstream's outcome of a scenario: the kind of
    outcome, for an allocation the results with share IDs numbered in order of appearance,
    quantities in canonical form and empty fields dropped, and for a failure whether it is the
    invalid-pools one (other messages are worded differently)."""
    kind = outcome.get("outcome")
    found: dict[str, Any] = {"outcome": kind}
    if kind == "allocated":
        found["allocations"] = _canonical(outcome.get("allocations") or [], "", {}) or []
    elif kind == "unschedulable":
        found["invalidPools"] = outcome.get("message") == INVALID_POOLS_MESSAGE
    return found
