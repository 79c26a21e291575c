"""The plugin's gRPC servers over real unix sockets, driven by the test-side fake kubelet.

Nothing here reaches the API server (unpreparing a claim the node never prepared needs no API
call); tests/integration/test_node_plugin.py covers prepare against a real control plane.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from kubedra.node.cdi import ContainerEdits, write_spec
from kubedra.node.checkpoint import CHECKPOINT_FILE, PreparedClaim, PreparedDevice
from kubedra.node.claimspec import claim_spec, spec_path
from tests.support.fake_kubelet import Claim, FakeKubelet
from tests.support.plugin_node import PluginNode

DRIVER = "gpu.kubedra.io"


@pytest.fixture
async def node() -> AsyncIterator[PluginNode]:
    n = PluginNode()
    yield n
    n.remove()


@pytest.fixture
async def api() -> AsyncIterator[ApiClient]:
    """Never used: nothing in these tests calls the API."""
    client = ApiClient(Configuration(host="http://127.0.0.1:9"))
    yield client
    await client.close()


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
async def test_register_serve_and_stop(node: PluginNode, api: ApiClient, version: str) -> None:
    plugin = node.plugin(api)
    await plugin.start()
    kubelet = FakeKubelet(node.registry_dir, api=version)
    try:
        info = await kubelet.register()
        assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
            "DRAPlugin", DRIVER, str(node.plugins_dir / DRIVER / "dra.sock"),
            ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
             "v1alpha1.DRAResourceHealth"])
        assert plugin.health.to_dict() == {"ok": True, "serving": True, "registered": True,
                                           "registrationError": None,
                                           "checkpointProblem": None, "kubeletAPIs": {}}
        assert node.metric("kubedra_plugin_registered") == 1
        timed = "kubedra_plugin_claim_duration_seconds_count"
        assert node.metrics_registry.get_sample_value(
            timed, {"operation": "prepare", "result": "done"}) == 0  # present before any claim
        response = await kubelet.unprepare([Claim("ns", "never-prepared", "uid-x")])
        assert dict(response.claims) == {"uid-x": type(response.claims["uid-x"])(error="")}
        assert node.metric("kubedra_plugin_requests_total", method="NodeUnprepareResources",
                           api=version) == 1
        # the version the kubelet chose, known from its call (registration does not say)
        assert plugin.health.to_dict()["kubeletAPIs"] == {"DRAPlugin": version}
        assert node.metric("kubedra_plugin_claims_total", operation="unprepare",
                           result="cached") == 1
        assert [node.metric(timed, operation="unprepare", result=r)
                for r in ("done", "cached", "error")] == [0, 1, 0]
        assert 0 < node.metric("kubedra_plugin_claim_duration_seconds_sum",
                               operation="unprepare", result="cached") < 5
    finally:
        await kubelet.close()
        await plugin.stop()
    assert sorted(p.name for p in node.registry_dir.iterdir()) == []
    assert sorted(p.name for p in (node.plugins_dir / DRIVER).iterdir()) == ["serialize.lock"]
    assert plugin.health.serving is False


async def test_refused_registration_shows_in_health(node: PluginNode, api: ApiClient) -> None:
    plugin = node.plugin(api)
    await plugin.start()
    kubelet = FakeKubelet(node.registry_dir)
    try:
        await kubelet.register(accept=False, error="version mismatch")
        assert plugin.health.to_dict()["ok"] is False
        assert plugin.health.registration_error == "version mismatch"
        assert node.metric("kubedra_plugin_registered") == 0
    finally:
        await kubelet.close()
        await plugin.stop()


async def test_rolling_update_sockets_and_stale_socket_replaced(node: PluginNode,
                                                                api: ApiClient) -> None:
    uid = "11111111-2222-3333-4444-555555555555"
    stale = node.registry_dir / f"{DRIVER}-{uid}-reg.sock"
    stale.write_text("left over")
    plugin = node.plugin(api, pod_uid=uid)
    await plugin.start()
    kubelet = FakeKubelet(node.registry_dir)
    try:
        assert stale.is_socket()
        info = await kubelet.register()
        assert info.endpoint == str(node.plugins_dir / DRIVER / f"dra-{uid}.sock")
    finally:
        await kubelet.close()
        await plugin.stop()
    assert not stale.exists()


async def test_corrupt_checkpoint_is_rebuilt_from_cdi_specs(node: PluginNode,
                                                             api: ApiClient) -> None:
    data_dir = node.plugins_dir / DRIVER
    data_dir.mkdir(parents=True)
    (data_dir / CHECKPOINT_FILE).write_text("{not json")
    claim = PreparedClaim(uid="u1", namespace="ns", name="c", state="PrepareCompleted",
                          boot_id="boot-1", devices=[PreparedDevice(
                              request_names=["gpu"], pool_name="node-1", device_name="gpu-0",
                              cdi_device_ids=["gpu.kubedra.io/claim=u1-gpu-0"])])
    write_spec(spec_path(node.cdi_dir, DRIVER, "u1"),
               claim_spec(DRIVER, claim, [ContainerEdits(env=["A=1"])]))
    (node.cdi_dir / "other-vendor-claim_u2.json").write_text("{}")
    plugin = node.plugin(api)
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
        assert (data_dir / f"{CHECKPOINT_FILE}.bad").read_text() == "{not json"
    finally:
        await plugin.stop()


async def test_unreadable_checkpoint_is_replaced(node: PluginNode, api: ApiClient) -> None:
    (node.data_dir / CHECKPOINT_FILE).mkdir(parents=True)
    plugin = node.plugin(api)
    await plugin.start()
    try:
        assert plugin.health.checkpoint_problem == (
            f"cannot read {node.data_dir / CHECKPOINT_FILE}: [Errno 21] Is a directory: "
            f"'{node.data_dir / CHECKPOINT_FILE}'")
        assert plugin.health.ok is True
        assert json.loads((node.data_dir / CHECKPOINT_FILE).read_text())["data"] == {
            "version": 1, "claims": {}}
        assert (node.data_dir / f"{CHECKPOINT_FILE}.bad").is_dir()
    finally:
        await plugin.stop()
