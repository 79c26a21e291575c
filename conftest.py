"""Fixtures shared by unit, integration and end-to-end tests (tests/ and e2e/).

``control_plane`` starts one real v1.37.2 control plane per test session (never a mock API);
tests that use it, directly or through another fixture, get the last lines of every
component's log attached to their report when they fail.

``KUBEDRA_KUBECONFIG=<path>`` points the fixtures at an existing cluster instead (e.g. the kind
cluster of ``make kind-demo``): ``admin_api`` and ``namespace`` use that kubeconfig, and tests
that need what only the harness has (``control_plane``: kwok nodes, real-node internals, the
components' processes) are skipped with that reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import ControlPlane
from e2e.harness.kubedra import Kubedra
from e2e.harness.versions import HarnessVersionError, kube_version, kubelet_version
from kubedra.controller.features import PROBE_DRIVER, detect
from kubedra.kube import make_api_client
from kubedra.publishing.features import ServedFeatures

_planes: list[ControlPlane] = []


def pytest_configure(config: pytest.Config) -> None:
    """Stop before collecting when ``KUBE_VERSION`` or ``KUBELET_VERSION`` names no release
    the harness runs, with the one line that says so (test files read them at import)."""
    try:
        kube_version()
        kubelet_version()
    except HarnessVersionError as err:
        raise pytest.UsageError(str(err)) from None
EXISTING_CLUSTER = os.environ.get("KUBEDRA_KUBECONFIG", "")
"""The kubeconfig of an existing cluster the tests run against (empty: the harness's own)."""


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
    kwok; real nodes that tests add) for the whole session; stopped, by PID, when the session
    ends, and an error if a real node's process, mount or cgroup is left behind. Skipped when
    ``KUBEDRA_KUBECONFIG`` names an existing cluster."""
    if EXISTING_CLUSTER:
        pytest.skip(f"needs the harness's own control plane (KUBEDRA_KUBECONFIG={EXISTING_CLUSTER} "
                    "is an existing cluster)")
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    _planes.append(plane)
    plane.start()
    try:
        yield plane
    finally:
        left = plane.stop()
        _planes.remove(plane)
        assert not left, f"left behind by the control plane: {left}"


@pytest.fixture(scope="session")
def admin_kubeconfig(request: pytest.FixtureRequest) -> Path:
    """The cluster admin's kubeconfig: ``KUBEDRA_KUBECONFIG``'s, or the harness's control
    plane's (started for it)."""
    if EXISTING_CLUSTER:
        return Path(EXISTING_CLUSTER)
    plane: ControlPlane = request.getfixturevalue("control_plane")
    return plane.admin_kubeconfig


@pytest.fixture(scope="session")
async def admin_api(admin_kubeconfig: Path) -> AsyncIterator[ApiClient]:
    """A kubernetes-asyncio client authenticated as cluster admin."""
    api = await make_api_client(admin_kubeconfig)
    async with api:
        yield api


@pytest.fixture(scope="session")
async def served(admin_api: ApiClient) -> ServedFeatures:
    """What the session's cluster serves, detected as the operator detects it
    (:func:`kubedra.controller.features.detect`): tests of behaviour that depends on a feature
    (device taints are off by default before Kubernetes 1.36) assert what kubedra does and
    reports where it is off."""
    return await detect(admin_api, PROBE_DRIVER)


@pytest.fixture(scope="session")
def kubedra(control_plane: ControlPlane) -> Kubedra:
    """kubedra installed from manifests/, with the operator running under its ServiceAccount
    and the test attach step of :mod:`tests.support.scripted_attacher` (agents are started per
    test with :meth:`Kubedra.start_agent`)."""
    deployment = Kubedra(control_plane)
    deployment.install()
    deployment.start_operator(explain_event_interval=2.0,
                              attacher="tests.support.scripted_attacher:ScriptedAttacher")
    return deployment


@pytest.fixture
async def namespace(admin_api: ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin_api)
    await core.create_namespace({"metadata": {"name": name}})
    yield name
    await core.delete_namespace(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the control plane's log tails to the report of a failed test that used it."""
    outcome = yield
    report = outcome.get_result()
    uses = set(getattr(item, "fixturenames", ()))
    if report.failed and _planes and uses & {"control_plane", "admin_kubeconfig"}:
        report.sections.append(("control plane logs", _planes[0].log_tails()))

