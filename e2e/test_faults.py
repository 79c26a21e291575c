"""Fault injection (issue 13, item 3): faults repeated at random moments during a storm of
inventory changes and claim creation/deletion, on a control plane of its own (restarting
kube-apiserver or etcd must not disturb the other tests).

While the storm runs, the safety invariants (no device in two claims, no counter
over-consumed, no allocated device unpublished; on the real node no device prepared for two
claims) are checked continuously and must never break; after each fault the storm pauses and
every invariant (:mod:`e2e.invariants`) must hold again within a deadline — the time that
takes is the convergence time reported. Each fault also asserts that it really happened: the
410 Gone reached the operator's watches (its log), the API server refused kubedra's requests
with 429 (its ``apiserver_flowcontrol_rejected_requests_total``).

The API server serves watches from etcd (``--watch-cache=false``), so that etcd's compaction
decides which resourceVersions are too old, as it does for every watch a watch cache cannot
serve; it runs at most 60 requests at once (40 reading, 20 mutating), so that one share of
API Priority and Fairness is one seat.

The counts are bounded for ``make test``; ``make faults`` (``KUBEDRA_FAULTS=full``) runs the
issue's counts; ``KUBEDRA_FAULT_KINDS`` picks faults by name (``watch expiry,kubelet``). The
operator is started again when its leader stops because it could not renew its Lease (as its
Deployment would; counted), any other exit of it fails the run. Each run writes its table to
``$KUBEDRA_FAULT_REPORT`` (default ``.cache/faults-report.json``), the figures of
docs/reliability.md.

Fleet mode (``KUBEDRA_FAULT_FLEET_NODES=N``, ``make faults-fleet``; issue 23): N simulated
nodes of 8 H200 GPUs each besides the suite's, the agents of bench/scale.py (kwok nodes, their
Leases renewed by ``hack/benchagents``, their reports written by the suite); the storm also
changes :data:`FLEET_CHURN` of their reports each round, and after each fault every fleet pool
must have converged too (:func:`e2e.invariants.pool_violations`). Unset or 0: no fleet.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from bench.scale import Agents, build_go, h200_node, inventory_body, node_name
from e2e.harness import ControlPlane
from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.kubedra import NAMESPACE, Kubedra, own_control_plane
from e2e.harness.realnode import RealNode, stand_in_devices
from e2e.harness.wait import eventually
from e2e.invariants import (
    NodeFiles,
    cluster_state,
    converged,
    node_inventory,
    pool_violations,
    prepared_twice,
    safety_violations,
)
from e2e.kube_objects import (
    create_claim_template,
    create_gpu_pod,
    create_reporting_pod,
    read_inventory,
    running_report,
)
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from kubedra.settings import Settings

FULL = os.environ.get("KUBEDRA_FAULTS") == "full"
FLEET_NODES = int(os.environ.get("KUBEDRA_FAULT_FLEET_NODES") or 0)
"""Simulated nodes of the fleet mode (0: none)."""
FLEET_S_PER_NODE = 2.0
"""What each fleet node adds to the module's time limit and to the deadline of its first
publication (seconds): 1,000 nodes took 26 min in all, 3-5 min of it to publish (issue 23)."""
FLEET_CONVERGE_S_PER_NODE = 0.2
"""What each fleet node adds to the convergence deadline (seconds): a restarted operator
verifies every pool before it catches up (99-119 s for 1,000 nodes after a SIGKILL)."""
FLEET_CHURN = 2
"""Fleet nodes whose report each storm round changes (an attribute of gpu-0, as the churn of
bench/scale.py changes it)."""
pytestmark = [pytest.mark.cluster, pytest.mark.faults,
              pytest.mark.timeout((5400 if FULL else 900) + FLEET_S_PER_NODE * FLEET_NODES)]
COUNTS = {"operator SIGKILL": 50 if FULL else 3,
          "kube-apiserver restart": 10 if FULL else 1,
          "etcd restart (data kept)": 5 if FULL else 1,
          "watch expiry (410 Gone after etcd compaction)": 10 if FULL else 1,
          "API throttling (APF, 429)": 10 if FULL else 1}
NODE_COUNTS = {"agent SIGKILL during prepare (real node)": 20 if FULL else 1,
               "kubelet restart (real node)": 5 if FULL else 1}
KINDS = [k.strip() for k in os.environ.get("KUBEDRA_FAULT_KINDS", "").split(",") if k.strip()]
"""Only the faults whose names contain one of these (comma-separated), all when empty."""
COUNTS = {f: n for f, n in COUNTS.items() if not KINDS or any(k in f for k in KINDS)}
NODE_COUNTS = {f: n for f, n in NODE_COUNTS.items() if not KINDS or any(k in f for k in KINDS)}
NODES = ("f-a", "f-b")
REAL_NODE = "f-real"
PROFILES = ("1g.18gb", "2g.35gb", "3g.71gb")
LIVE_PODS = 6
CONVERGE_S = 180.0 + FLEET_CONVERGE_S_PER_NODE * FLEET_NODES
REPORT = Path(os.environ.get("KUBEDRA_FAULT_REPORT", REPO_ROOT / ".cache" / "faults-report.json"))
INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")
WATCH_RESTART = re.compile(r"Restarting the watch-stream for (\S+)")
"""kopf's line when a watch got 410 Gone and lists again (shown by the operator)."""
PREPARE_CALL = "Calling NodePrepareResources rpc"
"""The kubelet's line (``--vmodule=dra_plugin=4``) as it calls the agent to prepare."""
KUBELET_CONFIG = {"syncFrequency": "10s"}
"""The real node's kubelet retries a pod whose sync failed (a prepare call to a killed agent)
after 10-15 s instead of the default minute and a half: the suite measures kubedra, not that
interval."""
FENCED = "leadership lost: exiting"
"""The operator's last line when its leader stopped because it could not renew its Lease."""
THROTTLED = "kubedra-throttled"
"""The FlowSchema and PriorityLevelConfiguration of the throttling fault."""
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"


@dataclass
class Storm:
    """Claims and inventory changes in a loop; the safety invariants checked each round (on
    the real nodes of ``nodes`` too); with a ``fleet``, :data:`FLEET_CHURN` of its reports
    changed each round too (counted in ``churns``)."""

    api: ApiClient
    namespace: str
    rng: random.Random
    nodes: list[NodeFiles] = field(default_factory=list)
    fleet: Agents | None = None
    churns: int = 0
    paused: asyncio.Event = field(default_factory=asyncio.Event)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by :meth:`run` while paused, once no step is in flight."""
    pods: list[str] = field(default_factory=list)
    rounds: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)
    serial: int = 0

    async def run(self) -> None:
        """Forever: one change, then a safety check (API errors while a component restarts
        are expected: skipped)."""
        while True:
            if self.paused.is_set():
                self.idle.set()
                await asyncio.sleep(0.2)
                continue
            try:
                await self.step()
                claims, slices, inventories = await cluster_state(self.api)
                self.violations += safety_violations(claims, slices)
                for files in self.nodes:
                    self.violations += prepared_twice(files, files.checkpoint(),
                                                      node_inventory(files, inventories))
                self.checks += 1  # counted once every check of the round ran
            except Exception:  # the API server may be restarting
                await asyncio.sleep(0.5)
            self.rounds += 1

    async def pause(self) -> None:
        """Pause, and return once the round under way (if any) has ended: no change of the
        storm lands after the pause (one in flight did, and a convergence could be declared
        before it: 2 of 10 fleet pools changed after converging, in the first fleet run)."""
        self.idle.clear()
        self.paused.set()
        await asyncio.wait_for(self.idle.wait(), timeout=CONVERGE_S)

    async def more_rounds(self, n: int) -> None:
        """Wait until ``n`` more rounds ran (the storm must not be paused)."""
        target = self.rounds + n

        async def done() -> bool:
            return self.rounds >= target
        await eventually(done, timeout=120, what=f"{n} storm rounds")

    async def step(self) -> None:
        """Create a pod asking for a random MIG profile, delete the oldest beyond
        ``LIVE_PODS``, or toggle an override on a random partition; then change the reports
        of random fleet nodes."""
        choice = self.rng.random()
        if choice < 0.2:
            node = self.rng.choice(NODES)
            device = f"gpu-0-mig-1g18gb-s{self.rng.randrange(7)}"
            overrides = [{"device": device, "disabled": True}] if self.rng.random() < 0.5 \
                else None
            await client.CustomObjectsApi(self.api).patch_cluster_custom_object(
                *INVENTORIES, f"{node}-gpu.kubedra.io", {"spec": {"overrides": overrides}},
                _content_type="application/merge-patch+json")
        elif choice < 0.6 or len(self.pods) < 2:
            self.serial += 1
            name = f"s-{self.serial}"
            await create_gpu_pod(self.api, self.namespace, name,
                                 f'device.attributes["gpu.kubedra.io"].profile == '
                                 f'"{self.rng.choice(PROFILES)}"',
                                 device_class="mig.gpu.kubedra.io",
                                 node=self.rng.choice(NODES))
            self.pods.append(name)
        if len(self.pods) > LIVE_PODS or (choice >= 0.6 and self.pods):
            name = self.pods.pop(0)
            await client.CoreV1Api(self.api).delete_namespaced_pod(
                name, self.namespace, grace_period_seconds=0)
            await client.ResourceV1Api(self.api).delete_namespaced_resource_claim_template(
                name, self.namespace)
        if self.fleet is not None:
            for node in self.rng.sample(self.fleet.nodes, min(FLEET_CHURN,
                                                              len(self.fleet.nodes))):
                self.churns += 1
                await self.fleet.churn(node, self.churns)


@dataclass
class Injected:
    """What an injected fault leaves to do: ``settle`` is awaited as part of converging (a pod
    of the real node must run again), ``undo`` after converging (lift the throttling)."""

    settle: Callable[[], Awaitable[None]] | None = None
    undo: Callable[[], Awaitable[None]] | None = None


Injector = Callable[[], Awaitable[Injected]]


@dataclass
class Results:
    """The rows of the report and what each fault's evidence counted, over the module."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    storms: list[Storm] = field(default_factory=list)
    evidence: dict[str, Counter[str]] = field(default_factory=dict)
    fleet: Agents | None = None

    def report(self) -> dict[str, Any]:
        """The figures so far (written after each kind of fault)."""
        violations = [v for s in self.storms for v in s.violations]
        fleet = {"fleet_nodes": FLEET_NODES,
                 "fleet_reports_changed": sum(s.churns for s in self.storms),
                 "fleet_agents": self.fleet.counts() if self.fleet else {}} if FLEET_NODES else {}
        return {"mode": "full" if FULL else "bounded",
                "storm_rounds": sum(s.rounds for s in self.storms),
                "safety_checks": sum(s.checks for s in self.storms),
                "safety_violations": violations[:20], "faults": self.rows,
                **fleet, "load_average": os.getloadavg()}


RESULTS = Results()


@pytest.fixture(scope="module")
async def fault_cluster(tmp_path_factory: pytest.TempPathFactory
                        ) -> AsyncIterator[tuple[ControlPlane, Kubedra, ApiClient]]:
    """A control plane of its own (watches served from etcd) with kubedra and two H200 kwok
    nodes in MIG mode."""
    async with own_control_plane(tmp_path_factory.mktemp("fault-plane"), apiserver_args=[
            "--watch-cache=false", "--max-requests-inflight=40",
            "--max-mutating-requests-inflight=20"]) as (plane, kubedra, api):
        # the shipped drain grace: a partition the storm disables stays published, tainted,
        # for as long as it would in a cluster, so the race it closes is tested as shipped
        kubedra.start_operator(drain_grace=Settings.model_fields["drain_grace"].default)
        for node in NODES:
            await client.CustomObjectsApi(api).create_cluster_custom_object(
                *INVENTORIES, {
                    "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                    "metadata": {"name": f"{node}-gpu.kubedra.io"},
                    "spec": {"driver": "gpu.kubedra.io", "nodeName": node,
                             "discovery": {"mig": "partitions"}}})
            kubedra.add_node(node)
            kubedra.start_agent(node)
        for node in NODES:
            await eventually(lambda n=node: _published(api, n, 26),  # type: ignore[misc]
                             timeout=120, what=f"{node} published")
        yield plane, kubedra, api


@pytest.fixture(scope="module")
async def fleet(fault_cluster: tuple[ControlPlane, Kubedra, ApiClient]
                ) -> AsyncIterator[Agents | None]:
    """The simulated nodes of the fleet mode (None without): ``FLEET_NODES`` kwok nodes with
    8 H200 GPUs each, their agents' Leases renewed by ``hack/benchagents`` for the whole
    module, their inventories reported, every pool published."""
    if not FLEET_NODES:
        yield None
        return
    plane, _, api = fault_cluster
    agents = Agents(api, [node_name(i) for i in range(FLEET_NODES)], h200_node(0, mig=False))
    await agents.create_nodes()
    binary = await asyncio.to_thread(build_go, "benchagents")
    renewer = plane.spawn("benchagents", agents.renewer_args(binary, plane.admin_kubeconfig,
                                                             plane.workdir))

    async def renewing() -> bool:
        return bool(agents.counts().get("renewing"))
    await eventually(renewing, timeout=CONVERGE_S + FLEET_S_PER_NODE * FLEET_NODES,
                     what="every fleet agent's Lease")
    await agents.report()
    await converged(api, timeout=CONVERGE_S + FLEET_S_PER_NODE * FLEET_NODES,
                    pools=fleet_pools(agents))
    RESULTS.fleet = agents
    yield agents
    plane.stop_component(renewer)


def fleet_pools(fleet: Agents | None) -> list[str]:
    """The inventories of the fleet's nodes (none without a fleet)."""
    return [inventory_body(n)["metadata"]["name"] for n in fleet.nodes] if fleet else []


@pytest.fixture(scope="module")
async def supervisor(fault_cluster: tuple[ControlPlane, Kubedra, ApiClient]
                     ) -> AsyncIterator[OperatorSupervisor]:
    """The operator's supervisor, running for the whole module."""
    this = OperatorSupervisor(fault_cluster[1])
    task = asyncio.create_task(this.run())
    yield this
    await _stop([task])


async def _published(api: ApiClient, node: str, devices: int) -> bool:
    status = (await read_inventory(api, f"{node}-gpu.kubedra.io") or {}).get("status") or {}
    return bool(status.get("deviceCount") == devices)


@dataclass
class OperatorSupervisor:
    """Starts the operator again when it exits, as its Deployment's kubelet would: its leader
    stops on purpose when it could not renew its Lease within the renew deadline (10 s), e.g.
    while kube-apiserver or etcd restart slowly on a loaded machine (counted in ``fenced``).
    Any other exit is a crash, recorded in ``crashes`` with the log's last lines."""

    kubedra: Kubedra
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    fenced: int = 0
    crashes: list[str] = field(default_factory=list)

    async def run(self) -> None:
        """Forever: every 0.5 s, start an exited operator again."""
        while True:
            await asyncio.sleep(0.5)
            async with self.lock:
                operator = self.kubedra.operator
                if operator is None or operator.process is None \
                        or operator.process.poll() is None:
                    continue
                tail = operator.log.read_text(errors="replace").splitlines()[-5:]
                if any(FENCED in line for line in tail):
                    self.fenced += 1
                else:
                    self.crashes.append("\n".join(tail))
                await asyncio.to_thread(self.kubedra.kill_operator)  # collects it
                await asyncio.to_thread(self.kubedra.restart_operator)


class ClusterFaults:
    """The faults of the control plane and the operator, by name (:data:`COUNTS`)."""

    def __init__(self, plane: ControlPlane, kubedra: Kubedra, storm: Storm,
                 supervisor: OperatorSupervisor) -> None:
        self.plane, self.kubedra, self.storm = plane, kubedra, storm
        self.supervisor = supervisor
        self.evidence: Counter[str] = Counter()

    def injectors(self) -> dict[str, Injector]:
        return {"operator SIGKILL": self.operator_kill,
                "kube-apiserver restart": lambda: self._restart("kube-apiserver"),
                "etcd restart (data kept)": lambda: self._restart("etcd"),
                "watch expiry (410 Gone after etcd compaction)": self.watch_expiry,
                "API throttling (APF, 429)": self.throttling}

    async def operator_kill(self) -> Injected:
        async with self.supervisor.lock:
            await asyncio.to_thread(self.kubedra.kill_operator)
            await asyncio.to_thread(self.kubedra.restart_operator)
        return Injected()

    async def _restart(self, component: str) -> Injected:
        await asyncio.to_thread(self.plane.restart_component, component)
        return Injected()

    def _watch_restarts(self) -> Counter[str]:
        """The operator's kopf watches that got 410 Gone so far, by resource (its own watch of
        agent Leases lists again after any error, the cut connection included)."""
        log = (self.plane.logs / "kubedra-operator.log").read_text(errors="replace")
        return Counter(WATCH_RESTART.findall(log))

    async def watch_expiry(self) -> Injected:
        """The operator stalls (SIGSTOP) while the storm writes on; etcd compacts its history;
        the operator's connections are cut and it resumes (SIGCONT): each watch resumes from
        a resourceVersion compacted away, gets 410 Gone and lists again — asserted from the
        operator's log."""
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        before = self._watch_restarts()
        os.kill(pid, signal.SIGSTOP)
        try:  # 1-2 rounds: a stall beyond the renew deadline (10 s) ends the leader instead
            await self.storm.more_rounds(self.storm.rng.randrange(1, 3))
            await asyncio.to_thread(self.plane.compact_etcd)
            cut = await asyncio.to_thread(self.plane.cut_connections, pid)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert cut > 0, "the operator had no connection to the API server to cut"

        async def expired() -> Counter[str]:
            return self._watch_restarts() - before
        await eventually(expired, timeout=120, what="a 410 Gone reaching the operator's watches")

        async def count() -> None:  # once converged: every watch has resumed by then
            self.evidence.update(self._watch_restarts() - before)
        return Injected(undo=count)

    def _rejected(self) -> float:
        """kubedra's requests refused with 429 so far (the API server's metric)."""
        text: str = self.plane.request("GET", "/metrics")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("apiserver_flowcontrol_rejected_requests_total{")
                   and f'priority_level="{THROTTLED}"' in line)

    async def throttling(self) -> Injected:
        """The operator's and the agents' requests go to a priority level of one share of the
        API server's concurrency, no queueing (429 at once); the storm runs until the API
        server refused some, and every invariant must hold again while the throttling stays
        (the operator backs off and retries); then it is lifted."""
        before = await asyncio.to_thread(self._rejected)
        await asyncio.to_thread(self.plane.request, "POST",
                                f"{FLOWCONTROL}/prioritylevelconfigurations", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": THROTTLED},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0,
                "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}})
        accounts = [{"kind": "ServiceAccount",
                     "serviceAccount": {"name": name, "namespace": NAMESPACE}}
                    for name in ("kubedra-operator", "kubedra-agent")]
        await asyncio.to_thread(self.plane.request, "POST", f"{FLOWCONTROL}/flowschemas", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": THROTTLED},
            "spec": {"priorityLevelConfiguration": {"name": THROTTLED},
                     "matchingPrecedence": 50, "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": accounts,
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                                   "resources": ["*"], "clusterScope": True,
                                                   "namespaces": ["*"]}],
                                "nonResourceRules": [{"verbs": ["*"],
                                                      "nonResourceURLs": ["*"]}]}]}})
        await self.storm.more_rounds(self.storm.rng.randrange(1, 6))

        async def refused() -> bool:
            return await asyncio.to_thread(self._rejected) > before
        await eventually(refused, timeout=120, what="the API server refusing kubedra with 429")

        async def lift() -> None:
            self.evidence["429"] += int(await asyncio.to_thread(self._rejected) - before)
            for kind in ("flowschemas", "prioritylevelconfigurations"):
                await asyncio.to_thread(self.plane.request, "DELETE",
                                        f"{FLOWCONTROL}/{kind}/{THROTTLED}")
        return Injected(undo=lift)


async def _inject(storm: Storm, api: ApiClient, counts: dict[str, int],
                  injectors: dict[str, Injector], evidence: Counter[str],
                  nodes: list[NodeFiles], supervisor: OperatorSupervisor) -> None:
    """Each fault of ``counts`` as often as it says, after a random number of storm rounds;
    after each, the storm pauses and every invariant must hold within ``CONVERGE_S`` (the
    pools of the storm's fleet converged too, counted once more after each)."""
    pools = fleet_pools(storm.fleet)
    for fault, count in counts.items():
        times: list[float] = []
        before = len(storm.violations)
        evidence.clear()
        fenced = supervisor.fenced
        churns = storm.churns
        pools_converged: list[int] = []
        for _ in range(count):
            storm.paused.clear()
            await storm.more_rounds(storm.rng.randrange(1, 6))
            injected = await injectors[fault]()
            start = time.monotonic()
            await storm.more_rounds(2)
            await storm.pause()
            if injected.settle:
                await injected.settle()
            await converged(api, timeout=CONVERGE_S, nodes=nodes, pools=pools)
            times.append(time.monotonic() - start)
            if pools:
                _, slices, inventories = await cluster_state(api)
                pools_converged.append(len(pools) - len(
                    pool_violations(slices, inventories, pools).unconverged()))
            if injected.undo:
                await injected.undo()
        if supervisor.fenced > fenced:
            evidence["operator leader stopped (Lease not renewed), started again"] += (
                supervisor.fenced - fenced)
        fleet = {"converge_max_s": round(max(times), 1),
                 "fleet_pools_converged": pools_converged,
                 "fleet_reports_changed": storm.churns - churns} if pools else {}
        RESULTS.rows.append({"fault": fault, "injected": count,
                             "violations": len(storm.violations) - before,
                             "converge_p50_s": round(statistics.median(times), 1),
                             "converge_p99_s": round(_percentile(times, 0.99), 1),
                             "evidence": dict(evidence), **fleet})
        await asyncio.to_thread(_write_report, RESULTS.report())


async def _storm(api: ApiClient, namespace: str, nodes: list[NodeFiles], fleet: Agents | None
                 ) -> tuple[Storm, list[asyncio.Task[None]]]:
    """A storm in a new ``namespace`` (changing the reports of ``fleet`` too), running."""
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    storm = Storm(api, namespace, random.Random(int(os.environ.get("KUBEDRA_FAULT_SEED", "13"))),
                  nodes, fleet)
    RESULTS.storms.append(storm)
    return storm, [asyncio.create_task(storm.run())]


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_every_invariant_holds_through_injected_faults(
        fault_cluster: tuple[ControlPlane, Kubedra, ApiClient],
        supervisor: OperatorSupervisor, fleet: Agents | None) -> None:
    if not COUNTS:
        pytest.skip("KUBEDRA_FAULT_KINDS picks none of these faults")
    plane, kubedra, api = fault_cluster
    storm, tasks = await _storm(api, "storm", [], fleet)
    try:
        faults = ClusterFaults(plane, kubedra, storm, supervisor)
        await _inject(storm, api, COUNTS, faults.injectors(), faults.evidence, [], supervisor)
    finally:
        await _stop(tasks)
    assert supervisor.crashes == []
    assert storm.violations == []
    assert storm.checks > 0
    rows = {r["fault"]: r["evidence"] for r in RESULTS.rows}
    for fault, evidence in rows.items():
        if fault.startswith("watch expiry"):
            assert evidence, "no 410 Gone reached the operator"
        if fault.startswith("API throttling"):
            assert evidence["429"] > 0


@dataclass
class RealNodeFaults:
    """The faults of real node ``real``: pods take turns with its one GPU (each new pod waits
    for it until the previous one is deleted), so that every fault falls while a pod stops
    and the next one is prepared."""

    kubedra: Kubedra
    real: RealNode
    api: ApiClient
    namespace: str
    rng: random.Random
    evidence: Counter[str] = field(default_factory=Counter)
    serial: int = 0
    current: str | None = None

    def injectors(self) -> dict[str, Injector]:
        return {"agent SIGKILL during prepare (real node)": self.agent_kill_during_prepare,
                "kubelet restart (real node)": self.kubelet_restart}

    def start_agent(self) -> None:
        self.kubedra.start_agent(self.real.name, device_root=self.real.device_root,
                                 boot_id_path=self.real.root / "boot_id")

    def _log(self, component: str) -> str:
        return (self.kubedra.plane.logs / f"{component}.log").read_text(errors="replace")

    async def next_pod(self) -> Callable[[], Awaitable[None]]:
        """Create the next pod (with a claim from a template of its own) and delete the
        previous one; returns a wait for the new pod to run."""
        self.serial += 1
        name = f"r-{self.serial}"
        await create_claim_template(self.api, self.namespace, name)
        await create_reporting_pod(self.api, self.namespace, name, self.real.name,
                                   template=name)
        if self.current:
            await client.CoreV1Api(self.api).delete_namespaced_pod(self.current,
                                                                   self.namespace)
            await client.ResourceV1Api(self.api).delete_namespaced_resource_claim_template(
                self.current, self.namespace)
        self.current = name

        async def runs() -> None:
            await eventually(lambda: running_report(self.api, self.namespace, name),
                             timeout=CONVERGE_S, what=f"pod {name} running")
        return runs

    async def agent_kill_during_prepare(self) -> Injected:
        """SIGKILL the agent at a random moment (0-300 ms) after the kubelet called it to
        prepare the next pod's claim, then start it again."""
        calls = self._log(f"kubelet-{self.real.name}").count(PREPARE_CALL)
        runs = await self.next_pod()

        async def called() -> bool:
            return self._log(f"kubelet-{self.real.name}").count(PREPARE_CALL) > calls
        await eventually(called, timeout=CONVERGE_S, what="the kubelet calling prepare")
        prepared = self._log(f"kubedra-agent-{self.real.name}").count("claim prepared")
        await asyncio.sleep(self.rng.uniform(0, 0.3))  # the fault's moment, not a wait
        await asyncio.to_thread(self.kubedra.stop_agent, self.real.name, crash=True)
        if self._log(f"kubedra-agent-{self.real.name}").count("claim prepared") == prepared:
            self.evidence["killed before the claim was prepared"] += 1
        await asyncio.to_thread(self.start_agent)
        return Injected(settle=runs)

    async def kubelet_restart(self) -> Injected:
        """Restart the kubelet at a random moment (0-3 s) after the next pod was created and
        the previous one deleted."""
        runs = await self.next_pod()
        await asyncio.sleep(self.rng.uniform(0, 3))  # the fault's moment, not a wait
        await asyncio.to_thread(self.real.restart_kubelet)
        return Injected(settle=runs)


@pytest.fixture(scope="module")
async def real_faults(fault_cluster: tuple[ControlPlane, Kubedra, ApiClient],
                      supervisor: OperatorSupervisor) -> RealNodeFaults:
    """Real node ``f-real`` (kubelet, containerd) with its agent replaying the H200 capture
    (one GPU, stand-in device nodes), published."""
    _, kubedra, api = fault_cluster
    real = await asyncio.to_thread(kubedra.add_real_node, REAL_NODE,
                                   {"kubedra.io/gpu": "true"}, KUBELET_CONFIG)
    stand_in_devices(real.device_root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
    (real.root / "boot_id").write_text("boot-1\n")
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": "real-pods"}})
    faults = RealNodeFaults(kubedra, real, api, "real-pods", random.Random(
        int(os.environ.get("KUBEDRA_FAULT_SEED", "13"))))
    faults.start_agent()
    await eventually(lambda: _published(api, REAL_NODE, 1), timeout=120,
                     what=f"{REAL_NODE} published")
    return faults


async def test_real_node_prepares_no_device_twice_and_keeps_cdi_specs_through_faults(
        fault_cluster: tuple[ControlPlane, Kubedra, ApiClient], real_faults: RealNodeFaults,
        supervisor: OperatorSupervisor, fleet: Agents | None) -> None:
    if not NODE_COUNTS:
        pytest.skip("KUBEDRA_FAULT_KINDS picks none of these faults")
    _, _, api = fault_cluster
    files = NodeFiles(REAL_NODE, real_faults.real.root, real_faults.real.cdi_dir)
    storm, tasks = await _storm(api, "storm-node", [files], fleet)
    try:
        runs = await real_faults.next_pod()
        await runs()
        await _inject(storm, api, NODE_COUNTS, real_faults.injectors(), real_faults.evidence,
                      [files], supervisor)
    finally:
        await _stop(tasks)
    assert supervisor.crashes == []
    assert storm.violations == []
    assert storm.checks > 0
    assert files.spec_uids()
    assert files.spec_uids() == set(files.checkpoint())


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _write_report(report: dict[str, Any]) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")


