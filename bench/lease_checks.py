"""bench/lease_checks: what the agents' Lease renewals cost the operator in a fleet's steady
state, the way it handled them before and now, side by side in one process.

A fleet of ``--nodes`` nodes, one node-local inventory each, whose agents renew a
``--duration``-second Lease every third of it (the agent's cadence). Per second of steady
state the operator decodes ``nodes / (duration / 3)`` renewal events and runs its tick every
``--interval`` seconds. Measured, CPU milliseconds per second of steady state (the least of
``--repeat`` runs), for:

- the event decode: kubernetes_asyncio's ``Watch(return_type="object")`` (``json.loads``, a
  ``json.dumps`` and the model's deserializer, then :func:`parse_lease` of the raw object),
  as :class:`LeaseCache` watched before, against :data:`LEASE_DECODER` (``json.loads`` and
  :func:`parse_lease`), what its :class:`ListWatch` runs now;
- the tick: :func:`check_lease` of every node with an inventory (before) against
  :func:`check_lease` of the nodes :meth:`LeaseCache.expired` returns (now), in a steady state
  where no Lease expires.

Usage::

    PYTHONPATH=.:operator .venv/bin/python -m bench.lease_checks [--nodes 5000]

Prints a JSON object of the figures and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from kubernetes_asyncio import watch

from kubedra.controller.leases import LEASE_DECODER, AgentLease, LeaseCache, parse_lease
from kubedra.controller.queue import WorkQueue
from kubedra.controller.runtime import check_lease

NOW = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.UTC)


def lease_event(node: str, renewed: datetime.datetime, duration_s: int) -> bytes:
    """A watch event line of an agent's Lease renewal, as the API server sends it (with the
    managedFields entry of the agent's update)."""
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"type": "MODIFIED", "object": {
        "kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": f"kubedra-agent-{node}", "namespace": "kubedra-system",
                     "uid": "6f1c1c1e-54d6-4b7e-9b9e-1b1f3c6e2a01", "resourceVersion": "918273",
                     "creationTimestamp": "2026-12-02T11:00:00Z",
                     "managedFields": [{"manager": "kubedra-agent", "operation": "Update",
                                        "apiVersion": "coordination.k8s.io/v1",
                                        "time": stamp, "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:spec": {"f:holderIdentity": {},
                                                                "f:leaseDurationSeconds": {},
                                                                "f:renewTime": {}}}}]},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": duration_s,
                 "renewTime": stamp}}}).encode()


def _cpu_ms(work: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best * 1000


async def measure() -> None:
    """Run the bench (in a running event loop: the old watch makes an API client); print its
    JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--duration", type=int, default=40, help="leaseDurationSeconds")
    parser.add_argument("--interval", type=float, default=5.0,
                        help="the operator's lease_check_interval, seconds")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    nodes = [f"gpu-node-{i:05d}" for i in range(args.nodes)]
    renewals_per_s = args.nodes / (args.duration / 3)
    events = [lease_event(n, NOW, args.duration) for n in nodes[:max(1, int(renewals_per_s))]]
    old_watch = watch.Watch(return_type="V1Lease")

    def decode_before() -> None:
        for line in events:
            parse_lease(old_watch.unmarshal_event(line, "V1Lease")["raw_object"])

    def decode_now() -> None:
        for line in events:
            LEASE_DECODER.event(line)

    cache = LeaseCache(api=None, namespace="kubedra-system",  # type: ignore[arg-type]
                       on_change=lambda node: None)
    for node in nodes:
        cache.take(AgentLease(node, NOW, args.duration))
    inventories = {node: [f"{node}-gpu.kubedra.io"] for node in nodes}
    state = SimpleNamespace(leases=cache, lease_states={}, inventory_queue=WorkQueue[str](),
                            view=SimpleNamespace(inventories_on_node=inventories.__getitem__))
    live = NOW + datetime.timedelta(seconds=1)
    for node in nodes:
        check_lease(state, node, live)  # type: ignore[arg-type]  # first sight: live

    def tick_before() -> None:
        for node in inventories:
            check_lease(state, node, live)  # type: ignore[arg-type]

    def tick_now() -> None:
        for node in cache.expired(live):
            check_lease(state, node, live)  # type: ignore[arg-type]

    ticks_per_s = 1 / args.interval
    figures = {
        "nodes": args.nodes, "renewals_per_s": round(renewals_per_s, 1),
        "decode_before_ms_per_s": round(_cpu_ms(decode_before, args.repeat), 2),
        "decode_now_ms_per_s": round(_cpu_ms(decode_now, args.repeat), 2),
        "tick_before_ms_per_s": round(_cpu_ms(tick_before, args.repeat) * ticks_per_s, 3),
        "tick_now_ms_per_s": round(_cpu_ms(tick_now, args.repeat) * ticks_per_s, 3),
    }
    before = figures["decode_before_ms_per_s"] + figures["tick_before_ms_per_s"]
    now = figures["decode_now_ms_per_s"] + figures["tick_now_ms_per_s"]
    figures.update(total_before_pct_of_a_core=round(before / 10, 2),
                   total_now_pct_of_a_core=round(now / 10, 2),
                   ratio_before_to_now=round(before / now, 2) if now else None)
    await old_watch.close()
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    asyncio.run(measure())
