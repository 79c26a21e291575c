"""The node agent's kubelet plugin against claims allocated by the real v1.37.2 scheduler.

The test plays the kubelet (tests/support/fake_kubelet.py: registration, then
NodePrepareResources / NodeUnprepareResources over the plugin's real unix sockets) and the
agent's discovery (``PluginNode.devices``). It publishes the ResourceSlices itself; pods pinned
to the kwok node ``plugin-node`` make kube-scheduler allocate the claims.

The plugin talks to the API as the agent would in its DaemonSet: a ServiceAccount bound to the
rules of the agent's ClusterRole in manifests/rbac-agent.yaml, with a token from TokenRequest
bound to a pod running on the node (so the token carries the node name, which the
``associated-node:patch`` permission on ``resourceclaims/driver`` requires).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.harness import KWOK_NODE_LABEL, ControlPlane
from e2e.harness.realnode import stand_in_devices
from e2e.harness.wait import eventually
from kubedra.api.inventory import InventoryDevice
from kubedra.api.resource import DeviceAttribute
from kubedra.kube import APPLY_PATCH, make_api_client
from kubedra.node.checkpoint import CHECKPOINT_FILE
from kubedra.node.plugin import KubeletPlugin
from tests.support.cdi_schema import schema_errors
from tests.support.fake_kubelet import Claim, FakeKubelet
from tests.support.plugin_node import FakeMigPartitioner, PluginNode

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
DRIVER = "gpu.kubedra.io"
OTHER_DRIVER = "other.test.kubedra.io"
NODE = "plugin-node"
GPU_CLASS = "gpu.plugin.test.kubedra.io"
OTHER_CLASS = "other.plugin.test.kubedra.io"
AGENT_NAMESPACE = "kubedra-plugin-test"
AGENT = "kubedra-agent"
ROLE = "kubedra-agent-plugin-test"
"""A copy of the agent's ClusterRole under a name of its own (the e2e tests install the real
one)."""
NODE_GPUS = range(18)
"""The agent's GPUs gpu-0 … gpu-17 (each test uses its own, so no test waits for another's
claims to be deallocated; gpu-16 has no device node); the slice also publishes gpu-99, which
the node lacks."""
CONTROL_NODES = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]


MIG_DEVICE = InventoryDevice(name="gpu-0-mig-1g18gb-s0", attributes={
    "type": DeviceAttribute(string_value="mig"),
    "parentUUID": DeviceAttribute(string_value="GPU-0"),
    "profile": DeviceAttribute(string_value="1g.18gb"),
    "profileID": DeviceAttribute(int_value=19),
    "placementStart": DeviceAttribute(int_value=0),
    "placementSize": DeviceAttribute(int_value=1)})
"""A MIG placement of gpu-0, named and attributed as kubedra.discovery publishes it."""


def gpu(n: int) -> InventoryDevice:
    return InventoryDevice(name=f"gpu-{n}", attributes={
        "type": DeviceAttribute(string_value="gpu"),
        "uuid": DeviceAttribute(string_value=f"GPU-{n}"),
        "minor": DeviceAttribute(int_value=n)})


@dataclass
class Cluster:
    """What the module publishes, and the agent's credentials."""

    control_plane: ControlPlane
    admin: ApiClient
    agent: ApiClient
    """Token bound to the agent pod on ``NODE``."""
    agent_kubeconfig_unbound: Path
    """Token of the same ServiceAccount without a node."""


@pytest.fixture(scope="module")
async def cluster(control_plane: ControlPlane, admin_api: ApiClient) -> AsyncIterator[Cluster]:
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    rbac = client.RbacAuthorizationV1Api(admin_api)
    await core.create_node({"metadata": {"name": NODE, "labels": {
        KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": NODE}}})
    devices: list[dict[str, Any]] = [
        {"name": d.name, "attributes": {k: v.to_api() for k, v in d.attributes.items()}}
        for d in [*(gpu(n) for n in NODE_GPUS), gpu(99), MIG_DEVICE]]
    await resource.create_resource_slice({
        "metadata": {"name": f"{NODE}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": NODE, "devices": devices,
                 "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}})
    await resource.create_resource_slice({
        "metadata": {"name": f"{NODE}-{OTHER_DRIVER}"},
        "spec": {"driver": OTHER_DRIVER, "nodeName": NODE, "devices": [{"name": "dev-0"}],
                 "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}})
    for name, driver in ((GPU_CLASS, DRIVER), (OTHER_CLASS, OTHER_DRIVER)):
        await resource.create_device_class({"metadata": {"name": name}, "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})

    await core.create_namespace({"metadata": {"name": AGENT_NAMESPACE}})
    await core.create_namespaced_service_account(AGENT_NAMESPACE, {"metadata": {"name": AGENT}})
    role = next(doc for doc in yaml.safe_load_all((REPO / "manifests" / "rbac-agent.yaml")
                                                  .read_text())
                if doc["kind"] == "ClusterRole")
    await rbac.create_cluster_role({"metadata": {"name": ROLE}, "rules": role["rules"]})
    await rbac.create_cluster_role_binding({
        "metadata": {"name": ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT,
                      "namespace": AGENT_NAMESPACE}]})
    # the agent's own pod on the node, as the DaemonSet would run it
    await core.create_namespaced_pod(AGENT_NAMESPACE, {
        "metadata": {"name": "agent"},
        "spec": {"nodeName": NODE, "serviceAccountName": AGENT,
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "agent", "image": "registry.invalid/kubedra:1"}]}})
    bound = control_plane.kubeconfig_for_service_account(AGENT_NAMESPACE, AGENT,
                                                         bound_pod="agent")
    unbound = control_plane.kubeconfig_for_service_account(AGENT_NAMESPACE, AGENT)
    agent = await make_api_client(bound)
    try:
        yield Cluster(control_plane, admin_api, agent, unbound)
    finally:
        await agent.close()
        await rbac.delete_cluster_role_binding(ROLE)
        await rbac.delete_cluster_role(ROLE)
        await core.delete_namespace(AGENT_NAMESPACE)
        for name in (GPU_CLASS, OTHER_CLASS):
            await resource.delete_device_class(name)
        for driver in (DRIVER, OTHER_DRIVER):
            await resource.delete_resource_slice(f"{NODE}-{driver}")
        await core.delete_node(NODE)


@pytest.fixture
def node() -> Iterator[PluginNode]:
    n = PluginNode(NODE, DRIVER)
    n.devices = {d.name: d for d in (gpu(n) for n in NODE_GPUS)}
    yield n
    n.remove()


class Agent:
    """Running plugins of one test (stopped at the end) and the kubelet talking to them."""

    def __init__(self, node: PluginNode, api: ApiClient) -> None:
        self.node, self.api = node, api
        self.plugin: KubeletPlugin | None = None
        self.kubelet: FakeKubelet | None = None

    async def start(self, api: ApiClient | None = None,
                    mig: FakeMigPartitioner | None = None) -> KubeletPlugin:
        """Start a fresh plugin (a new agent process) and register it with a new kubelet."""
        self.plugin = self.node.plugin(api or self.api, mig=mig)
        await self.plugin.start()
        self.kubelet = FakeKubelet(self.node.registry_dir)
        await self.kubelet.register()
        return self.plugin

    async def stop(self) -> None:
        if self.kubelet is not None:
            await self.kubelet.close()
        if self.plugin is not None:
            await self.plugin.stop()
        self.plugin = self.kubelet = None

    async def prepare(self, *claims: Claim) -> dict[str, Any]:
        assert self.kubelet is not None
        return dict((await self.kubelet.prepare(list(claims))).claims)

    async def unprepare(self, *claims: Claim) -> dict[str, str]:
        assert self.kubelet is not None
        answer = await self.kubelet.unprepare(list(claims))
        return {uid: r.error for uid, r in answer.claims.items()}


@pytest.fixture
async def agent(cluster: Cluster, node: PluginNode) -> AsyncIterator[Agent]:
    a = Agent(node, cluster.agent)
    yield a
    await a.stop()


def by_uuid(*uuids: str) -> str:
    # has(): MIG placement devices have no uuid, and a missing attribute is a CEL error
    attribute = f'device.attributes["{DRIVER}"]'
    return f"has({attribute}.uuid) && (" + " || ".join(
        f'{attribute}.uuid == "{u}"' for u in uuids) + ")"


def claim_body(name: str, request: str = "gpu", *, cls: str = GPU_CLASS,
               selector: str | None = None, count: int = 1,
               config: dict[str, Any] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": request, "exactly": exactly}]}
    if config is not None:
        devices["config"] = [{"opaque": {"driver": DRIVER, "parameters": config}}]
    return {"metadata": {"name": name}, "spec": {"devices": devices}}


async def create_claims(admin: ApiClient, namespace: str, bodies: list[dict[str, Any]],
                        pod: str | None = "consumer",
                        existing: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Create claims and (unless ``pod`` is None) a pod on NODE using them and the
    ``existing`` ones; wait until the scheduler allocated them all. Returns the claims as the
    API shows them, by name."""
    core, resource = client.CoreV1Api(admin), client.ResourceV1Api(admin)
    for body in bodies:
        await resource.create_namespaced_resource_claim(namespace, body)
    names = [*existing, *(b["metadata"]["name"] for b in bodies)]
    if pod is not None:
        await core.create_namespaced_pod(namespace, {
            "metadata": {"name": pod},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "resourceClaims": [{"name": n, "resourceClaimName": n} for n in names],
                     "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                     "resources": {"claims": [{"name": n} for n in names]}}]}})

    async def read_all(need_allocation: bool) -> dict[str, dict[str, Any]] | None:
        claims = {n: await read_claim(admin, namespace, n) for n in names}
        if need_allocation and not all("allocation" in c.get("status", {})
                                       for c in claims.values()):
            return None
        return claims

    result = await eventually(lambda: read_all(pod is not None), timeout=60,
                              what=f"the scheduler to allocate {names}")
    assert result is not None
    return result


async def read_claim(admin: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    raw = await admin.call_api(
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}", "GET",
        header_params={"Accept": "application/json"}, response_types_map={200: "object"},
        auth_settings=["BearerToken"], _return_http_data_only=True)
    assert isinstance(raw, dict)
    return raw


async def kubectl(cluster: Cluster, *args: str) -> str:
    """Run kubectl (from the test extras, next to this Python) as admin; its stdout."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "kubectl"),
        f"--kubeconfig={cluster.control_plane.admin_kubeconfig}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def kubectl_create(cluster: Cluster, namespace: str, body: dict[str, Any],
                         tmp_path: Path) -> None:
    """Create a claim the way users do, with kubectl (which sends canonical JSON)."""
    path = tmp_path / f"{body['metadata']['name']}.json"
    path.write_text(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                **body}))
    await kubectl(cluster, "create", "-n", namespace, "-f", str(path))


def ref(claim: dict[str, Any]) -> Claim:
    meta = claim["metadata"]
    return Claim(meta["namespace"], meta["name"], meta["uid"])


def devices_of(claim: dict[str, Any]) -> list[str]:
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


def spec_file(node: PluginNode, uid: str) -> Path:
    return node.cdi_dir / f"{DRIVER}-claim_{uid}.json"


def device_nodes(node: PluginNode, *paths: str) -> list[dict[str, str]]:
    """CDI device nodes for container ``paths``, taken from the node's stand-ins."""
    return [{"path": p, "hostPath": f"{node.device_root}{p}"} for p in paths]


def expected_spec(node: PluginNode, claim: dict[str, Any], request: str,
                  extra_env: list[str] | None = None) -> dict[str, Any]:
    """The CDI spec kubedra must write on ``node`` for a claim of GPUs (all of request
    ``request``)."""
    meta = claim["metadata"]
    gpus = devices_of(claim)
    visible = "NVIDIA_VISIBLE_DEVICES=" + ",".join(f"GPU-{g.removeprefix('gpu-')}" for g in gpus)
    return {
        "cdiVersion": "0.6.0", "kind": f"{DRIVER}/claim",
        "annotations": {"kubedra.io/claim-namespace": meta["namespace"],
                        "kubedra.io/claim-name": meta["name"], "kubedra.io/claim-uid": meta["uid"]},
        "devices": [{
            "name": f"{meta['uid']}-{g}",
            "annotations": {"kubedra.io/pool": NODE, "kubedra.io/device": g,
                            "kubedra.io/requests": request},
            "containerEdits": {
                "env": sorted([visible, *(extra_env or [])]),
                "deviceNodes": device_nodes(node, f"/dev/nvidia{g.removeprefix('gpu-')}",
                                            *CONTROL_NODES)}} for g in gpus]}


def prepared_entry(claim: dict[str, Any], device: str) -> dict[str, Any]:
    """The status.devices entry the agent writes for ``device``, minus lastTransitionTime."""
    uid = claim["metadata"]["uid"]
    return {"driver": DRIVER, "pool": NODE, "device": device, "conditions": [{
        "type": "Prepared", "status": "True", "reason": "DevicePrepared",
        "message": f"prepared on node {NODE} as CDI device {DRIVER}/claim={uid}-{device}"}]}


def without_times(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for entry in entries:
        for condition in entry.get("conditions", []):
            assert condition.pop("lastTransitionTime")
    return entries


def cdi_ids(uid: str, device: str, request: str = "gpu", first: bool = True) -> list[str]:
    """The CDI IDs the answer gives ``device``: its own, and on the first device of a request
    the request's device metadata (KEP-5304)."""
    return [f"{DRIVER}/claim={uid}-{device}", *([f"{DRIVER}/metadata={uid}_{request}"]
                                                 if first else [])]


def metadata_spec_names(uid: str, *requests: str) -> list[str]:
    return [f"{DRIVER}_metadata_{uid}_{r}.json" for r in requests]


def response_devices(answer: Any) -> list[tuple[list[str], str, str, list[str]]]:
    return [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids))
            for d in answer.devices]


@dataclass
class PreparedPair:
    """The story of :func:`test_prepare_two_claims_then_unprepare`: claim ``single`` (request
    ``gpu``: gpu-0) and claim ``pair`` (request ``gpus``: gpu-1 and gpu-2) as the API showed
    them when allocated, and the plugin's answer to preparing both, by claim UID."""

    cluster: Cluster
    agent: Agent
    node: PluginNode
    namespace: str
    single: dict[str, Any]
    pair: dict[str, Any]
    answer: dict[str, Any]


async def test_prepare_two_claims_then_unprepare(cluster: Cluster, agent: Agent,
                                                 node: PluginNode, namespace: str) -> None:
    claims = await create_claims(cluster.admin, namespace, [
        claim_body("single", selector=by_uuid("GPU-0")),
        claim_body("pair", "gpus", selector=by_uuid("GPU-1", "GPU-2"), count=2)])
    single, pair = claims["single"], claims["pair"]
    assert sorted(devices_of(pair)) == ["gpu-1", "gpu-2"]
    plugin = await agent.start()
    assert plugin.health.to_dict()["registered"] is True
    story = PreparedPair(cluster, agent, node, namespace, single, pair,
                         await agent.prepare(ref(single), ref(pair)))

    assert_cdi_specs_written(story)
    assert_device_metadata_written(story)
    prepared = await assert_prepared_conditions(story)
    await assert_repeated_prepare_is_cached(story, prepared)
    await assert_operator_ready_coexists(story)
    await assert_unprepare_removes_everything(story)


def assert_cdi_specs_written(story: PreparedPair) -> None:
    """Step 1: one CDI spec per claim, valid and exact, and the response's CDI device IDs."""
    single, pair, node = story.single, story.pair, story.node
    assert sorted(story.answer) == sorted([single["metadata"]["uid"], pair["metadata"]["uid"]])
    for claim, request in ((single, "gpu"), (pair, "gpus")):
        uid = claim["metadata"]["uid"]
        assert story.answer[uid].error == ""
        assert response_devices(story.answer[uid]) == [
            ([request], NODE, g, cdi_ids(uid, g, request, i == 0))
            for i, g in enumerate(devices_of(claim))]
        document = json.loads(spec_file(node, uid).read_text())
        assert schema_errors(document) == []
        assert document == expected_spec(node, claim, request)
    assert sorted(p.name for p in node.cdi_dir.iterdir()) == sorted([
        *(spec_file(node, c["metadata"]["uid"]).name for c in (single, pair)),
        *metadata_spec_names(single["metadata"]["uid"], "gpu"),
        *metadata_spec_names(pair["metadata"]["uid"], "gpus")])


def assert_device_metadata_written(story: PreparedPair) -> None:
    """Step 2: device metadata (KEP-5304), one file per request, mounted by a CDI spec of
    its own."""
    pair, node, namespace = story.pair, story.node, story.namespace
    pair_uid = pair["metadata"]["uid"]
    host = node.data_dir / "dra-device-metadata" / f"{namespace}_pair" / "gpus" / "metadata.json"
    streamed = [json.loads(line) for line in host.read_text().splitlines()]
    assert [d.pop("apiVersion") for d in streamed] == [
        "metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]
    assert streamed[0] == streamed[1] == {
        "kind": "DeviceMetadata",
        "metadata": {"name": "pair", "namespace": namespace, "uid": pair_uid, "generation": 1},
        "requests": [{"name": "gpus", "devices": [
            {"driver": DRIVER, "pool": NODE, "name": g, "attributes": {
                "minor": {"int": int(g.removeprefix("gpu-"))}, "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{g.removeprefix('gpu-')}"}}}
            for g in devices_of(pair)]}]}
    mount_spec = json.loads((node.cdi_dir / f"{DRIVER}_metadata_{pair_uid}_gpus.json").read_text())
    assert schema_errors(mount_spec) == []
    assert mount_spec == {
        "cdiVersion": mount_spec["cdiVersion"], "kind": f"{DRIVER}/metadata",
        "devices": [{"name": f"{pair_uid}_gpus", "containerEdits": {"mounts": [{
            "hostPath": str(host),
            "containerPath": "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/"
                             f"pair/gpus/{DRIVER}-metadata.json",
            "options": ["ro", "bind"]}]}}]}
    assert mount_spec["cdiVersion"] in ("0.3.0", "0.5.0")


async def assert_prepared_conditions(story: PreparedPair) -> dict[str, Any]:
    """Step 3: the agent's Prepared condition on each device of our driver in status.devices,
    as ``kubectl describe`` shows it; returns claim ``single`` as read then."""
    cluster, namespace, single, pair = story.cluster, story.namespace, story.single, story.pair
    single_now = await read_claim(cluster.admin, namespace, "single")
    prepared_at = single_now["status"]["devices"][0]["conditions"][0]["lastTransitionTime"]
    assert without_times(single_now["status"]["devices"]) == [prepared_entry(single, "gpu-0")]
    pair_now = await read_claim(cluster.admin, namespace, "pair")
    assert without_times(pair_now["status"]["devices"]) == [
        prepared_entry(pair, g) for g in devices_of(pair)]
    described = (await kubectl(cluster, "describe", "resourceclaim", "single", "-n",
                               namespace)).splitlines()
    start = described.index("  Devices:", described.index("Status:"))
    assert described[start:start + 10] == [
        "  Devices:",
        "    Conditions:",
        f"      Last Transition Time:  {prepared_at}",
        f"      Message:               prepared on node {NODE} as CDI device "
        f"{DRIVER}/claim={single['metadata']['uid']}-gpu-0",
        "      Reason:                DevicePrepared",
        "      Status:                True",
        "      Type:                  Prepared",
        "    Device:                  gpu-0",
        f"    Driver:                  {DRIVER}",
        f"    Pool:                    {NODE}"]
    return single_now


async def assert_repeated_prepare_is_cached(story: PreparedPair,
                                            single_now: dict[str, Any]) -> None:
    """Step 4: a repeated prepare is answered from the checkpoint, with no API write."""
    single, node = story.single, story.node
    uid = single["metadata"]["uid"]
    again = await story.agent.prepare(ref(single))
    assert response_devices(again[uid]) == response_devices(story.answer[uid])
    assert (await read_claim(story.cluster.admin, story.namespace, "single"))["metadata"][
        "resourceVersion"] == single_now["metadata"]["resourceVersion"]
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="done") == 2
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="cached") == 1
    assert node.metric("kubedra_plugin_prepared_claims") == 2
    timed = "kubedra_plugin_claim_duration_seconds"
    assert [node.metric(f"{timed}_count", operation="prepare", result=r)
            for r in ("done", "cached", "error")] == [2, 1, 0]
    assert 0 < node.metric(f"{timed}_sum", operation="prepare", result="done") < 45


async def assert_operator_ready_coexists(story: PreparedPair) -> None:
    """Step 5: the operator's Ready condition on the same entry coexists with the agent's
    Prepared (two field managers, server-side apply)."""
    admin, namespace = story.cluster.admin, story.namespace
    await admin.call_api(
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/single/status",
        "PATCH", query_params=[("fieldManager", "kubedra-operator"), ("force", "true")],
        header_params={"Content-Type": APPLY_PATCH, "Accept": "application/json"},
        body={"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "single", "namespace": namespace},
              "status": {"devices": [{"driver": DRIVER, "pool": NODE, "device": "gpu-0",
                                      "conditions": [{
                                          "type": "Ready", "status": "True",
                                          "reason": "Published", "message": "",
                                          "lastTransitionTime": "2026-11-30T00:00:00Z"}]}]}},
        response_types_map={200: "object"}, auth_settings=["BearerToken"])
    both = await read_claim(admin, namespace, "single")
    assert [c["type"] for c in both["status"]["devices"][0]["conditions"]] == [
        "Prepared", "Ready"]


async def assert_unprepare_removes_everything(story: PreparedPair) -> None:
    """Step 6: unprepare removes the CDI specs, the metadata, the agent's conditions (the
    operator's stay) and the checkpoint entries; unpreparing again is fine and touches
    nothing."""
    admin, namespace, single, pair, node = (story.cluster.admin, story.namespace, story.single,
                                            story.pair, story.node)
    assert await story.agent.unprepare(ref(single), ref(pair)) == {
        single["metadata"]["uid"]: "", pair["metadata"]["uid"]: ""}
    assert list(node.cdi_dir.iterdir()) == []
    assert list((node.data_dir / "dra-device-metadata").iterdir()) == []
    after = await read_claim(admin, namespace, "single")
    assert without_times(after["status"]["devices"]) == [
        {"driver": DRIVER, "pool": NODE, "device": "gpu-0", "conditions": [{
            "type": "Ready", "status": "True", "reason": "Published", "message": ""}]}]
    assert "devices" not in (await read_claim(admin, namespace, "pair"))["status"]
    checkpoint = json.loads((node.data_dir / CHECKPOINT_FILE).read_text())
    assert checkpoint["data"]["claims"] == {}
    assert node.metric("kubedra_plugin_prepared_claims") == 0
    assert await story.agent.unprepare(ref(single)) == {single["metadata"]["uid"]: ""}
    assert node.metric("kubedra_plugin_claims_total", operation="unprepare", result="done") == 2
    assert node.metric("kubedra_plugin_claims_total", operation="unprepare",
                       result="cached") == 1


async def test_unprepare_after_agent_restart(cluster: Cluster, agent: Agent, node: PluginNode,
                                             namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("restart", selector=by_uuid("GPU-3"))]))["restart"]
    uid = claim["metadata"]["uid"]
    await agent.start()
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    old = agent.plugin
    assert old is not None
    await agent.stop()
    assert not old.registration_socket.exists()
    assert not old.dra_socket.exists()
    assert spec_file(node, uid).exists()

    await agent.start()
    answer = await agent.prepare(ref(claim))
    assert response_devices(answer[uid]) == [(["gpu"], NODE, "gpu-3", cdi_ids(uid, "gpu-3"))]
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="cached") == 1
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert not spec_file(node, uid).exists()
    assert "devices" not in (await read_claim(cluster.admin, namespace, "restart"))["status"]


async def test_prepare_after_reboot_recreates_the_spec(cluster: Cluster, agent: Agent,
                                                       node: PluginNode, namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("reboot", selector=by_uuid("GPU-4"))]))["reboot"]
    uid = claim["metadata"]["uid"]
    await agent.start()
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    await agent.stop()
    node.reboot("boot-2")
    assert not spec_file(node, uid).exists()

    await agent.start()
    answer = await agent.prepare(ref(claim))
    assert answer[uid].error == ""
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="done") == 1
    assert json.loads(spec_file(node, uid).read_text()) == expected_spec(node, claim, "gpu")
    checkpoint = json.loads((node.data_dir / CHECKPOINT_FILE).read_text())
    assert checkpoint["data"]["claims"][uid]["bootID"] == "boot-2"
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert not spec_file(node, uid).exists()


async def test_a_deleted_cdi_spec_of_a_prepared_claim_is_written_again(
        cluster: Cluster, agent: Agent, node: PluginNode, namespace: str) -> None:
    """Issue 16, item 9: a CDI spec deleted while its claim stays prepared (same boot, no new
    prepare call) is written again, the same, by the check the agent runs at start and every
    ``cdi_check_interval``; also after an agent restart. A claim unprepared since is left
    alone."""
    claims = await create_claims(cluster.admin, namespace, [
        claim_body("kept", selector=by_uuid("GPU-6")),
        claim_body("dropped", selector=by_uuid("GPU-7"))])
    kept, dropped = claims["kept"], claims["dropped"]
    plugin = await agent.start()
    answer = await agent.prepare(ref(kept), ref(dropped))
    assert [a.error for a in answer.values()] == ["", ""]
    path = spec_file(node, kept["metadata"]["uid"])
    written = path.read_text()
    assert await plugin.preparer.restore_missing_files() == 0
    path.unlink()
    assert await plugin.preparer.restore_missing_files() == 1
    assert path.read_text() == written
    assert node.metric("kubedra_plugin_cdi_specs_restored_total", kind="claim",
                       result="done") == 1

    await agent.stop()
    path.unlink()
    plugin = await agent.start()
    assert await plugin.preparer.restore_missing_files() == 1
    assert json.loads(path.read_text()) == expected_spec(node, kept, "gpu")

    dropped_uid = dropped["metadata"]["uid"]
    assert await agent.unprepare(ref(dropped)) == {dropped_uid: ""}
    assert await plugin.preparer.restore_missing_files() == 0
    assert not spec_file(node, dropped_uid).exists()
    assert await agent.unprepare(ref(kept)) == {kept["metadata"]["uid"]: ""}


async def test_each_deleted_file_of_a_prepared_claim_is_written_again_on_its_own(
        cluster: Cluster, agent: Agent, node: PluginNode, namespace: str) -> None:
    """Issue 22, item 3: the device metadata CDI spec and the metadata file it mounts are
    rechecked too, each written again alone (the claim's CDI spec untouched), counted by kind;
    a claim without any file left gets all three back."""
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("healed", selector=by_uuid("GPU-8"))]))["healed"]
    uid = claim["metadata"]["uid"]
    plugin = await agent.start()
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    claim_spec = spec_file(node, uid)
    [metadata_spec] = [node.cdi_dir / n for n in metadata_spec_names(uid, "gpu")]
    metadata_file = (node.data_dir / "dra-device-metadata" / f"{namespace}_healed" / "gpu"
                     / "metadata.json")
    written = {p: p.read_text() for p in (claim_spec, metadata_spec, metadata_file)}
    claim_inode = claim_spec.stat().st_ino

    metadata_spec.unlink()
    assert await plugin.preparer.restore_missing_files() == 1
    assert metadata_spec.read_text() == written[metadata_spec]
    assert claim_spec.stat().st_ino == claim_inode
    metadata_file.unlink()
    assert await plugin.preparer.restore_missing_files() == 1
    assert metadata_file.read_text() == written[metadata_file]
    assert claim_spec.stat().st_ino == claim_inode
    for path in written:
        path.unlink()
    assert await plugin.preparer.restore_missing_files() == 3
    assert {p: p.read_text() for p in written} == written
    assert await plugin.preparer.restore_missing_files() == 0
    assert [node.metric("kubedra_plugin_cdi_specs_restored_total", kind=kind, result="done")
            for kind in ("claim", "metadata", "metadata-file")] == [1, 2, 2]
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert not any(p.exists() for p in written)


async def test_corrupt_checkpoint_is_reported_and_rebuilt(cluster: Cluster, agent: Agent,
                                                          node: PluginNode,
                                                          namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("corrupt", selector=by_uuid("GPU-5"))]))["corrupt"]
    uid = claim["metadata"]["uid"]
    await agent.start()
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    await agent.stop()
    checkpoint = node.data_dir / CHECKPOINT_FILE
    checkpoint.write_text(checkpoint.read_text()[:-30])

    plugin = await agent.start()
    problem = plugin.health.checkpoint_problem
    assert problem is not None
    assert problem.startswith(f"{checkpoint}: not a kubedra checkpoint: ")
    assert node.metric("kubedra_plugin_checkpoint_errors_total") == 1
    assert list(plugin.preparer.prepared_claims()) == [uid]
    # the rebuilt record makes a repeated prepare redo the work (status unknown), then unprepare
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="done") == 1
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert not spec_file(node, uid).exists()
    assert "devices" not in (await read_claim(cluster.admin, namespace, "corrupt"))["status"]


GOOD_CONFIG = {"apiVersion": "gpu.kubedra.io/v1alpha1", "kind": "GpuConfig",
               "driverCapabilities": ["compute", "utility"], "env": {"TRAINING_MODE": "fast"}}
GOOD_CONFIG_ENV = ["NVIDIA_DRIVER_CAPABILITIES=compute,utility", "TRAINING_MODE=fast"]


async def test_bad_claims_fail_alone(cluster: Cluster, agent: Agent, node: PluginNode,
                                     namespace: str, tmp_path: Path) -> None:
    await kubectl_create(cluster, namespace, claim_body(
        "good", selector=by_uuid("GPU-11"), config=GOOD_CONFIG), tmp_path)
    claims = await create_claims(cluster.admin, namespace, [
        claim_body("foreign", "dev", cls=OTHER_CLASS),
        claim_body("missing", selector=by_uuid("GPU-99")),
        claim_body("badconfig", selector=by_uuid("GPU-10"), config={
            "apiVersion": "gpu.kubedra.io/v1alpha1", "kind": "GpuConfig",
            "driverCapabilities": ["compute", "warp"]}),
    ], existing=("good",))
    unallocated = (await create_claims(cluster.admin, namespace, [
        claim_body("idle", selector=by_uuid("GPU-8"))], pod=None))["idle"]
    await agent.start()
    good = claims["good"]
    gone = Claim(namespace, "no-such-claim", "0000-gone")
    replaced = Claim(namespace, "good", "1111-old-uid")
    answer = await agent.prepare(*(ref(c) for c in claims.values()), ref(unallocated), gone,
                                 replaced)
    uid = {name: c["metadata"]["uid"] for name, c in claims.items()}
    assert {k: v.error for k, v in answer.items()} == {
        uid["good"]: "",
        uid["foreign"]: f"claim {namespace}/foreign has no device of driver {DRIVER} "
                        f"(allocated: {OTHER_DRIVER}/{NODE}/dev-0)",
        uid["missing"]: f"device {NODE}/gpu-99 (request gpu) of claim {namespace}/missing does "
                        "not exist on this node (18 devices: gpu-0, gpu-1, gpu-10, gpu-11, "
                        "gpu-12, gpu-13, gpu-14, gpu-15, ...)",
        uid["badconfig"]: f"claim {namespace}/badconfig: config[0] (FromClaim) for {DRIVER} is "
                          "invalid: GpuConfig.driverCapabilities.1: Input should be 'compute', "
                          "'utility', 'graphics', 'video', 'display' or 'compat32'",
        unallocated["metadata"]["uid"]: f"claim {namespace}/idle is not allocated",
        "0000-gone": f"claim {namespace}/no-such-claim does not exist",
        "1111-old-uid": f"claim {namespace}/good has UID {uid['good']}, not 1111-old-uid: it "
                        "was deleted and created again",
    }
    assert json.loads(spec_file(node, uid["good"]).read_text()) == expected_spec(
        node, good, "gpu", GOOD_CONFIG_ENV)
    assert sorted(p.name for p in node.cdi_dir.iterdir()) == sorted([
        spec_file(node, uid["good"]).name, *metadata_spec_names(uid["good"], "gpu")])
    now = await read_claim(cluster.admin, namespace, "good")
    assert without_times(now["status"]["devices"]) == [prepared_entry(good, "gpu-11")]
    for reason, count in (("NoDeviceOfDriver", 1), ("UnknownDevice", 1), ("InvalidConfig", 1),
                          ("NotAllocated", 1), ("NotFound", 1), ("Replaced", 1)):
        assert node.metric("kubedra_plugin_claim_errors_total", operation="prepare",
                           reason=reason) == count


async def test_unhealthy_device_is_refused(cluster: Cluster, agent: Agent, node: PluginNode,
                                           namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("sick", selector=by_uuid("GPU-9"))]))["sick"]
    node.devices["gpu-9"] = gpu(9).model_copy(update={
        "health": "Unhealthy", "health_message": "XID 79: GPU has fallen off the bus"})
    await agent.start()
    answer = await agent.prepare(ref(claim))
    assert answer[claim["metadata"]["uid"]].error == (
        f"device {NODE}/gpu-9 (request gpu) of claim {namespace}/sick is Unhealthy: "
        "XID 79: GPU has fallen off the bus")
    assert not node.cdi_dir.exists()


async def test_missing_device_node_fails_the_claim(cluster: Cluster, agent: Agent,
                                                   node: PluginNode, namespace: str) -> None:
    """gpu-16's node /dev/nvidia16 is not on the host: prepare fails naming it, instead of
    succeeding and leaving the runtime to refuse the container."""
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("nodeless", selector=by_uuid("GPU-16"))]))["nodeless"]
    uid = claim["metadata"]["uid"]
    await agent.start()
    assert (await agent.prepare(ref(claim)))[uid].error == (
        f"claim {namespace}/nodeless: device node {node.device_root}/dev/nvidia16 does not "
        "exist on this host (the container runtime would refuse the container)")
    assert node.metric("kubedra_plugin_claim_errors_total", operation="prepare",
                       reason="DeviceNodeMissing") == 1
    assert not spec_file(node, uid).exists()
    assert "devices" not in (await read_claim(cluster.admin, namespace, "nodeless"))["status"]

    stand_in_devices(node.device_root, ["/dev/nvidia16"])
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    assert json.loads(spec_file(node, uid).read_text()) == expected_spec(node, claim, "gpu")
    assert await agent.unprepare(ref(claim)) == {uid: ""}


async def test_device_still_prepared_for_a_deleted_claim_is_refused(
        cluster: Cluster, agent: Agent, node: PluginNode, namespace: str) -> None:
    """The scheduler hands gpu-17 to a new claim as soon as the old claim is gone, before the
    kubelet unprepared the old one (a force-deleted pod): the node refuses double use."""
    old = (await create_claims(cluster.admin, namespace, [
        claim_body("old", selector=by_uuid("GPU-17"))], pod="old-pod"))["old"]
    await agent.start()
    assert (await agent.prepare(ref(old)))[old["metadata"]["uid"]].error == ""
    core, resource = client.CoreV1Api(cluster.admin), client.ResourceV1Api(cluster.admin)
    await core.delete_namespaced_pod("old-pod", namespace, grace_period_seconds=0)
    await resource.delete_namespaced_resource_claim("old", namespace)

    async def old_gone() -> bool:
        return "old" not in {c.metadata.name for c in (
            await resource.list_namespaced_resource_claim(namespace)).items}
    await eventually(old_gone, timeout=60, what="claim old deleted")
    new = (await create_claims(cluster.admin, namespace, [
        claim_body("new", selector=by_uuid("GPU-17"))], pod="new-pod"))["new"]
    uid = new["metadata"]["uid"]
    assert devices_of(new) == ["gpu-17"]
    assert (await agent.prepare(ref(new)))[uid].error == (
        f"device {NODE}/gpu-17 of claim {namespace}/new is still prepared for claim "
        f"{namespace}/old (UID {old['metadata']['uid']}); it is prepared once that claim is "
        "unprepared")
    assert node.metric("kubedra_plugin_claim_errors_total", operation="prepare",
                       reason="DeviceInUse") == 1
    assert not spec_file(node, uid).exists()

    assert await agent.unprepare(ref(old)) == {old["metadata"]["uid"]: ""}
    assert (await agent.prepare(ref(new)))[uid].error == ""
    assert json.loads(spec_file(node, uid).read_text()) == expected_spec(node, new, "gpu")
    assert await agent.unprepare(ref(new)) == {uid: ""}


async def test_concurrent_prepares_prepare_each_claim_once(cluster: Cluster, agent: Agent,
                                                           node: PluginNode,
                                                           namespace: str) -> None:
    names = [f"c{n}" for n in (6, 7, 8)]
    claims = await create_claims(cluster.admin, namespace, [
        claim_body(f"c{n}", selector=by_uuid(f"GPU-{n}")) for n in (6, 7, 8)])
    await agent.start()
    assert agent.kubelet is not None
    calls = [[names[i % 3], names[(i + 1) % 3]] for i in range(12)]
    answers = await asyncio.gather(*(agent.kubelet.prepare([ref(claims[n]) for n in call])
                                     for call in calls))
    for call, answer in zip(calls, answers, strict=True):
        for n in call:
            uid = claims[n]["metadata"]["uid"]
            assert answer.claims[uid].error == ""
            device = f"gpu-{n[1:]}"
            assert response_devices(answer.claims[uid]) == [
                (["gpu"], NODE, device, cdi_ids(uid, device))]
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="done") == 3
    assert node.metric("kubedra_plugin_claims_total", operation="prepare", result="cached") == 21
    assert len(list(node.cdi_dir.iterdir())) == 6  # a claim spec and a metadata spec each
    assert await agent.unprepare(*(ref(c) for c in claims.values())) == {
        c["metadata"]["uid"]: "" for c in claims.values()}


async def test_status_write_needs_a_token_bound_to_the_node(cluster: Cluster, agent: Agent,
                                                            node: PluginNode,
                                                            namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("nodeless", selector=by_uuid("GPU-12"))]))["nodeless"]
    uid = claim["metadata"]["uid"]
    unbound = await make_api_client(cluster.agent_kubeconfig_unbound)
    try:
        await agent.start(unbound)
        error = (await agent.prepare(ref(claim)))[uid].error
        assert error == (
            f"writing status.devices of claim {namespace}/nodeless: 422 Unprocessable Entity: "
            f'ResourceClaim.resource.k8s.io "nodeless" is invalid: status.devices: Forbidden: '
            'changing status.devices requires resource="resourceclaims/driver", '
            'verb="[arbitrary-node:patch]" permission: resourceclaims.resource.k8s.io '
            f'"{DRIVER}" is forbidden: User "system:serviceaccount:{AGENT_NAMESPACE}:{AGENT}" '
            'cannot arbitrary-node:patch resource "resourceclaims/driver" in API group '
            f'"resource.k8s.io" in the namespace "{namespace}"')
        assert node.metric("kubedra_plugin_claim_errors_total", operation="prepare",
                           reason="StatusWrite") == 1
        # nothing was written to the claim; unprepare cleans up the spec
        assert "devices" not in (await read_claim(cluster.admin, namespace, "nodeless"))["status"]
        assert await agent.unprepare(ref(claim)) == {uid: ""}
        assert not spec_file(node, uid).exists()
    finally:
        await agent.stop()
        await unbound.close()


async def test_claim_with_non_canonical_config_json_is_prepared_without_status(
        cluster: Cluster, agent: Agent, node: PluginNode, namespace: str) -> None:
    """Python clients send JSON with whitespace; the API server then refuses every JSON write
    to the claim's status (see ``_refuses_any_json_write`` in kubedra.node.prepare). The claim
    is still prepared, without the Prepared condition, and unprepares cleanly."""
    claim = (await create_claims(cluster.admin, namespace, [
        claim_body("pyconfig", selector=by_uuid("GPU-13"), config=GOOD_CONFIG)]))["pyconfig"]
    uid = claim["metadata"]["uid"]
    await agent.start()
    answer = await agent.prepare(ref(claim))
    assert answer[uid].error == ""
    assert json.loads(spec_file(node, uid).read_text()) == expected_spec(
        node, claim, "gpu", GOOD_CONFIG_ENV)
    assert "devices" not in (await read_claim(cluster.admin, namespace, "pyconfig"))["status"]
    assert node.metric("kubedra_plugin_status_writes_skipped_total") == 1
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert not spec_file(node, uid).exists()


async def test_mig_placement_is_created_at_prepare_and_destroyed_at_unprepare(
        cluster: Cluster, agent: Agent, node: PluginNode, namespace: str) -> None:
    claim = (await create_claims(cluster.admin, namespace, [claim_body(
        "slice", selector=f'device.attributes["{DRIVER}"].type == "mig"')]))["slice"]
    uid = claim["metadata"]["uid"]
    assert devices_of(claim) == [MIG_DEVICE.name]
    node.devices[MIG_DEVICE.name] = MIG_DEVICE
    mig = FakeMigPartitioner()
    await agent.start(mig=mig)
    answer = await agent.prepare(ref(claim))
    assert response_devices(answer[uid]) == [
        (["gpu"], NODE, MIG_DEVICE.name, cdi_ids(uid, MIG_DEVICE.name))]
    instance = mig.live["MIG-fake-1"]
    assert (instance.placement.parent_uuid, instance.placement.parent_minor,
            instance.placement.profile_id, instance.placement.start,
            instance.placement.size) == ("GPU-0", 0, 19, 0, 1)
    document = json.loads(spec_file(node, uid).read_text())
    assert schema_errors(document) == []
    assert document["devices"][0]["containerEdits"] == {
        "env": ["NVIDIA_VISIBLE_DEVICES=MIG-fake-1"],
        "deviceNodes": device_nodes(node, "/dev/nvidia0", *CONTROL_NODES,
                                    "/dev/nvidia-caps/nvidia-cap102",
                                    "/dev/nvidia-caps/nvidia-cap103")}

    # after a restart, unprepare still knows which instance to destroy
    await agent.stop()
    await agent.start(mig=mig)
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert mig.live == {}

    # after a reboot the instance is gone; a repeated prepare creates a new one
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    await agent.stop()
    node.reboot("boot-2")
    mig.live.clear()
    await agent.start(mig=mig)
    assert (await agent.prepare(ref(claim)))[uid].error == ""
    assert list(mig.live) == ["MIG-fake-3"]
    assert json.loads(spec_file(node, uid).read_text())["devices"][0]["containerEdits"][
        "env"] == ["NVIDIA_VISIBLE_DEVICES=MIG-fake-3"]
    assert await agent.unprepare(ref(claim)) == {uid: ""}
    assert mig.live == {}


async def test_rolling_update_instances_share_the_checkpoint(
        cluster: Cluster, node: PluginNode, namespace: str) -> None:
    claims = await create_claims(cluster.admin, namespace, [
        claim_body("r1", selector=by_uuid("GPU-14")), claim_body("r2", selector=by_uuid("GPU-15"))])
    old, new = (node.plugin(cluster.agent, pod_uid=uid) for uid in (
        "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"))
    kubelets = [FakeKubelet(node.registry_dir), FakeKubelet(node.registry_dir)]
    try:
        for plugin, kubelet in zip((old, new), kubelets, strict=True):
            await plugin.start()
            info = await kubelet.register(socket=plugin.registration_socket)
            assert info.endpoint == str(plugin.dra_socket)
        assert old.dra_socket != new.dra_socket
        r1, r2 = ref(claims["r1"]), ref(claims["r2"])
        assert (await kubelets[0].prepare([r1])).claims[r1.uid].error == ""
        assert (await kubelets[1].prepare([r2])).claims[r2.uid].error == ""
        saved = json.loads((node.data_dir / CHECKPOINT_FILE).read_text())
        assert sorted(saved["data"]["claims"]) == sorted([r1.uid, r2.uid])
        # each instance unprepares the claim the other one prepared
        assert (await kubelets[1].unprepare([r1])).claims[r1.uid].error == ""
        assert (await kubelets[0].unprepare([r2])).claims[r2.uid].error == ""
        assert list(node.cdi_dir.iterdir()) == []
        saved = json.loads((node.data_dir / CHECKPOINT_FILE).read_text())
        assert saved["data"]["claims"] == {}
    finally:
        for kubelet in kubelets:
            await kubelet.close()
        await old.stop()
        await new.stop()
