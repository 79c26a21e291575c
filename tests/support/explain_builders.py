"""Clusters for explain tests: the H200 capture published as the operator publishes it, the
shipped DeviceClasses, claims and nodes."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kubedra.allocation import DEFAULT_FEATURES, AllocatorFeatures
from kubedra.api.inventory import DeviceInventory, DiscoverySettings
from kubedra.api.resource import OwnerReference, ResourceClaim
from kubedra.discovery import discover
from kubedra.explain import ClusterSnapshot, explain_claim
from kubedra.explain.render import render_explanation
from kubedra.publishing.pool import build_pool
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import plan_sync
from tests.support.scenario_builders import CLASSES

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "hardware" / "nvidia-h200"
Json = dict[str, Any]


@cache
def _discovered(mig: str) -> Json:
    result: Json = discover(f"snapshot:{H200}", DiscoverySettings(mig=mig)).to_api()
    return result


def h200_slices(node: str, *, mig: str = "none") -> list[Json]:
    """The ResourceSlices the operator publishes for an H200 node (``mig``: none|partitions)."""
    name = f"{node}-gpu.kubedra.io"
    inventory = DeviceInventory.from_api({
        "metadata": {"name": name, "uid": f"uid-{node}", "generation": 1},
        "spec": {"driver": "gpu.kubedra.io", "nodeName": node},
        "status": {"discovered": _discovered(mig)}})
    pool = build_pool(inventory)
    owner = OwnerReference(api_version="kubedra.io/v1alpha1", kind="DeviceInventory", name=name,
                           uid=f"uid-{node}", controller=True)
    return [write.body for write in plan_sync(name, owner, pool, split_pool(pool), []).writes
            if write.body is not None]


def shipped_classes() -> list[Json]:
    """The DeviceClasses of manifests/deviceclasses."""
    folder = REPO / "manifests" / "deviceclasses"
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.kubedra.io.yaml"))]


def node(name: str, **labels: str) -> Json:
    """A Node object with ``kubernetes.io/hostname`` and ``labels``."""
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def gpu_claim(name: str, *selectors: str, device_class: str = "gpu.kubedra.io",
              namespace: str = "demo", allocation: Json | None = None, **request: Any) -> Json:
    """A claim with one request ``gpu`` of ``device_class`` with CEL ``selectors``."""
    exactly: Json = {"deviceClassName": device_class, **request}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    found: Json = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    if allocation is not None:
        found["status"] = {"allocation": allocation}
    return found


def on_node(node_name: str, pool: str, *devices: str, request: str = "gpu",
            driver: str = "gpu.kubedra.io") -> Json:
    """An allocation of ``devices`` from a node-local pool, as kube-scheduler writes it."""
    return {"devices": {"results": [{"request": request, "driver": driver, "pool": pool,
                                     "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}


def explain_on_node_a(slices: list[Json], wants: Json, allocated: tuple[Json, ...] = (),
                      features: AllocatorFeatures = DEFAULT_FEATURES) -> tuple[Json, str]:
    """Explain claim ``wants`` on ``node-a`` with the default scenario classes, after the
    ``allocated`` claims, deciding with ``features`` (by default 1.37's): its JSON form and its
    text."""
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [*allocated, wants], [node("node-a")],
                                        features)
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    return explanation.to_json(), render_explanation(explanation)
