"""bench/explain_live: live ``kubectl dra explain`` and the operator's ``CannotAllocate`` Event on
N kwok nodes (issue 24 item 2).

On one local v1.37.2 control plane (``e2e.harness``) with kubedra installed: N kwok nodes, each
with the ResourceSlice of :mod:`bench.fleet_dump` (8 H200 GPUs), created directly, as a
driver's kubelet plugin publishes them (the operator's publishing is ``bench/scale.py``'s
``publish`` phase, and takes long at 2,000 nodes on a shared machine); then the operator starts
(with leader election, as shipped) and, once it is idle and has detected what the cluster
serves (its explainer starts then), :meth:`bench.scale.ScaleBench.explain` runs: one claim
no device satisfies, its pod created → kube-scheduler marks it unschedulable → the operator's
``CannotAllocate`` Event (``event_after_unschedulable_s``: issue 24's ≤ 2 s), and the wall time
of ``kubectl dra explain`` (median of three, fetching included: ≤ 3 s) and of ``kubectl dra
simulate --max-copies 1000``.

Usage: ``PYTHONPATH=.:operator .venv/bin/python -m bench.explain_live [--nodes 2000] [--before
DIR/operator] [--profile DIR]``; prints one JSON object (with the load average). ``--before``
runs the same first with another checkout's operator and ``kubectl dra`` on the same cluster
(its claim in a namespace of its own, deleted before this checkout's operator starts), so the
two are measured side by side. ``--cli-pairs N`` (with ``--before``) then runs ``kubectl dra
explain`` of this checkout's claim N times more with each checkout's ``kubectl dra``,
alternating (the other's first), on the same cluster with this checkout's operator running:
the CLIs side by side, each run beside the other's (``cli_pairs``: each run's wall seconds and
the load average after it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench import explain_profile, fleet_dump
from bench.scale import (
    Agents,
    AuditLog,
    Options,
    ScaleBench,
    SliceWatch,
    gather_limited,
    timed,
)
from e2e.harness import ControlPlane
from e2e.harness.kubedra import kubectl
from e2e.harness.wait import eventually
from kubedra.kube import make_api_client


@contextlib.contextmanager
def _python_path(source: Path) -> Iterator[None]:
    """``kubectl dra`` (a child of this process) runs the code of ``source`` meanwhile."""
    kept = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(source)
    try:
        yield
    finally:
        if kept is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = kept


async def _run(bench: ScaleBench, nodes: int, profile: Path | None,
               before_source: Path | None, cli_pairs: int = 0) -> dict[str, Any]:
    bench.kubedra.install()
    api = await make_api_client(bench.plane.admin_kubeconfig)
    async with api:
        names = [fleet_dump.node_name(i) for i in range(nodes)]
        agents = Agents(api, names, {})
        await agents.create_nodes()
        gpu = fleet_dump.capture_gpu()
        resource = client.ResourceV1Api(api)
        slices = [fleet_dump.node_objects(i, gpu)[1] for i in range(nodes)]
        await gather_limited(lambda s=s: resource.create_resource_slice(  # type: ignore[misc]
            s, _preload_content=False) for s in slices)
        watcher = SliceWatch(api)
        watching = asyncio.create_task(watcher.run())
        try:
            await eventually(lambda: _true(watcher.count(fleet_dump.DRIVER) >= nodes),
                             timeout=900, interval=0.5, what="every slice")
            before = None
            if before_source is not None:  # the same, first with the other checkout's code
                bench.start_operator(before_source)
                await _started(bench)
                with _python_path(before_source):
                    before = await bench.explain(api, agents, watcher, "scale-explain-before")
                core = client.CoreV1Api(api)
                await core.delete_namespaced_pod("too-big", "scale-explain-before",
                                                 grace_period_seconds=0)
                await core.delete_namespace("scale-explain-before")
                assert bench.kubedra.operator is not None
                bench.plane.stop_component(bench.kubedra.operator)
            bench.start_operator()
            await _started(bench)
            figures = await bench.explain(api, agents, watcher)
            if before is not None:
                figures["before"] = before
            if before_source is not None and cli_pairs:
                figures["cli_pairs"] = await asyncio.to_thread(
                    _cli_pairs, bench, before_source, cli_pairs)
            if profile is not None:
                figures["profile"] = await asyncio.to_thread(
                    explain_profile.profile, bench.plane.admin_kubeconfig, "scale-explain",
                    "too-big", "too-big", profile)
                operator = bench.kubedra.operator
                assert operator is not None
                shutil.copy(operator.log, profile / "operator.log")
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
    return {"nodes": nodes, **figures, "load_average": round(os.getloadavg()[0], 2)}


def _cli_pairs(bench: ScaleBench, before_source: Path, pairs: int) -> dict[str, Any]:
    """``kubectl dra explain resourceclaim too-big -n scale-explain`` ``pairs`` times with
    each checkout's code, alternating, the other's first: wall seconds per run and the load
    average after each."""
    runs: dict[str, list[float]] = {"before": [], "this": []}
    load: list[float] = []
    for _ in range(pairs):
        for label, source in (("before", before_source), ("this", None)):
            with contextlib.ExitStack() as stack:
                if source is not None:
                    stack.enter_context(_python_path(source))
                seconds, _ = timed(lambda: kubectl(bench.plane, "dra", "explain",
                                                   "resourceclaim", "too-big", "-n",
                                                   "scale-explain"))
            runs[label].append(round(seconds, 2))
            load.append(round(os.getloadavg()[0], 2))
    return {**runs, "before_median_s": statistics.median(runs["before"]),
            "this_median_s": statistics.median(runs["this"]), "load_average": load}


async def _started(bench: ScaleBench) -> None:
    """The operator idle (:meth:`ScaleBench.settle`) and its start done: it has detected what
    the cluster serves (``featureDetections``), after which its workers, the explainer's
    included, start (:func:`kubedra.controller.runtime.run`). Idle alone came while the
    operator still listed and detected (5.2 s at 2,000 nodes, load 7): a pod marked
    unschedulable then had its Event after the operator's start, not after its question."""
    await bench.settle()

    async def detected() -> bool:
        return bool((await bench.probe()).get("featureDetections"))
    await eventually(detected, timeout=600, interval=0.2, what="the operator's detection")


async def _true(value: bool) -> bool:
    return value


def main() -> None:
    """Parse the options, run, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="then profile the CLI's and the operator's explanation "
                             "(bench/explain_profile.py); pstats files into DIR")
    parser.add_argument("--before", type=Path, default=None, metavar="OPERATOR_DIR",
                        help="first the same with the operator and kubectl dra of another "
                             "checkout's operator/ (its figures under \"before\")")
    parser.add_argument("--cli-pairs", type=int, default=0, metavar="N",
                        help="with --before: then N runs of each checkout's kubectl dra "
                             "explain, alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubedra-explain-live-") as tmp:
        workdir = Path(tmp)
        audit = AuditLog(workdir / "audit")
        with ControlPlane(workdir / "plane", apiserver_args=audit.apiserver_args()) as plane:
            bench = ScaleBench(plane, audit, Options(nodes=args.nodes, phases=("explain",)))
            print(json.dumps(asyncio.run(_run(bench, args.nodes, args.profile,
                                              args.before, args.cli_pairs))))


if __name__ == "__main__":
    main()
