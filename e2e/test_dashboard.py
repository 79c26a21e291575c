"""The Grafana dashboard of manifests/monitoring against a real Prometheus (Debian's
``prometheus``) on loopback, scraping the local control plane's operator and a node agent:
after the demo's pods ran (one holding the H200, prepared by the agent as a kubelet would
call it, one too big for it), every panel's query returns series (evaluated through
Prometheus's HTTP API): the fleet's devices per model are ``kubectl dra status``'s, and every
latency panel has a number for each queue and for prepare."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.controlplane import free_port
from e2e.harness.kubedra import Kubedra, kubectl
from e2e.harness.prometheus import Prometheus
from e2e.harness.realnode import stand_in_devices
from e2e.harness.wait import eventually
from e2e.kube_objects import create_gpu_pod, pod_claim
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from tests.support.fake_kubelet import Claim, FakeKubelet

pytestmark = pytest.mark.cluster

DASHBOARD = (Path(__file__).resolve().parents[1] / "manifests" / "monitoring" / "dashboards"
             / "kubedra.json")
NODE = "dash-h200"  # the plugin socket paths under the node directory stay short
FITS = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0'
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'


def panel_queries() -> list[tuple[str, str, str]]:
    """Every query of the dashboard: (panel title, legend, query)."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["legendFormat"], t["expr"]) for p in dashboard["panels"]
            for t in p["targets"]]


def _value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


def _finite(found: list[dict[str, Any]], label: str) -> dict[str, float]:
    """``label`` → value of the series whose value is a number (a quantile over no
    observation in its window is NaN)."""
    return {s["metric"].get(label, ""): _value(s) for s in found if math.isfinite(_value(s))}


def _fleet(found: dict[tuple[str, str], list[dict[str, Any]]], panel: str, legend: str
           ) -> dict[tuple[str, str, str | None], float]:
    return {(m["driver"], m["model"], m.get("profile") or None): _value(s)
            for s in found[(panel, legend)] for m in [s["metric"]]}


@pytest.fixture
def prometheus(kubedra: Kubedra) -> Iterator[Prometheus]:
    """The session's operator restarted with /metrics on a loopback port, an agent for
    ``NODE`` with its own, and Prometheus scraping both (all restored or stopped after)."""
    options = dict(kubedra.operator_options)
    operator_port, agent_port = free_port(), free_port()
    kubedra.stop_operator()
    kubedra.start_operator(**{**options, "liveness_port": operator_port})
    kubedra.add_node(NODE, {"kubedra.io/gpu": "true"})
    root = kubedra.node_dir(NODE) / "host"  # the H200's device nodes, for its prepare
    stand_in_devices(root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
    kubedra.start_agent(NODE, metrics_port=agent_port, device_root=root)
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


async def _prepare(kubedra: Kubedra, claim: dict[str, Any]) -> FakeKubelet:
    """NodePrepareResources of ``claim`` on ``NODE``'s agent, as a kubelet calls it (a kwok
    node has none); returns the registered kubelet, to be closed."""
    kubelet = FakeKubelet(kubedra.node_dir(NODE) / "plugins_registry")
    await kubelet.register()
    meta = claim["metadata"]
    answer = await kubelet.prepare([Claim(meta["namespace"], meta["name"], meta["uid"])])
    assert answer.claims[meta["uid"]].error == ""
    return kubelet


async def test_every_panel_returns_series_after_the_demo(
        prometheus: Prometheus, kubedra: Kubedra, admin_api: ApiClient,
        namespace: str) -> None:
    queries = panel_queries()
    assert len(queries) == 19

    async def scraped() -> bool:  # before the pods: rate() needs a sample before each change
        return {s["metric"]["job"]: _value(s) for s in prometheus.query("up")} == {
            job: 1.0 for job in prometheus.targets}
    await eventually(scraped, timeout=60, what="Prometheus scraping the operator and agent")
    await create_gpu_pod(admin_api, namespace, "trainer", FITS, node=NODE)
    await create_gpu_pod(admin_api, namespace, "too-big", TOO_BIG, node=NODE)
    core = client.CoreV1Api(admin_api)

    async def ran() -> bool:
        return bool((await core.read_namespaced_pod("trainer", namespace)).status.phase
                    == "Running")
    await eventually(ran, timeout=90, what="trainer pod Running")
    trainer = await pod_claim(admin_api, namespace, "trainer")
    assert trainer is not None
    kubelet = await _prepare(kubedra, trainer)
    try:
        await _every_panel_answers(prometheus, kubedra, queries)
    finally:
        meta = trainer["metadata"]
        await kubelet.unprepare([Claim(meta["namespace"], meta["name"], meta["uid"])])
        await kubelet.close()


async def _every_panel_answers(prometheus: Prometheus, kubedra: Kubedra,
                               queries: list[tuple[str, str, str]]) -> None:
    latencies = [("Prepare latency per claim", "{{operation}} p50", "operation"),
                 ("Prepare latency per claim", "{{operation}} p99", "operation"),
                 ("Reconcile latency", "{{queue}} p50", "queue"),
                 ("Reconcile latency", "{{queue}} p99", "queue"),
                 ("Publish latency", "p50", ""), ("Publish latency", "p99", "")]

    async def answered() -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Every query's series once each says what it should, else AssertionError naming
        those that do not yet (``eventually`` reports the last one)."""
        found = {(title, legend): prometheus.query(expr) for title, legend, expr in queries}
        status = json.loads(kubectl(kubedra.plane, "dra", "status", "-o", "json"))
        rows = {(r["driver"], r["model"], r["profile"]): r for r in status["devices"]}
        waiting = [f"{key}: no series" for key, series in found.items() if not series]
        unschedulable = found[("Pending claims", "pods unschedulable for their claims")]
        if unschedulable and _value(unschedulable[0]) < 1:
            waiting.append("no unschedulable pod yet")
        for panel, legend, count in (
                ("Fleet allocation by model", "{{model}} {{profile}} allocated", "allocated"),
                ("Fleet allocation by model", "{{model}} {{profile}} published", "published"),
                ("Free devices by model", "{{model}} {{profile}}", "free")):
            series = _fleet(found, panel, legend)
            if series != {k: float(r[count]) for k, r in rows.items()}:
                # the operator counts the fleet every 30 s
                waiting.append(f"{count}: {series} is not kubectl dra status's {rows}")
        waiting += [f"{(title, legend)}: no number in {found[(title, legend)]}"
                    for title, legend, label in latencies
                    if not _finite(found[(title, legend)], label)]
        if waiting:
            raise AssertionError("; ".join(waiting))
        return found
    found = await eventually(answered, timeout=120, what="every panel's query answered")
    operator, agent = prometheus.targets["kubedra-operator"], prometheus.targets["kubedra-agent"]
    assert [s["metric"]["instance"] for s in found[("Operator leader", "{{instance}}")]] == [
        operator]
    assert {s["metric"]["queue"] for s in found[("Operator queues", "{{queue}}")]} == {
        "inventories", "claims", "explain"}
    assert [(s["metric"]["instance"], _value(s))
            for s in found[("Prepared claims per node agent", "{{instance}}")]] == [(agent, 1.0)]
    # the H200 of NODE: published and held by the trainer, so not free
    fleet = _fleet(found, "Fleet allocation by model", "{{model}} {{profile}} published")
    assert fleet[("gpu.kubedra.io", "NVIDIA H200", None)] >= 1
    for legend in ("{{operation}} p50", "{{operation}} p99"):
        prepared = _finite(found[("Prepare latency per claim", legend)], "operation")
        assert 0 < prepared["prepare"] <= 45  # the kubelet's call timeout
    for legend in ("{{queue}} p50", "{{queue}} p99"):  # the trainer's claim, its inventory's
        # allocations, the too-big pod's explanation: each queue reconciled since the scrapes
        assert set(_finite(found[("Reconcile latency", legend)], "queue")) == {
            "inventories", "claims", "explain"}
    assert all(0 < v <= 60 for legend in ("p50", "p99")
               for v in _finite(found[("Publish latency", legend)], "").values())
