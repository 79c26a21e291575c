"""The /metrics and /healthz endpoint of kubedra processes."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from kubedra.metrics import start_metrics_server


async def test_metrics_and_health() -> None:
    registry = CollectorRegistry()
    Counter("kubedra_test_things", "Things.", registry=registry).inc(3)
    state: dict[str, Any] = {"ok": True, "serving": True}
    runner = await start_metrics_server(0, lambda: state, host="127.0.0.1", registry=registry)
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
