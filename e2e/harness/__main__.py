"""``python -m e2e.harness up|down``: a detached local control plane for humans.

``up`` starts it in ``.cache/clusters/default`` (or ``$KUBEDRA_CLUSTER_DIR``) and prints the
``export KUBECONFIG=…`` line; ``down`` stops exactly the processes ``up`` started.
Used by ``make cluster-up`` and ``make cluster-down``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from e2e.harness.controlplane import REPO_ROOT, ControlPlane, ControlPlaneError


def cluster_dir() -> Path:
    """Where the detached cluster lives."""
    default = REPO_ROOT / ".cache" / "clusters" / "default"
    return Path(os.environ.get("KUBEDRA_CLUSTER_DIR", default))


def main(argv: list[str]) -> int:
    """Run ``up`` or ``down``; returns the exit code."""
    if len(argv) != 1 or argv[0] not in {"up", "down"}:
        print("usage: python -m e2e.harness up|down", file=sys.stderr)
        return 2
    workdir = cluster_dir()
    if argv[0] == "down":
        stopped = ControlPlane.stop_from_state(workdir)
        print("control plane stopped" if stopped else f"no control plane recorded in {workdir}")
        return 0
    if (workdir / "state.json").exists():
        print(f"a control plane is already recorded in {workdir}; run `make cluster-down` first",
              file=sys.stderr)
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    plane = ControlPlane(workdir, detached=True)
    try:
        plane.start()
    except ControlPlaneError as err:
        print(f"control plane failed to start: {err}", file=sys.stderr)
        return 1
    print(f"control plane {plane.server} is up (logs in {plane.logs})")
    print(f"export KUBECONFIG={plane.admin_kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
