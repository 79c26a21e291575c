"""The Grafana dashboard of manifests/monitoring against a real Prometheus (Debian's
``prometheus``) on loopback, scraping the local control plane's operator and a node agent:
after the demo's pods ran (one holding the H200, one too big for it), every panel's query
returns series (evaluated through Prometheus's HTTP API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra
from e2e.harness.prometheus import Prometheus
from e2e.harness.wait import eventually
from e2e.kube_objects import create_gpu_pod

pytestmark = pytest.mark.cluster

DASHBOARD = (Path(__file__).resolve().parents[1] / "manifests" / "monitoring" / "dashboards"
             / "kubedra.json")
NODE = "dash-h200"  # the plugin socket paths under the node directory stay short
FITS = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0'
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'


def panel_queries() -> list[tuple[str, str]]:
    """Every panel's (title, query) of the dashboard."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


@pytest.fixture
def prometheus(kubedra: Kubedra) -> Iterator[Prometheus]:
    """The session's operator restarted with /metrics on a loopback port, an agent for
    ``NODE`` with its own, and Prometheus scraping both (all restored or stopped after)."""
    options = dict(kubedra.operator_options)
    operator_port, agent_port = free_port(), free_port()
    kubedra.stop_operator()
    kubedra.start_operator(**{**options, "liveness_port": operator_port})
    kubedra.add_node(NODE, {"kubedra.io/gpu": "true"})
    kubedra.start_agent(NODE, metrics_port=agent_port)
    found = Prometheus(kubedra.plane, {"kubedra-operator": f"127.0.0.1:{operator_port}",
                                       "kubedra-agent": f"127.0.0.1:{agent_port}"})
    found.start()
    try:
        yield found
    finally:
        found.stop()
        kubedra.stop_agent(NODE)
        kubedra.stop_operator()
        kubedra.start_operator(**options)


async def test_every_panel_returns_series_after_the_demo(
        prometheus: Prometheus, admin_api: ApiClient, namespace: str) -> None:
    assert len(panel_queries()) == 8
    await create_gpu_pod(admin_api, namespace, "trainer", FITS, node=NODE)
    await create_gpu_pod(admin_api, namespace, "too-big", TOO_BIG, node=NODE)
    core = client.CoreV1Api(admin_api)

    async def ran() -> bool:
        return bool((await core.read_namespaced_pod("trainer", namespace)).status.phase
                    == "Running")
    await eventually(ran, timeout=90, what="trainer pod Running")

    async def answered() -> dict[str, list[dict[str, Any]]] | None:
        found = {title: prometheus.query(expr) for title, expr in panel_queries()}
        unschedulable = found["Pods unschedulable for their claims"]
        if any(not series for series in found.values()) or \
                float(unschedulable[0]["value"][1]) < 1:
            return None
        return found
    found = await eventually(answered, timeout=90, what="every panel's query answered")
    assert [s["value"][1] for s in found["Operator leader"]] == ["1"]
    assert {s["metric"]["queue"] for s in found["Operator queues"]} == {
        "inventories", "claims", "explain"}
    assert [s["metric"]["instance"] for s in found["Prepared claims per node agent"]] == [
        prometheus.targets["kubedra-agent"]]
