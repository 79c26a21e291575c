"""The operator's kopf registry and the resources it watches (imported as a namespace:
``resources.registry``, ``resources.CLAIMS``)."""

from __future__ import annotations

from typing import Any

import kopf

from kubedra.api import inventory as inv

registry = kopf.OperatorRegistry()

INVENTORIES = (inv.GROUP, inv.VERSION, inv.PLURAL)
SLICES = ("resource.k8s.io", "v1", "resourceslices")
CLAIMS = ("resource.k8s.io", "v1", "resourceclaims")
CLASSES = ("resource.k8s.io", "v1", "deviceclasses")
TAINT_RULES = ("resource.k8s.io", "v1", "devicetaintrules")
PODS = ("v1", "pods")
NODES = ("v1", "nodes")


def plain(body: Any) -> dict[str, Any]:
    """A plain-dict copy of a kopf body without ``managedFields``."""
    data = dict(body)
    meta = {k: v for k, v in dict(data.get("metadata", {})).items() if k != "managedFields"}
    return {**data, "metadata": meta}
