"""Fault injection (issue 13, item 3): faults repeated at random moments during a storm of
inventory changes and claim creation/deletion, on a control plane of its own (restarting
kube-apiserver or etcd must not disturb the other tests).

While the storm runs, the safety invariants (no device in two claims, no counter
over-consumed, no allocated device unpublished) are checked continuously and must never
break; after each fault the storm pauses and every invariant (:mod:`e2e.invariants`) must hold
again within a deadline — the time that takes is the convergence time reported.

The counts are bounded for ``make test``; ``make faults`` (``KUBEDRA_FAULTS=full``) runs the
issue's counts. Each run writes its table to ``$KUBEDRA_FAULT_REPORT`` (default
``.cache/faults-report.json``), the figures of docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from e2e.invariants import cluster_state, converged, safety_violations
from e2e.kube_objects import create_gpu_pod, read_inventory
from kubedra.kube import make_api_client

FULL = os.environ.get("KUBEDRA_FAULTS") == "full"
pytestmark = [pytest.mark.cluster, pytest.mark.faults,
              pytest.mark.timeout(3600 if FULL else 600)]
COUNTS = {"operator SIGKILL": 50 if FULL else 3,
          "kube-apiserver restart": 10 if FULL else 1,
          "etcd restart (data kept)": 5 if FULL else 1}
NODES = ("f-a", "f-b")
PROFILES = ("1g.18gb", "2g.35gb", "3g.71gb")
LIVE_PODS = 6
CONVERGE_S = 180.0
REPORT = Path(os.environ.get("KUBEDRA_FAULT_REPORT", REPO_ROOT / ".cache" / "faults-report.json"))
INVENTORIES = ("kubedra.io", "v1alpha1", "deviceinventories")


@dataclass
class Storm:
    """Claims and inventory changes in a loop; the safety invariants checked each round."""

    api: ApiClient
    namespace: str
    rng: random.Random
    paused: asyncio.Event = field(default_factory=asyncio.Event)
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
                await asyncio.sleep(0.2)
                continue
            try:
                await self.step()
                claims, slices, _ = await cluster_state(self.api)
                self.checks += 1
                self.violations += safety_violations(claims, slices)
            except Exception:  # the API server may be restarting
                await asyncio.sleep(0.5)
            self.rounds += 1

    async def step(self) -> None:
        """Create a pod asking for a random MIG profile, delete the oldest beyond
        ``LIVE_PODS``, or toggle an override on a random partition."""
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


@pytest.fixture(scope="module")
async def fault_cluster(tmp_path_factory: pytest.TempPathFactory
                        ) -> AsyncIterator[tuple[ControlPlane, Kubedra, ApiClient]]:
    """A control plane of its own with kubedra and two H200 kwok nodes in MIG mode."""
    plane = ControlPlane(tmp_path_factory.mktemp("fault-plane"))
    plane.start()
    try:
        kubedra = Kubedra(plane)
        kubedra.install()
        kubedra.start_operator()
        api = await make_api_client(plane.admin_kubeconfig)
        async with api:
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
                async def published(node: str = node) -> bool:
                    status = (await read_inventory(api, f"{node}-gpu.kubedra.io") or {}).get(
                        "status") or {}
                    return bool(status.get("deviceCount") == 26)
                await eventually(published, timeout=120, what=f"{node} published")
            yield plane, kubedra, api
    finally:
        plane.stop()


def _injectors(plane: ControlPlane, kubedra: Kubedra) -> dict[str, Callable[[], None]]:
    def operator_kill() -> None:
        kubedra.kill_operator()
        kubedra.restart_operator()
    return {"operator SIGKILL": operator_kill,
            "kube-apiserver restart": lambda: plane.restart_component("kube-apiserver"),
            "etcd restart (data kept)": lambda: plane.restart_component("etcd")}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def test_every_invariant_holds_through_injected_faults(
        fault_cluster: tuple[ControlPlane, Kubedra, ApiClient]) -> None:
    plane, kubedra, api = fault_cluster
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": "storm"}})
    rng = random.Random(int(os.environ.get("KUBEDRA_FAULT_SEED", "13")))
    storm = Storm(api, "storm", rng)
    task = asyncio.create_task(storm.run())
    rows: list[dict[str, Any]] = []
    try:
        injectors = _injectors(plane, kubedra)
        for fault, count in COUNTS.items():
            times: list[float] = []
            before = len(storm.violations)
            for _ in range(count):
                storm.paused.clear()
                rounds = storm.rounds
                await eventually(lambda r=rounds: _after(storm, r + rng.randrange(1, 6)),
                                 timeout=120, what="storm rounds before the fault")
                await asyncio.to_thread(injectors[fault])
                await eventually(lambda r=storm.rounds: _after(storm, r + 2), timeout=120,
                                 what="storm rounds after the fault")
                storm.paused.set()
                times.append(await converged(api, timeout=CONVERGE_S))
            rows.append({"fault": fault, "injected": count,
                         "violations": len(storm.violations) - before,
                         "converge_p50_s": round(statistics.median(times), 1),
                         "converge_p99_s": round(_percentile(times, 0.99), 1)})
            await asyncio.to_thread(_write_report, _report(storm, rows))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert storm.violations == []
    assert storm.checks > 0


def _report(storm: Storm, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures so far (written after each kind of fault)."""
    return {"mode": "full" if FULL else "bounded", "storm_rounds": storm.rounds,
            "safety_checks": storm.checks, "safety_violations": storm.violations[:20],
            "faults": rows}


def _write_report(report: dict[str, Any]) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2) + "\n")


async def _after(storm: Storm, rounds: int) -> bool:
    return storm.rounds >= rounds
