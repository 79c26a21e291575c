"""Explain a pod: all of its claims together, as kube-scheduler allocates them.

The scheduler's DRA plugin allocates every unallocated claim of a pod in one search per node
(``Filter`` in ``pkg/scheduler/framework/plugins/dynamicresources``); a claim that is already
allocated pins the pod to the nodes its allocation selects. So a pod can stay pending although
each of its claims fits somewhere on its own: no node fits all of them, or two claims compete
for the same devices. Per node this module says which: the node is excluded (the pod's node
selection, or an allocated claim's node), the claims fit together (with which devices), one
claim does not fit at all (its explanation), or they fit alone but not together (the devices
they compete for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubedra.allocation import (
    AllocationError,
    AllocationFailed,
    Allocator,
    NodeInfo,
    claim_label,
    compile_node_selector,
)
from kubedra.api.resource import ResourceClaim
from kubedra.explain.claims import (
    FILTER_ERROR,
    MISSING_CLASS_NOTE,
    devices_by_request,
    evaluate_node,
    missing_class,
    result_devices,
)
from kubedra.explain.model import API_VERSION, NodeOutcome, SchedulerSearch
from kubedra.explain.search_time import TIMED_OUT, judge_search
from kubedra.explain.shapes import NODES_NAMED
from kubedra.explain.snapshot import ClusterSnapshot, PodPlacement

KIND = "PodExplanation"
DEVICES_NAMED = 5
"""Devices named when claims compete for devices."""


@dataclass
class PodNodeOutcome:
    """The pod's claims on one node."""

    node: str
    fits: bool
    message: str
    excluded: str | None = None
    devices: list[dict[str, str]] = field(default_factory=list)
    claims: dict[str, NodeOutcome] = field(default_factory=dict)
    search: SchedulerSearch | None = None
    """kube-scheduler's search for the claims together on this node."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"node": self.node, "fits": self.fits, "message": self.message,
                "excluded": self.excluded, "devices": self.devices,
                "claims": [{"claim": name, "fitsAlone": o.fits, "message": o.message,
                            "error": o.error} for name, o in self.claims.items()],
                "schedulerSearch": self.search.to_json() if self.search is not None else None}

    def times_out(self) -> bool:
        """Whether kube-scheduler's search for the claims on this node times out."""
        return self.search is not None and self.search.outcome == "TimesOut"


@dataclass
class PodExplanation:
    """Everything ``kubedra explain pod`` says.

    JSON (``kubedra.io/v1alpha1``, ``kind: PodExplanation``; fields are only ever added)::

        {"pod": "ns/name", "kubeVersion": "1.37",
         "claims": {"allocated": [...], "pending": [...], "missing": [...]},
         "verdict": "Fits" | "Unschedulable" | "Error" | "Timeout" | "Allocated",
         "message": "...",
         "nodes": [{"node", "fits", "message", "excluded", "devices",
                    "claims": [{"claim", "fitsAlone", "message", "error"}],
                    "schedulerSearch": null | SchedulerSearch}]}   # see explain.model
    """

    pod: str
    allocated: list[str]
    pending: list[str]
    missing: list[str]
    verdict: str = ""
    message: str = ""
    nodes: list[PodNodeOutcome] = field(default_factory=list)
    kube_version: str = ""
    """The Kubernetes minor whose scheduler this explanation decides as (``1.37``)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form documented above."""
        return {"apiVersion": API_VERSION, "kind": KIND, "pod": self.pod,
                "kubeVersion": self.kube_version,
                "claims": {"allocated": self.allocated, "pending": self.pending,
                           "missing": self.missing},
                "verdict": self.verdict, "message": self.message,
                "nodes": [n.to_json() for n in self.nodes]}


def _pinned_by(claims: Sequence[ResourceClaim], node: NodeInfo) -> str | None:
    """The allocated claim whose allocation selects other nodes than ``node``, if any."""
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None or allocation.node_selector is None:
            continue
        try:
            allowed = compile_node_selector(allocation.node_selector).matches(node)
        except AllocationError:
            allowed = False
        if not allowed:
            return claim_label(claim)
    return None


def _fitting_devices(outcome: NodeOutcome) -> set[str]:
    """The devices that pass every check for any request of the claim."""
    return {finding for request in outcome.requests for finding in request.fitting_devices}


def _alone(outcome: NodeOutcome) -> str:
    """Why a claim does not fit alone, as its own explanation says it on the node (the
    deciding request with its devices: ``gpu-0 on n is allocated to claim ns/c``)."""
    if outcome.error is not None:
        return f"error: {outcome.error}"
    return outcome.message.partition(": ")[2]


def _competition(alone: dict[str, NodeOutcome], reason: str) -> str:
    """Claims that fit alone but not together: the devices they both could use."""
    names = list(alone)
    shared: set[str] = set()
    pairs = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            both = _fitting_devices(alone[first]) & _fitting_devices(alone[second])
            if both:
                pairs.append((first, second))
                shared |= both
    if not shared:
        return f"each claim fits alone, but not all together: {reason}"
    listed = sorted(key.rpartition("/")[2] for key in shared)
    named = ", ".join(listed[:DEVICES_NAMED]) + (", …" if len(listed) > DEVICES_NAMED else "")
    claims = "; ".join(f"{a} and {b}" for a, b in pairs)
    return (f"each claim fits alone, but not all together: {claims} compete for the same "
            f"{len(listed)} device{'s' if len(listed) != 1 else ''} ({named}): {reason}")


def _evaluate(snapshot: ClusterSnapshot, pending: list[ResourceClaim], node: NodeInfo
              ) -> PodNodeOutcome:
    allocator = snapshot.allocator()
    try:
        pools = snapshot.resources.node_pools(node)
        results = allocator.allocate(node, pending)
    except AllocationFailed as failure:
        alone = {claim_label(c): evaluate_node(snapshot, allocator, c, node, pools)
                 for c in pending}
        failing = [name for name, outcome in alone.items() if not outcome.fits]
        if failing:
            message = "; ".join(f"claim {name} does not fit: " + _alone(alone[name])
                                for name in failing)
        else:
            message = _competition(alone, failure.reason)
        return _searched(PodNodeOutcome(node.name, False, message, claims=alone), allocator,
                         node, pending)
    except AllocationError as err:
        return PodNodeOutcome(node.name, False, f"error: {err}")
    devices = [{**d, "claim": claim_label(c)} for c, r in zip(pending, results, strict=True)
               for d in result_devices(r)]
    names = ", ".join(f"{d['device']} ({d['claim']}, request {d['request']})" for d in devices)
    return _searched(PodNodeOutcome(node.name, True, f"all claims fit with {names}",
                                    devices=devices), allocator, node, pending)


def _searched(outcome: PodNodeOutcome, allocator: Allocator, node: NodeInfo,
              pending: list[ResourceClaim]) -> PodNodeOutcome:
    """``outcome`` with kube-scheduler's search for the claims together on the node; where it
    times out the message says so first."""
    outcome.search = judge_search(allocator, node, pending, outcome.fits)
    if outcome.search.outcome != "Finishes":
        found = f"an allocation exists ({devices_by_request(outcome.devices)})" \
            if outcome.fits else f"the claims do not fit anyway: {outcome.message}"
        outcome.message = f"{outcome.search.reason}; {found}"
    return outcome


def explain_pod(snapshot: ClusterSnapshot, pod: PodPlacement, claims: Sequence[ResourceClaim],
                *, nodes: Sequence[str] | None = None) -> PodExplanation:
    """Explain ``pod`` (its node selection) with ``claims``, the ResourceClaims it uses that
    exist (allocated ones pin it; the others are allocated together on each node)."""
    found = {claim_label(c) for c in claims}
    wanted = [f"{pod.namespace}/{name}" for name in pod.claims]
    allocated = [c for c in claims if c.status.allocation is not None]
    pending = [c for c in claims if c.status.allocation is None]
    explanation = PodExplanation(str(pod), [claim_label(c) for c in allocated],
                                 [claim_label(c) for c in pending],
                                 [name for name in wanted if name not in found],
                                 kube_version=str(snapshot.resources.features.version))
    if not pending:
        explanation.verdict = "Allocated"
        explanation.message = "every claim of the pod is allocated" + (
            f"; claims not found: {', '.join(explanation.missing)}" if explanation.missing
            else "")
        return explanation
    if (missing := missing_class(snapshot, pending)) is not None:
        explanation.verdict = "Unschedulable"
        explanation.message = (f"cannot be allocated: claim {claim_label(missing[0])}, "
                               f"{missing[1]} ({MISSING_CLASS_NOTE})")
        return explanation
    for node in snapshot.nodes:
        if nodes is not None and node.name not in nodes:
            continue
        if not pod.allows(node):
            continue
        pinned = _pinned_by(allocated, node)
        if pinned is not None:
            explanation.nodes.append(PodNodeOutcome(
                node.name, False, f"excluded: claim {pinned} is allocated on other nodes",
                excluded=f"claim {pinned}"))
            continue
        explanation.nodes.append(_evaluate(snapshot, pending, node))
    _verdict(explanation)
    return explanation


def _verdict(explanation: PodExplanation) -> None:
    fitting = [n for n in explanation.nodes if n.fits]
    erred = [n for n in explanation.nodes if n.message.startswith("error: ")]
    timed_out = [n for n in explanation.nodes if n.times_out()]
    if erred:
        explanation.verdict = "Error"
        explanation.message = f"{erred[0].node}: {erred[0].message}"
    elif timed_out:
        explanation.verdict = "Timeout"
        explanation.message = (f"kube-scheduler times out on node {timed_out[0].node} and "
                               f"reports an error: {FILTER_ERROR}node {timed_out[0].node}: "
                               f"{TIMED_OUT}; {timed_out[0].message}")
    elif fitting:
        explanation.verdict = "Fits"
        explanation.message = f"the claims fit together on {fitting[0].node}: " + \
            fitting[0].message
    else:
        explanation.verdict = "Unschedulable"
        groups: dict[str, list[str]] = {}
        for outcome in explanation.nodes:
            groups.setdefault(outcome.message.replace(outcome.node, "\0"), []).append(
                outcome.node)
        parts = []
        for nodes in sorted(groups.values(), key=lambda g: (-len(g), g[0])):
            first = next(o for o in explanation.nodes if o.node == nodes[0])
            text = f"{first.node}: {first.message}"
            if len(nodes) > 1:
                more = ", ".join(nodes[1:NODES_NAMED + 1]) + (
                    ", …" if len(nodes) > NODES_NAMED + 1 else "")
                text += f" (the same on {len(nodes) - 1} more: {more})"
            parts.append(text)
        explanation.message = "no node fits all claims of the pod: " + "; ".join(parts) if \
            parts else "no node fits all claims of the pod: no node is left after the pod's " \
            "node selection"
