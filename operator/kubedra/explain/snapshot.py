"""What an explanation is computed from: one consistent view of the cluster.

The kube-scheduler's allocator sees every ResourceSlice, DeviceClass and DeviceTaintRule and
every allocated claim (``pkg/scheduler/framework/plugins/dynamicresources``); so does an
explanation. :class:`ClusterSnapshot` holds them as kubedra's models, with the nodes (name and
labels) and the pods that use the claim being explained (their node selector and required
node affinity narrow the nodes worth explaining, as the scheduler's NodeAffinity filter does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from pydantic import ValidationError

from kubedra.allocation import (
    DEFAULT_FEATURES,
    AllocatedState,
    AllocationError,
    Allocator,
    AllocatorFeatures,
    DeviceID,
    NodeInfo,
    ResourceSnapshot,
    claim_label,
    compile_node_selector,
)
from kubedra.api.base import validation_errors
from kubedra.api.resource import (
    DeviceClass,
    DeviceTaintRule,
    NodeSelector,
    ResourceClaim,
    ResourceSlice,
)
from kubedra.api.slice_decoding import SliceDecoder

T = TypeVar("T")


class ObjectError(ValueError):
    """An object explain reads does not parse (a dump edited by hand, or written by another
    tool): the message names its kind, its namespace and name, and each field and why
    (``ResourceSlice node-a-0: spec.devices[0].capacity.memory.value: …``)."""


def parsed(kind: str, parse: Callable[[Mapping[str, Any]], T], obj: Mapping[str, Any]) -> T:
    """``parse(obj)``, or :class:`ObjectError` naming ``obj`` and the fields it refuses.

    Raises:
        ObjectError: ``parse`` raises pydantic's ``ValidationError``, or ``obj`` is no
            mapping.
    """
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{kind}: not an object: {type(obj).__name__}")
    try:
        return parse(obj)
    except ValidationError as err:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = "/".join(str(meta[k]) for k in ("namespace", "name") if meta.get(k)) or "<unnamed>"
        raise ObjectError(f"{kind} {name}: " + "; ".join(validation_errors(err))) from None


@dataclass(frozen=True)
class Holder:
    """A claim holding a device: ``claim`` is ``namespace/name``, ``request`` the request
    (``req`` or ``req/sub``) the device was allocated for."""

    claim: str
    request: str

    def __str__(self) -> str:
        return f"claim {self.claim} (request {self.request})"


@dataclass
class ClusterSnapshot:
    """The cluster as the allocator sees it.

    Attributes:
        resources: slices, classes and taint rules (build one with :meth:`build`).
        taint_rules: the DeviceTaintRules, to name the rule behind a taint.
        claims: every claim; the allocated ones take devices.
        nodes: every node, by name.
    """

    resources: ResourceSnapshot
    taint_rules: list[DeviceTaintRule]
    claims: list[ResourceClaim]
    nodes: list[NodeInfo]

    @classmethod
    def build(cls, slices: Iterable[ResourceSlice], classes: Iterable[DeviceClass],
              taint_rules: Iterable[DeviceTaintRule], claims: Iterable[ResourceClaim],
              nodes: Iterable[NodeInfo],
              features: AllocatorFeatures = DEFAULT_FEATURES) -> ClusterSnapshot:
        """A snapshot of the given objects (taint rules apply when the features say so)."""
        rules = list(taint_rules)
        return cls(ResourceSnapshot(slices, classes, rules, features), rules, list(claims),
                   sorted(nodes, key=lambda n: n.name))

    @classmethod
    def from_api(cls, slices: Iterable[Mapping[str, Any]],
                 classes: Iterable[Mapping[str, Any]],
                 taint_rules: Iterable[Mapping[str, Any]],
                 claims: Iterable[Mapping[str, Any]],
                 nodes: Iterable[Mapping[str, Any]],
                 features: AllocatorFeatures = DEFAULT_FEATURES, *,
                 parsed_slices: list[ResourceSlice] | None = None) -> ClusterSnapshot:
        """A snapshot of objects as the API server returns them (plain dicts); slices share
        the models of equal attribute values and capacities (:class:`SliceDecoder`), or are
        ``parsed_slices``, the same slices parsed so already (while they were read).

        Raises:
            ObjectError: an object does not parse (the message names it and each field).
        """
        decoder = SliceDecoder()
        return cls.build(parsed_slices if parsed_slices is not None else
                         [parsed("ResourceSlice", decoder.decode, s) for s in slices],
                         [parsed("DeviceClass", DeviceClass.from_api, c) for c in classes],
                         [parsed("DeviceTaintRule", DeviceTaintRule.from_api, r)
                          for r in taint_rules],
                         [parsed("ResourceClaim", ResourceClaim.from_api, c) for c in claims],
                         [node_info(n) for n in nodes], features)

    @cached_property
    def allocated(self) -> AllocatedState:
        """The devices the allocated claims hold."""
        return AllocatedState.from_claims(
            self.claims, consumable_capacity=self.resources.features.consumable_capacity)

    @cached_property
    def holders(self) -> dict[DeviceID, list[Holder]]:
        """Per device, the allocated claims that hold it (or a share of it)."""
        found: dict[DeviceID, list[Holder]] = {}
        for claim in self.claims:
            allocation = claim.status.allocation
            if allocation is None or allocation.devices is None:
                continue
            for result in allocation.devices.results or ():
                if not result.admin_access:
                    found.setdefault((result.driver, result.pool, result.device), []).append(
                        Holder(claim_label(claim), result.request))
        return found

    def allocator(self) -> Allocator:
        """A fresh allocator over the snapshot (its counter cache starts empty)."""
        return Allocator(self.resources, self.allocated)



def _string_map(value: Any) -> bool:
    """Whether ``value`` is a map of strings to strings (labels, a node selector)."""
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """The allocator's view of a Node object: its name and labels.

    Raises:
        ObjectError: the name is no string or the labels no map of strings.
    """
    meta = (node.get("metadata") if isinstance(node, Mapping) else None) or {}
    if not isinstance(meta, Mapping):
        raise ObjectError("Node: metadata: Input should be a valid dictionary")
    name, labels = meta.get("name") or "", meta.get("labels") or {}
    if not isinstance(name, str):
        raise ObjectError("Node: metadata.name: Input should be a valid string")
    if not _string_map(labels):
        raise ObjectError(f"Node {name or '<unnamed>'}: metadata.labels: Input should be a "
                          "map of strings to strings")
    return NodeInfo(name, dict(labels))


@dataclass(frozen=True)
class PodPlacement:
    """Where a pod may run, as far as claims care: ``spec.nodeName`` when bound, its
    ``nodeSelector`` and its required node affinity; and the claims it uses.

    Attributes:
        claims: names of the ResourceClaims the pod uses (``spec.resourceClaims[].
            resourceClaimName``, the generated ones in ``status.resourceClaimStatuses`` and
            the one kube-scheduler made for its extended resources,
            ``status.extendedResourceClaimStatus``).
    """

    namespace: str
    name: str
    node_name: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    claims: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, pod: Mapping[str, Any]) -> PodPlacement:
        """The placement of a Pod object (a plain dict).

        Raises:
            ObjectError: its node selector is no map of strings, or its required node
                affinity does not parse (a dump edited by hand).
        """
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        label = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        selector = spec.get("nodeSelector") or {}
        if not _string_map(selector):
            raise ObjectError(f"{label}: spec.nodeSelector: Input should be a map of strings "
                              "to strings")
        try:
            affinity = NodeSelector.from_api(required) if required else None
        except ValidationError as err:
            raise ObjectError(f"{label}: " + "; ".join(validation_errors(
                err, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            ))) from None
        claims = [c["resourceClaimName"] for c in spec.get("resourceClaims") or ()
                  if c.get("resourceClaimName")]
        status = pod.get("status") or {}
        claims += [s["resourceClaimName"] for s in status.get("resourceClaimStatuses") or ()
                   if s.get("resourceClaimName")]
        extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        claims += [extended] if extended else []
        return cls(namespace=meta.get("namespace") or "", name=meta.get("name") or "",
                   node_name=spec.get("nodeName") or None,
                   node_selector=dict(selector), affinity=affinity,
                   claims=tuple(dict.fromkeys(claims)))

    def allows(self, node: NodeInfo) -> bool:
        """Whether the pod may run on ``node`` (name, node selector, required affinity; a
        required affinity that does not parse allows no node, as the scheduler rejects it).
        """
        if self.node_name is not None and node.name != self.node_name:
            return False
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.affinity is None:
            return True
        try:
            return compile_node_selector(self.affinity).matches(node)
        except AllocationError:
            return False

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
