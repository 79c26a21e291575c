"""What the fuzz tests against the real API server share (issue 13, item 4): running the
examples of a hypothesis strategy against the cluster, and a control inventory that bad input
must not disturb."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, read_inventory, slices_of

INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")


async def fuzz(strategy: st.SearchStrategy[Any], examples: int,
               attempt: Callable[[Any, int], Awaitable[str]]) -> Counter[str]:
    """Draw ``examples`` values of ``strategy`` and await ``attempt(value, index)`` for each, on
    this event loop (hypothesis runs in a thread); returns the outcomes ``attempt`` named,
    counted. An assertion of ``attempt`` fails the test with the value drawn. No shrinking: an
    example against the cluster takes seconds."""
    loop = asyncio.get_running_loop()
    outcomes: Counter[str] = Counter()

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(value=strategy)
    def one(value: Any) -> None:
        index = sum(outcomes.values())
        outcomes[asyncio.run_coroutine_threadsafe(attempt(value, index), loop).result()] += 1

    await asyncio.to_thread(one)
    return outcomes


@asynccontextmanager
async def undisturbed(kubedra: Kubedra, api: ApiClient, name: str, spec: dict[str, Any]
                      ) -> AsyncIterator[list[dict[str, Any]]]:
    """Create DeviceInventory ``name`` with ``spec`` and yield its slices once it is published;
    on leaving, check that the operator still runs and the slices have the same
    resourceVersions (nothing the block did touched them), then delete the inventory."""
    custom = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(*INVENTORIES, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": name}, "spec": spec})

    async def published() -> list[dict[str, Any]] | None:
        ready = condition(await read_inventory(api, name), "Ready") or {}
        return await slices_of(api, name) if ready.get("status") == "True" else None
    before = await eventually(published, timeout=60, what=f"{name} published")
    yield before
    assert kubedra.operator is not None
    assert kubedra.operator.process is not None
    assert kubedra.operator.process.poll() is None, "the operator crashed"
    after = await slices_of(api, name)
    assert [s["metadata"]["resourceVersion"] for s in after] == [
        s["metadata"]["resourceVersion"] for s in before]
    await custom.delete_cluster_custom_object(*INVENTORIES, name)
