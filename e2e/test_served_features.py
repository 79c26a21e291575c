"""What the operator learns the cluster serves, against real kube-apiservers (issue 26, item 2):
the session's control plane with its default gates, and one started with the gates of
Kubernetes 1.34's defaults for these fields (``DRADeviceTaints``, ``DRADeviceTaintRules`` and
``DRAPartitionableDevices`` off), where the API server drops taints and counters from a
written slice without an error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.controlplane import kube_version
from kubedra.controller.features import PROBE_DRIVER, detect
from kubedra.kube import make_api_client
from kubedra.publishing.features import ServedFeatures

GATES_OF_1_34 = "DRADeviceTaints=false,DRADeviceTaintRules=false,DRAPartitionableDevices=false"


@pytest.fixture(scope="module")
async def gates_off_api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ApiClient]:
    """An admin client of a second control plane whose kube-apiserver has the gates of
    :data:`GATES_OF_1_34` off (stopped by PID afterwards)."""
    plane = ControlPlane(Path(tmp_path_factory.mktemp("gates-off")),
                         apiserver_args=[f"--feature-gates={GATES_OF_1_34}"])
    plane.start()
    try:
        api = await make_api_client(plane.admin_kubeconfig)
        async with api:
            yield api
    finally:
        assert plane.stop() == []


async def test_the_default_cluster_keeps_taints_and_counters(admin_api: ApiClient) -> None:
    served = await detect(admin_api, PROBE_DRIVER)
    assert served == ServedFeatures(resource_versions=served.resource_versions,
                                    server_version=f"v{kube_version()}")
    assert served.resource_versions[0] == "v1"
    assert served.off == ()


async def test_a_cluster_with_the_gates_off_is_detected(gates_off_api: ApiClient) -> None:
    served = await detect(gates_off_api, PROBE_DRIVER)
    # v1.37.2's kube-apiserver still lists devicetaintrules in resource.k8s.io/v1 with
    # DRADeviceTaintRules off (measured here): discovery says the kind is served, not whether
    # the scheduler applies it, so only the two fields a slice write drops are off
    assert served.off == ("DRADeviceTaints", "DRAPartitionableDevices")
    assert served.server_version == f"v{kube_version()}"
    assert served.resource_versions[0] == "v1"
