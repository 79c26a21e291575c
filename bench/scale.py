"""bench/scale: kubedra on thousands of nodes, side by side with upstream's Go publisher.

On one local v1.37.2 control plane (``e2e.harness``), the bench plays N node agents: it creates
N kwok nodes, their agent Leases ``kubedra-agent-<node>`` (created and renewed every
``lease_duration / 3`` seconds, as the agent does, for the whole run, by one Go process,
``hack/benchagents``, so that 5,000 agents cost the machine little) and their
DeviceInventories with ``status.discovered`` written by server-side apply as the agent's field
manager: 8 H200 GPUs per node from the real capture (``hardware/nvidia-h200``), or with
``--mig`` every MIG placement of each GPU (26 devices and one counter set per GPU). Then, each
phase measured on its own:

* ``peer``: the Go peer (``hack/slicepublisher``: upstream's
  ``k8s.io/dynamic-resource-allocation/resourceslice`` controller v0.37.2, one per node, owned by
  the Node, as every kubelet plugin runs it) publishes the same slices under driver
  ``peer.gpu.kubedra.io``: process start → every slice exists; its slices are deleted after.
* ``publish``: kubedra's operator starts with every inventory reported: start → every slice
  exists. Seconds, API writes, peak RSS (``VmHWM``), CPU seconds, for both.
* ``restart``: the operator is stopped and started again: start → every inventory reconciled
  (its ``/healthz`` probe), with the API writes it made (should be none).
* ``steady``: only Lease renewals for ``--steady`` seconds: slice writes, operator CPU %, the
  operator's requests per second (from the API server's audit log, which records only the
  operator's ServiceAccount).
* ``churn``: ``--churn-percent`` of the inventories per minute get a changed device for
  ``--churn`` seconds: status written → the slice shows it, p50/p99.
* ``claims``: ``--claims`` pods with one-GPU claims at ``--claim-rate`` per second
  (:mod:`bench.claimload`; the rate it reached is ``created_per_s``), allocated by
  kube-scheduler: allocation seen → the operator's ``Ready`` in ``status.devices``, p50/p95/p99,
  split at the API server's audit timestamps into kube-scheduler's part (claim and pod
  created → allocation written) and kubedra's (allocation written → ``Ready`` written), and
  the operator's writes per claim.
* ``explain``: one claim no device satisfies: pod created → kube-scheduler marks it
  unschedulable → the operator's ``CannotAllocate`` Event (both seen by polling every 50 ms),
  and the wall time of ``kubectl dra explain`` (median of three runs, fetching included) and
  of ``kubectl dra simulate --max-copies 1000``. Issue 24's figures at 2,000 nodes:
  ``--nodes 2000 --phases publish,explain``.

Usage (after ``make venv binaries``; Go ≥ 1.26 builds the peer and the agents on first use)::

    PYTHONPATH=.:operator .venv/bin/python -m bench.scale --nodes 500 [--mig] [--steady 600]

prints one JSON object with every figure; ``--phases`` picks phases (default all).

``--tracemalloc DIR`` runs each operator under :mod:`bench.memtrace` (opt-in: tracing slows it
and costs memory of its own, so its RSS figures are not comparable with a run without it):
``DIR/<phase>/`` gets ``peak.tracemalloc`` (at the highest traced memory seen) and
``end.tracemalloc`` (when the phase is done: published and settled, or every pool verified),
each with a ``.json`` of ``VmRSS``, glibc's ``mallinfo2`` and, at the end, the RSS after
``malloc_trim``, and ``holders.txt`` (the API objects alive by kind, and what holds them);
then ``python -m bench.memtrace report DIR/<phase>`` writes the top
allocations by line, file and traceback, and ``python -m bench.memtrace compare
A.tracemalloc B.tracemalloc`` what differs between two snapshot files. Glibc's allocator
is tuned as usual through the environment (``MALLOC_ARENA_MAX=2``), which the operator
inherits.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from bench import memtrace
from bench.claimload import create_claims, pod_with_claim
from bench.publish import cpu_seconds, peak_rss_mib, rss_mib, writes_by_resource
from bench.py_spy import PhaseProfiles
from e2e.harness import ControlPlane
from e2e.harness.controlplane import KWOK_NODE_LABEL, REPO_ROOT, Component, default_bin_dir
from e2e.harness.kubedra import H200_CAPTURE, NAMESPACE, Kubedra, kubectl
from e2e.harness.wait import eventually
from kubedra import kube
from kubedra.api.inventory import (
    AGENT_LEASE_PREFIX,
    DeviceInventory,
    DiscoveredState,
    DiscoveryResult,
    DiscoverySettings,
)
from kubedra.api.mig import compact, expand
from kubedra.api.resource import OwnerReference
from kubedra.controller.leadership import LEASE_NAME as LEADER_LEASE
from kubedra.discovery.backends import discover
from kubedra.kube import make_api_client
from kubedra.publishing.pool import build_pool
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import plan_sync

DRIVER = "gpu.kubedra.io"
PEER_DRIVER = "peer.gpu.kubedra.io"
GPUS_PER_NODE = 8
LEASE_DURATION = 40
"""Seconds, the agent's default (``Settings.lease_duration``); renewed every third of it
(``--lease-duration`` sets another, where the API server of a small machine cannot take the
renewals of thousands of agents: ``bench/RESULTS.md``, 5,000 nodes)."""
NODE_STATUS_PERIOD_S = 300.0
"""A real kubelet's ``nodeStatusReportFrequency`` (seconds): how often it posts a Node status
that did not change (its heartbeats go to its Lease in ``kube-node-lease``, which nothing of
kubedra watches). kwok's own heartbeat stage posts one every 20 to 25 s, 12 to 15 times as
many Node events as a fleet of kubelets sends (``--node-status-period 0``: kwok's)."""
SCHEDULER_QPS = 50.0
"""kube-scheduler's client QPS by default (``clientConnection.qps``,
``pkg/scheduler/apis/config/v1/defaults.go``; burst 100)."""
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:kubedra-operator"
CLAIM_CPU_OF = ("kube-scheduler", "kube-apiserver")
"""Components whose CPU the claims phase reports, per claim, beside the operator's."""
SCHEDULER_USER = "system:kube-scheduler"
"""kube-scheduler's user (its client certificate, ``e2e.harness.controlplane``)."""
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
CONCURRENCY = 16
MIG_REPORTS = 2
"""MIG inventories whose status the bench applies at once: each (208 devices, 225 KB) costs the
API server about 0.7 s of CPU, so 16 at once on a loaded 2-core machine ran past its 60 s
request timeout (``bench/RESULTS.md``, MIG)."""
EXPLAIN_RUNS = 3
"""``kubectl dra explain`` runs in the explain phase (the median is ``explain_s``)."""

PHASES = ("peer", "publish", "restart", "steady", "churn", "claims", "explain")
CHURN_ATTRIBUTE = "benchChurn"
Json = dict[str, Any]


# --- what the agents report ------------------------------------------------------------------

def node_name(index: int) -> str:
    """``scale-00042``."""
    return f"scale-{index:05d}"


def h200_node(index: int, mig: bool, mig_form: str = "compact") -> Json:
    """``status.discovered`` of node ``index``: the capture's H200 as 8 GPUs (uuid, PCI bus ID and
    minor number per GPU), with every MIG placement and one counter set per GPU if ``mig``:
    ``mig_form`` ``compact`` as the agent reports them (:func:`kubedra.api.mig.compact`: one
    ``migModels`` entry and one ``deviceModels`` entry, each GPU naming them and listing what is
    its own), ``explicit`` as an agent of an earlier version did (every partition and every
    attribute listed)."""
    result = discover(f"snapshot:{H200_CAPTURE}",
                      DiscoverySettings(mig="partitions" if mig else "none"))
    text = json.dumps({"devices": [d.to_api() for d in result.devices],
                       "counterSets": [c.to_api() for c in result.counter_sets]})
    uuid = result.devices[0].attributes["uuid"].string_value
    assert uuid
    devices: list[Json] = []
    counter_sets: list[Json] = []
    for gpu in range(GPUS_PER_NODE):
        copy = json.loads(text.replace('"gpu-0', f'"gpu-{gpu}')
                          .replace(uuid, f"GPU-{index:08x}-0000-4000-8000-{gpu:012x}")
                          .replace('"0000:00:06.0"', f'"0000:{gpu + 1:02x}:00.0"')
                          .replace('"minor": {"int": 0}', f'"minor": {{"int": {gpu}}}'))
        devices += copy["devices"]
        counter_sets += copy["counterSets"]
    full = DiscoveryResult.model_validate({"devices": devices, "counterSets": counter_sets})
    full.mig_profiles = {f"gpu-{gpu}": profiles for gpu in range(GPUS_PER_NODE)
                         for profiles in result.mig_profiles.values()}
    report = compact(full) if mig_form == "compact" else DiscoveredState(
        devices=full.devices, counter_sets=full.counter_sets or None)
    return {**report.to_api(), "backend": "snapshot", "agentVersion": "bench"}


def inventory_body(node: str) -> Json:
    """The DeviceInventory an agent creates for ``node``."""
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node}}


def published_slices(node: str, discovered: Json) -> list[Json]:
    """The slices kubedra publishes for ``node`` (``spec`` fields the Go peer needs):
    ``[{"devices": [...], "sharedCounters": [...]}]``."""
    inventory = DeviceInventory.from_api({**inventory_body(node), "status": {
        "discovered": discovered}})
    owner = OwnerReference(api_version="kubedra.io/v1alpha1", kind="DeviceInventory",
                           name=node, uid="00000000-0000-0000-0000-000000000000")
    pool = build_pool(inventory)
    plan = plan_sync(node, owner, pool, split_pool(pool), [])
    specs = [w.body["spec"] for w in plan.writes if w.body is not None]
    return [{k: spec[k] for k in ("devices", "sharedCounters") if k in spec} for spec in specs]


def devices_per_node(discovered: Json) -> int:
    """Devices one node's pool publishes (the compact form written out)."""
    return len(expand(DiscoveredState.from_api(discovered)).devices)


def api_footprint(plane: ControlPlane, node: str) -> Json:
    """What the API holds: kube-apiserver's and etcd's RSS (MiB), etcd's database size (bytes,
    ``etcd_mvcc_db_total_size_in_use_in_bytes``), and the bytes of ``node``'s inventory and of
    its slices as the API server sends them (``kubectl get --raw``: ``managedFields``
    included, no indentation, as a list or watch carries them)."""
    procs = {c.name: c.pid for c in plane.components if c.name in ("etcd", "kube-apiserver")}
    with urllib.request.urlopen(f"{plane.etcd_url}/metrics", timeout=30) as response:
        metrics = response.read().decode()
    in_use = next(float(line.split()[1]) for line in metrics.splitlines()
                  if line.startswith("etcd_mvcc_db_total_size_in_use_in_bytes "))
    inventory = kubectl(plane, "get", "--raw",
                        f"/apis/kubedra.io/v1alpha1/deviceinventories/{node}-{DRIVER}")
    slices = json.loads(kubectl(plane, "get", "--raw", "/apis/resource.k8s.io/v1/resourceslices"
                                f"?fieldSelector=spec.nodeName%3D{node}"))
    return {"apiserver_rss_mib": round(rss_mib(procs["kube-apiserver"]), 1),
            "etcd_rss_mib": round(rss_mib(procs["etcd"]), 1),
            "etcd_db_in_use_bytes": int(in_use),
            "inventory_bytes": len(inventory.encode()),
            "slice_bytes": sum(len(json.dumps(s, separators=(",", ":")).encode())
                               for s in slices["items"] if s["spec"]["driver"] == DRIVER)}


# --- the agents --------------------------------------------------------------------------------

async def gather_limited(calls: Iterable[Callable[[], Awaitable[Any]]],
                         limit: int = CONCURRENCY) -> None:
    """Run the calls, ``limit`` at a time."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()
    await asyncio.gather(*(one(c) for c in calls))


@dataclass
class Agents:
    """N node agents played by the bench: their nodes and inventories from here, their Leases
    from ``hack/benchagents`` (one Go process renewing every Lease at the agents' cadence;
    round 3 of ``bench/RESULTS.md``: renewing them from this process starved it at 2,000
    nodes)."""

    api: ApiClient
    nodes: list[str]
    discovered: Json
    lease_duration: int = LEASE_DURATION
    """The agents' ``leaseDurationSeconds``; each renews every third of it."""
    stats_file: Path | None = None
    """The renewer's counts (``hack/benchagents -stats``), once it runs."""
    churned: dict[tuple[str, int], float] = field(default_factory=dict)
    """(node, churn value) → when its status write returned (monotonic seconds)."""

    async def create_nodes(self) -> None:
        """kwok nodes, one per agent."""
        core = client.CoreV1Api(self.api)
        await gather_limited(lambda n=n: core.create_node(  # type: ignore[misc]
            {"metadata": {"name": n, "labels": {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1],
                                                "kubernetes.io/hostname": n}}},
            _preload_content=False) for n in self.nodes)

    def renewer_args(self, binary: Path, kubeconfig: Path, workdir: Path) -> list[str]:
        """The command of ``hack/benchagents`` for these agents (their node names written to
        ``workdir``), remembering where it writes its counts."""
        nodes_file = workdir / "agent-nodes.txt"
        nodes_file.write_text("".join(f"{n}\n" for n in self.nodes))
        self.stats_file = workdir / "agent-stats.json"
        return [str(binary), f"--kubeconfig={kubeconfig}", f"--nodes={nodes_file}",
                f"--stats={self.stats_file}", f"--namespace={NAMESPACE}",
                f"--prefix={AGENT_LEASE_PREFIX}", f"--lease-duration={self.lease_duration}",
                f"--concurrency={CONCURRENCY}"]

    def counts(self) -> Json:
        """The renewer's counts now: ``leases`` created, ``renewals``, ``late`` and ``failed``
        ones, ``renewing`` (every Lease exists); ``{}`` before its first write."""
        if self.stats_file is None or not self.stats_file.exists():
            return {}
        counts: Json = json.loads(self.stats_file.read_text())
        return counts

    async def report(self, limit: int = CONCURRENCY) -> None:
        """Every agent creates its inventory and applies ``status.discovered``, ``limit`` at
        a time."""
        async def one(node: str) -> None:
            body = inventory_body(node)
            await kube.create_inventory(self.api, body)
            await kube.apply_discovered(self.api, body["metadata"]["name"], self.discovered)
        await gather_limited((lambda n=n: one(n) for n in self.nodes),  # type: ignore[misc]
                             limit)

    async def churn(self, node: str, value: int) -> None:
        """Change gpu-0 of ``node`` (an attribute ``benchChurn: value``) as its agent would
        report a change; remembers when the write returned."""
        devices = [dict(d) for d in self.discovered["devices"]]
        devices[0] = {**devices[0], "attributes": {**devices[0].get("attributes", {}),
                                                   CHURN_ATTRIBUTE: {"int": value}}}
        await kube.apply_discovered(self.api, inventory_body(node)["metadata"]["name"],
                                    {**self.discovered, "devices": devices})
        self.churned[(node, value)] = time.monotonic()


# --- what the API server shows -----------------------------------------------------------------

async def watch_forever(list_call: Callable[..., Any], *args: Any,
                        on_object: Callable[[str, Json], None],
                        on_list: Callable[[], None] = lambda: None) -> None:
    """List, then watch, forever: ``on_object(type, object)`` for every listed object
    (``ADDED``) and every watch event; relists after a dropped or failed watch, calling
    ``on_list()`` first (what was deleted meanwhile is in no list and no event).

    A list answered with an error (kubernetes-asyncio raises none with
    ``_preload_content=False``: the body is a ``Status``) is printed in one line and
    relisted; any other exception is printed with its traceback and relisted too: this task
    ends only when cancelled. (Before, such a list ended the task silently, a ``KeyError`` on
    ``items``, and the phase waiting on its counts waited out its timeout: a 1,000-node MIG
    run, while the API server answered the Go peer's creates ``504 Timeout``,
    ``bench/RESULTS.md``, scale, round 16.)"""
    while True:
        try:
            response = await list_call(*args, _preload_content=False)
            listed = json.loads(await response.read())
            if listed.get("kind") == "Status":
                print(f"bench.scale: list failed, relisting: {listed.get('code')} "
                      f"{listed.get('message')}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.5)
                continue
            on_list()
            for item in listed["items"]:
                on_object("ADDED", item)
            stream = watch.Watch(return_type="object")
            async for event in stream.stream(
                    list_call, *args, resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=300):
                if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                    break  # ERROR (e.g. 410 Gone): relist
                on_object(event["type"], event["object"])
        except (aiohttp.ClientError, TimeoutError, client.ApiException):
            await asyncio.sleep(0.5)
        except Exception:  # a watch of the bench outlives any failure
            traceback.print_exc()
            await asyncio.sleep(0.5)


@dataclass
class SliceWatch:
    """Every ResourceSlice by name, kept by one watch: driver, node, and the churn value of the
    first device (with the time it was first seen)."""

    api: ApiClient
    slices: dict[str, tuple[str, str]] = field(default_factory=dict)
    churn_seen: dict[tuple[str, int], float] = field(default_factory=dict)

    def seen(self, node: str, value: int) -> float | None:
        """When ``node``'s slice first showed churn value ``value`` or a later one (a later
        change may overtake an earlier one before it is published)."""
        times = [t for (n, v), t in self.churn_seen.items() if n == node and v >= value]
        return min(times) if times else None

    def count(self, driver: str) -> int:
        """Slices of ``driver`` now."""
        return sum(1 for d, _node in self.slices.values() if d == driver)

    async def run(self) -> None:
        """Keep :attr:`slices` current, forever."""
        def on_object(kind: str, obj: Json) -> None:
            if kind == "DELETED":
                self.slices.pop(obj["metadata"]["name"], None)
            else:
                self._see(obj)
        await watch_forever(client.ResourceV1Api(self.api).list_resource_slice,
                            on_object=on_object, on_list=self.slices.clear)

    def _see(self, obj: Json) -> None:
        spec = obj["spec"]
        node = spec.get("nodeName") or ""
        self.slices[obj["metadata"]["name"]] = (spec["driver"], node)
        for device in spec.get("devices") or []:
            if device["name"] == "gpu-0":
                value = ((device.get("attributes") or {}).get(CHURN_ATTRIBUTE) or {}).get("int")
                if value is not None:
                    self.churn_seen.setdefault((node, value), time.monotonic())


class AuditLog:
    """The API server's audit log, which records the operator's ServiceAccount and
    kube-scheduler's writes (its allocations, bindings, pod statuses), nothing else."""

    POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
              "omitStages": ["RequestReceived", "ResponseStarted"],
              "rules": [{"level": "Metadata", "users": [OPERATOR_USER]},
                        {"level": "Metadata", "users": [SCHEDULER_USER],
                         "verbs": sorted(WRITE_VERBS)},
                        {"level": "None"}]}

    def __init__(self, workdir: Path) -> None:
        self.policy = workdir / "audit-policy.yaml"
        self.path = workdir / "audit.log"
        workdir.mkdir(parents=True, exist_ok=True)
        self.policy.write_text(yaml.safe_dump(self.POLICY))

    def apiserver_args(self) -> list[str]:
        """kube-apiserver flags that turn it on."""
        return [f"--audit-policy-file={self.policy}", f"--audit-log-path={self.path}",
                "--audit-log-format=json", "--audit-log-maxsize=0"]

    def offset(self) -> int:
        """Where the log ends now (bytes)."""
        return self.path.stat().st_size if self.path.exists() else 0

    def events_since(self, offset: int, user: str | None = OPERATOR_USER) -> Iterable[Json]:
        """The audit events of ``user`` (None: every user logged) after ``offset``, in the
        log's order."""
        with self.path.open("rb") as log:
            log.seek(offset)
            for line in log:
                event = json.loads(line)
                if user is None or event["user"]["username"] == user:
                    yield event

    def claim_writes_since(self, offset: int, namespace: str) -> ClaimWrites:
        """When the claims of ``namespace`` were allocated and made Ready after ``offset``."""
        return claim_writes(self.events_since(offset, user=None), namespace)

    def requests_since(self, offset: int, user: str = OPERATOR_USER) -> dict[str, int]:
        """The requests of ``user`` (the operator, or kube-scheduler's writes) after
        ``offset``, by ``verb resource[/subresource]`` (watches count when they end); those on
        the operator's leader-election Lease end in :data:`ELECTION`, dry runs (which write
        nothing) in :data:`DRY_RUN`."""
        counts: dict[str, int] = {}
        for event in self.events_since(offset, user):
            ref = event.get("objectRef") or {}
            key = f"{event['verb']} {ref.get('resource', '')}" + (
                f"/{ref['subresource']}" if ref.get("subresource") else "")
            if ref.get("resource") == "leases" and ref.get("name") == LEADER_LEASE:
                key += ELECTION
            elif "dryRun=" in event.get("requestURI", ""):
                key += DRY_RUN
            counts[key] = counts.get(key, 0) + 1
        return counts

    def renewals_since(self, offset: int) -> list[float]:
        """When the operator's successful writes of its leader-election Lease after
        ``offset`` completed (epoch seconds, the API server's ``stageTimestamp``)."""
        return [datetime.datetime.fromisoformat(event["stageTimestamp"]).timestamp()
                for event in self.events_since(offset)
                if event["verb"] in ("create", "update")
                and (event.get("objectRef") or {}).get("resource") == "leases"
                and (event.get("objectRef") or {}).get("name") == LEADER_LEASE
                and (event.get("responseStatus") or {}).get("code", 0) < 300]


@dataclass
class ClaimWrites:
    """When each claim's status was written, by claim name, as the API server's audit log has it
    (epoch seconds, from the events' microsecond timestamps): ``allocated``, kube-scheduler's
    first successful status write of the claim (its allocation) completed; ``sent`` and
    ``ready``, the operator's first successful status write of the claim received and
    completed: its ``Ready`` condition in ``status.devices``, ``True`` while the claim's pool
    stays published (the audit log at level Metadata does not say which; a pool withdrawn for a
    late agent Lease makes it a ``False`` one, and the bench's own watch, which waits for
    ``True``, then reports later: ``bench/RESULTS.md``, round 21 at 50/s)."""

    allocated: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)


def claim_writes(events: Iterable[Json], namespace: str) -> ClaimWrites:
    """The :class:`ClaimWrites` of the claim status writes of ``namespace`` among audit
    ``events`` (stage ``ResponseComplete``; refused writes, 300 and above, left out)."""
    found = ClaimWrites()
    for event in events:
        ref = event.get("objectRef") or {}
        if (event.get("stage") != "ResponseComplete" or ref.get("resource") != "resourceclaims"
                or ref.get("subresource") != "status" or ref.get("namespace") != namespace
                or event["verb"] not in ("update", "patch")
                or (event.get("responseStatus") or {}).get("code", 0) >= 300):
            continue
        name, user = ref["name"], event["user"]["username"]
        done = datetime.datetime.fromisoformat(event["stageTimestamp"]).timestamp()
        if user == SCHEDULER_USER:
            found.allocated.setdefault(name, done)
        elif user == OPERATOR_USER and name not in found.ready:
            found.sent[name] = datetime.datetime.fromisoformat(
                event["requestReceivedTimestamp"]).timestamp()
            found.ready[name] = done
    return found


def between(start: dict[str, float], end: dict[str, float]) -> list[float]:
    """``end[k] - start[k]`` (seconds) for every key in both."""
    return [end[k] - start[k] for k in start.keys() & end.keys()]


ELECTION = " (leader election)"
"""Suffix of :meth:`AuditLog.requests_since`'s keys for requests on the leader Lease."""
DRY_RUN = " (dry run)"
"""Suffix of :meth:`AuditLog.requests_since`'s keys for dry-run requests (the operator's probe
of the fields the API server keeps, :mod:`kubedra.controller.features`)."""


def writes(requests: dict[str, int]) -> int:
    """The writes among :meth:`AuditLog.requests_since`'s counts, but those of the leader
    election (a renewal every 2 s), which are not work, and dry runs, which write nothing."""
    return sum(n for key, n in requests.items()
               if key.split(" ")[0] in WRITE_VERBS and not key.endswith((ELECTION, DRY_RUN)))


def per_second(requests: dict[str, int], seconds: float) -> Json:
    """Requests per second, all and without the leader election's."""
    election = sum(n for key, n in requests.items() if key.endswith(ELECTION))
    return {"operator_requests_per_s": round(sum(requests.values()) / seconds, 2),
            "operator_requests_per_s_without_election":
                round((sum(requests.values()) - election) / seconds, 2)}


def kept_lease(before: Json, after: Json, renewals: list[float], start: float,
               end: float) -> Json:
    """Whether the leader held its Lease from ``start`` to ``end`` (epoch seconds): the same
    holder and acquire time before and after (``leaseTransitions`` unchanged), and the longest
    time without a successful renewal (``renewals``: epoch seconds), to hold against the renew
    deadline (10 s)."""
    edges = [start, *sorted(renewals), end]
    return {"kept": before.get("holderIdentity") == after.get("holderIdentity")
            and before.get("acquireTime") == after.get("acquireTime")
            and before.get("leaseTransitions") == after.get("leaseTransitions"),
            "holder": after.get("holderIdentity"),
            "lease_transitions": after.get("leaseTransitions"),
            "renewals": len(renewals),
            "longest_without_renewal_s": round(max(b - a for a, b in itertools.pairwise(edges)),
                                               2)}


def helpers_rss_mib(pid: int) -> Json:
    """Peak RSS (``VmHWM``, MiB) of each child process of ``pid`` (the operator's elector
    and multiprocessing's resource tracker), by ``<pid> <command name>``."""
    children: list[str] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += (task / "children").read_text().split()
    result: Json = {}
    for child in children:
        try:
            name = Path(f"/proc/{child}/comm").read_text().strip()
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
            kind = ("resource_tracker" if b"resource_tracker" in cmdline
                    else "elector" if b"multiprocessing" in cmdline else name)
            result[f"{child} {kind}"] = round(peak_rss_mib(int(child)), 1)
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
    return result


def election_figures(probe: Json) -> Json:
    """The election's and the garbage collector's longest delays from the operator's
    ``/healthz`` (``electionRenewalGapSeconds``, ``electionStallSeconds``, ... since its
    start; :mod:`kubedra.controller.election_figures`)."""
    return {k: v for k, v in probe.items() if k.startswith(("election", "gcPause"))}


def percentiles(samples: list[float]) -> Json:
    """``{"n", "p50", "p95", "p99", "max"}`` in seconds (p95 and p99 by nearest rank)."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    return {"n": len(ordered), "p50": round(statistics.median(ordered), 3),
            "p95": round(rank(0.95), 3), "p99": round(rank(0.99), 3),
            "max": round(ordered[-1], 3)}


# --- the run -----------------------------------------------------------------------------------

@dataclass
class Options:
    """What to run (defaults: every phase, a short steady phase)."""

    nodes: int
    mig: bool = False
    mig_form: str = "compact"
    """How the agents report MIG partitions: ``compact`` or ``explicit`` (:func:`h200_node`)."""
    phases: tuple[str, ...] = PHASES
    steady_s: float = 60.0
    churn_s: float = 120.0
    churn_percent: float = 1.0
    claims: int = 200
    claim_rate: float = 50.0
    baseline: Path | None = None
    """Another checkout's ``operator/`` directory: the restart and claims phases run with it
    first, then with this checkout's, on the same API server (before/after side by side)."""
    leader_elect: bool = True
    """Run the operator with leader election (as shipped); on a machine loaded far beyond its
    cores the leader may miss its 10 s renew deadline and exit (``bench/RESULTS.md``)."""
    lease_duration: int = LEASE_DURATION
    """The agents' Lease duration (seconds); renewed every third of it."""
    tracemalloc: Path | None = None
    """Where :mod:`bench.memtrace` writes each operator's snapshots (one directory per phase);
    None: the operator runs untraced."""
    tracemalloc_frames: int = 16
    """Frames per traced allocation; 0: no tracing, only the figures (RSS, ``mallinfo2``, RSS
    after ``malloc_trim``) at each phase's end."""
    scheduler_qps: float = SCHEDULER_QPS
    """kube-scheduler's client QPS (its burst is twice that)."""
    node_status_period_s: float | None = NODE_STATUS_PERIOD_S
    """Seconds between two status updates of a kwok Node (None: kwok's 20 to 25 s; see
    :class:`~e2e.harness.ControlPlane`)."""
    py_spy: Path | None = None
    """A directory for py-spy profiles of the operator, one per phase (:mod:`bench.py_spy`)."""
    peer_hold_s: float = 35.0
    """How long the Go peer runs after publishing: its controllers sync every pool again
    30 s after the informer's last event (``DefaultSyncDelay``)."""


class ScaleBench:
    """One run on ``plane`` (started with :meth:`AuditLog.apiserver_args`)."""

    def __init__(self, plane: ControlPlane, audit: AuditLog, options: Options) -> None:
        self.plane = plane
        self.audit = audit
        self.options = options
        self.kubedra = Kubedra(plane)
        self.results: Json = {"nodes": options.nodes, "mig": options.mig}
        self.liveness_port = 0
        self.renewer_pid = 0
        """``hack/benchagents``' process, once started."""
        self.traces: Path | None = None
        """Where the running operator's snapshots go (``--tracemalloc``), else None."""
        self.profiles = PhaseProfiles(options.py_spy)
        self.phase = ""
        """The phase running now."""

    async def run(self) -> Json:
        """Every chosen phase in order; returns the figures."""
        opts = self.options
        self.kubedra.install()
        api = await make_api_client(self.plane.admin_kubeconfig)
        async with api:
            discovered = h200_node(0, opts.mig, opts.mig_form)
            agents = Agents(api, [node_name(i) for i in range(opts.nodes)], discovered,
                            lease_duration=opts.lease_duration)
            self.expected = len(published_slices(agents.nodes[0], discovered)) * opts.nodes
            self.results.update(agents_lease_duration_s=opts.lease_duration,
                                devices=devices_per_node(discovered) * opts.nodes,
                                slices=self.expected, mig_form=opts.mig_form)
            start = time.monotonic()
            await agents.create_nodes()
            renewer = self.plane.spawn("benchagents", agents.renewer_args(
                build_go("benchagents"), self.plane.admin_kubeconfig, self.plane.workdir))
            self.renewer_pid = renewer.pid
            await eventually(lambda: _true(bool(agents.counts().get("renewing"))),
                             timeout=900, interval=0.2, what="every agent's Lease")
            renewing_since = time.monotonic()
            await agents.report(MIG_REPORTS if opts.mig else CONCURRENCY)
            self.results["agents_reported_s"] = round(time.monotonic() - start, 2)
            watcher = SliceWatch(api)
            watching = asyncio.create_task(watcher.run())
            try:
                for phase in PHASES:
                    if phase in opts.phases:
                        self.phase = phase
                        if self.kubedra.operator is not None and not self.exited():
                            self.profiles.start(self.kubedra.operator.pid, phase)
                        self.results[phase] = await getattr(self, phase)(api, agents, watcher)
                        self.profiles.stop()
                        self.results[phase]["load_average"] = os.getloadavg()[0]
                        print(f"{phase}: {json.dumps(self.results[phase])}", file=sys.stderr,
                              flush=True)
            finally:
                self.profiles.stop()
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
                renewer_cpu = cpu_seconds(renewer.pid)
                self.results["agents_rss_mib"] = round(peak_rss_mib(renewer.pid), 1)
                self.plane.stop_component(renewer)
                self.results["agents_renewing_s"] = round(time.monotonic() - renewing_since, 1)
            counts = agents.counts()
            self.results["agents_cpu_s"] = round(renewer_cpu, 2)
            self.results["agent_leases"] = counts.get("leases", 0)
            self.results["lease_renewals"] = counts.get("renewals", 0)
            self.results["late_lease_renewals"] = counts.get("late", 0)
            self.results["failed_lease_renewals"] = counts.get("failed", 0)
        return self.results

    # --- phases --------------------------------------------------------------------------------

    async def peer(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """The Go peer publishes the same slices; then they are deleted."""
        binary = build_go("slicepublisher")
        pools = {"driver": PEER_DRIVER, "pools": [
            {"node": n, "slices": published_slices(n, agents.discovered)} for n in agents.nodes]}
        pools_file = self.plane.workdir / "peer-pools.json"
        pools_file.write_text(json.dumps(pools))
        del pools
        before = await writes_by_resource(self.plane)
        start = time.monotonic()
        peer = self.plane.spawn("slicepublisher", [
            str(binary), f"--kubeconfig={self.plane.admin_kubeconfig}",
            f"--pools={pools_file}"])
        await eventually(lambda: _true(watcher.count(PEER_DRIVER) >= self.expected),
                         timeout=3600, interval=0.2, what="every slice of the Go peer")
        published = time.monotonic() - start
        cpu_published = cpu_seconds(peer.pid)
        await asyncio.sleep(self.options.peer_hold_s)
        after = await writes_by_resource(self.plane)
        result = {"publish_s": round(published, 2), "cpu_s_publish": round(cpu_published, 2),
                  "cpu_s": round(cpu_seconds(peer.pid), 2),
                  "rss_mib": round(peak_rss_mib(peer.pid), 1),
                  "slice_writes": after.get("resourceslices", 0)
                  - before.get("resourceslices", 0),
                  "slices": watcher.count(PEER_DRIVER)}
        self.plane.stop_component(peer)

        async def deleted() -> bool:
            if watcher.count(PEER_DRIVER):  # a loaded API server may time out (504): again
                await client.ResourceV1Api(api).delete_collection_resource_slice(
                    field_selector=f"spec.driver={PEER_DRIVER}")
            return watcher.count(PEER_DRIVER) == 0
        await eventually(deleted, timeout=900, interval=1.0, what="the Go peer's slices deleted")
        return result

    def start_operator(self, source: Path | None = None) -> None:
        """Start the operator (``source``: another checkout's ``operator/``; with
        ``--tracemalloc`` its snapshots go to a directory named after the phase)."""
        self.liveness_port = free_port()
        self.traces = None
        launcher: tuple[str, ...] = ("-m", "kubedra")
        if self.options.tracemalloc is not None:
            self.traces = self.options.tracemalloc / (
                self.phase if source is None else f"{self.phase}-baseline")
            launcher = ("-m", "bench.memtrace", "--dir", str(self.traces),
                        f"--frames={self.options.tracemalloc_frames}", "kubedra")
        # plain HTTP /healthz: a baseline checkout may predate HTTPS metrics (it ignores the
        # setting), and the bench measures publishing, not scrapes
        self.kubedra.start_operator(liveness_port=self.liveness_port, source=source,
                                    leader_elect=self.options.leader_elect,
                                    metrics_secure=False, launcher=launcher)
        assert self.kubedra.operator is not None
        self.profiles.start(self.kubedra.operator.pid, self.phase)

    async def snapshot_end(self) -> str | None:
        """With ``--tracemalloc``: the traced operator's ``end`` snapshot and its holders,
        taken now (the directory of the files), else None."""
        if self.traces is None:
            return None
        for label in ("end", "holders") if self.options.tracemalloc_frames else ("end",):
            done = memtrace.request(self.traces, label)
            await self.until(done.exists, timeout=600, what=f"the {label} snapshot")
        return str(done.parent)

    async def switch_operator(self, source: Path | None, nodes: int) -> None:
        """Stop the operator and start the one of ``source`` (None: this checkout's), then
        wait until it has verified every pool."""
        if self.kubedra.operator is not None:  # stopped, or reaped if it exited
            self.plane.stop_component(self.kubedra.operator)
        self.start_operator(source)
        await self.verified(nodes)

    def exited(self) -> bool:
        """Whether the operator process has exited."""
        operator = self.kubedra.operator
        assert operator is not None
        assert operator.process is not None
        return operator.process.poll() is not None

    def check_alive(self) -> None:
        """Raises:
            OperatorExited: the operator has exited (its last log line says why).
        """
        operator = self.kubedra.operator
        assert operator is not None
        if self.exited():
            raise OperatorExited(operator.log.read_text().strip().splitlines()[-1])

    async def until(self, probe: Callable[[], bool | Awaitable[bool]], *, timeout: float,
                    what: str) -> None:
        """Poll ``probe`` until it is true or the operator has exited (``eventually`` counts
        an exception as "not yet", so the exit is checked outside it).

        Raises:
            OperatorExited: the operator exited first (its last log line says why).
        """
        async def done() -> bool:
            if self.exited():
                return True
            value = probe()
            return bool(await value if not isinstance(value, bool) else value)
        await eventually(done, timeout=timeout, interval=0.2, what=what)
        self.check_alive()

    async def verified(self, nodes: int) -> None:
        """Wait until the operator has reconciled every inventory and has nothing queued.

        Raises:
            OperatorExited: the operator exited first (its last log line says why).
        """
        async def done() -> bool:
            probe = await self.probe()
            return probe.get("inventoriesReconciled", 0) >= nodes and \
                probe.get("inventoriesBusy") == 0
        await self.until(done, timeout=3600, what="every pool verified")

    async def probe(self) -> Json:
        """The ``kubedra`` part of the operator's ``/healthz`` (``{}`` while it does not
        answer)."""
        return dict((await self.healthz()).get("kubedra") or {})

    async def healthz(self) -> Json:
        """The operator's ``/healthz`` (``{}`` while it does not answer): the election's
        figures and, on the leader, ``kubedra``."""
        try:
            async with aiohttp.ClientSession() as session, session.get(
                    f"http://127.0.0.1:{self.liveness_port}/healthz",
                    timeout=aiohttp.ClientTimeout(total=5)) as resp:
                return dict(await resp.json())
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return {}

    async def settle(self) -> None:
        """Wait until the operator has nothing queued or in progress."""
        async def idle() -> bool:
            probe = await self.probe()
            return bool(probe.get("cachesReady")) and probe.get("inventoriesBusy") == 0 \
                and probe.get("claimsBusy") == 0
        await eventually(idle, timeout=600, interval=0.2, what="the operator idle")

    async def publish(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """The operator starts with every inventory reported → every slice exists."""
        before = await writes_by_resource(self.plane)
        audit = self.audit.offset()
        start = time.monotonic()
        self.start_operator()
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        await self.until(lambda: watcher.count(DRIVER) >= self.expected, timeout=3600,
                         what="every slice of kubedra")
        published = time.monotonic() - start
        cpu_published = cpu_seconds(pid)
        await self.settle()
        after = await writes_by_resource(self.plane)
        requests = self.audit.requests_since(audit)
        rss_now = rss_mib(pid)
        return {"publish_s": round(published, 2), "cpu_s_publish": round(cpu_published, 2),
                "settled_s": round(time.monotonic() - start, 2),
                "cpu_s": round(cpu_seconds(pid), 2), "rss_mib": round(peak_rss_mib(pid), 1),
                "rss_now_mib": round(rss_now, 1), "helpers_rss_mib": helpers_rss_mib(pid),
                "tracemalloc_end": await self.snapshot_end(),
                "election": election_figures(await self.healthz()),
                "slice_writes": after.get("resourceslices", 0) - before.get("resourceslices", 0),
                "status_writes": requests.get("patch deviceinventories/status", 0),
                "operator_writes": writes(requests), "slices": watcher.count(DRIVER),
                "api": api_footprint(self.plane, agents.nodes[0])}

    async def restart(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """Stop the operator, start it again → every inventory reconciled, 0 writes (with
        ``baseline``: its operator first, then this checkout's; a baseline operator that
        exits is reported, with its last log line, and replaced)."""
        result: Json = {}
        if self.options.baseline is not None:
            try:
                result["baseline"] = await self._restart(len(agents.nodes),
                                                         self.options.baseline)
            except OperatorExited as exited:
                result["baseline"] = {"exited": str(exited)}
        try:
            return {**result, **await self._restart(len(agents.nodes), None)}
        except OperatorExited as exited:  # reported; a later phase needing it fails
            return {**result, "exited": str(exited)}

    async def _restart(self, nodes: int, source: Path | None) -> Json:
        if self.kubedra.operator is not None:
            self.plane.stop_component(self.kubedra.operator)
        audit = self.audit.offset()
        start = time.monotonic()
        self.start_operator(source)
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        try:
            await self.verified(nodes)
        except OperatorExited as exited:
            raise OperatorExited(f"after {time.monotonic() - start:.1f} s: {exited}") from None
        elapsed = time.monotonic() - start
        requests = self.audit.requests_since(audit)
        probe = await self.probe()
        rss_now = rss_mib(pid)
        return {"verified_s": round(elapsed, 2), "cpu_s": round(cpu_seconds(pid), 2),
                "reconciled": probe.get("inventoriesReconciled"),
                "unchanged": probe.get("inventoriesUnchanged"),
                "rss_mib": round(peak_rss_mib(pid), 1),
                "rss_now_mib": round(rss_now, 1), "helpers_rss_mib": helpers_rss_mib(pid),
                "tracemalloc_end": await self.snapshot_end(),
                "election": election_figures(await self.healthz()),
                "operator_writes": writes(requests),
                "operator_requests": sum(requests.values()), "requests": requests}

    async def steady(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """Only Lease renewals: slice writes, operator CPU and requests per second."""
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        await self.settle()
        before = await writes_by_resource(self.plane)
        audit, cpu, counts = self.audit.offset(), cpu_seconds(pid), agents.counts()
        agents_cpu = cpu_seconds(self.renewer_pid)
        lease_before = await self.leader_lease(api)
        start, start_epoch = time.monotonic(), time.time()
        await asyncio.sleep(self.options.steady_s)
        elapsed = time.monotonic() - start
        self.check_alive()
        after = await writes_by_resource(self.plane)
        requests = self.audit.requests_since(audit)
        result = {"seconds": round(elapsed, 1),
                  "slice_writes": after.get("resourceslices", 0)
                  - before.get("resourceslices", 0),
                  "operator_writes": writes(requests),
                  "operator_cpu_percent": round(100 * (cpu_seconds(pid) - cpu) / elapsed, 1),
                  **per_second(requests, elapsed),
                  "lease_renewals_per_s": round(
                      (agents.counts()["renewals"] - counts["renewals"]) / elapsed, 1),
                  "late_lease_renewals": agents.counts()["late"] - counts["late"],
                  "failed_lease_renewals": agents.counts()["failed"] - counts["failed"],
                  "rss_mib": round(peak_rss_mib(pid), 1),
                  "agents_cpu_percent": round(
                      100 * (cpu_seconds(self.renewer_pid) - agents_cpu) / elapsed, 1),
                  "election": election_figures(await self.healthz()), "requests": requests}
        if self.options.leader_elect:
            result["leader"] = kept_lease(lease_before, await self.leader_lease(api),
                                          self.audit.renewals_since(audit),
                                          start_epoch, start_epoch + elapsed)
        return result

    async def leader_lease(self, api: ApiClient) -> Json:
        """The operator's leader-election Lease's ``spec`` now."""
        lease = await client.CoordinationV1Api(api).read_namespaced_lease(
            LEADER_LEASE, NAMESPACE, _preload_content=False)
        spec: Json = json.loads(await lease.read())["spec"]
        return spec

    async def churn(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """``churn_percent`` of inventories per minute change: write → slice shows it."""
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        opts = self.options
        per_s = max(opts.churn_percent / 100 * len(agents.nodes) / 60, 1 / 60)
        order = list(agents.nodes)
        random.Random(14).shuffle(order)  # each node once before any twice
        audit, cpu = self.audit.offset(), cpu_seconds(pid)
        start = time.monotonic()
        changes: list[tuple[str, int]] = []
        value = 0
        while time.monotonic() - start < opts.churn_s:
            node = order[value % len(order)]
            value += 1
            await agents.churn(node, value)
            changes.append((node, value))
            await asyncio.sleep(max(0.0, start + value / per_s - time.monotonic()))
        elapsed = time.monotonic() - start

        await eventually(lambda: _true(all(watcher.seen(*c) for c in changes)), timeout=120,
                         interval=0.1, what="every churned slice")
        latencies = [(watcher.seen(n, v) or 0.0) - agents.churned[(n, v)] for n, v in changes]
        requests = self.audit.requests_since(audit)
        return {"seconds": round(elapsed, 1), "changes_per_min": round(per_s * 60, 1),
                "latency": percentiles(latencies),
                "operator_cpu_percent": round(100 * (cpu_seconds(pid) - cpu) / elapsed, 1),
                **per_second(requests, elapsed),
                "operator_writes": writes(requests), "requests": requests}

    async def claims(self, api: ApiClient, agents: Agents, watcher: SliceWatch) -> Json:
        """Pods with one-GPU claims at ``claim_rate``/s: allocation → Ready written (with
        ``baseline``: first with its operator, in a namespace of their own)."""
        baseline = self.options.baseline
        if baseline is None:
            return await self._claims(api, "scale-claims")
        try:
            await self.switch_operator(baseline, len(agents.nodes))
            before = await self._claims(api, "scale-claims-baseline")
        except OperatorExited as exited:
            before = {"exited": str(exited)}
        await self.switch_operator(None, len(agents.nodes))
        return {"baseline": before, **await self._claims(api, "scale-claims")}

    async def _claims(self, api: ApiClient, namespace: str) -> Json:
        opts = self.options
        core = client.CoreV1Api(api)
        await core.create_namespace({"metadata": {"name": namespace}})
        await eventually(lambda: _sa_exists(core, namespace), timeout=60, interval=0.2,
                         what="the default ServiceAccount")
        tracker = ClaimTracker(api, namespace)
        tracking = asyncio.create_task(tracker.run())
        await asyncio.sleep(0.5)
        assert self.kubedra.operator is not None
        pid = self.kubedra.operator.pid
        audit, cpu = self.audit.offset(), cpu_seconds(pid)
        others = {name: cpu_seconds(self.component(name).pid) for name in CLAIM_CPU_OF}
        scheduler_log = self.component("kube-scheduler").log
        scheduler_logged = scheduler_log.stat().st_size
        reconciles = await self.claim_reconciles()
        start = time.monotonic()
        made = await create_claims(api, namespace, [f"claim-{i:05d}" for i in range(opts.claims)],
                                   opts.claim_rate)
        await eventually(lambda: _true(len(tracker.ready) >= opts.claims), timeout=900,
                         interval=0.2, what="every claim Ready")
        elapsed = time.monotonic() - start
        tracking.cancel()
        await self.settle()
        cpu = cpu_seconds(pid) - cpu
        others = {name: cpu_seconds(self.component(name).pid) - before
                  for name, before in others.items()}
        with scheduler_log.open("rb") as log:
            log.seek(scheduler_logged)
            throttled = sum(b"client-side throttling" in line for line in log)
        reconciles = [after - before for after, before
                      in zip(await self.claim_reconciles(), reconciles, strict=True)]
        requests = self.audit.requests_since(audit)
        claim_writes = sum(n for k, n in requests.items()
                           if k.split(" ")[0] in WRITE_VERBS and "resourceclaims" in k)
        written = self.audit.claim_writes_since(audit, namespace)
        allocated = sorted(written.allocated.values())
        return {"claims": opts.claims, "created_per_s": made.per_s,
                "creator_max_lag_s": made.max_lag_s,
                # kube-scheduler's allocations a second, first to last completed write of an
                # allocation (its client's QPS limits it: two writes per pod, the claim's
                # status and the binding)
                "allocated_per_s": round((len(allocated) - 1) / (allocated[-1] - allocated[0]), 1)
                if len(allocated) > 1 and allocated[-1] > allocated[0] else None,
                "all_ready_s": round(elapsed, 1),
                # as the bench's own watch sees the claims
                "allocated_to_ready": percentiles(between(tracker.allocated, tracker.ready)),
                # the same, split at the API server's audit timestamps: kube-scheduler's part
                # (claim and pod created → its allocation written), kubedra's (allocation
                # written → the operator's Ready written), and within kubedra's the operator's
                # reaction (the allocation's watch event to the operator, kopf, the queue, the
                # reconcile up to its write) and the API server's write of Ready
                "created_to_allocated_written": percentiles(
                    between(made.created, written.allocated)),
                "allocated_to_ready_written": percentiles(
                    between(written.allocated, written.ready)),
                "allocated_to_operator_write": percentiles(
                    between(written.allocated, written.sent)),
                "operator_write": percentiles(between(written.sent, written.ready)),
                "ready_written_to_seen": percentiles(between(written.ready, tracker.ready)),
                "claim_reconciles": reconciles[0],
                "claim_reconcile_mean_ms": round(1000 * reconciles[1] / reconciles[0], 1)
                if reconciles[0] else None,
                "operator_cpu_ms_per_claim": round(1000 * cpu / opts.claims, 1),
                **{f"{name.removeprefix('kube-')}_cpu_ms_per_claim":
                   round(1000 * seconds / opts.claims, 1) for name, seconds in others.items()},
                # requests kube-scheduler's client logged as held back by its own QPS
                # ("Waited before sending request ... client-side throttling": client-go logs
                # only long waits, 1.0-2.8 s in bench/RESULTS.md's round 21)
                "scheduler_throttled_requests": throttled,
                "claim_writes_per_claim": round(claim_writes / opts.claims, 2),
                "operator_writes_per_claim": round(writes(requests) / opts.claims, 2),
                "requests": requests,
                "scheduler_writes": self.audit.requests_since(audit, SCHEDULER_USER)}

    def component(self, name: str) -> Component:
        """The control plane's running component ``name``."""
        return next(c for c in self.plane.components if c.name == name)

    async def claim_reconciles(self) -> tuple[float, float]:
        """(count, seconds) of the operator's claim reconciles so far, every outcome
        (``kubedra_operator_reconcile_duration_seconds{queue="claims"}`` of its ``/metrics``:
        from a worker taking the key to the reconcile's end, the wait in the queue not
        included)."""
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{self.liveness_port}/metrics",
                timeout=aiohttp.ClientTimeout(total=30)) as resp:
            text = await resp.text()
        count = total = 0.0
        for family in text_string_to_metric_families(text):
            if family.name != "kubedra_operator_reconcile_duration_seconds":
                continue
            for sample in family.samples:
                if sample.labels.get("queue") == "claims":
                    if sample.name.endswith("_count"):
                        count += sample.value
                    elif sample.name.endswith("_sum"):
                        total += sample.value
        return count, total

    async def explain(self, api: ApiClient, agents: Agents, watcher: SliceWatch,
                      namespace: str = "scale-explain") -> Json:
        """One claim no device satisfies (in ``namespace``, created): Event latency, explain
        and simulate wall time."""
        core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        await core.create_namespace({"metadata": {"name": namespace}})
        await eventually(lambda: _sa_exists(core, namespace), timeout=60, interval=0.2,
                         what="the default ServiceAccount")
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "too-big", "namespace": namespace},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpu.kubedra.io", "selectors": [{"cel": {"expression": (
                         'device.capacity["gpu.kubedra.io"].memory.compareTo('
                         'quantity("200Gi")) >= 0')}}]}}]}}}
        start = time.monotonic()
        await resource.create_namespaced_resource_claim(namespace, claim)
        pod = pod_with_claim("too-big")
        await core.create_namespaced_pod(namespace, pod)

        async def unschedulable() -> bool:
            found = await core.read_namespaced_pod(pod["metadata"]["name"], namespace)
            return any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                       for c in found.status.conditions or ())

        async def explained() -> bool:
            events = await core.list_namespaced_event(
                namespace, field_selector="involvedObject.name=too-big,reason=CannotAllocate")
            return bool(events.items)
        await eventually(unschedulable, timeout=600, interval=0.05,
                         what="the pod marked unschedulable")
        unschedulable_s = time.monotonic() - start
        await eventually(explained, timeout=600, interval=0.05, what="the CannotAllocate Event")
        event_s = time.monotonic() - start
        runs = [timed(lambda: kubectl(self.plane, "dra", "explain", "resourceclaim", "too-big",
                                      "-n", namespace)) for _ in range(EXPLAIN_RUNS)]
        explain_s, explained_text = sorted(runs)[len(runs) // 2]
        claim_file = self.plane.workdir / "one-gpu-claim.yaml"
        claim_file.write_text(yaml.safe_dump({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "one-more", "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.kubedra.io"}}]}}}))
        simulate_s, simulated = timed(lambda: kubectl(
            self.plane, "dra", "simulate", "-f", str(claim_file), "--max-copies", "1000"))
        return {"unschedulable_s": round(unschedulable_s, 2), "event_s": round(event_s, 2),
                "event_after_unschedulable_s": round(event_s - unschedulable_s, 2),
                "explain_s": round(explain_s, 2),
                "explain_runs_s": [round(r[0], 2) for r in runs],
                "simulate_s": round(simulate_s, 2),
                "explain_first_line": explained_text.strip().splitlines()[0],
                "simulate_first_line": simulated.strip().splitlines()[0]}


class OperatorExited(Exception):
    """The operator process exited while the bench waited for it; the message says why."""


@dataclass
class ClaimTracker:
    """When each claim of a namespace was first seen allocated and first seen with kubedra's
    ``Ready`` condition in ``status.devices`` (``time.time()``, to compare with the audit
    log's timestamps)."""

    api: ApiClient
    namespace: str
    allocated: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Record the times, forever."""
        def on_object(kind: str, obj: Json) -> None:
            name, status = obj["metadata"]["name"], obj.get("status") or {}
            now = time.time()
            if status.get("allocation"):
                self.allocated.setdefault(name, now)
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for d in status.get("devices") or [] for c in d.get("conditions") or []):
                self.ready.setdefault(name, now)
        await watch_forever(client.ResourceV1Api(self.api).list_namespaced_resource_claim,
                            self.namespace, on_object=on_object)


async def _sa_exists(core: Any, namespace: str) -> bool:
    try:
        await core.read_namespaced_service_account("default", namespace)
    except client.ApiException:
        return False
    return True


async def _true(value: bool) -> bool:
    return value


def timed(call: Callable[[], str]) -> tuple[float, str]:
    """(wall seconds, output) of ``call``."""
    start = time.monotonic()
    out = call()
    return time.monotonic() - start, out


def free_port() -> int:
    """A free loopback TCP port."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def build_go(tool: str) -> Path:
    """Build ``hack/<tool>`` (``slicepublisher``, ``benchagents``) into ``$KUBEDRA_CACHE/bin``
    (Go's build cache makes a second build take a second or two); returns the binary."""
    out = default_bin_dir() / tool
    subprocess.run(["go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(out), "."],
                   cwd=REPO_ROOT / "hack" / tool, check=True,
                   env={**os.environ, "CGO_ENABLED": "0"})
    return out


def scheduler_args(qps: float) -> list[str]:
    """kube-scheduler flags for a client of ``qps`` requests a second, burst twice that
    (rounded up: kube-scheduler takes the burst as an integer).

    ``--kube-api-qps`` and ``--kube-api-burst`` are kube-scheduler's deprecated flags
    (``cmd/kube-scheduler/app/options/deprecated.go``), still applied when it runs without
    ``--config``, as the harness runs it; at :data:`SCHEDULER_QPS` they change nothing.
    """
    if qps == SCHEDULER_QPS:
        return []
    return [f"--kube-api-qps={qps:g}", f"--kube-api-burst={math.ceil(2 * qps)}"]


def run(options: Options, workdir: Path) -> Json:
    """One whole run on a fresh control plane in ``workdir``."""
    audit = AuditLog(workdir / "audit")
    with ControlPlane(workdir / "plane", apiserver_args=audit.apiserver_args(),
                      scheduler_args=scheduler_args(options.scheduler_qps),
                      node_status_period_s=options.node_status_period_s) as plane:
        result = asyncio.run(ScaleBench(plane, audit, options).run())
        started = {c.name: c.args for c in plane.components}
    return {**result, "scheduler_qps": options.scheduler_qps,
            "node_status_period_s": options.node_status_period_s,
            "scheduler_client_flags": [a for a in started["kube-scheduler"]
                                       if a.startswith("--kube-api-")],
            "node_monitor_flags": [a for a in started["kube-controller-manager"]
                                   if a.startswith("--node-monitor-")]}


def main() -> None:
    """Parse the options, run, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--mig", action="store_true")
    parser.add_argument("--mig-form", choices=("compact", "explicit"), default="compact",
                        help="how the agents report MIG partitions (explicit: as before 0.2)")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--steady", type=float, default=60.0, help="seconds")
    parser.add_argument("--churn", type=float, default=120.0, help="seconds")
    parser.add_argument("--churn-percent", type=float, default=1.0, help="per minute")
    parser.add_argument("--lease-duration", type=int, default=LEASE_DURATION,
                        help="the agents' Lease duration, seconds (renewed every third)")
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--claim-rate", type=float, default=50.0, help="per second")
    parser.add_argument("--scheduler-qps", type=float, default=SCHEDULER_QPS,
                        help="kube-scheduler's client QPS, burst twice that (default: "
                             "upstream's 50)")
    parser.add_argument("--node-status-period", type=float, default=NODE_STATUS_PERIOD_S,
                        help="seconds between two status updates of a kwok Node (default: a "
                             "kubelet's 300; 0: kwok's heartbeat stage, 20 to 25 s)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="py-spy profiles of the operator, DIR/<phase>.raw "
                             "(python -m bench.py_spy FILE.raw summarises one)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-leader-elect", dest="leader_elect", action="store_false",
                        help="run the operator without leader election")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout's operator/ to run first in restart and claims")
    parser.add_argument("--tracemalloc", type=Path, default=None, metavar="DIR",
                        help="run each operator under bench.memtrace: tracemalloc snapshots "
                        "at its peak and at the end of each phase in DIR/<phase>/ (slows it; "
                        "its RSS is not comparable with an untraced run)")
    parser.add_argument("--tracemalloc-frames", type=int, default=16, metavar="N",
                        help="frames per traced allocation; 0: untraced, only the allocator's "
                        "figures and the RSS after malloc_trim at each phase's end")
    args = parser.parse_args()
    phases = tuple(p for p in args.phases.split(",") if p)
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    if args.scheduler_qps <= 0:
        parser.error(f"--scheduler-qps must be above 0, not {args.scheduler_qps:g}")
    if args.node_status_period < 0:
        parser.error(f"--node-status-period must be 0 (kwok's) or above, not "
                     f"{args.node_status_period:g}")
    options = Options(nodes=args.nodes, mig=args.mig, mig_form=args.mig_form, phases=phases,
                      steady_s=args.steady,
                      churn_s=args.churn, churn_percent=args.churn_percent,
                      claims=args.claims, claim_rate=args.claim_rate,
                      baseline=args.baseline and args.baseline.resolve(),
                      leader_elect=args.leader_elect, lease_duration=args.lease_duration,
                      tracemalloc=args.tracemalloc and args.tracemalloc.resolve(),
                      tracemalloc_frames=args.tracemalloc_frames,
                      scheduler_qps=args.scheduler_qps,
                      node_status_period_s=args.node_status_period or None,
                      py_spy=args.py_spy and args.py_spy.resolve())
    if args.workdir:
        result = run(options, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="kubedra-scale-") as tmp:
            result = run(options, Path(tmp))
    print(json.dumps(result, indent=1), flush=True)


if __name__ == "__main__":
    main()
