"""bench/publish: how fast the operator publishes many inventories, against the floor.

For each shape (inventories x devices), on a fresh local control plane:

* kubedra: create N static DeviceInventories (``allNodes``) of M devices each, with the
  operator running under its ServiceAccount; measure the seconds from the first inventory
  create until every ResourceSlice exists, the API writes the operator made (from the API
  server's ``apiserver_request_total``), and the operator's peak RSS (``VmHWM``).
* floor: a plain kubernetes-asyncio loop that creates the same slices directly, with the same
  concurrency (4) as the operator's workers.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/publish.py [--shapes 500x8,50x128]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.kubedra import Kubedra
from e2e.harness.wait import eventually
from kubedra.api.inventory import DeviceInventory
from kubedra.api.resource import OwnerReference
from kubedra.kube import make_api_client
from kubedra.publishing.pool import build_pool
from kubedra.publishing.slices import split_pool
from kubedra.publishing.sync import plan_sync

CONCURRENCY = 4


def inventory(index: int, devices: int) -> dict[str, Any]:
    """A static inventory ``bench-<index>`` of ``devices`` GPU-like devices."""
    return {"apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
            "metadata": {"name": f"bench-{index:04d}"},
            "spec": {"driver": "gpu.kubedra.io", "allNodes": True, "pool": f"bench-{index:04d}",
                     "devices": [{"name": f"gpu-{d}",
                                  "attributes": {"index": {"int": d},
                                                 "productName": {"string": "NVIDIA H200"}},
                                  "capacity": {"memory": {"value": "143771Mi"}}}
                                 for d in range(devices)]}}


async def count_slices(api: ApiClient) -> int:
    """ResourceSlices that exist now."""
    listed = await client.ResourceV1Api(api).list_resource_slice(_preload_content=False)
    body = await listed.json()
    return len(body["items"])


async def writes_by_resource(plane: ControlPlane) -> dict[str, float]:
    """Mutating requests so far, by resource, from the API server's metrics; dry runs (the
    operator's probe of which fields the server keeps) write nothing and are not counted."""
    text = plane.request("GET", "/metrics")
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{") or re.search(r'dry_run="[^"]+"', line):
            continue
        verb = re.search(r'verb="(\w+)"', line)
        resource = re.search(r'resource="([\w.]+)"', line)
        sub = re.search(r'subresource="(\w*)"', line)
        if verb and resource and verb.group(1) in {"POST", "PUT", "PATCH", "DELETE", "APPLY"}:
            key = resource.group(1) + (f"/{sub.group(1)}" if sub and sub.group(1) else "")
            counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """Peak resident set size of ``pid`` in MiB (``VmHWM``)."""
    return _status_mib(pid, "VmHWM")


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` now, in MiB (``VmRSS``)."""
    return _status_mib(pid, "VmRSS")


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run_kubedra(plane: ControlPlane, n: int, m: int) -> dict[str, float]:
    """Create the inventories and wait until every slice exists."""
    deployment = Kubedra(plane)
    deployment.install()
    operator = deployment.start_operator()
    api = await make_api_client(plane.admin_kubeconfig)
    async with api:
        expected = len(split_pool(build_pool(DeviceInventory.from_api(inventory(0, m))))) * n
        await asyncio.sleep(3)  # let the operator start and list (not part of the measurement)
        before = await writes_by_resource(plane)
        custom = client.CustomObjectsApi(api)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def create(i: int) -> None:
            async with gate:
                await custom.create_cluster_custom_object(
                    "kubedra.io", "v1alpha1", "deviceinventories", inventory(i, m))
        start = time.monotonic()
        await asyncio.gather(*(create(i) for i in range(n)))
        created = time.monotonic() - start

        async def published() -> bool:
            return await count_slices(api) >= expected
        await eventually(published, timeout=1800, interval=0.1, what="every slice")
        elapsed = time.monotonic() - start
        await asyncio.sleep(2)  # let trailing status writes land before counting
        after = await writes_by_resource(plane)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return {"seconds": elapsed, "slices": expected, "create_seconds": created,
            "cpu_seconds": cpu_seconds(operator.pid),
            "slice_writes": delta.get("resourceslices", 0),
            "status_writes": delta.get("deviceinventories/status", 0),
            "inventory_creates": delta.get("deviceinventories", 0),
            "rss_mib": peak_rss_mib(operator.pid)}


async def run_floor(plane: ControlPlane, n: int, m: int) -> dict[str, float]:
    """Create the same slices with a plain kubernetes-asyncio loop."""
    owner = OwnerReference(api_version="kubedra.io/v1alpha1", kind="DeviceInventory",
                           name="floor", uid="00000000-0000-0000-0000-000000000000")
    bodies = []
    for i in range(n):
        inv = DeviceInventory.from_api(inventory(i, m))
        pool = build_pool(inv)
        plan = plan_sync(f"floor-{i:04d}", owner, pool, split_pool(pool), [])
        for write in plan.writes:
            assert write.body is not None
            write.body["metadata"].pop("ownerReferences")
            bodies.append(write.body)
    api = await make_api_client(plane.admin_kubeconfig)
    async with api:
        resource = client.ResourceV1Api(api)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def create(body: dict[str, Any]) -> None:
            async with gate:
                await resource.create_resource_slice(body, _preload_content=False)
        start = time.monotonic()
        await asyncio.gather(*(create(b) for b in bodies))
        elapsed = time.monotonic() - start
    return {"seconds": elapsed, "slices": len(bodies)}


def main() -> None:
    """Run every shape on fresh control planes and print a Markdown table row per shape."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="500x8,50x128")
    args = parser.parse_args()
    print("| shape | slices | kubedra s | floor s | ratio | slice writes | status writes "
          "| operator peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in args.shapes.split(","):
        n, m = (int(x) for x in shape.split("x"))
        with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "floor") as plane:
            floor = asyncio.run(run_floor(plane, n, m))
        with tempfile.TemporaryDirectory() as tmp, ControlPlane(Path(tmp) / "kubedra") as plane:
            ours = asyncio.run(run_kubedra(plane, n, m))
        print(f"| {n} x {m} | {ours['slices']:.0f} | {ours['seconds']:.2f} | "
              f"{floor['seconds']:.2f} | {ours['seconds'] / floor['seconds']:.2f} | "
              f"{ours['slice_writes']:.0f} | {ours['status_writes']:.0f} | "
              f"{ours['rss_mib']:.0f} MiB |", flush=True)
        print(f"  (inventory creates took {ours['create_seconds']:.2f} s; operator CPU "
              f"{ours['cpu_seconds']:.2f} s including start-up)", flush=True)


if __name__ == "__main__":
    main()
