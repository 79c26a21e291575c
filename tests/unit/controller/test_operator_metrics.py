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
from kubedra.explain.status import Counts
from kubedra.settings import Settings

GPU = "gpu.kubedra.io"


def _pod(name: str, seconds_ago: float) -> dict[str, Any]:
    since = utcnow().timestamp() - seconds_ago
    return {"metadata": {"namespace": "demo", "name": name}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "lastTransitionTime": timestamp(datetime.fromtimestamp(since, UTC))}]}}


HISTOGRAMS = ("kubedra_operator_reconcile_duration_seconds",
              "kubedra_operator_publish_duration_seconds")


def _scrape(collector: OperatorCollector, *, histograms: bool = False) -> list[str]:
    """The sample lines served, those of the histograms only with ``histograms``."""
    registry = CollectorRegistry()
    registry.register(collector)
    return [line for line in generate_latest(registry).decode().splitlines()
            if not line.startswith("#") and histograms == line.startswith(HISTOGRAMS)]


def test_a_standby_reports_only_that_it_does_not_lead() -> None:
    runtime = Runtime(Settings())
    collector = OperatorCollector(runtime, lambda: False)
    assert _scrape(collector) == ["kubedra_operator_leader 0.0"]
    counts = [line for line in _scrape(collector, histograms=True) if "_count" in line]
    assert counts == [  # every label pair from the start, at 0
        *(f'kubedra_operator_reconcile_duration_seconds_count{{outcome="{o}",queue="{q}"}} 0.0'
          for q in ("inventories", "claims", "explain") for o in ("done", "retry", "error")),
        *(f'kubedra_operator_publish_duration_seconds_count{{result="{r}"}} 0.0'
          for r in ("written", "unchanged", "failed"))]


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
        pending = {("demo", "c1"): [{}], ("demo", "c2"): [{}], ("train", "c3"): [{}]}
        view = ClusterView({}, {}, {}, {}, {}, {}, unschedulable_pods=pods,
                           pending_claims=pending)
        fleet = {(GPU, "NVIDIA H200", None): Counts(published=16, allocated=5, free=9),
                 (GPU, "NVIDIA H200", "3g.71gb"): Counts(published=14, allocated=2, free=0)}
        state = SimpleNamespace(inventory_queue=inventories, claim_queue=WorkQueue(),
                                explain_queue=WorkQueue(), pools=pools, view=view,
                                fleet=fleet)
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
        "kubedra_operator_unschedulable_pods 2.0",
        "kubedra_operator_pending_claims 3.0",
        *(f'kubedra_operator_fleet_devices_{gauge}{{driver="gpu.kubedra.io",'
          f'model="NVIDIA H200",profile="{profile}"}} {value}'
          for gauge, values in (("published", (16.0, 14.0)), ("allocated", (5.0, 2.0)),
                                ("free", (9.0, 0.0)))
          for profile, value in zip(("", "3g.71gb"), values, strict=True))]
