"""bench/cli: how long the command line takes, as a whole process, many runs each.

Rows (each run is a fresh process, as a user's shell starts it):

* ``kubedra --help`` and ``kubectl dra --help`` (the ``kubectl-dra`` executable, which is what
  kubectl runs), against the floor ``python -c pass`` and against the same help with every
  subcommand imported first (how the command line loaded before subcommands were lazy);
* ``kubectl dra explain`` of a claim that fits nowhere on a local v1.37.2 control plane with
  the demo's objects (one node with one H200-like GPU, the ``too-big`` claim asking 141Gi),
  and with 300 such nodes; the same from a dump of that cluster (``--from``).

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/cli.py [--runs 20]``. Prints a Markdown
table: min, median and max seconds, and the ratio of medians to the row's baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.harness import ControlPlane

BIN = Path(sys.executable).parent
EAGER_HELP = ("from kubedra.cli import main; import click; "
              "[main.get_command(click.Context(main), n) for n in main.lazy]; "
              "main(['--help'])")
GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"name": "gpu.kubedra.io"},
             "spec": {"selectors": [{"cel": {"expression":
                                             'device.driver == "gpu.kubedra.io"'}}]}}
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'


def timed(command: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall seconds of ``runs`` runs of ``command`` (output discarded; a failure raises)."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, timeout=120)
        seconds.append(time.perf_counter() - start)
    return seconds


def populate(plane: ControlPlane, nodes: int) -> None:
    """``nodes`` nodes ``node-NNN`` with one H200-like GPU each, the class, the claim."""
    plane.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", GPU_CLASS)
    for i in range(nodes):
        name = f"node-{i:03d}"
        plane.request("POST", "/api/v1/nodes", {"metadata": {"name": name}})
        plane.request("POST", "/apis/resource.k8s.io/v1/resourceslices", {
            "metadata": {"name": f"{name}-gpu"},
            "spec": {"driver": "gpu.kubedra.io", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0",
                                  "attributes": {"productName": {"string": "NVIDIA H200"}},
                                  "capacity": {"memory": {"value": "143771Mi"}}}]}})
    plane.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {
        "metadata": {"name": "too-big"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.kubedra.io",
            "selectors": [{"cel": {"expression": TOO_BIG}}]}}]}}})


def row(name: str, seconds: list[float], baseline: list[float] | None, against: str) -> str:
    """One Markdown table row."""
    median = statistics.median(seconds)
    ratio = f"{median / statistics.median(baseline):.2f}" if baseline else ""
    return (f"| {name} | {min(seconds):.3f} | {median:.3f} | {max(seconds):.3f} | {ratio} | "
            f"{against} |")


def main() -> None:
    """Run every row and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    python = [sys.executable]
    rows = []
    floor = timed([*python, "-c", "pass"], args.runs, env)
    eager = timed([*python, "-c", EAGER_HELP], args.runs, env)
    rows.append(row("`python -c pass` (floor)", floor, None, ""))
    rows.append(row("help, every subcommand imported (before)", eager, None, ""))
    rows.append(row("`kubedra --help`", timed([str(BIN / "kubedra"), "--help"], args.runs, env),
                    eager, "before"))
    rows.append(row("`kubectl dra --help`",
                    timed([str(BIN / "kubectl"), "dra", "--help"], args.runs, env),
                    eager, "before"))
    for nodes in (1, 300):
        with tempfile.TemporaryDirectory(prefix="bench-cli-") as workdir, \
                ControlPlane(Path(workdir) / "plane") as plane:
            populate(plane, nodes)
            cluster_env = {**env, "KUBECONFIG": str(plane.admin_kubeconfig)}
            explain = [str(BIN / "kubectl"), "dra", "explain", "resourceclaim", "too-big",
                       "-n", "default"]
            live = timed(explain, args.runs, cluster_env)
            rows.append(row(f"`kubectl dra explain`, {nodes} node(s), live", live, floor,
                            "floor"))
            rows.extend(_from_dump_rows(explain, nodes, Path(workdir), cluster_env, args.runs,
                                        live))
    print("| command | min s | median s | max s | ratio | ratio to |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def _from_dump_rows(explain: list[str], nodes: int, workdir: Path, env: dict[str, Any],
                    runs: int, live: list[float]) -> list[str]:
    """The same explain from a dump of the cluster (``kubedra dump``), against live."""
    dump = workdir / "dump.yaml"
    subprocess.run([str(BIN / "kubedra"), "dump", "-o", str(dump)], check=True, env=env,
                   timeout=120)
    offline = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    seconds = timed([*explain, "--from", str(dump)], runs, offline)
    return [row(f"`kubectl dra explain --from`, {nodes} node(s)", seconds, live, "live")]


if __name__ == "__main__":
    main()
