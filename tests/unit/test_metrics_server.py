"""The /metrics and /healthz endpoint of kubedra processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, Counter

from kubedra.cli import main
from kubedra.metrics import start_metrics_server


async def test_metrics_and_health() -> None:
    registry = CollectorRegistry()
    Counter("kubedra_test_things", "Things.", registry=registry).inc(3)
    state: dict[str, Any] = {"ok": True, "serving": True}
    runner = await start_metrics_server(0, lambda: state, hosts=["127.0.0.1"], registry=registry)
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/metrics") as response:
                assert response.status == 200
                assert "kubedra_test_things_total 3.0" in (await response.text()).splitlines()
            async with http.get("/healthz") as response:
                assert (response.status, await response.json()) == (200, state)
            state["ok"] = False
            async with http.get("/healthz") as response:
                assert (response.status, await response.json()) == (
                    503, {"ok": False, "serving": True})
    finally:
        await runner.cleanup()


async def test_metrics_listen_on_each_address_given_and_nowhere_else() -> None:
    runner = await start_metrics_server(0, lambda: {"ok": True}, hosts=["127.0.0.1", "127.0.0.2"],
                                        registry=CollectorRegistry())
    try:
        assert sorted(host for host, _port in runner.addresses) == ["127.0.0.1", "127.0.0.2"]
    finally:
        await runner.cleanup()


async def test_health_on_a_unix_socket_answers_kubedra_probe(tmp_path: Path) -> None:
    """``--health-socket``: no TCP port, and ``kubedra probe`` (an exec probe) reads the same
    /healthz: exit 0 and the JSON while ok, exit 1 when not, or when nothing listens."""
    path = str(tmp_path / "health.sock")
    await asyncio.to_thread(Path(path).touch)  # a predecessor's file is replaced
    state: dict[str, Any] = {"ok": True, "role": "standby"}
    runner = await start_metrics_server(None, lambda: state, socket_path=path,
                                        registry=CollectorRegistry())
    try:
        assert runner.addresses == [path]

        def probe() -> tuple[int, Any]:
            result = CliRunner().invoke(main, ["probe", "--socket", path])
            return result.exit_code, json.loads(result.output)
        assert await asyncio.to_thread(probe) == (0, state)
        state["ok"] = False
        assert await asyncio.to_thread(probe) == (1, state)
    finally:
        await runner.cleanup()
    result = CliRunner().invoke(main, ["probe", "--socket", path])
    assert result.exit_code == 1


async def test_the_health_socket_is_removed_at_cleanup(tmp_path: Path) -> None:
    """A stopped operator leaves no socket file behind (``--health-socket`` of the local
    cluster in docs/operating.md, in the checkout's ``.cache/``): aiohttp's ``UnixSite`` does
    not remove the file it bound, so the server does."""
    path = tmp_path / "health.sock"
    runner = await start_metrics_server(None, lambda: {"ok": True}, socket_path=str(path),
                                        registry=CollectorRegistry())
    assert await asyncio.to_thread(path.is_socket)
    await runner.cleanup()
    assert not await asyncio.to_thread(path.exists)
