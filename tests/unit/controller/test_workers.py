"""The operator's workers: a burst of claims, each waiting on its status write, is reconciled
at once, not two by two (bench/scale.py at 100 nodes: with 2 claim workers claims waited
12.6 s p50 in the queue behind each other's writes)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kubedra.controller import runtime
from kubedra.controller.queue import WorkQueue

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
                            explain_queue=WorkQueue[tuple[str, str]]())
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
