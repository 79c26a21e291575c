"""The operator's workers: a burst of claims, each waiting on its status write, is reconciled
at once, not two by two (bench/scale.py at 100 nodes: with 2 claim workers claims waited
12.6 s p50 in the queue behind each other's writes)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kubernetes_asyncio.client import ApiException
from prometheus_client import CollectorRegistry

from kubedra.controller import runtime
from kubedra.controller.histograms import OperatorHistograms
from kubedra.controller.queue import Retry, WorkQueue

BURST = 16


async def test_a_burst_of_claims_waits_on_its_writes_together(
        monkeypatch: pytest.MonkeyPatch) -> None:
    writes_in_flight = asyncio.Barrier(BURST)  # every write returns once all are sent
    reconciled: list[str] = []
    all_reconciled = asyncio.Event()

    async def reconcile_claim(state: object, namespace: str, name: str) -> None:
        await writes_in_flight.wait()
        reconciled.append(name)
        if len(reconciled) == BURST:
            all_reconciled.set()
    monkeypatch.setattr(runtime, "reconcile_claim", reconcile_claim)
    state = SimpleNamespace(inventory_queue=WorkQueue[str](),
                            claim_queue=WorkQueue[tuple[str, str]](),
                            explain_queue=WorkQueue[tuple[str, str]](),
                            metrics=OperatorHistograms())
    for i in range(BURST):
        state.claim_queue.add(("ns", f"claim-{i}"))

    workers = runtime.start_workers(state)  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(all_reconciled.wait(), timeout=5)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    assert sorted(reconciled) == sorted(f"claim-{i}" for i in range(BURST))
    assert _count(state.metrics, "claims", "done") == BURST


def _count(metrics: OperatorHistograms, queue: str, outcome: str) -> float:
    registry = CollectorRegistry()
    registry.register(metrics)
    return registry.get_sample_value("kubedra_operator_reconcile_duration_seconds_count",
                                     {"queue": queue, "outcome": outcome}) or 0.0


async def test_each_reconcile_is_timed_by_queue_and_outcome() -> None:
    metrics = OperatorHistograms()
    queue = WorkQueue[str](base_delay=60)  # no retry comes back during the test
    finished = asyncio.Event()
    ended: list[str] = []

    def timed(outcome: str, started: float) -> None:
        metrics.reconciled("inventories", outcome, started)
        ended.append(outcome)
        if len(ended) == 4:
            finished.set()

    async def step(key: str) -> None:
        if key.startswith("retry"):
            raise Retry("attaching")
        if key.startswith("error"):
            raise ApiException(status=500, reason="Internal Server Error")
    for key in ("done-1", "retry-1", "error-1", "done-2"):
        queue.add(key)
    worker = asyncio.create_task(runtime.work(queue, step, timed))
    try:
        await asyncio.wait_for(finished.wait(), timeout=5)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    assert ended == ["done", "retry", "error", "done"]
    assert [_count(metrics, q, o) for q in ("inventories", "claims")
            for o in ("done", "retry", "error")] == [2, 1, 1, 0, 0, 0]
