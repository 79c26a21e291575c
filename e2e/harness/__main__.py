"""``python -m e2e.harness up [--real-nodes N]|down``: a detached local control plane for
humans.

``up`` starts it in ``.cache/clusters/default`` (or ``$KUBEDRA_CLUSTER_DIR``), with ``N`` real
nodes ``real-1`` … (kubelet, containerd, runc; root only) if asked, and prints the
``export KUBECONFIG=…`` line; ``down`` stops exactly what ``up`` started (processes, a real
node's containers, shims, mounts and cgroups). Used by ``make cluster-up [REAL_NODES=N]`` and
``make cluster-down``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from e2e.harness.controlplane import REPO_ROOT, ControlPlane, ControlPlaneError
from e2e.harness.realnode import RealNodeError
from e2e.harness.versions import HarnessVersionError, kube_version, kubelet_version


def cluster_dir() -> Path:
    """Where the detached cluster lives."""
    default = REPO_ROOT / ".cache" / "clusters" / "default"
    return Path(os.environ.get("KUBEDRA_CLUSTER_DIR", default))


def main(argv: list[str]) -> int:
    """Run ``up`` or ``down``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m e2e.harness")
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--real-nodes", type=int, default=0, metavar="N",
                        help="real nodes to start with the control plane (root only)")
    args = parser.parse_args(argv)
    workdir = cluster_dir()
    if args.command == "down":
        stopped = ControlPlane.stop_from_state(workdir)
        print("control plane stopped" if stopped else f"no control plane recorded in {workdir}")
        return 0
    try:
        kube_version()
        kubelet_version()
    except HarnessVersionError as err:
        print(f"cluster not started: {err}", file=sys.stderr)
        return 1
    if (workdir / "state.json").exists():
        print(f"a control plane is already recorded in {workdir}; run `make cluster-down` first",
              file=sys.stderr)
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    plane = ControlPlane(workdir, detached=True)
    try:
        plane.start()
        for n in range(1, args.real_nodes + 1):
            node = plane.add_real_node(f"real-{n}")
            print(f"real node real-{n} is Ready (files in {node.link}; crictl: "
                  f"CONTAINER_RUNTIME_ENDPOINT=unix://{node.socket})")
    except (ControlPlaneError, RealNodeError) as err:
        print(f"cluster failed to start: {err}", file=sys.stderr)
        plane.stop()
        return 1
    print(f"control plane {plane.server} is up (logs in {plane.logs})")
    print(f"export KUBECONFIG={plane.admin_kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
