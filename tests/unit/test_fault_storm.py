"""The fault suite's storm (e2e/test_faults.py) pauses only once the round under way has ended,
so that no change of it lands after convergence is declared (the first fleet run saw 2 of 10
pools change right after converging: the churn of a round still in flight)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from e2e import test_faults
from e2e.test_faults import Storm


async def test_a_pause_returns_once_the_round_under_way_has_ended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    storm = Storm(api=None, namespace="ns", rng=random.Random(13))
    started, release = asyncio.Event(), asyncio.Event()
    steps: list[str] = []

    async def step() -> None:
        steps.append("started")
        started.set()
        await release.wait()
        steps.append("ended")

    async def state(api: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return [], [], []
    monkeypatch.setattr(storm, "step", step)
    monkeypatch.setattr(test_faults, "cluster_state", state)
    running = asyncio.create_task(storm.run())
    try:
        await asyncio.wait_for(started.wait(), timeout=5)
        pausing = asyncio.create_task(storm.pause())
        for _ in range(10):  # let the pause run as far as it can: it must wait for the step
            await asyncio.sleep(0)
        assert not pausing.done()
        assert steps == ["started"]
        release.set()
        await asyncio.wait_for(pausing, timeout=5)
        assert steps == ["started", "ended"]
        assert (storm.rounds, storm.checks) == (1, 1)
        assert storm.paused.is_set()
        assert storm.idle.is_set()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
