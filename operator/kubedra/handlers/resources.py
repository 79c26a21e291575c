"""The operator's kopf registry and the resources it watches (imported as a namespace:
``resources.registry``, ``resources.CLAIMS``)."""

from __future__ import annotations

from typing import Any

import kopf

from kubedra.api import inventory as inv
from kubedra.controller.compact import Compactor

registry = kopf.OperatorRegistry()

INVENTORIES = (inv.GROUP, inv.VERSION, inv.PLURAL)
SLICES = ("resource.k8s.io", "v1", "resourceslices")
CLAIMS = ("resource.k8s.io", "v1", "resourceclaims")
CLASSES = ("resource.k8s.io", "v1", "deviceclasses")
TAINT_RULES = ("resource.k8s.io", "v1", "devicetaintrules")
PODS = ("v1", "pods")


def url(resource: tuple[str, ...]) -> str:
    """The API path of a resource's cluster-wide collection (``/api/v1/nodes``,
    ``/apis/resource.k8s.io/v1/resourceslices``)."""
    *group_version, plural = resource
    prefix = "/api" if len(group_version) == 1 else "/apis"
    return "/".join([prefix, *group_version, plural])


_compactor = Compactor()


def plain(body: Any) -> dict[str, Any]:
    """A compact plain-dict copy of a kopf body without ``managedFields`` (see
    :mod:`kubedra.controller.compact`)."""
    return _compactor.copy(body)
