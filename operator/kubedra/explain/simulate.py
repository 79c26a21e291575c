"""What-if: where would a claim fit now, and how many copies of it fit in the cluster.

The claim (a ResourceClaim, or the claim a ResourceClaimTemplate would create) is explained on
every node as :func:`kubedra.explain.claims.explain_claim` does. Then copies of it are
allocated greedily, one after another, each against the cluster with the copies before it
allocated: a copy goes to the first node (by name) where it fits. A node where a copy does not
fit is not tried again, since allocations only take devices, counters and capacity away. The
count stops at ``max_copies`` (a claim that takes nothing, e.g. with ``adminAccess``, would fit
forever).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kubedra.allocation import (
    AllocatedState,
    AllocationError,
    AllocationFailed,
    Allocator,
    NodeInfo,
)
from kubedra.api.base import validation_errors
from kubedra.api.claim_validation import device_claim_errors
from kubedra.api.resource import AllocationResult, ResourceClaim
from kubedra.cel import CELCompileError, compile_selector
from kubedra.explain.claims import explain_claim, result_devices
from kubedra.explain.model import API_VERSION, MAX_COPIES, ClaimExplanation
from kubedra.explain.node_shapes import NodeShapes
from kubedra.explain.shapes import NODES_NAMED, named
from kubedra.explain.snapshot import ClusterSnapshot


class ClaimFileError(ValueError):
    """The file holds no ResourceClaim or ResourceClaimTemplate, or one the API server would
    refuse (the message names each field and why)."""


def claim_from_documents(documents: Iterable[Any], namespace: str | None, *,
                         effect_none: bool = True) -> ResourceClaim:
    """The first ResourceClaim (or the claim of the first ResourceClaimTemplate) among YAML
    documents, without status, in ``namespace`` when given (else its own, else ``default``),
    named ``<unnamed>`` when it has neither name nor generateName. ``effect_none=False``
    refuses a toleration with effect None, as the API server of Kubernetes 1.34 does
    (``TAINT_EFFECT_NONE`` of :mod:`kubedra.allocation`).

    Raises:
        ClaimFileError: there is none, its ``apiVersion`` is not one simulate reads
            (:data:`READ_API_VERSIONS`), the API server would refuse it
            (:func:`~kubedra.api.claim_validation.device_claim_errors`, or a selector that
            does not compile), or it has no requests:
            valid (``DeviceClaim.requests``: "if empty, nothing needs to be allocated",
            ``k8s.io/api/resource/v1/types.go``), but there is nothing to simulate; or a
            field has the wrong type (each named, :func:`~kubedra.api.base.validation_errors`).
    """
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        kind = document.get("kind")
        meta = dict(document.get("metadata") or {})
        if kind == "ResourceClaimTemplate":
            spec = (document.get("spec") or {}).get("spec") or {}
        elif kind == "ResourceClaim":
            spec = document.get("spec") or {}
        else:
            continue
        _check_api_version(document.get("apiVersion"), kind)
        meta["namespace"] = namespace or meta.get("namespace") or "default"
        meta.setdefault("name", meta.get("generateName") or "<unnamed>")
        outer = "spec." * (kind != "ResourceClaim")
        try:
            claim = ResourceClaim.from_api({"metadata": {k: meta[k] for k in ("name",
                                                                           "namespace")},
                                            "spec": spec})
        except ValidationError as err:
            raise ClaimFileError("the API server would refuse this claim: " + "; ".join(
                validation_errors(err, outer))) from None
        path = f"{outer}spec.devices"
        errors = [f"{e.field}: {e.message}"
                  for e in device_claim_errors(claim.spec.devices, path, _cel_error,
                                               effect_none=effect_none)]
        if errors:
            raise ClaimFileError("the API server would refuse this claim: " + "; ".join(errors))
        if not (claim.spec.devices and claim.spec.devices.requests):
            raise ClaimFileError(
                f"nothing to simulate: the claim has no requests ({path}.requests is empty); "
                "the API server accepts such a claim and kube-scheduler allocates it on any "
                "node with no devices")
        return claim
    raise ClaimFileError("no ResourceClaim or ResourceClaimTemplate found")


READ_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")
"""The API versions whose claims simulate reads: v1 and v1beta2, whose ``DeviceRequest`` has
the same fields (``exactly``, ``firstAvailable``; ``k8s.io/api/resource/v1beta2/types.go``)."""


def _check_api_version(api_version: Any, kind: str) -> None:
    """Refuse a claim of an API version simulate does not read (a file without
    ``apiVersion`` is read as v1): a v1beta1 claim's requests would otherwise be refused for
    lacking ``exactly``, which never names what is wrong.

    Raises:
        ClaimFileError: ``api_version`` is set and is not one of :data:`READ_API_VERSIONS`.
    """
    if api_version is None or api_version in READ_API_VERSIONS:
        return
    why = (" (v1beta1 has deviceClassName, selectors, count and allocationMode on the request "
           "itself; v1 has them under exactly)" if api_version == "resource.k8s.io/v1beta1"
           else "")
    raise ClaimFileError(f"apiVersion: {api_version!r}: simulate reads a {kind} of "
                         f"{' or '.join(READ_API_VERSIONS)}{why}")


def _cel_error(expression: str) -> str | None:
    """Why selector ``expression`` does not compile, or None: the API server compiles every
    selector of a claim it is given (``validateCELExpression`` in
    ``pkg/apis/resource/validation/validation.go``) and refuses the claim, so simulate does
    too, once per selector, rather than explain it device by device."""
    try:
        compile_selector(expression)
    except CELCompileError as err:
        return str(err)
    return None


@dataclass
class Simulation:
    """The claim now (:attr:`explanation`) and the copies that fit, in order.

    Attributes:
        copies: per copy, the node and its devices (``request``, ``driver``, ``pool``,
            ``device``).
        limit_reached: the count stopped at the limit; more copies may fit.
    """

    explanation: ClaimExplanation
    copies: list[tuple[str, list[dict[str, str]]]] = field(default_factory=list)
    limit_reached: bool = False

    def by_node(self) -> dict[str, int]:
        """Copies per node, in node order."""
        counts: dict[str, int] = {}
        for node, _ in self.copies:
            counts[node] = counts.get(node, 0) + 1
        return dict(sorted(counts.items()))

    def message(self) -> str:
        """One line: how many copies fit, and where."""
        count = len(self.copies)
        where = _where(self.by_node())
        more = " (the limit; more fit)" if self.limit_reached else ""
        text = f"{count} {'copy fits' if count == 1 else 'copies fit'} in the cluster now" + \
            more + (f" ({where})" if where else "")
        placed = self.by_node()
        times_out, may_time_out = ([n for n in nodes if n in placed]
                                   for nodes in self.search_warnings())
        if times_out:
            text += (f", but kube-scheduler's search times out on {_nodes(times_out)}: it does "
                     "not place the claim there (see Scheduler search)")
        if may_time_out:
            text += (f"{', and' if times_out else ', but'} kube-scheduler's search may time out "
                     f"on {_nodes(may_time_out)} (see Scheduler search)")
        return text

    def search_warnings(self) -> tuple[list[str], list[str]]:
        """The nodes where kube-scheduler's search for the claim times out, and those where it
        may (:class:`kubedra.explain.model.SchedulerSearch`)."""
        candidates = self.explanation.candidates
        return ([c.node for c in candidates if c.times_out()],
                [c.node for c in candidates if c.may_time_out()])

    def to_json(self) -> dict[str, Any]:
        """``{"apiVersion", "kind": "ResourceClaimSimulation", "explanation": <the
        ResourceClaimExplanation of the claim now>, "copies": {"count", "limitReached",
        "byNode": {node: count}, "allocations": [{"node", "devices"}],
        "schedulerTimesOut": [node], "schedulerMayTimeOut": [node]}, "message"}``: copies are
        counted where kubedra's allocator finds them; the nodes where kube-scheduler's own search
        for the claim times out (or may) are listed apart."""
        times_out, may_time_out = self.search_warnings()
        return {"apiVersion": API_VERSION, "kind": "ResourceClaimSimulation",
                "explanation": self.explanation.to_json(),
                "copies": {"count": len(self.copies), "limitReached": self.limit_reached,
                           "byNode": self.by_node(),
                           "allocations": [{"node": node, "devices": devices}
                                           for node, devices in self.copies],
                           "schedulerTimesOut": times_out,
                           "schedulerMayTimeOut": may_time_out},
                "message": self.message()}


def _where(by_node: dict[str, int]) -> str:
    """``gpu-node-0000: 2, gpu-node-0001: 1``; where more than :data:`NODES_NAMED` nodes take
    the same number of copies, ``1 on each of 1,000 nodes: gpu-node-0000, …``."""
    counts: dict[int, list[str]] = {}
    for node, count in by_node.items():
        counts.setdefault(count, []).append(node)
    if all(len(nodes) <= NODES_NAMED for nodes in counts.values()):
        return ", ".join(f"{node}: {n}" for node, n in by_node.items())
    return "; ".join(f"{n} on {nodes[0]}" if len(nodes) == 1 else
                     f"{n} on each of {len(nodes):,} nodes: {named(nodes)}"
                     for n, nodes in sorted(counts.items(), key=lambda c: -len(c[1])))


def _nodes(names: list[str]) -> str:
    return ("node " if len(names) == 1 else "nodes ") + ", ".join(names)


def simulate_claim(snapshot: ClusterSnapshot, claim: ResourceClaim, *,
                   nodes: Sequence[str] | None = None,
                   max_copies: int = MAX_COPIES, by_shape: bool = True) -> Simulation:
    """Explain ``claim`` on the cluster now and count the copies of it that fit
    (``by_shape``: as :func:`~kubedra.explain.claims.explain_claim`)."""
    shapes = NodeShapes(snapshot, snapshot.allocator(), claim)
    simulation = Simulation(explain_claim(snapshot, claim, nodes=nodes, by_shape=by_shape,
                                          shapes=shapes))
    fits = {c.node for c in simulation.explanation.candidates if c.fits}
    left = [node for node in snapshot.nodes if node.name in fits]
    consumable = snapshot.resources.features.consumable_capacity
    allocated = AllocatedState.from_claims(snapshot.claims, consumable_capacity=consumable)
    while left:
        found = _next_copy(Allocator(snapshot.resources, allocated), claim, left,
                           shapes if by_shape else None)
        if found is None:
            break
        if len(simulation.copies) == max_copies:
            simulation.limit_reached = True
            break
        node, allocation = found
        allocated.add_allocation(allocation, consumable_capacity=consumable)
        simulation.copies.append((node, result_devices(allocation)))
    return simulation


_COPY = "copy"
"""What :class:`NodeShapes` keeps per shape for the copies: the allocation result (as JSON),
or ``False`` where the claim does not fit."""


def _next_copy(allocator: Allocator, claim: ResourceClaim, left: list[NodeInfo],
               shapes: NodeShapes | None) -> tuple[str, AllocationResult] | None:
    """Allocate one more copy on the first node of ``left`` where it fits; nodes where it does
    not are removed from ``left``. With ``shapes``, once per node shape (and allocated state):
    a later node of the shape gets the first one's result with its names."""
    while left:
        node = left[0]
        pools = allocator.snapshot.node_pools(node)
        shape = shapes.shape(node, pools, allocator.allocated) if shapes is not None else None
        found = shapes.reused(shape, _COPY) if shapes is not None and shape is not None \
            else None
        if found is None:
            try:
                [allocation] = allocator.allocate(node, [claim])
            except AllocationFailed:
                found = False
            except AllocationError:
                left.pop(0)
                continue
            if shapes is not None and shape is not None:
                shapes.keep(shape, found if found is False else allocation.model_dump(
                    mode="json", by_alias=True, exclude_none=True), pools, _COPY)
            if found is None:
                return node.name, allocation
        if found is False:
            left.pop(0)
            continue
        return node.name, AllocationResult.model_validate(found)
    return None
