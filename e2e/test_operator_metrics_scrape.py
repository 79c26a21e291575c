"""The operator's ``/metrics`` on the local v1.37.2 control plane: the gauges the alerts of
manifests/monitoring read (kubedra.controller.metrics), served by the leader (to a scraper
bound to kubedra-metrics-reader, over HTTPS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes_asyncio.client import ApiClient

from e2e.harness import scrape
from e2e.harness.controlplane import ControlPlane, free_port
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import create_gpu_pod

pytestmark = pytest.mark.cluster

NODE = "metrics-h200"
NEVER = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("1000Gi")) >= 0'


@pytest.fixture
def metrics_port(kubedra: Kubedra) -> Iterator[int]:
    """The session's operator, restarted to serve /metrics on a free loopback port (and
    restarted as it was afterwards; the test's agent is stopped then too)."""
    options = dict(kubedra.operator_options)
    port = free_port()
    kubedra.stop_operator()
    kubedra.start_operator(**{**options, "liveness_port": port})
    try:
        yield port
    finally:
        if NODE in kubedra.agents:
            kubedra.stop_agent(NODE)
        kubedra.stop_operator()
        kubedra.start_operator(**options)


def _samples(plane: ControlPlane, port: int, token: str) -> dict[str, float]:
    status, text = scrape.get(plane, port, "/metrics", token)
    assert status == 200, text
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("kubedra_operator_")}


async def test_the_leader_serves_its_gauges(kubedra: Kubedra, metrics_port: int,
                                            admin_api: ApiClient, namespace: str) -> None:
    kubedra.add_node(NODE, {"kubedra.io/gpu": "true"})
    kubedra.start_agent(NODE)  # its H200 has 141Gi, less than the claim asks
    await create_gpu_pod(admin_api, namespace, "never", NEVER, node=NODE)
    token = scrape.scraper_token(kubedra.plane)

    async def unschedulable() -> dict[str, float] | None:
        found = _samples(kubedra.plane, metrics_port, token)
        return found if found.get("kubedra_operator_unschedulable_pods", 0) >= 1 else None
    samples = await eventually(unschedulable, timeout=90,
                               what="the unschedulable pod in the operator's gauges")
    assert samples["kubedra_operator_leader"] == 1.0
    assert {k for k in samples if k.startswith("kubedra_operator_queue_length")} == {
        'kubedra_operator_queue_length{queue="inventories"}',
        'kubedra_operator_queue_length{queue="claims"}',
        'kubedra_operator_queue_length{queue="explain"}'}
    assert samples["kubedra_operator_unschedulable_pod_max_age_seconds"] >= 0.0
