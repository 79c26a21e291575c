"""What the operator's explainer remembers between evaluations, and its rate limits (see
:mod:`kubedra.controller.explanations`). Times are ``time.monotonic()`` seconds."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubedra.allocation import (
    DEFAULT_FEATURES,
    AllocationError,
    AllocatorFeatures,
    NodeInfo,
    ResourceSnapshot,
    features_of_server,
)
from kubedra.api.resource import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from kubedra.api.slice_decoding import SliceDecoder
from kubedra.controller.kept import KeptObject, opened
from kubedra.explain import ClusterSnapshot
from kubedra.explain.snapshot import node_info

EVENT_INTERVAL = 60.0
"""Default seconds between two Events on the same claim, at least (setting
``explain_event_interval``)."""
EVALUATION_INTERVAL = 5.0
"""Seconds between two evaluations of the same pod, at least."""

Key = tuple[str, str]
"""(namespace, name) of a pod or claim."""


@dataclass
class Inputs:
    """What one evaluation reads, copied from the operator's caches (plain dicts; the
    allocated claims as the claim index keeps them, opened in the explainer's thread when
    they are parsed)."""

    slices: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    taint_rules: list[dict[str, Any]]
    allocated: list[KeptObject | dict[str, Any]]
    nodes: list[dict[str, Any]]
    inventory_version: int
    claims_version: int
    nodes_version: int = 0


def _explain_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="kubedra-explain")


@dataclass
class ExplainState:
    """The explainer's memory: input versions, per-pod evaluations, per-claim Events.

    Versions count watch events that can change an explanation: ``inventory`` (slices,
    classes, taint rules), ``claims`` (allocations), ``nodes`` (node labels).

    Evaluations run in :attr:`executor`, one thread for the life of the operator: the cached
    inventory keeps each device's CEL activation, and cel-expr-python binds an activation to
    the thread that made it (evaluating it in another thread fails with "No PyCelArena found
    for google::protobuf::Arena").
    """

    event_interval: float = EVENT_INTERVAL
    inventory_version: int = 0
    claims_version: int = 0
    nodes_version: int = 0
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    evaluated: dict[Key, tuple[Any, ...]] = field(default_factory=dict)
    """Pod → the versions it was last explained at."""
    evaluated_at: dict[Key, float] = field(default_factory=dict)
    posted: dict[Key, tuple[str, float]] = field(default_factory=dict)
    """Claim → (message, time) of the last Event posted on it."""
    executor: ThreadPoolExecutor = field(default_factory=_explain_thread)
    _resources: tuple[int, ResourceSnapshot, list[DeviceTaintRule]] | None = None
    _slices: dict[str, tuple[str, ResourceSlice]] = field(default_factory=dict)
    """Slice name → (resourceVersion, parsed) of the last snapshot, reused while unchanged."""
    _others: tuple[Any, ...] | None = None
    """The classes, taint rules and features of the last snapshot (as given)."""
    _allocated: tuple[int, list[ResourceClaim]] | None = None
    _nodes: tuple[int, list[NodeInfo]] | None = None
    features: AllocatorFeatures = DEFAULT_FEATURES
    """The allocator features of the cluster's scheduler (:meth:`decide_as`)."""

    def decide_as(self, server_version: str) -> str:
        """Explain as the scheduler of the API server's version (``gitVersion``, detected at
        start, :mod:`kubedra.controller.features`) decides; the note of
        :func:`kubedra.allocation.features_of_server` ("" when that minor is one kubedra
        decides as)."""
        features, note = features_of_server(server_version)
        if features != self.features:
            self.features = features
            self._resources = None
        return note

    def node_changed(self, name: str, labels: Mapping[str, str] | None) -> bool:
        """Record a node's labels (``None``: deleted); whether that changes anything."""
        if labels is None:
            changed = self.node_labels.pop(name, None) is not None
        else:
            changed = self.node_labels.get(name) != dict(labels)
            self.node_labels[name] = dict(labels)
        if changed:
            self.nodes_version += 1
        return changed

    def evaluation_delay(self, pod: Key, now: float) -> float:
        """Seconds until the pod may be evaluated again (0: now; then the time is recorded)."""
        last = self.evaluated_at.get(pod)
        if last is not None and now - last < EVALUATION_INTERVAL:
            return EVALUATION_INTERVAL - (now - last)
        self.evaluated_at[pod] = now
        return 0.0

    def event_delay(self, claim: Key, message: str, now: float) -> float | None:
        """When to post ``message`` on the claim: ``None`` never (it is the last one posted),
        0 now (record it with :meth:`event_posted`), else the seconds to wait."""
        last = self.posted.get(claim)
        if last is not None and last[0] == message:
            return None
        if last is not None and now - last[1] < self.event_interval:
            return self.event_interval - (now - last[1])
        return 0.0

    def event_posted(self, claim: Key, message: str, now: float) -> None:
        """Record the Event just posted on the claim."""
        self.posted[claim] = (message, now)

    def forget_pod(self, pod: Key) -> None:
        """Drop what is known about a pod that was scheduled or deleted."""
        self.evaluated.pop(pod, None)
        self.evaluated_at.pop(pod, None)

    def forget_claim(self, claim: Key) -> None:
        """Drop the Event memory of a claim that was allocated or deleted."""
        self.posted.pop(claim, None)

    def snapshot(self, inputs: Inputs) -> ClusterSnapshot:
        """The cluster of ``inputs``, reusing what did not change since the last call (called
        from the worker thread only): the parsed inventory while its version is the same;
        when only slices changed, the allocator's index with those slices replaced
        (:meth:`ResourceSnapshot.with_slices`), so a question after a slice changed costs
        that slice, not the fleet; the allocated claims and the nodes while their versions
        are the same."""
        if self._resources is None or self._resources[0] != inputs.inventory_version:
            others = (inputs.classes, inputs.taint_rules, self.features)
            models, changed = self._parsed_slices(inputs.slices)
            if self._resources is not None and self._others == others:
                _, resources, rules = self._resources
                resources = resources.with_slices(models, changed)
            else:
                rules = [DeviceTaintRule.from_api(r) for r in inputs.taint_rules]
                resources = ResourceSnapshot(models,
                                             [DeviceClass.from_api(c) for c in inputs.classes],
                                             rules, self.features)
            self._resources, self._others = (inputs.inventory_version, resources, rules), others
        if self._allocated is None or self._allocated[0] != inputs.claims_version:
            self._allocated = (inputs.claims_version,
                               [ResourceClaim.from_api(opened(c)) for c in inputs.allocated])
        if self._nodes is None or self._nodes[0] != inputs.nodes_version:
            self._nodes = (inputs.nodes_version, sorted((node_info(n) for n in inputs.nodes),
                                                        key=lambda n: n.name))
        _, resources, rules = self._resources
        return ClusterSnapshot(resources, rules, self._allocated[1], self._nodes[1])

    def prepare(self, inputs: Inputs) -> None:
        """Make the snapshot of ``inputs``, the pools of each of its nodes and each device's
        attribute check (:meth:`~kubedra.allocation.DeviceEntry.conversion_error`, which
        every claim's node shapes read, and the device keeps) now, before a question needs
        them (at start, once the caches are read: the first question then costs what any
        later one does)."""
        snapshot = self.snapshot(inputs)
        for node in snapshot.nodes:
            with contextlib.suppress(AllocationError):  # the question reports it
                for device in snapshot.resources.node_pools(node).devices:
                    device.conversion_error()

    def _parsed_slices(self, slices: list[dict[str, Any]]) -> tuple[list[ResourceSlice],
                                                                     set[str]]:
        """``slices`` parsed, and the names of those parsed anew: a slice at the
        resourceVersion it was last parsed at is the same model again (none mutates them),
        the others go through one :class:`SliceDecoder`, so their equal attribute values and
        capacities share models. A change of one slice in a fleet costs one slice's parse,
        not the fleet's; the memory the snapshot holds is that of the distinct values, not of
        every device's copy."""
        decoder = SliceDecoder()
        parsed: dict[str, tuple[str, ResourceSlice]] = {}
        models, changed = [], set()
        for data in slices:
            metadata = data.get("metadata") or {}
            name, version = metadata.get("name") or "", metadata.get("resourceVersion") or ""
            known = self._slices.get(name)
            if known and version and known[0] == version:
                model = known[1]
            else:
                model = decoder.decode(data)
                changed.add(name)
            if name and version:
                parsed[name] = (version, model)
            models.append(model)
        self._slices = parsed
        return models, changed
