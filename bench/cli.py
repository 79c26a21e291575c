"""bench/cli: how long the command line takes, as a whole process, many runs each.

Rows (each run is a fresh process, as a user's shell starts it):

* ``kubedra --help`` and ``kubectl dra --help`` (the ``kubectl-dra`` executable, which is what
  kubectl runs), against the floor ``python -c pass`` and against the same help with every
  subcommand imported first (how the command line loaded before subcommands were lazy);
* ``kubectl dra explain`` of a claim that fits nowhere on a local v1.37.2 control plane with
  the demo's objects (one node with one H200-like GPU, the ``too-big`` claim asking 141Gi),
  and with 300 such nodes; the same from a dump of that cluster (``--from``).

With ``--before DIR`` (the ``operator/`` directory of another version, e.g. ``git archive main
operator | tar -x -C /tmp/before``) each live explain is also timed with that version's
``kubectl-dra``, run for run alternately with this one's on the same cluster, so both see the
same load.

Usage: ``PYTHONPATH=.:operator .venv/bin/python bench/cli.py [--runs 20] [--before DIR]``.
Prints a Markdown table: min, median and max wall seconds, the median CPU seconds (user + sys
of the command and every process it waited for: kubectl and its proxy included), and the
ratios of the medians (wall, CPU) to the row's baseline. CPU time is the steadier figure on a
shared machine: it counts the work, not the wait for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
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


Run = tuple[float, float]
"""One run: wall seconds, CPU seconds (user + sys of the process tree it waited for)."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], runs: int, env: dict[str, str]) -> list[Run]:
    """Wall and CPU seconds of ``runs`` runs of ``command`` (output discarded, standard error
    too: a note there would land in the bench's table; a failure raises
    ``subprocess.CalledProcessError``, with the standard error)."""
    found = []
    for _ in range(runs):
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env=env, timeout=120)
        found.append((time.perf_counter() - start, _children_cpu() - cpu))
    return found


def timed_alternately(commands: list[tuple[list[str], dict[str, str]]], runs: int
                      ) -> list[list[Run]]:
    """Wall and CPU seconds of ``runs`` runs of each ``(command, env)``, one of each in turn."""
    found: list[list[Run]] = [[] for _ in commands]
    for _ in range(runs):
        for (command, env), runs_of in zip(commands, found, strict=True):
            runs_of.extend(timed(command, 1, env))
    return found


def before_env(before: Path, workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with a ``kubectl-dra`` of the version in ``before`` first on ``PATH`` (a script
    as pip writes for a console script, importing kubedra from ``before``)."""
    bin_dir = workdir / "before-bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl-dra"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(before)!r})\n"
                      "from kubedra.cli import kubectl_plugin\nsys.exit(kubectl_plugin())\n")
    script.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": ""}


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


def row(name: str, runs: list[Run], baseline: list[Run] | None, against: str) -> str:
    """One Markdown table row."""
    wall, cpu = [w for w, _ in runs], statistics.median(c for _, c in runs)
    median = statistics.median(wall)
    ratio = cpu_ratio = ""
    if baseline:
        ratio = f"{median / statistics.median(w for w, _ in baseline):.2f}"
        base_cpu = statistics.median(c for _, c in baseline)
        cpu_ratio = f"{cpu / base_cpu:.2f}" if base_cpu else ""
    return (f"| {name} | {min(wall):.3f} | {median:.3f} | {max(wall):.3f} | {cpu:.3f} | "
            f"{ratio} | {cpu_ratio} | {against} |")


def main() -> None:
    """Run every row and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--before", type=Path, default=None,
                        help="operator/ directory of the version to compare live explain with")
    args = parser.parse_args()
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    python = [sys.executable]
    rows = []
    load = os.getloadavg()[0]
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
            title = f"`kubectl dra explain`, {nodes} node(s), live"
            if args.before is None:
                live = timed(explain, args.runs, cluster_env)
                rows.append(row(title, live, floor, "floor"))
            else:
                before, live = timed_alternately(
                    [(explain, before_env(args.before.resolve(), Path(workdir), cluster_env)),
                     (explain, cluster_env)], args.runs)
                rows.append(row(f"{title}, before", before, floor, "floor"))
                rows.append(row(title, live, before, "before"))
            rows.extend(_from_dump_rows(explain, nodes, Path(workdir), cluster_env, args.runs,
                                        live))
    print(f"Load average (1 min) at the start {load:.1f}, at the end {os.getloadavg()[0]:.1f}\n")
    print("| command | min s | median s | max s | CPU s | ratio | CPU ratio | ratio to |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def _from_dump_rows(explain: list[str], nodes: int, workdir: Path, env: dict[str, Any],
                    runs: int, live: list[Run]) -> list[str]:
    """The same explain from a dump of the cluster (``kubedra dump``), against live."""
    dump = workdir / "dump.yaml"
    subprocess.run([str(BIN / "kubedra"), "dump", "-o", str(dump)], check=True, env=env,
                   timeout=120)
    offline = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    seconds = timed([*explain, "--from", str(dump)], runs, offline)
    return [row(f"`kubectl dra explain --from`, {nodes} node(s)", seconds, live, "live")]


if __name__ == "__main__":
    main()
