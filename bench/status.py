"""bench/status: ``kubedra status --from`` on a fleet dump of 2,000 nodes, as a whole process.

The dump (written to a temporary directory, never checked in) is the fleet of issue 24:
2,000 nodes of 8 H200 (16,000 devices, each with the attributes kubedra publishes for the H200
capture, ``resource.kubernetes.io/numaNode`` 0/1 by GPU index), node *k* with GPUs
``gpu-0``…``gpu-(k mod 3)`` held by one claim ``train/job-k``; and pending claims: one asking
8 GPUs (fits nowhere) and, with ``--pending N``, N more such claims.

Rows: ``kubedra status`` (by model), ``--by node``, ``--by pool``, ``-o json``; each run is a
fresh process (wall and CPU seconds, as ``bench/cli.py`` counts them) and the lines printed.
With ``--before DIR`` (another version's ``operator/``) each row is first timed with that
code (``PYTHONPATH=DIR``), so both see the same load.

The dump is JSON, as ``kubedra dump`` writes it (``serverVersion`` v1.37.2 included);
``--format yaml`` writes it as YAML instead (libyaml, as ``kubectl get -o yaml`` gives it),
read twenty times slower.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/status.py [--nodes 2000] [--runs 3]
[--pending 0] [--format json|yaml]``. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.cli import timed
from tests.support.explain_builders import h200_slices, shipped_classes

Json = dict[str, Any]
GPUS = 8


def _node_slice(node: str, gpu: Json) -> Json:
    devices = []
    for i in range(GPUS):
        device = copy.deepcopy(gpu)
        device["name"] = f"gpu-{i}"
        device["attributes"]["resource.kubernetes.io/numaNode"] = {"int": i // (GPUS // 2)}
        device["attributes"]["uuid"] = {"string": f"GPU-{node}-{i}"}
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.kubedra.io-00000"},
            "spec": {"driver": "gpu.kubedra.io", "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def _claim(namespace: str, name: str, count: int, allocation: Json | None) -> Json:
    claim: Json = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                       "deviceClassName": "gpu.kubedra.io", "count": count}}]}}}
    if allocation is not None:
        claim["status"] = {"allocation": allocation}
    return claim


def fleet_dump(nodes: int, pending: int) -> Json:
    """The dump described in the module docstring, as one ``List``."""
    gpu = h200_slices("template")[0]["spec"]["devices"][0]
    items: list[Json] = [{"kind": "DeviceClass", **c} for c in shipped_classes()]
    for k in range(nodes):
        node = f"gpu-node-{k:04d}"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node, "labels": {"kubernetes.io/hostname": node}}})
        items.append(_node_slice(node, gpu))
        results = [{"request": "gpu", "driver": "gpu.kubedra.io", "pool": node,
                    "device": f"gpu-{i}"} for i in range(k % 3 + 1)]
        items.append(_claim("train", f"job-{k:04d}", len(results), {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}))
    items += [_claim("train", f"eight-{i}", GPUS, None) for i in range(1 + pending)]
    return {"apiVersion": "v1", "kind": "List", "serverVersion": "v1.37.2", "items": items}


def main() -> None:
    """Write the dump, time each row, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--format", choices=["json", "yaml"], default="json")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also time the operator/ code in DIR (git archive main operator), "
                             "each row right before this one's")
    args = parser.parse_args()
    kubedra = [sys.executable, "-m", "kubedra"]  # each version's own entry point
    env = {**os.environ, "PYTHONPATH": "operator"}
    with tempfile.TemporaryDirectory() as folder:
        dump = Path(folder) / f"fleet.{args.format}"
        document = fleet_dump(args.nodes, args.pending)
        dump.write_text(json.dumps(document) if args.format == "json" else yaml.dump(
            document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
        print(f"{args.nodes} nodes, {args.nodes * GPUS} devices, {1 + args.pending} pending; "
              f"dump {dump.stat().st_size / 2**20:.1f} MiB of {args.format}; "
              f"load {os.getloadavg()[0]:.2f}\n")
        print("| command | wall min / median / max | CPU median | lines |\n| --- | --- | --- "
              "| --- |")
        versions = [("", env)]
        if args.before:
            versions.insert(0, (" (before)", {**os.environ, "PYTHONPATH": str(args.before)}))
        for extra in ([], ["--by", "node"], ["--by", "pool"], ["-o", "json"]):
            command = [*kubedra, "status", "--from", str(dump), *extra]
            for label, version_env in versions:
                lines = subprocess.run(command, env=version_env, check=True, capture_output=True,
                                       text=True).stdout.count("\n")
                runs = timed(command, args.runs, version_env)
                walls = [w for w, _ in runs]
                print(f"| `kubedra status {' '.join(extra)}`{label} | {min(walls):.2f} / "
                      f"{statistics.median(walls):.2f} / {max(walls):.2f} s | "
                      f"{statistics.median(c for _, c in runs):.2f} s | {lines} |")
        print(f"\nload {os.getloadavg()[0]:.2f} at the end")

if __name__ == "__main__":
    main()
