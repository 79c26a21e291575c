"""The operator's gauges (kubedra.controller.metrics), as /metrics serves them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from kubedra.api.time import timestamp, utcnow
from kubedra.controller.metrics import OperatorCollector
from kubedra.controller.queue import WorkQueue
from kubedra.controller.runtime import Runtime
from kubedra.controller.state import ClusterView, PublishedPool
from kubedra.settings import Settings

GPU = "gpu.kubedra.io"


def _pod(name: str, seconds_ago: float) -> dict[str, Any]:
    since = utcnow().timestamp() - seconds_ago
    return {"metadata": {"namespace": "demo", "name": name}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "lastTransitionTime": timestamp(datetime.fromtimestamp(since, UTC))}]}}


def _scrape(collector: OperatorCollector) -> list[str]:
    registry = CollectorRegistry()
    registry.register(collector)
    return [line for line in generate_latest(registry).decode().splitlines()
            if not line.startswith("#")]


def test_a_standby_reports_only_that_it_does_not_lead() -> None:
    runtime = Runtime(Settings())
    assert _scrape(OperatorCollector(runtime, lambda: False)) == ["kubedra_operator_leader 0.0"]


def test_the_leader_reports_queues_pools_and_unschedulable_pods() -> None:
    async def scrape() -> list[str]:
        inventories: WorkQueue[str] = WorkQueue()
        for name in ("a", "b", "c"):
            inventories.add(name)
        health = {"gpu-0": ("Unhealthy", "XID 79"), "gpu-1": ("Healthy", None),
                  "gpu-9": ("Unhealthy", "not published")}
        pools = {
            "n1": PublishedPool(GPU, "n1", frozenset({"gpu-0", "gpu-1"}), health),
            "n2": PublishedPool(GPU, "n2", frozenset({"gpu-0"}), {}, withdrawn=True,
                                draining={"gpu-0": "withdrawn"}),
            "n3": PublishedPool(GPU, "n3", frozenset({"gpu-0"}), {})}
        pods = {("demo", "old"): [_pod("old", 1200)], ("demo", "new"): [_pod("new", 30)]}
        view = ClusterView({}, {}, {}, {}, {}, {}, unschedulable_pods=pods)
        state = SimpleNamespace(inventory_queue=inventories, claim_queue=WorkQueue(),
                                explain_queue=WorkQueue(), pools=pools, view=view)
        runtime = Runtime(Settings())
        runtime.state = state  # type: ignore[assignment]
        return _scrape(OperatorCollector(runtime, lambda: True))

    lines = asyncio.run(scrape())
    age = next(line for line in lines if line.startswith("kubedra_operator_unschedulable_pod_"))
    assert 1199.0 <= float(age.split()[1]) <= 1205.0
    assert [line for line in lines if line is not age] == [
        "kubedra_operator_leader 1.0",
        'kubedra_operator_queue_length{queue="inventories"} 3.0',
        'kubedra_operator_queue_length{queue="claims"} 0.0',
        'kubedra_operator_queue_length{queue="explain"} 0.0',
        'kubedra_operator_pool_withdrawn{driver="gpu.kubedra.io",pool="n2"} 1.0',
        'kubedra_operator_devices_unhealthy{driver="gpu.kubedra.io",pool="n1"} 1.0',
        'kubedra_operator_devices_draining{driver="gpu.kubedra.io",pool="n2"} 1.0',
        "kubedra_operator_unschedulable_pods 2.0"]
