"""kubedra status beside upstream's own answer, KEP-5677 ``ResourcePoolStatusRequest``
(``resource.k8s.io/v1alpha3``, gate ``DRAResourcePoolStatus``: alpha, off by default in
v1.37.2, so a control plane of its own turns it on in kube-apiserver and
kube-controller-manager, and runs ``resourcepoolstatusrequest-controller``).

The two agree on a pool's devices and allocated devices; they differ, by definition, on a
device that is both allocated and tainted ``NoSchedule``: upstream counts it allocated *and*
unavailable, so its ``availableDevices`` (total - allocated - unavailable) is one lower than
kubedra's ``free`` (see :mod:`kubedra.explain.status`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import ControlPlane
from e2e.harness.kubedra import kubectl
from e2e.harness.wait import eventually

pytestmark = pytest.mark.cluster

GATE = "--feature-gates=DRAResourcePoolStatus=true"
NODE = "pool-status-node"
DRIVER = "gpu.kubedra.io"
GPU_CLASS = Path(__file__).resolve().parents[1] / "manifests" / "deviceclasses" / f"{DRIVER}.yaml"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane that serves ResourcePoolStatusRequest."""
    found = ControlPlane(tmp_path_factory.mktemp("pool-status"),
                         apiserver_args=[GATE, "--runtime-config=resource.k8s.io/v1alpha3=true"],
                         kcm_args=[GATE])
    # ServiceAccounts (the harness waits for the default one) and the pool status requests:
    # no resourceclaim-controller, which would take the hand-made allocations back
    found.controllers = ("serviceaccount-controller", "serviceaccount-token-controller",
                         "resourcepoolstatusrequest-controller")
    found.start()
    try:
        yield found
    finally:
        found.stop()


def _apply(plane: ControlPlane, obj: dict[str, Any]) -> None:
    kubectl(plane, "create", "-f", "-", stdin=json.dumps(obj))


def _device(name: str, taint: bool) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}}}
    if taint:
        device["taints"] = [{"key": "kubedra.io/unhealthy", "value": "XID-79",
                             "effect": "NoSchedule"}]
    return device


def _allocate(plane: ControlPlane, name: str, device: str) -> None:
    _apply(plane, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                       "deviceClassName": DRIVER}}]}}})
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": NODE,
                                           "device": device}]},
                  "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                      {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}
    kubectl(plane, "patch", "resourceclaim", name, "-n", "default", "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"allocation": allocation}}))


async def test_status_and_resource_pool_status_request_agree_but_on_tainted_allocated_devices(
        plane: ControlPlane) -> None:
    kubectl(plane, "apply", "-f", str(GPU_CLASS))
    _apply(plane, {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})
    # gpu-0 allocated, gpu-1 allocated and tainted, gpu-2 tainted, gpu-3 free
    _apply(plane, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": f"{NODE}-{DRIVER}"},
                   "spec": {"driver": DRIVER, "nodeName": NODE,
                            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                            "devices": [_device("gpu-0", False), _device("gpu-1", True),
                                        _device("gpu-2", True), _device("gpu-3", False)]}})
    _allocate(plane, "job-0", "gpu-0")
    _allocate(plane, "job-1", "gpu-1")

    status = json.loads(kubectl(plane, "dra", "status", "--by", "pool", "-o", "json"))
    [pool] = status["byPool"]
    assert pool["devices"] == [{
        "driver": DRIVER, "model": "NVIDIA H200", "profile": None, "published": 4,
        "allocated": 2, "claims": 2, "free": 1, "unhealthy": 2, "draining": 0, "withdrawn": 0}]

    _apply(plane, {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest",
                   "metadata": {"name": "gpus"}, "spec": {"driver": DRIVER}})

    async def answered() -> dict[str, Any] | None:
        found = json.loads(kubectl(plane, "get", "resourcepoolstatusrequest", "gpus", "-o",
                                   "json"))
        return found.get("status")
    upstream = await eventually(answered, timeout=60, what="the request's status")
    assert [(c["type"], c["status"]) for c in upstream["conditions"]] == [("Complete", "True")]
    [upstream_pool] = upstream["pools"]
    assert {k: upstream_pool.get(k) for k in (
        "driver", "poolName", "nodeName", "generation", "resourceSliceCount", "totalDevices",
        "allocatedDevices", "unavailableDevices", "availableDevices")} == {
        "driver": DRIVER, "poolName": NODE, "nodeName": NODE, "generation": 1,
        "resourceSliceCount": 1,
        "totalDevices": 4,       # = published
        "allocatedDevices": 2,   # = allocated
        "unavailableDevices": 2,  # every NoSchedule device, gpu-1 (allocated) too
        "availableDevices": 0}   # 4 - 2 - 2; kubedra's free: 1 (gpu-3)

