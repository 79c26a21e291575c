"""bench/decide: process CPU of one ``decide_inventory`` (the operator's reconcile of one
inventory, no API calls) for one 8 x H200 node, as MIG partitions and whole.

    PYTHONPATH=TREE:TREE/operator .venv/bin/python -m bench.decide [--mig-rounds 20] [--rounds 200]

Run it once per tree, alternating, to compare two trees side by side (bench/RESULTS.md, scale,
round 18). The inventory is ``bench.scale``'s (:func:`bench.scale.h200_node`, compact form);
one decision warms up, the figure is the mean of the rounds after it, milliseconds. Then the
same for the request bodies of the decision's slice writes: as the operator sends them, and
through kubernetes-asyncio's serialization, as it sent them before round 19.
"""

from __future__ import annotations

import argparse
import json
import time

from kubernetes_asyncio.client import ApiClient

from bench.scale import h200_node, inventory_body
from kubedra.api.resource import OwnerReference
from kubedra.controller.inventories import InventoryInputs, decide_inventory

_OWNER = OwnerReference(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition",
                        name="deviceinventories.kubedra.io", uid="uid-crd")


def decision_ms(mig: bool, rounds: int) -> tuple[str, float]:
    """The decision's reason and its mean process CPU in milliseconds over ``rounds``."""
    given = _inputs(mig)
    decision = decide_inventory(given)
    start = time.process_time()
    for _ in range(rounds):
        decide_inventory(given)
    return decision.reason, (time.process_time() - start) / rounds * 1000


def bodies_ms(mig: bool, rounds: int) -> tuple[float, float]:
    """Mean process CPU in milliseconds, over ``rounds``, of the request bodies of one
    decision's slice writes: as the executor sends them (``SliceWrite.payload``), and as the
    API client would from ``SliceWrite.body`` (its ``sanitize_for_serialization``, then
    ``json.dumps``, kubernetes-asyncio's ``rest.py``)."""
    plan = decide_inventory(_inputs(mig)).plan
    assert plan is not None
    sanitize = ApiClient.__new__(ApiClient).sanitize_for_serialization
    start = time.process_time()
    for _ in range(rounds):
        for write in plan.writes:
            assert write.payload is not None
    sent = (time.process_time() - start) / rounds * 1000
    start = time.process_time()
    for _ in range(rounds):
        for write in plan.writes:
            json.dumps(sanitize(write.body))
    return sent, (time.process_time() - start) / rounds * 1000


def _inputs(mig: bool) -> InventoryInputs:
    raw = {**inventory_body("node-1"),
           "metadata": {"name": "node-1-gpu", "uid": "uid-1", "generation": 1,
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "status": {"discovered": h200_node(0, mig)}}
    return InventoryInputs(raw=raw, existing=[], lease="live", namespace="kubedra-system",
                           owner=_OWNER, drain_grace=30.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mig-rounds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    for mig, rounds in ((True, args.mig_rounds), (False, args.rounds)):
        reason, ms = decision_ms(mig, rounds)
        sent, client = bodies_ms(mig, rounds)
        print(f"{'8 x H200 as MIG' if mig else '8 x H200'}: {reason}, {ms:.1f} ms; its "
              f"bodies {sent:.1f} ms as sent, {client:.1f} ms through the API client")


if __name__ == "__main__":
    main()
