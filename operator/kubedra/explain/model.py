"""The result of explaining a claim, and its JSON form (``kubedra explain -o json``).

The JSON form is stable (fields are added, never renamed or removed, within
``apiVersion: kubedra.io/v1alpha1``)::

    {"apiVersion": "kubedra.io/v1alpha1", "kind": "ResourceClaimExplanation",
     "claim": {"namespace", "name", "uid"},
     "kubeVersion": "1.37",   # the minor whose scheduler it decides as (--kube-version)
     "pods": ["namespace/name", ...],            # pods using the claim
     "verdict": "Allocated" | "Fits" | "Unschedulable" | "Error" | "Timeout",
     "message": "...",                            # the short form (the operator's Event)
     "nodes": {"total", "evaluated", "withoutDevices", "excludedByPods"},
     "candidates": [                              # unallocated claim: one per evaluated node
       {"node", "fits", "message", "error",
        "devices": [{"request", "driver", "pool", "device"}],   # what it would get
        "schedulerSearch": null | SchedulerSearch,  # whether kube-scheduler's search ends
        "requests": [
          {"request", "deviceClass", "needed",
           "funnel": {"devices", "inClass", "matchRequest", "free", "capacity", "counters",
                      "untainted"},              # devices passing each check and all before
           "failedAt": null | a funnel stage | "constraints" | "together",
           "message",
           "devices": [DeviceFinding],           # the devices that failed at failedAt
           "constraints": [{"constraint", "together"}],
           "unusablePools": [{"pool", "reason"}],
           "errors": ["..."],
           "chosen": null | bool,             # firstAvailable: the alternative chosen
           "allocationMode": "ExactCount" | "All"}]}],
     "allocation": null | {"node", "devices": [ChosenDevice]}}   # allocated claim

    DeviceFinding: {"device", "driver", "pool", "check", "reason",
                    "selector"?: {"source", "expression", "conjunct"},
                    "comparison"?: {"name", "relation", "device", "asked",
                                    "deviceQuantity"?, "askedQuantity"?},
                    "heldBy"?: ["claim namespace/name (request r)"],
                    "capacity"?: [{"capacity", "needed", "left", "total", "neededQuantity",
                                   "leftQuantity", "totalQuantity"}],
                    "counters"?: [{"counterSet", "counter", "needed", "left", "heldBy",
                                   "neededQuantity", "leftQuantity"}],
                    "taints"?: ["key=value:Effect"]}
    SchedulerSearch: {"outcome": "Finishes" | "MayTimeOut" | "TimesOut",
                      "steps",                    # upstream's allocateOne calls, its order
                      "stepsExact",               # false: at least "steps" (counting stopped)
                      "finishesWithin", "timesOutAfter", "timeoutSeconds",   # the bounds
                      "reason", "suggestions": ["..."]}   # why it explodes, how to rewrite
    ChosenDevice: {"request", "driver", "pool", "device", "deviceClass",
                   "reasons": [{"source", "conjunct", "reason"}],
                   "values": {"<qualified name>": "<value>"}}

Funnel stages are those of :class:`kubedra.allocation.Stage`, camelCased. Quantities
are exact numbers (bytes for memory); each ``…Quantity`` beside one is the same amount in the
units the claim used (``143771Mi`` beside a selector's ``141Gi``, ``20Gi`` beside a capacity
request of ``30Gi``) or, for counters, those of the device's ``consumesCounters``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

API_VERSION = "kubedra.io/v1alpha1"
KIND = "ResourceClaimExplanation"

_LETTER = re.compile(r"[a-z]", re.IGNORECASE)

MAX_COPIES = 1000
"""Default bound of simulate's copy count."""

FUNNEL_NAMES = {"devices": "devices", "in_class": "inClass", "match_request": "matchRequest",
                "free": "free", "capacity": "capacity", "counters": "counters",
                "untainted": "untainted"}
"""Funnel stages of the allocator's diagnosis → their names in the JSON form."""


@dataclass(frozen=True)
class CounterShortage:
    """A counter a device needs more of than is left in its pool."""

    counter_set: str
    counter: str
    needed: str
    left: str
    held_by: tuple[str, ...]
    needed_quantity: str
    left_quantity: str
    """``needed`` and ``left`` in the units of the device's ``consumesCounters``."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"counterSet": self.counter_set, "counter": self.counter, "needed": self.needed,
                "left": self.left, "heldBy": list(self.held_by),
                "neededQuantity": self.needed_quantity, "leftQuantity": self.left_quantity}


@dataclass(frozen=True)
class CapacityShortage:
    """A capacity of a device a request needs more of than is left (KEP-5075): exact numbers
    (bytes for memory), and each ``…_quantity`` the same in the units of the request."""

    capacity: str
    needed: str
    left: str
    total: str
    needed_quantity: str
    left_quantity: str
    total_quantity: str

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"capacity": self.capacity, "needed": self.needed, "left": self.left,
                "total": self.total, "neededQuantity": self.needed_quantity,
                "leftQuantity": self.left_quantity, "totalQuantity": self.total_quantity}


@dataclass
class DeviceFinding:
    """Why one device cannot serve a request (the first check it fails)."""

    device: str
    driver: str
    pool: str
    check: str
    reason: str
    selector: dict[str, str] | None = None
    comparison: dict[str, str] | None = None
    held_by: list[str] = field(default_factory=list)
    capacity: list[CapacityShortage] = field(default_factory=list)
    counters: list[CounterShortage] = field(default_factory=list)
    taints: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (optional fields only when set)."""
        found: dict[str, Any] = {"device": self.device, "driver": self.driver,
                                 "pool": self.pool, "check": self.check, "reason": self.reason}
        if self.selector is not None:
            found["selector"] = self.selector
        if self.comparison is not None:
            found["comparison"] = self.comparison
        if self.held_by:
            found["heldBy"] = self.held_by
        if self.capacity:
            found["capacity"] = [c.to_json() for c in self.capacity]
        if self.counters:
            found["counters"] = [c.to_json() for c in self.counters]
        if self.taints:
            found["taints"] = self.taints
        return found


@dataclass
class RequestOutcome:
    """One request (or subrequest) of the claim on one node."""

    request: str
    device_class: str
    needed: int
    funnel: dict[str, int]
    failed_at: str | None
    message: str
    devices: list[DeviceFinding] = field(default_factory=list)
    constraints: list[tuple[str, int]] = field(default_factory=list)
    unusable_pools: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outdated: list[tuple[str, str, int, int, list[str]]] = field(default_factory=list)
    """Devices only an outdated slice has that would have matched: (pool, slice, generation,
    the pool's generation, devices); JSON ``outdatedSlices``, only when there are any."""
    all_devices: bool = False
    """``allocationMode: All`` (``needed`` is then the number of matching devices)."""
    fitting_devices: list[str] = field(default_factory=list)
    """The devices (``driver/pool/device``) that pass every check (not in the JSON)."""
    compile_errors: list[str] = field(default_factory=list)
    """Selectors of the request or its class that do not compile, each said once in words
    (not in the JSON, whose ``errors`` has them as the allocator words them)."""
    chosen: bool | None = None
    """For a subrequest (``firstAvailable``) on a node where the claim fits: whether it is
    the alternative the allocator chose (the first that can be met); else ``None``."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        found = {"request": self.request, "deviceClass": self.device_class,
                 "needed": self.needed, "funnel": self.funnel, "failedAt": self.failed_at,
                 "message": self.message, "devices": [d.to_json() for d in self.devices],
                 "constraints": [{"constraint": c, "together": n} for c, n in self.constraints],
                 "unusablePools": [{"pool": p, "reason": r} for p, r in self.unusable_pools],
                 "errors": self.errors, "chosen": self.chosen,
                 "allocationMode": "All" if self.all_devices else "ExactCount"}
        if self.outdated:
            found["outdatedSlices"] = [
                {"pool": pool, "slice": name, "generation": generation,
                 "poolGeneration": newest, "devices": devices}
                for pool, name, generation, newest, devices in self.outdated]
        return found


@dataclass
class SchedulerSearch:
    """Whether kube-scheduler's own search on the node ends within its filter timeout
    (:func:`kubedra.allocation.scheduler_search_time`), and for one that does not, why and
    how to rewrite the claim.

    Attributes:
        outcome: ``Finishes``, ``MayTimeOut`` or ``TimesOut``.
        steps: the steps upstream's search takes (its ``allocateOne`` calls).
        exact: False when counting stopped at a limit (``steps`` is then a lower bound).
        reason: for a search that may or does time out: why, in plain words.
        suggestions: rewrites of the claim, each checked to finish.
    """

    outcome: str
    steps: int
    exact: bool
    finishes_within: int
    times_out_after: int
    timeout_seconds: int
    reason: str = ""
    suggestions: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"outcome": self.outcome, "steps": self.steps, "stepsExact": self.exact,
                "finishesWithin": self.finishes_within, "timesOutAfter": self.times_out_after,
                "timeoutSeconds": self.timeout_seconds, "reason": self.reason,
                "suggestions": self.suggestions}


@dataclass(frozen=True)
class Renaming:
    """An outcome copied from the first node of its shape with names replaced word for word
    (:meth:`kubedra.explain.node_shapes.NodeShapes.reused`).

    Attributes:
        first: that node's outcome.
        names: the words of the first node's names (node, pools, slices, holding claims).
        words: the words replaced, the first node's → this node's (the first node's hold a
            letter and are none of ``taken``).
        taken: every other word the outcome's text may hold (the explanation's and the
            allocator's sentences, the claim, its classes, the first node's devices).
    """

    first: NodeOutcome
    names: frozenset[str]
    words: dict[str, str]
    taken: frozenset[str]

    @cached_property
    def reproduces_texts(self) -> bool:
        """Whether the texts made from this outcome (:mod:`kubedra.explain.render`) are the
        first node's with :attr:`words` replaced: every replacement is as long as the word it
        replaces (lines wrap at the same places), holds a letter, and is none of :attr:`taken`
        nor of the first node's names (so replacing commutes with every operation on words
        the texts are made with: masking names, folding devices that fail alike)."""
        return all(len(a) == len(b) and _LETTER.search(b) and b not in self.taken
                   and b not in self.names for a, b in self.words.items())


@dataclass
class NodeOutcome:
    """The claim on one node: whether it fits, with which devices, or why not."""

    node: str
    fits: bool
    message: str
    error: str | None = None
    devices: list[dict[str, str]] = field(default_factory=list)
    requests: list[RequestOutcome] = field(default_factory=list)
    failed_request: str | None = None
    """The request the allocator could not complete (``None`` when it fits or erred)."""
    search: SchedulerSearch | None = None
    """kube-scheduler's own search on this node (``None`` when the node was not searched)."""
    renamed_from: Renaming | None = field(default=None, compare=False, repr=False)
    """Where this outcome is another node's with the names replaced
    (:mod:`kubedra.explain.node_shapes`); not part of the JSON form."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"node": self.node, "fits": self.fits, "message": self.message,
                "error": self.error, "devices": self.devices,
                "requests": [r.to_json() for r in self.requests],
                "schedulerSearch": self.search.to_json() if self.search is not None else None}

    def times_out(self) -> bool:
        """Whether kube-scheduler's search on this node runs past its filter timeout."""
        return self.search is not None and self.search.outcome == "TimesOut"

    def may_time_out(self) -> bool:
        """Whether kube-scheduler's search on this node may run past its filter timeout."""
        return self.search is not None and self.search.outcome == "MayTimeOut"

    def deciding(self) -> list[RequestOutcome]:
        """The outcomes of the request that failed: the request, or for a subrequest
        (``firstAvailable``) every subrequest of its request that failed."""
        failed = self.failed_request
        if failed is None:
            return []
        parent, sub, _ = failed.partition("/")
        if not sub:
            return [r for r in self.requests if r.request == failed]
        return [r for r in self.requests if r.request.startswith(f"{parent}/")
                and (r.failed_at is not None or r.request == failed)]


@dataclass
class SelectorReason:
    """Why an allocated device passes one conjunct of a selector."""

    source: str
    conjunct: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"source": self.source, "conjunct": self.conjunct, "reason": self.reason}


@dataclass
class ChosenDevice:
    """A device in the claim's allocation and why it fits."""

    request: str
    driver: str
    pool: str
    device: str
    device_class: str
    reasons: list[SelectorReason] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"request": self.request, "driver": self.driver, "pool": self.pool,
                "device": self.device, "deviceClass": self.device_class,
                "reasons": [r.to_json() for r in self.reasons], "values": self.values}


@dataclass
class NodeCounts:
    """How many nodes an explanation looked at, and why the others were left out."""

    total: int = 0
    evaluated: int = 0
    without_devices: int = 0
    excluded_by_pods: int = 0
    excluded_by_claims: int = 0
    """Nodes the pods' node selection allows but their other, allocated claims do not (an
    allocated claim's ``nodeSelector`` holds its pods to its nodes)."""
    holding_claims: list[str] = field(default_factory=list)
    """Those allocated claims (``namespace/name``)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``excludedByClaims`` and ``holdingClaims`` only when claims hold the
        pods)."""
        found: dict[str, Any] = {
            "total": self.total, "evaluated": self.evaluated,
            "withoutDevices": self.without_devices, "excludedByPods": self.excluded_by_pods}
        if self.holding_claims:
            found["excludedByClaims"] = self.excluded_by_claims
            found["holdingClaims"] = self.holding_claims
        return found


@dataclass
class ClaimExplanation:
    """Everything ``kubedra explain`` says about one claim."""

    namespace: str
    name: str
    uid: str
    pods: list[str]
    verdict: str
    message: str
    nodes: NodeCounts = field(default_factory=NodeCounts)
    candidates: list[NodeOutcome] = field(default_factory=list)
    allocation_node: str | None = None
    allocation: list[ChosenDevice] | None = None
    kube_version: str = ""
    """The Kubernetes minor whose scheduler this explanation decides as (``1.37``)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form documented in this module."""
        allocation = None if self.allocation is None else {
            "node": self.allocation_node, "devices": [d.to_json() for d in self.allocation]}
        return {"apiVersion": API_VERSION, "kind": KIND,
                "claim": {"namespace": self.namespace, "name": self.name, "uid": self.uid},
                "kubeVersion": self.kube_version,
                "pods": self.pods, "verdict": self.verdict, "message": self.message,
                "nodes": self.nodes.to_json(),
                "candidates": [c.to_json() for c in self.candidates],
                "allocation": allocation}
