"""The operator's count of the fleet's devices per model (kubedra.controller.fleet), the
series of the dashboard's allocation panels: the same rows as ``kubectl dra status``, counted
again when an allocation changes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from e2e.harness.wait import eventually
from kubedra.controller import fleet
from kubedra.controller.explain_state import ExplainState
from kubedra.controller.state import ClusterView
from kubedra.settings import Settings
from tests.support.explain_builders import gpu_claim, h200_slices, node, on_node

GPU = "gpu.kubedra.io"
PARTITIONS = {"1g.18gb": 7, "1g.18gb+me": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2,
              "4g.71gb": 1, "7g.141gb": 1}
"""The MIG partitions of the H200 capture (every placement), by profile."""


async def _counted(state: Any, previous: object) -> None:
    """Wait until ``state.fleet`` is another value than ``previous``."""
    async def changed() -> bool:
        return state.fleet is not previous
    await eventually(changed, timeout=10, interval=0.01, what="the fleet counted")


async def test_the_fleet_is_counted_as_status_counts_it_and_again_after_an_allocation(
        ) -> None:
    slices = [*h200_slices("whole-h200"), *h200_slices("mig-h200", mig="partitions")]
    claims: dict[tuple[str, str], list[dict[str, Any]]] = {}
    view = ClusterView({}, {}, {}, {}, claims, {},
                       all_slices={s["metadata"]["name"]: [s] for s in slices},
                       nodes={n: [node(n)] for n in ("whole-h200", "mig-h200")})
    state = SimpleNamespace(view=view, explain=ExplainState(), fleet=None,
                            settings=Settings(fleet_metrics_interval=0.01))
    task = asyncio.create_task(fleet.count_fleet(state))  # type: ignore[arg-type]
    try:
        await _counted(state, None)
        first = state.fleet
        assert {k[2]: v.numbers() for k, v in first.items()} == {
            None: (2, 0, 0, 2, 0, 0, 0), **{profile: (n, 0, 0, n, 0, 0, 0) for profile, n in (
                PARTITIONS.items())}}
        # the MIG node's GPU taken whole: none of its partitions is free any more (their
        # counters are used), though none is allocated
        claims[("demo", "whole")] = [gpu_claim("whole", allocation=on_node(
            "mig-h200", "mig-h200", "gpu-0"))]
        state.explain.claims_version += 1
        await _counted(state, first)
        assert {k[2]: v.numbers() for k, v in state.fleet.items()} == {
            None: (2, 1, 1, 1, 0, 0, 0), **{profile: (n, 0, 0, 0, 0, 0, 0) for profile, n in (
                PARTITIONS.items())}}
        assert state.fleet[(GPU, "NVIDIA H200", None)].claims == {"demo/whole"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        state.explain.executor.shutdown()
