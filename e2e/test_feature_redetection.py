"""The operator detects what the cluster serves again while it runs (issue 26, item 2): an API
server restarted with ``DRANodeAllocatableResources`` on is noticed by the next probe, and the
pool whose slices change with it (a GPU's host overhead, KEP-5517) is published again; a
detection that finds what it found before writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import ControlPlane
from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import read_inventory
from e2e.test_feature_detection import (
    GATE_CAN_BE_ON,
    GPU,
    STORED_OVERHEAD,
    _operator_health,
    _publish_gpu_pool,
    published_with,
)
from kubedra import kube
from kubedra.kube import make_api_client

pytestmark = GATE_CAN_BE_ON


@pytest.fixture(scope="module")
def redetecting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubedra, int]]:
    """kubedra on a control plane of its own with the default gates, its operator detecting
    every second (without leader election: it keeps running while kube-apiserver restarts),
    serving ``/healthz`` on the port yielded."""
    plane = ControlPlane(Path(tmp_path_factory.mktemp("redetect")))
    plane.start()
    try:
        deployment = Kubedra(plane)
        deployment.install()
        port = free_port()
        deployment.start_operator(liveness_port=port, leader_elect=False,
                                  feature_detection_interval=1.0)
        yield deployment, port
    finally:
        assert plane.stop() == []


async def _raw_slice(api: Any, name: str) -> dict[str, Any]:
    """Slice ``name`` as stored (a raw GET: the client's models drop alpha fields)."""
    found: dict[str, Any] = await kube.get_discovery(
        api, f"/apis/resource.k8s.io/v1/resourceslices/{name}")
    return found


async def test_a_gate_turned_on_while_the_operator_runs_republishes_the_pool(
        redetecting: tuple[Kubedra, int]) -> None:
    deployment, port = redetecting
    api = await make_api_client(deployment.plane.admin_kubeconfig)
    async with api:
        published, ready = await _publish_gpu_pool(
            deployment, api, "redetect-node", declared=["DRANodeAllocatableResources"],
            port=port)
        assert published["spec"]["devices"] == [GPU]
        assert ready["reason"] == "FeatureOff"
        slice_name = published["metadata"]["name"]

        # detections that find the same features write nothing
        health = await _operator_health(deployment, port)
        inventory_version = (await read_inventory(api, "redetect-node"))["metadata"][
            "resourceVersion"]

        async def detected_twice_more() -> dict[str, Any] | None:
            now = await _operator_health(deployment, port)
            return now if now["featureDetections"] >= health["featureDetections"] + 2 else None
        later = await eventually(detected_twice_more, timeout=30, what="two more detections")
        assert later["sliceWrites"] == health["sliceWrites"]
        assert (await read_inventory(api, "redetect-node"))["metadata"][
            "resourceVersion"] == inventory_version
        assert (await _raw_slice(api, slice_name))["metadata"]["resourceVersion"] == \
            published["metadata"]["resourceVersion"]

        deployment.plane.restart_component(
            "kube-apiserver", extra_args=["--feature-gates=DRANodeAllocatableResources=true"])

        ready = await published_with(api, "redetect-node", "SlicesPublished", timeout=90)
        assert ready["message"] == (
            "1 device in 1 ResourceSlice (pool redetect-node, generation 1); each pod using "
            "its devices is charged besides them (nodeAllocatableResources): cpu 500m per pod, "
            "memory 256Mi per pod and 64Mi per container")
        stored = await _raw_slice(api, slice_name)
        assert stored["spec"]["devices"] == [{**GPU, "nodeAllocatableResources": STORED_OVERHEAD}]
        served = (await _operator_health(deployment, port))["servedFeatures"]
        assert served["nodeAllocatableResources"] is True
        assert "DRANodeAllocatableResources" not in served["off"]
