"""The demo's checks on the kind cluster of ``make kind-demo`` (``make test-kind``).

Runs only with ``KUBEDRA_KUBECONFIG`` naming that cluster (``.cache/kind/kubeconfig``), where
kubedra is installed from ``hack/kind`` and its agent on ``kubedra-worker`` replays the
NVIDIA H200 capture: the trainer's container gets the H200 (its CDI environment and device
node), too-big is explained, and legacy gets the GPU through its extended resource. Also checks
that the host's addresses and routes are those recorded before the cluster was created: the
cluster's networks exist only inside the engine's network namespace (hack/kind/engine.sh).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from conftest import EXISTING_CLUSTER
from e2e import demo
from e2e.harness.controlplane import REPO_ROOT
from e2e.harness.kubedra import ExistingCluster
from e2e.harness.wait import eventually

pytestmark = [
    pytest.mark.kind,
    pytest.mark.skipif(not EXISTING_CLUSTER,
                       reason="needs the kind cluster of `make kind-demo` (KUBEDRA_KUBECONFIG)"),
]
NODE = "kubedra-worker"
H200_UUID = "GPU-3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d"
HOST_NETWORK_BEFORE = REPO_ROOT / ".cache" / "kind" / "host-network.before"


def host_network() -> str:
    """This machine's addresses and routes, as ``make kind-demo`` records them."""
    return "".join(subprocess.run(args, capture_output=True, text=True, check=True).stdout
                   for args in (["ip", "-br", "addr"], ["ip", "route"], ["ip", "-6", "route"]))


def test_host_network_is_unchanged() -> None:
    """The kind cluster's bridge, pod and service addresses are not on this machine."""
    if not HOST_NETWORK_BEFORE.exists():
        pytest.skip(f"{HOST_NETWORK_BEFORE} missing: the cluster was not made by make kind-demo")
    assert host_network() == HOST_NETWORK_BEFORE.read_text()
    assert "172.18." not in host_network()
    assert "10.244." not in host_network()


async def test_demo_checks_on_kind(admin_api: ApiClient, tmp_path: Path) -> None:
    """The demo's pods on the kind worker, from a fresh ``demo`` namespace: the trainer is
    given the H200, too-big is explained, legacy gets it through ``nvidia.com/gpu``."""
    core = client.CoreV1Api(admin_api)
    try:
        await core.delete_namespace(demo.NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise

    async def gone() -> bool:
        try:
            await core.read_namespace(demo.NAMESPACE)
        except ApiException as error:
            return error.status == 404
        return False
    await eventually(gone, timeout=120, what=f"namespace {demo.NAMESPACE} deleted")
    cluster = ExistingCluster(Path(EXISTING_CLUSTER))
    _claim, _too_big, report = await demo.scenario(cluster, NODE)
    assert f"NVIDIA_VISIBLE_DEVICES={H200_UUID}" in report.splitlines()
    assert "/dev/nvidia0" in report.splitlines()
    legacy = await demo.device_plugin_pod(cluster, NODE)
    assert f"NVIDIA_VISIBLE_DEVICES={H200_UUID}" in legacy.splitlines()
