"""The agent's loops survive an unreachable API server (they retry; they do not exit)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from kubedra.node.agent import Agent, run_cdi_check
from kubedra.settings import Settings


async def test_discovery_loop_retries_when_the_api_server_is_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent(Settings(node_name="n", rescan_interval=0.01), api=None)  # type: ignore[arg-type]
    calls: list[str] = []

    async def scan() -> bool:
        calls.append("scan")
        if len(calls) < 3:
            raise aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")
        return True

    monkeypatch.setattr(agent, "scan", scan)
    loop = asyncio.create_task(agent.run_discovery())
    await asyncio.wait_for(agent.scanned.wait(), timeout=5)
    loop.cancel()
    assert calls[:3] == ["scan", "scan", "scan"]


async def test_lease_loop_retries_when_the_api_server_is_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent(Settings(node_name="n", lease_duration=1), api=None)  # type: ignore[arg-type]
    renewed = asyncio.Event()
    calls: list[tuple[Any, ...]] = []

    async def node_owner_reference(*args: Any) -> None:
        raise OSError("Connection reset by peer")

    async def renew_lease(*args: Any) -> None:
        calls.append(args)
        if len(calls) < 3:
            raise OSError("Connection reset by peer")
        renewed.set()

    monkeypatch.setattr("kubedra.kube.renew_lease", renew_lease)
    monkeypatch.setattr("kubedra.kube.node_owner_reference", node_owner_reference)
    loop = asyncio.create_task(agent.run_lease())
    await asyncio.wait_for(renewed.wait(), timeout=5)
    loop.cancel()
    assert [c[2] for c in calls[:3]] == ["kubedra-agent-n"] * 3


async def test_cdi_check_runs_at_start_and_every_interval_and_survives_failures() -> None:
    """Issue 16, item 9: the agent checks prepared claims' CDI specs at once, then every
    ``cdi_check_interval`` seconds; a failing check is retried."""
    checked = asyncio.Event()
    calls: list[str] = []

    class Preparer:
        async def restore_missing_files(self) -> int:
            calls.append("check")
            if len(calls) == 1:
                raise OSError("No space left on device")
            if len(calls) == 3:
                checked.set()
            return 0

    loop = asyncio.create_task(run_cdi_check(Preparer(), 0.01))  # type: ignore[arg-type]
    await asyncio.wait_for(checked.wait(), timeout=5)
    loop.cancel()
    assert calls[:3] == ["check"] * 3
