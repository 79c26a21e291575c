"""Bad input, fuzzed against the real agent (issue 13, item 4): raw gRPC requests to the node
agent's DRA kubelet plugin socket, as a buggy or hostile kubelet could send them.

The agent runs as its own process (ServiceAccount, kwok node ``fuzz-plugin``, the H200 capture,
stand-in device nodes); the test plays the kubelet (tests/support/fake_kubelet.py). The claims
offered: ``held``, allocated ``gpu-0`` of this node by kube-scheduler; ``foreign``, allocated
a device of another driver (``pci.kubedra.io``); ``idle``, not allocated; and references
hypothesis makes up — unknown namespaces, names and UIDs (empty, long, odd characters),
``held``'s name with another UID — in requests of 0 to 8 claims, or 300 at once, through
NodePrepareResources or NodeUnprepareResources of API v1 or v1beta1; and garbage bytes, on the
socket and as a request body.

Every claim of a request gets an answer; only ``held`` (its own UID) is ever prepared, with
``gpu-0``; every other reference gets a per-claim error naming it from prepare; no CDI spec
of another claim is ever written; the agent never crashes and still prepares ``held`` at the
end. Bounded in ``make test`` (``KUBEDRA_FUZZ_PLUGIN``, default 15); counts in
``.cache/fuzz/plugin.json`` (tests/support/fuzz_report.py).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from e2e.fuzzing import INVENTORIES, fuzz
from e2e.harness.kubedra import Kubedra
from e2e.harness.realnode import stand_in_devices
from e2e.harness.wait import eventually
from e2e.kube_objects import condition, create_gpu_pod, pod_claim, read_inventory
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from tests.support.fake_kubelet import Claim, FakeKubelet
from tests.support.fuzz_report import fuzz_examples, write_fuzz_report

pytestmark = pytest.mark.cluster

EXAMPLES = fuzz_examples("KUBEDRA_FUZZ_PLUGIN", 15)
NODE = "fuzz-plugin"
DRIVER = "gpu.kubedra.io"
HUGE = 300
"""Claims in a huge request."""

odd_text = st.one_of(st.sampled_from(["", "default", "x" * 10000, "../../secrets", "a/b",
                                      "Ünïcode", "\x00"]),
                     st.text(max_size=40))


@dataclass
class Plugin:
    """The agent's socket and the claims the fuzzer offers."""

    kubelet: FakeKubelet
    namespace: str
    claims: dict[str, Claim]
    """``held``, ``foreign``, ``idle``."""


async def _allocated(api: ApiClient, namespace: str, pod: str) -> Claim:
    async def found() -> dict[str, Any] | None:
        claim = await pod_claim(api, namespace, pod)
        return claim if claim and claim["status"].get("allocation") else None
    claim = await eventually(found, timeout=60, what=f"the claim of {pod} allocated")
    meta = claim["metadata"]
    return Claim(meta["namespace"], meta["name"], meta["uid"])


@pytest.fixture
async def plugin(kubedra: Kubedra, admin_api: ApiClient, namespace: str
                 ) -> AsyncIterator[Plugin]:
    custom = client.CustomObjectsApi(admin_api)
    await custom.create_cluster_custom_object(*INVENTORIES, {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
        "metadata": {"name": "fuzz-plugin-pci"},
        "spec": {"driver": "pci.kubedra.io", "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]},
            "devices": [{"name": "dev-0"}]}})
    kubedra.add_node(NODE)
    root = kubedra.node_dir(NODE) / "host"
    stand_in_devices(root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
    kubedra.start_agent(NODE, device_root=root)

    async def published() -> bool:
        ready = condition(await read_inventory(admin_api, f"{NODE}-{DRIVER}"), "Ready") or {}
        return ready.get("status") == "True"
    await eventually(published, timeout=60, what=f"{NODE}'s inventory published")
    await create_gpu_pod(admin_api, namespace, "held", 'device.driver == "gpu.kubedra.io"',
                         node=NODE)
    await create_gpu_pod(admin_api, namespace, "foreign", "true", device_class="pci.kubedra.io",
                         node=NODE)
    claims = {"held": await _allocated(admin_api, namespace, "held"),
              "foreign": await _allocated(admin_api, namespace, "foreign")}
    idle = await client.ResourceV1Api(admin_api).create_namespaced_resource_claim(namespace, {
        "metadata": {"name": "idle"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.kubedra.io"}}]}}})
    claims["idle"] = Claim(namespace, "idle", idle.metadata.uid)
    kubelet = FakeKubelet(kubedra.node_dir(NODE) / "plugins_registry")
    await kubelet.register()
    try:
        yield Plugin(kubelet, namespace, claims)
    finally:
        await kubelet.close()
        kubedra.stop_agent(NODE)
        await custom.delete_cluster_custom_object(*INVENTORIES, "fuzz-plugin-pci")


def _references(claims: dict[str, Claim], namespace: str) -> st.SearchStrategy[Claim]:
    held = claims["held"]
    return st.one_of(
        st.sampled_from(list(claims.values())),
        st.builds(lambda uid: Claim(held.namespace, held.name, uid), odd_text),
        st.builds(Claim, st.one_of(st.just(namespace), odd_text), odd_text, odd_text))


def _requests(claims: dict[str, Claim], namespace: str) -> st.SearchStrategy[Any]:
    references = _references(claims, namespace)
    calls = st.tuples(st.sampled_from(["prepare", "unprepare"]), st.sampled_from(["v1",
                                                                                 "v1beta1"]))
    return st.one_of(
        st.tuples(calls, st.lists(references, max_size=8)),
        st.tuples(calls, st.builds(lambda uids: [Claim(namespace, f"huge-{i}", uid)
                                                 for i, uid in enumerate(uids)],
                                   st.just([f"huge-uid-{i}" for i in range(HUGE)]))),
        st.binary(max_size=2048))


async def _garbage(plugin: Plugin, data: bytes) -> str:
    """``data`` raw on the DRA socket, then as the body of a NodePrepareResources call."""
    path = plugin.kubelet.info.endpoint
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(10)
        await asyncio.to_thread(raw.connect, path)
        await asyncio.to_thread(raw.sendall, data)
    async with grpc.aio.insecure_channel(f"unix://{path}") as channel:
        call = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
                                   "NodePrepareResources")
        try:
            answer = await call(data, timeout=45)
        except grpc.aio.AioRpcError as err:
            code = err.code()
        else:
            assert isinstance(answer, bytes)
            return "garbage: parsed as a request"
    assert code != grpc.StatusCode.UNAVAILABLE, "the agent stopped serving"
    return f"garbage: refused ({code.name})"


async def _call(plugin: Plugin, operation: str, api: str, refs: list[Claim]) -> str:
    """One call; checks every claim got an answer and only ``held`` was prepared."""
    kubelet = FakeKubelet(plugin.kubelet.registry_dir, api=api)
    await kubelet.register()
    try:
        answer = await (kubelet.prepare(refs) if operation == "prepare"
                        else kubelet.unprepare(refs))
    finally:
        await kubelet.close()
    assert set(answer.claims) == {r.uid for r in refs}
    held = plugin.claims["held"]
    errors = 0
    for ref in refs:
        entry = answer.claims[ref.uid]
        if operation == "prepare" and ref.uid == held.uid:
            assert entry.error == ""
            assert [d.device_name for d in entry.devices] == ["gpu-0"]
        elif operation == "prepare":
            assert entry.error, ref
            assert list(entry.devices) == []
        errors += bool(entry.error)
    size = "huge" if len(refs) == HUGE else "empty" if not refs else "small"
    return f"{operation} {size}: " + ("per-claim errors" if errors else "all done")


async def test_fuzzed_plugin_requests_get_per_claim_answers_and_prepare_nothing_twice(
        kubedra: Kubedra, plugin: Plugin) -> None:
    cdi_dir = kubedra.node_dir(NODE) / "cdi"
    held = plugin.claims["held"]

    async def attempt(request: Any, index: int) -> str:
        if isinstance(request, bytes):
            outcome = await _garbage(plugin, request)
        else:
            (operation, api), refs = request
            outcome = await _call(plugin, operation, api, refs)
        specs = [p.name for p in cdi_dir.iterdir()] if cdi_dir.exists() else []
        assert all(held.uid in name for name in specs), specs
        return outcome

    outcomes = await fuzz(_requests(plugin.claims, plugin.namespace), EXAMPLES, attempt)
    agent = kubedra.agents[NODE]
    assert agent.process is not None
    assert agent.process.poll() is None, "the agent crashed"
    assert await _call(plugin, "prepare", "v1", [held]) == "prepare small: all done"
    assert await _call(plugin, "unprepare", "v1", [held]) == "unprepare small: all done"
    write_fuzz_report("plugin", outcomes)
