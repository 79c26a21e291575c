"""The claim kube-scheduler makes for a pod's extended resources (KEP-5004), so that
``kubectl dra explain pod`` can explain a pod that asks for ``nvidia.com/gpu: 1`` and has no
claim of its own yet (the scheduler creates it only when it binds the pod).

Rules of kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/dynamicresources/
extendeddynamicresources.go``, ``createRequestsAndMappings``):

- a resource name is backed by DRA when a DeviceClass has it as ``extendedResourceName``
  (several: the newest class wins) or it is ``deviceclass.resource.kubernetes.io/<class>``;
- per resource (sorted by name) and per long-lived container (regular containers and sidecar
  init containers), a request ``container-<i>-request-<j>`` for the container's quantity:
  ``i`` counts init containers first, then containers; ``j`` is the resource's index among the
  container's resource requests sorted by name;
- a non-sidecar init container first reuses requests of long-lived containers after it; what
  is left becomes a request of its own, and of those only the biggest is kept;
- requests sorted by name, each ``ExactCount`` of the class, nothing else.

Which nodes serve the name by a device plugin (allocatable) instead is left to the allocator's
node check: such nodes are explained as any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    DeviceClaim,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaim,
    ResourceClaimSpec,
)

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
"""``ResourceDeviceClassPrefix``: the name every DeviceClass backs without saying so."""
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def class_for(name: str, classes: Sequence[DeviceClass]) -> DeviceClass | None:
    """The DeviceClass backing extended resource ``name``, or None."""
    explicit = [c for c in classes if c.spec.extended_resource_name == name]
    if explicit:
        return max(explicit, key=lambda c: (c.metadata.creation_timestamp or "",
                                            c.metadata.name or ""))
    if name.startswith(IMPLICIT_PREFIX):
        wanted = name.removeprefix(IMPLICIT_PREFIX)
        return next((c for c in classes if c.metadata.name == wanted), None)
    return None


def _count(quantity: Any) -> int:
    """A whole quantity (the API server refuses fractional extended resources)."""
    return Quantity(str(quantity)).as_int()


def _container_request(index: int, container: Mapping[str, Any], name: str, class_name: str,
                       reusable: Sequence[DeviceRequest | None]) -> DeviceRequest | None:
    """``createResourceRequestAndMappings`` for one container and resource."""
    requests = (container.get("resources") or {}).get("requests") or {}
    if name not in requests or not (wanted := _count(requests[name])):
        return None
    covered = 0
    for request in reusable:
        if request is not None and request.exactly is not None:
            covered += request.exactly.count or 0
            if covered >= wanted:
                return None
    position = sorted(requests).index(name)
    return DeviceRequest(name=f"container-{index}-request-{position}", exactly=ExactDeviceRequest(
        device_class_name=class_name, allocation_mode="ExactCount", count=wanted - covered))


def extended_resource_requests(pod: Mapping[str, Any],
                               classes: Sequence[DeviceClass]) -> list[DeviceRequest]:
    """The requests of the claim kube-scheduler makes for ``pod`` (a Pod as a dict); empty
    when no extended resource of the pod is backed by a DeviceClass."""
    spec = pod.get("spec") or {}
    init = list(spec.get("initContainers") or [])
    containers = init + list(spec.get("containers") or [])
    short_lived = [i for i, c in enumerate(containers)
                   if i < len(init) and c.get("restartPolicy") != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    names = sorted({n for c in containers
                    for n in ((c.get("resources") or {}).get("requests") or {})})
    result: list[DeviceRequest] = []
    for name in names:
        device_class = class_for(name, classes)
        if device_class is None:
            continue
        class_name = device_class.metadata.name or ""
        own: list[DeviceRequest | None] = [None] * len(containers)
        for i in long_lived:
            own[i] = _container_request(i, containers[i], name, class_name, ())
        biggest: DeviceRequest | None = None
        for i in short_lived:
            request = _container_request(i, containers[i], name, class_name, own[i:])
            if request is not None and request.exactly is not None and (
                    biggest is None or (biggest.exactly and (biggest.exactly.count or 0)
                                        < (request.exactly.count or 0))):
                biggest = request
        result += [r for r in (biggest, *own) if r is not None]
    return sorted(result, key=lambda r: r.name)


def extended_resource_claim(pod: Mapping[str, Any],
                            classes: Sequence[DeviceClass]) -> ResourceClaim | None:
    """The claim kube-scheduler would make for ``pod`` (not yet allocated), named
    ``<pod>-extended-resources``; None when the pod has no extended resource backed by DRA."""
    requests = extended_resource_requests(pod, classes)
    if not requests:
        return None
    meta = pod.get("metadata") or {}
    return ResourceClaim(
        metadata=ObjectMeta(name=f"{meta.get('name')}-extended-resources",
                            namespace=meta.get("namespace"),
                            annotations={EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests)))
