"""A leader that cannot be starved (issue 23, item 3): the operator keeps its leader Lease while
it lists, caches and verifies a fleet of the largest inventories a node reports, with the
election's renew deadline shortened.

Each node is an H200 node with every MIG placement listed (208 devices, 8 counter sets: 210 KB
as listed, 397 KB while the agent's managedFields named every field of its report; the largest
inventory an agent writes: the full form, which agents before the compact form wrote and the
operator still accepts; ``bench/RESULTS.md``, rounds 4 and 12). Until
the operator bounded its unit of work, its initial list of them was one page decoded by one
``json.loads``, which held the interpreter lock for longer than the renew deadline, so the
election's thread could not renew and the leader fenced itself and exited (round 4's lost
Lease at 200 MIG nodes, here with the deadline cut to fit a test). Once pages were bounded, the
election thread still shared the interpreter lock with the reconcilers, and a garbage
collection of their caches (up to 2.2 s under load) starved it: the election now runs in a
process of its own (``kubedra.controller.election``), and its Lease requests at the API
server's ``leader-election`` priority level (``manifests/flowschema.yaml``, which the harness
installs). A control plane of its own: the API server holds tens of MB of inventories.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from bench.scale import MIG_REPORTS, Agents, free_port, gather_limited, h200_node, node_name
from e2e.harness import ControlPlane
from e2e.harness.controlplane import Component
from e2e.harness.kubedra import NAMESPACE, Kubedra, own_control_plane
from e2e.harness.scrape import client_tls
from e2e.harness.wait import eventually
from kubedra.api.inventory import AGENT_LEASE_PREFIX
from kubedra.controller.leadership import LEASE_NAME, ElectionTiming

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(
    os.environ.get("KUBEDRA_FLEET_TESTS") != "1",
    reason="the fleet-size test (5-10 min) runs with `make test-fleet` (KUBEDRA_FLEET_TESTS=1): "
           "too long for `make test` (bench/RESULTS.md, rounds 5 and 6)")]

NODES = int(os.environ.get("KUBEDRA_STARVATION_NODES", "80"))
"""MIG nodes (80: 32 MB of inventories as listed, one page of 500 until the fix)."""
TIMING = ElectionTiming(lease_duration=8, renew_deadline=6.0, retry_period=1.0)
"""A renewal tried every second (kubernetes-asyncio's shortest retry period); the leader fenced
after 6 s without one. Shorter deadlines measure the loaded API server's round trips (up to
1.3 s per renewal on this shared 2-core machine while 500 slices are written), not the
operator: the operator's share is :data:`MAX_STALL_S`."""
MAX_STALL_S = 1.0
"""The longest the elector may wait past a wake-up (``electionStallSeconds``). In the
reconcilers' process (the election thread until round 6) a garbage collection of the caches
held the interpreter lock for up to 2.2 s at load 13-15 and the leader fenced itself; the
elector, a process of its own, waits only for a CPU."""
MAX_RENEWAL_GAP_S = 3.0
"""Issue 23's target: no gap between two successful renewals over 3 s, any phase, any size
(``electionRenewalGapSeconds``: the retry period and one renewal's round trip)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture(scope="module")
async def fleet(tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[tuple[ControlPlane, Kubedra, ApiClient]]:
    """A control plane with kubedra installed and ``NODES`` MIG nodes reported (kwok nodes,
    agent Leases valid for an hour, inventories with ``status.discovered``); no operator."""
    async with own_control_plane(tmp_path_factory.mktemp("starvation-plane")) as (
            plane, kubedra, api):
        agents = Agents(api, [node_name(i) for i in range(NODES)],
                        h200_node(0, mig=True, mig_form="explicit"))
        await agents.create_nodes()
        coordination = client.CoordinationV1Api(api)
        await gather_limited(lambda n=n: coordination.create_namespaced_lease(  # type: ignore[misc]
            NAMESPACE, {"metadata": {"name": f"{AGENT_LEASE_PREFIX}{n}"},
                        "spec": {"holderIdentity": n, "leaseDurationSeconds": 3600,
                                 "acquireTime": _now(), "renewTime": _now()}},
            _preload_content=False) for n in agents.nodes)
        await agents.report(MIG_REPORTS)
        yield plane, kubedra, api


async def _health(plane: ControlPlane, port: int) -> dict[str, object]:
    try:
        async with aiohttp.ClientSession() as session, session.get(
                f"https://127.0.0.1:{port}/healthz", timeout=aiohttp.ClientTimeout(total=5),
                ssl=client_tls(plane)) as resp:
            return dict(await resp.json())
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return {}


async def _leader_lease(api: ApiClient) -> dict[str, object]:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(
        LEASE_NAME, NAMESPACE, _preload_content=False)
    spec: dict[str, object] = json.loads(await lease.read())["spec"]
    return spec


def _assert_running(operator: Component) -> None:
    assert operator.process is not None
    lines = operator.log.read_text().strip().splitlines()
    assert operator.process.poll() is None, f"the operator exited: {lines[-3:]}"


async def _start_and_verify(kubedra: Kubedra, api: ApiClient) -> None:
    """Start the operator with the short election; wait until it has reconciled every
    inventory; assert that it held its Lease all along."""
    port = free_port()
    operator = kubedra.start_operator(liveness_port=port, election=TIMING)
    assert operator.process is not None
    leading: dict[str, object] = {}

    async def leads() -> bool:
        assert operator.process is not None
        if operator.process.poll() is not None:
            return True
        health = await _health(kubedra.plane, port)
        if health.get("role") == "leader":
            leading.update(health)
        return bool(leading)
    stalls: list[float] = []
    await eventually(leads, timeout=120, interval=0.1, what="the operator leading")
    _assert_running(operator)
    first = await _leader_lease(api)

    async def verified() -> bool:
        assert operator.process is not None
        if operator.process.poll() is not None:
            return True
        health = await _health(kubedra.plane, port)
        stalls.append(float(health.get("electionStallSeconds") or 0))  # type: ignore[arg-type]
        work = health.get("kubedra") or {}
        assert isinstance(work, dict)
        return work.get("inventoriesReconciled", 0) >= NODES and work.get("inventoriesBusy") == 0
    await eventually(verified, timeout=900, interval=0.2, what="every pool reconciled")
    _assert_running(operator)
    assert "leadership lost" not in operator.log.read_text()
    figures = await _health(kubedra.plane, port)
    stalls.append(float(figures["electionStallSeconds"]))  # type: ignore[arg-type]
    figures.pop("kubedra", None)
    print("election figures:", json.dumps(figures))
    assert max(stalls) < MAX_STALL_S, f"the elector stalled {max(stalls)} s: {figures}"
    assert figures["electionRenewalGapSeconds"] <= MAX_RENEWAL_GAP_S, figures  # type: ignore[operator]
    # the harness installed manifests/ (its FlowSchema): the renewals ran at leader-election
    level = await client.FlowcontrolApiserverV1Api(api).read_priority_level_configuration(
        "leader-election")
    assert figures["electionPriorityLevelUID"] == level.metadata.uid, figures
    last = await _leader_lease(api)
    assert first["holderIdentity"] == last["holderIdentity"] == leading["identity"]
    # kubernetes-asyncio's election leaves leaseTransitions unset (client-go counts holders)
    assert first.get("leaseTransitions") == last.get("leaseTransitions")
    assert first["acquireTime"] == last["acquireTime"]


async def test_the_leader_keeps_its_lease_through_publish_and_restart_of_the_largest_inventories(
        fleet: tuple[ControlPlane, Kubedra, ApiClient]) -> None:
    _plane, kubedra, api = fleet
    await _start_and_verify(kubedra, api)  # publishes every pool: inventories listed
    kubedra.stop_operator()
    await _start_and_verify(kubedra, api)  # verifies every pool: inventories and slices listed
    kubedra.stop_operator()
