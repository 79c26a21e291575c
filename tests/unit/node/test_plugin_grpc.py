"""The plugin's gRPC servers over real unix sockets, driven by the test-side fake kubelet.

Nothing here reaches the API server (unpreparing a claim the node never prepared needs no API
call); tests/integration/test_node_plugin.py covers prepare against a real control plane.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry

from kubedra.node.cdi import ContainerEdits, write_spec
from kubedra.node.checkpoint import CHECKPOINT_FILE, PreparedClaim, PreparedDevice
from kubedra.node.claimspec import claim_spec, spec_path
from kubedra.node.metrics import PluginMetrics
from kubedra.node.plugin import KubeletPlugin
from kubedra.node.prepare import ClaimPreparer, PluginPaths
from tests.support.fake_kubelet import Claim, FakeKubelet

DRIVER = "gpu.kubedra.io"


class Node:
    """A node's directories under tmp_path, and a plugin built on them."""

    def __init__(self, root: Path) -> None:
        self.registry = root / "plugins_registry"
        self.plugins = root / "plugins"
        self.cdi = root / "cdi"
        self.boot_id = root / "boot_id"
        self.boot_id.write_text("boot-1\n")
        self.registry.mkdir()
        self.metrics_registry = CollectorRegistry()
        self.metrics = PluginMetrics(self.metrics_registry)
        # never used: nothing in these tests calls the API
        self.api = ApiClient(Configuration(host="http://127.0.0.1:9"))

    def plugin(self, pod_uid: str | None = None) -> KubeletPlugin:
        preparer = ClaimPreparer(
            api=self.api, driver=DRIVER, node_name="node-1", pool="node-1", devices=dict,
            paths=PluginPaths(data_dir=self.plugins / DRIVER, cdi_dir=self.cdi,
                              boot_id=self.boot_id), metrics=self.metrics)
        return KubeletPlugin(preparer, driver=DRIVER, registry_dir=self.registry,
                             plugins_dir=self.plugins, metrics=self.metrics, pod_uid=pod_uid)

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics_registry.get_sample_value(name, labels)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    # a short root: unix socket paths must stay under 108 bytes
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    n = Node(root)
    yield n
    await n.api.close()
    shutil.rmtree(root)


@pytest.mark.parametrize("api", ["v1", "v1beta1"])
async def test_register_serve_and_stop(node: Node, api: str) -> None:
    plugin = node.plugin()
    await plugin.start()
    kubelet = FakeKubelet(node.registry, api=api)
    try:
        info = await kubelet.register()
        assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
            "DRAPlugin", DRIVER, str(node.plugins / DRIVER / "dra.sock"),
            ["v1.DRAPlugin", "v1beta1.DRAPlugin"])
        assert plugin.health.to_dict() == {"ok": True, "serving": True, "registered": True,
                                           "registrationError": None,
                                           "checkpointProblem": None}
        assert node.metric("kubedra_plugin_registered") == 1
        response = await kubelet.unprepare([Claim("ns", "never-prepared", "uid-x")])
        assert dict(response.claims) == {"uid-x": type(response.claims["uid-x"])(error="")}
        assert node.metric("kubedra_plugin_requests_total", method="NodeUnprepareResources",
                           api=api) == 1
        assert node.metric("kubedra_plugin_claims_total", operation="unprepare",
                           result="cached") == 1
    finally:
        await kubelet.close()
        await plugin.stop()
    assert sorted(p.name for p in node.registry.iterdir()) == []
    assert sorted(p.name for p in (node.plugins / DRIVER).iterdir()) == ["serialize.lock"]
    assert plugin.health.serving is False


async def test_refused_registration_shows_in_health(node: Node) -> None:
    plugin = node.plugin()
    await plugin.start()
    kubelet = FakeKubelet(node.registry)
    try:
        await kubelet.register(accept=False, error="version mismatch")
        assert plugin.health.to_dict()["ok"] is False
        assert plugin.health.registration_error == "version mismatch"
        assert node.metric("kubedra_plugin_registered") == 0
    finally:
        await kubelet.close()
        await plugin.stop()


async def test_rolling_update_sockets_and_stale_socket_replaced(node: Node) -> None:
    uid = "11111111-2222-3333-4444-555555555555"
    stale = node.registry / f"{DRIVER}-{uid}-reg.sock"
    stale.write_text("left over")
    plugin = node.plugin(pod_uid=uid)
    await plugin.start()
    kubelet = FakeKubelet(node.registry)
    try:
        assert stale.is_socket()
        info = await kubelet.register()
        assert info.endpoint == str(node.plugins / DRIVER / f"dra-{uid}.sock")
    finally:
        await kubelet.close()
        await plugin.stop()
    assert not stale.exists()


async def test_corrupt_checkpoint_is_rebuilt_from_cdi_specs(node: Node) -> None:
    data_dir = node.plugins / DRIVER
    data_dir.mkdir(parents=True)
    (data_dir / CHECKPOINT_FILE).write_text("{not json")
    claim = PreparedClaim(uid="u1", namespace="ns", name="c", state="PrepareCompleted",
                          boot_id="boot-1", devices=[PreparedDevice(
                              request_names=["gpu"], pool_name="node-1", device_name="gpu-0",
                              cdi_device_ids=["gpu.kubedra.io/claim=u1-gpu-0"])])
    write_spec(spec_path(node.cdi, DRIVER, "u1"),
               claim_spec(DRIVER, claim, [ContainerEdits(env=["A=1"])]))
    (node.cdi / "other-vendor-claim_u2.json").write_text("{}")
    plugin = node.plugin()
    await plugin.start()
    try:
        assert plugin.health.checkpoint_problem is not None
        assert plugin.health.checkpoint_problem.endswith(
            "not a kubedra checkpoint: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)")
        assert node.metric("kubedra_plugin_checkpoint_errors_total") == 1
        assert plugin.preparer.prepared_claims() == {
            "u1": claim.model_copy(update={"state": "PrepareStarted"})}
        saved = json.loads((data_dir / CHECKPOINT_FILE).read_text())
        assert list(saved["data"]["claims"]) == ["u1"]
    finally:
        await plugin.stop()
