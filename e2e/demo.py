"""``make demo``: kubedra's main job on a local control plane, in one command.

Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (v1.37.2) and a
real node ``demo-h200`` (kubelet, containerd, runc: needs root), installs kubedra with
``kubectl apply -k manifests/``, runs the operator and the node agent of ``demo-h200``, which
replays the real NVIDIA H200 capture (stand-in device nodes), and creates two pods:
``trainer`` asks for a GPU with at least 140Gi of memory and compute capability 9.0 (it runs,
and its container prints the GPU it was given), ``too-big`` asks for at least 141Gi (the H200
has 143771Mi, about 140.4Gi: it stays pending, and the operator explains why in an Event on
its claim). Then it prints what a user would look at, ending with ``kubectl dra explain`` on
the pending claim and ``kubectl dra simulate`` of one more whole-GPU claim. Last, pod
``legacy``, written for NVIDIA's device plugin (``nvidia.com/gpu: 1``, no claim), waits for the
H200 and gets it through DRA once the trainer is deleted (KEP-5004). ``--keep`` leaves the
cluster running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from e2e.harness import ControlPlane
from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.kubedra import Cluster, ExistingCluster, Kubedra, kubectl
from e2e.harness.realnode import stand_in_devices
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    claim_events,
    condition,
    create_claim_template,
    create_reporting_pod,
    pod_claim,
    read_inventory,
    running_report,
)
from kubedra.kube import make_api_client
from kubedra.node.edits import NVIDIA_CONTROL_NODES

NODE = "demo-h200"
NAMESPACE = "demo"
FITS = ('device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0 && '
        'device.attributes["gpu.kubedra.io"].cudaComputeCapability.compareTo('
        'semver("9.0.0")) >= 0')
TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'
ANY_GPU = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: any-gpu, namespace: demo}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.kubedra.io}
"""


def step(text: str) -> None:
    """Print a progress line."""
    print(f"\n==> {text}", flush=True)


def show(plane: Cluster, *args: str) -> None:
    """Print a kubectl command and its output, as the user would type it."""
    print(f"\n$ kubectl {' '.join(args)}", flush=True)
    print(kubectl(plane, *args), flush=True)


async def scenario(plane: Cluster, node: str = NODE) -> tuple[str, str, str]:
    """Create the pods on ``node`` and wait for the expected outcome (the trainer runs; the
    too-big pod stays pending and the operator explains why on its claim); returns the names
    of the trainer's and the too-big pod's claims and what the trainer's container reported."""
    api = await make_api_client(plane.admin_kubeconfig)
    inventory = f"{node}-gpu.kubedra.io"
    async with api:
        async def ready() -> Any:
            found = await read_inventory(api, inventory)
            return (condition(found, "Ready") or {}).get("status") == "True"
        await eventually(ready, timeout=180, what=f"DeviceInventory {inventory} Ready")
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        step("creating pod trainer (GPU with >= 140Gi and compute capability >= 9.0) "
             "and pod too-big (>= 141Gi)")
        for name, selector in (("trainer", FITS), ("too-big", TOO_BIG)):
            await create_claim_template(api, NAMESPACE, name, selector)
            await create_reporting_pod(api, NAMESPACE, name, node, template=name)
        core = client.CoreV1Api(api)
        trainer = await eventually(lambda: running_report(api, NAMESPACE, "trainer"),
                                   timeout=180, what="pod trainer Running")

        async def reported() -> Any:
            claim = await pod_claim(api, NAMESPACE, "trainer")
            return claim if claim and (claim.get("status") or {}).get("devices") else None
        claim = await eventually(reported, timeout=60, what="claim status reported")

        async def pending() -> bool:
            pod = await core.read_namespaced_pod("too-big", NAMESPACE)
            return any(c.type == "PodScheduled" and c.status == "False"
                       for c in pod.status.conditions or [])
        await eventually(pending, timeout=90, what="pod too-big unschedulable")
        too_big = await pod_claim(api, NAMESPACE, "too-big")
        assert too_big is not None
        too_big_name: str = too_big["metadata"]["name"]

        async def explained() -> bool:
            return bool(await claim_events(api, NAMESPACE, too_big_name, "CannotAllocate"))
        await eventually(explained, timeout=60, what="the operator's explanation on the claim")
        name: str = claim["metadata"]["name"]
        return name, too_big_name, str(trainer["report"])


async def device_plugin_pod(plane: Cluster, node: str = NODE) -> str:
    """Before and after in one pod: ``legacy`` is written for the device-plugin world
    (``resources.limits: {nvidia.com/gpu: 1}``, no claim). It waits while the trainer holds the
    H200 (``kubectl dra explain pod`` says so), then gets it through DRA once the trainer is
    deleted; returns what its container reported."""
    api = await make_api_client(plane.admin_kubeconfig)
    async with api:
        await create_reporting_pod(api, NAMESPACE, "legacy", node,
                                   extended_resources={"nvidia.com/gpu": 1})

        async def waiting() -> bool:
            pod = await client.CoreV1Api(api).read_namespaced_pod("legacy", NAMESPACE)
            return any(c.type == "PodScheduled" and c.status == "False"
                       for c in pod.status.conditions or [])
        await eventually(waiting, timeout=90, what="pod legacy unschedulable")
        show(plane, "dra", "explain", "pod", "legacy", "-n", NAMESPACE)
        step("deleting pod trainer: the H200 is free for legacy")
        await client.CoreV1Api(api).delete_namespaced_pod("trainer", NAMESPACE)
        legacy = await eventually(lambda: running_report(api, NAMESPACE, "legacy"),
                                  timeout=180, what="pod legacy Running")
        return str(legacy["report"])


def checks(plane: Cluster, node: str, workdir: Path) -> None:
    """The demo on a cluster where kubedra runs with an agent on ``node`` replaying the H200:
    the pods, and what a user looks at (``workdir`` takes the template ``simulate`` reads)."""
    claim, too_big, report = asyncio.run(scenario(plane, node))
    step("the trainer's container was given (its termination message):")
    print(report, flush=True)
    show(plane, "get", "deviceinventories")
    show(plane, "describe", "deviceinventory", f"{node}-gpu.kubedra.io")
    show(plane, "get", "pods", "-n", NAMESPACE, "-o", "wide")
    show(plane, "describe", "resourceclaim", "-n", NAMESPACE, claim)
    show(plane, "get", "resourceclaims", "-n", NAMESPACE)
    show(plane, "describe", "pod", "-n", NAMESPACE, "too-big")
    show(plane, "describe", "resourceclaim", "-n", NAMESPACE, too_big)
    show(plane, "dra", "explain", "resourceclaim", too_big, "-n", NAMESPACE)
    template = workdir / "any-gpu.yaml"
    template.write_text(ANY_GPU)
    show(plane, "dra", "simulate", "-f", os.path.relpath(template))
    step("creating pod legacy, written for NVIDIA's device plugin: resources.limits "
         "{nvidia.com/gpu: 1} and no claim (DeviceClass gpu.kubedra.io has "
         "extendedResourceName nvidia.com/gpu)")
    report = asyncio.run(device_plugin_pod(plane, node))
    step("legacy's container was given (its termination message):")
    print(report, flush=True)
    show(plane, "get", "pod", "legacy", "-n", NAMESPACE, "-o",
         "jsonpath={.status.extendedResourceClaimStatus}")


def main(argv: list[str]) -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--kubeconfig", type=Path,
                        help="run the demo's pods and checks on this existing cluster, where "
                             "kubedra is installed (make kind-demo), instead of a local one")
    parser.add_argument("--node", default=NODE, help="with --kubeconfig: the GPU node")
    args = parser.parse_args(argv)
    if args.kubeconfig:
        workdir = args.kubeconfig.parent
        checks(ExistingCluster(args.kubeconfig), args.node, workdir)
        return 0
    workdir = REPO_ROOT / ".cache" / "clusters" / "demo"
    if (workdir / "state.json").exists():
        step(f"stopping the demo cluster kept by an earlier `make demo KEEP=1` ({workdir})")
        ControlPlane.stop_from_state(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    plane = ControlPlane(workdir, detached=args.keep)
    step("starting the local control plane: Kubernetes v1.37.2 (etcd, kube-apiserver, "
         f"kube-controller-manager, kube-scheduler) and kwok; logs in {workdir / 'logs'}")
    plane.start()
    try:
        step("installing kubedra: kubectl apply -k manifests/")
        deployment = Kubedra(plane)
        deployment.install()
        step(f"starting the real node {NODE}: kubelet v1.37.2, containerd, runc")
        node = deployment.add_real_node(NODE, {"kubedra.io/gpu": "true"})
        stand_in_devices(node.device_root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
        step(f"starting the operator and the node agent of {NODE} "
             "(replaying hardware/nvidia-h200, a real NVIDIA H200 capture)")
        deployment.start_operator()
        deployment.start_agent(NODE, device_root=node.device_root)
        checks(plane, NODE, workdir)
    except BaseException:
        print(plane.log_tails(), file=sys.stderr)
        for problem in plane.stop():
            print(f"left behind by the real node: {problem}", file=sys.stderr)
        raise
    if args.keep:
        print(f"\nThe cluster keeps running: export KUBECONFIG={plane.admin_kubeconfig}\n"
              "Stop it with: make demo-down")
    else:
        left = plane.stop()
        if left:
            print(f"\nleft behind by the real node: {left}", file=sys.stderr)
            return 1
        print("\nDemo finished; the control plane is stopped. Run `make demo KEEP=1` to keep it.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
