"""Explain reading a live v1.37.2 cluster through kubectl: the claim found through the
kubeconfig's context, and the errors a user meets (no kubectl, no access, no such claim)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness import KWOK_NODE_LABEL, ControlPlane
from e2e.harness.wait import eventually
from e2e.kube_objects import condition
from kubedra.api.resource import ResourceSlice
from kubedra.explain import sources
from kubedra.explain.command import explain_command
from kubedra.explain.kubectl import Kubectl
from kubedra.explain.sources import ClusterReading, read_cluster

pytestmark = pytest.mark.cluster

CLAIM = {"metadata": {"name": "one-gpu"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "no-such-class.kubedra.io"}}]}}}


@pytest.fixture(autouse=True)
def kubectl_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl (from the test extras) on ``PATH``, as for ``kubectl dra``."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}")


def explain(kubeconfig: Path, *args: str) -> Result:
    return CliRunner().invoke(explain_command, ["resourceclaim", *args,
                                                "--kubeconfig", str(kubeconfig)])


async def test_a_claim_in_the_contexts_namespace_is_explained(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str,
        tmp_path: Path) -> None:
    await client.ResourceV1Api(admin_api).create_namespaced_resource_claim(namespace, CLAIM)
    config = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    in_namespace = tmp_path / "in-namespace.kubeconfig"
    in_namespace.write_text(yaml.safe_dump(config))

    result = explain(in_namespace, "one-gpu")

    assert result.exit_code == 0, result.output
    # the verdict and what follows depend on what other tests of the session left
    assert result.output.startswith(f"ResourceClaim:  {namespace}/one-gpu\n"
                                    "Pods:           none\n"
                                    "Verdict:        ")


async def test_a_cel_runtime_error_is_kube_schedulers_error_and_explains(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    """A selector that fails at run time on a device: kube-scheduler reports an error for the
    pod (reason ``SchedulerError``), not unschedulable, and explain's verdict is ``Error``
    with the scheduler's own words."""
    node, driver = f"{namespace}-node", f"{namespace}.example.com"
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    await core.create_node({"metadata": {"name": node, "labels": {
        KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": node}}})
    await resource.create_resource_slice({"metadata": {"name": node}, "spec": {
        "driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "dev-0", "attributes": {"index": {"int": 0}}}]}})
    await resource.create_device_class({"metadata": {"name": driver}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    try:
        await resource.create_namespaced_resource_claim(namespace, {
            "metadata": {"name": "rt"}, "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": driver, "selectors": [{"cel": {
                    "expression": f'device.attributes["{driver}"].nosuch == 1'}}]}}]}}})
        await core.create_namespaced_pod(namespace, {
            "metadata": {"name": "rt"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "resourceClaims": [{"name": "d", "resourceClaimName": "rt"}],
                     "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                     "resources": {"claims": [{"name": "d"}]}}]}})

        async def not_scheduled() -> dict[str, Any] | None:
            """The pod's condition once the scheduler's DRA plugin evaluated the selector (an
            attempt before its informers saw the slice finds no device: unschedulable)."""
            pod = admin_api.sanitize_for_serialization(
                await core.read_namespaced_pod("rt", namespace))
            found = condition(pod, "PodScheduled")
            return found if found and "CEL" in (found.get("message") or "") else None
        scheduled = await eventually(not_scheduled, timeout=60,
                                     what="PodScheduled of pod rt naming the CEL error")
        message = (f'running "DynamicResources" filter plugin: claim {namespace}/rt: selector #0 '
                   f"on device {driver}/{node}/dev-0: CEL runtime error: no such key: nosuch. "
                   "consider using CEL optional chaining (.? followed by orValue()) or guarding "
                   "the check with has() for optional fields")
        assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
            "False", "SchedulerError", message)

        result = explain(control_plane.admin_kubeconfig, "rt", "-n", namespace, "-o", "json",
                         "--node", node)
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert (data["verdict"], data["message"]) == (
            "Error", f"kube-scheduler reports an error, not unschedulable, on node {node}: "
                     f"{message}")
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_namespaced_pod("rt", namespace, grace_period_seconds=0)
        await resource.delete_device_class(driver)
        await resource.delete_resource_slice(node)
        await core.delete_node(node)


async def test_a_missing_device_class_is_unschedulable_for_kube_scheduler_and_explain(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    """A claim naming a DeviceClass that does not exist: kube-scheduler's PreFilter finds it
    before any node and reports the pod unschedulable (reason ``Unschedulable``), not an error
    (a cluster without nodes says only "no nodes available to schedule pods");
    explain says so too (it said ``Error``, from its allocator's "could not retrieve device
    class")."""
    core, resource = client.CoreV1Api(admin_api), client.ResourceV1Api(admin_api)
    missing, node = f"{namespace}-missing.kubedra.io", f"{namespace}-node"
    await core.create_node({"metadata": {"name": node, "labels": {  # with no node, the
        KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": node}}})  # PreFilter
    await resource.create_namespaced_resource_claim(namespace, {
        "metadata": {"name": "no-class"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": missing}}]}}})
    await core.create_namespaced_pod(namespace, {
        "metadata": {"name": "no-class"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                 "resourceClaims": [{"name": "d", "resourceClaimName": "no-class"}],
                 "containers": [{"name": "main", "image": "registry.invalid/app:1",
                                 "resources": {"claims": [{"name": "d"}]}}]}})
    try:
        async def not_scheduled() -> dict[str, Any] | None:
            pod = admin_api.sanitize_for_serialization(
                await core.read_namespaced_pod("no-class", namespace))
            return condition(pod, "PodScheduled")
        scheduled = await eventually(not_scheduled, timeout=60,
                                     what="PodScheduled of pod no-class")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable"), scheduled
        assert f"request r: device class {missing} does not exist" in scheduled["message"]

        result = explain(control_plane.admin_kubeconfig, "no-class", "-n", namespace, "-o",
                         "json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert (data["verdict"], data["message"]) == (
            "Unschedulable", f"cannot be allocated: request r: device class {missing} does not "
                             "exist (kube-scheduler checks it before any node; the pod waits "
                             "until the DeviceClass is created)")
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_namespaced_pod("no-class", namespace, grace_period_seconds=0)
        await core.delete_node(node)


async def test_nodes_are_listed_as_their_metadata_only(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    """Explain reads a Node's name and labels only, so the API server sends nothing else: each
    Node comes as ``PartialObjectMetadata`` (no spec, no status), with the labels the Node
    has (a pod's node selector is judged by them)."""
    node = f"{namespace}-meta"
    core = client.CoreV1Api(admin_api)
    await core.create_node({"metadata": {"name": node, "labels": {"explain-test": namespace}},
                            "spec": {"podCIDR": "10.9.0.0/24"}})
    try:
        with Kubectl(control_plane.admin_kubeconfig).proxy() as proxy:
            objects = read_cluster(proxy, namespace, with_pods=False)
        listed = {n.metadata.name: n.metadata.labels or {} for n in (await core.list_node()).items}
        assert {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                for n in objects.nodes} == listed
        mine = next(n for n in objects.nodes if n["metadata"]["name"] == node)
        assert (mine["kind"], sorted(mine)) == ("PartialObjectMetadata",
                                                ["apiVersion", "kind", "metadata"])
        assert mine["metadata"]["labels"] == {"explain-test": namespace}
    finally:
        await core.delete_node(node)


async def test_slices_are_read_page_by_page_and_parsed_as_they_come(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ResourceSlices come a page at a time (two slices a page here, each page asked for
    with the last one's ``continue`` token): every slice once, in the API server's order, as
    one list gives them, and parsed as they come into the models a dump's slices become."""
    resource = client.ResourceV1Api(admin_api)
    driver = f"{namespace}.example.com"
    names = [f"{namespace}-page-{i}" for i in range(5)]
    for name in names:
        await resource.create_resource_slice({"metadata": {"name": name}, "spec": {
            "driver": driver, "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "dev-0", "attributes": {"index": {"int": 0}},
                         "capacity": {"memory": {"value": "1Gi"}}}]}})
    monkeypatch.setattr(sources, "SLICE_PAGE", 2)
    try:
        with Kubectl(control_plane.admin_kubeconfig).proxy() as proxy:
            reading = ClusterReading(proxy, namespace, with_pods=False)
            pages = [[s["metadata"]["name"] for s in page] for page in reading.slice_pages()]
            objects = reading.objects()
            parsed = ClusterReading(proxy, namespace, with_pods=False).objects(parse_slices=True)
            (whole,) = proxy.get(["/apis/resource.k8s.io/v1/resourceslices"])
        in_order = [s["metadata"]["name"] for s in whole["items"]]
        assert ([len(p) for p in pages][:-1], [n for p in pages for n in p]) == (
            [2] * (len(pages) - 1), in_order)
        assert set(names) <= set(in_order)
        assert (objects.slices, objects.parsed_slices) == (whole["items"], None)
        assert (parsed.slices, parsed.parsed_slices) == (
            whole["items"], [ResourceSlice.from_api(s) for s in whole["items"]])
    finally:
        for name in names:
            await resource.delete_resource_slice(name)


def test_a_missing_claim_is_not_found(control_plane: ControlPlane, namespace: str) -> None:
    result = explain(control_plane.admin_kubeconfig, "nope", "-n", namespace)
    assert (result.exit_code, result.output) == (
        1, f'Error: resourceclaim "nope" in namespace "{namespace}" not found\n')


async def test_no_access_names_what_explain_needs(
        control_plane: ControlPlane, admin_api: ApiClient, namespace: str) -> None:
    await client.CoreV1Api(admin_api).create_namespaced_service_account(
        namespace, {"metadata": {"name": "nobody"}})
    nobody = control_plane.kubeconfig_for_service_account(namespace, "nobody")

    result = explain(nobody, "one-gpu", "-n", namespace)

    assert result.exit_code == 1
    assert result.output.startswith(
        f'Error: forbidden: resourceclaim "one-gpu" in namespace "{namespace}" (explain needs '
        "list on resourceslices, deviceclasses, devicetaintrules, resourceclaims, nodes and "
        "pods): Error from server (Forbidden): ")
    assert f'"system:serviceaccount:{namespace}:nobody" cannot list resource' in result.output


def test_without_kubectl_the_error_says_so(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = explain(tmp_path / "unused.kubeconfig", "one-gpu", "-n", "default")
    assert (result.exit_code, result.output) == (
        1, "Error: kubectl not found on PATH (reading a live cluster needs it; explain from a "
           "dump with --from does not)\n")


def test_an_unreachable_api_server_is_named(control_plane: ControlPlane,
                                            tmp_path: Path) -> None:
    config = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(yaml.safe_dump(config))

    result = explain(unreachable, "one-gpu", "-n", "default")

    assert (result.exit_code, result.output) == (
        1, 'Error: resourceclaim "one-gpu" in namespace "default": cannot reach the API '
           "server: dial tcp 127.0.0.1:1: connect: connection refused\n")


def test_a_kubeconfig_kubectl_cannot_load_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.kubeconfig"
    result = explain(missing, "one-gpu", "-n", "default")
    assert (result.exit_code, result.output) == (
        1, f'Error: resourceclaim "one-gpu" in namespace "default": error: stat {missing}: '
           "no such file or directory\n")


def test_the_proxy_ends_and_its_socket_goes(control_plane: ControlPlane) -> None:
    proxy = Kubectl(control_plane.admin_kubeconfig).proxy()
    with proxy:
        [nodes, missing] = proxy.get(["/api/v1/nodes", "/apis/example.com/v1/nothing"])
        directory = Path(proxy._directory)
        assert (nodes["kind"], missing, [p.name for p in directory.iterdir()]) == (
            "NodeList", None, ["api.sock"])
    assert (proxy._process.returncode is not None, directory.exists()) == (True, False)


def test_the_proxy_ends_when_its_process_is_killed(control_plane: ControlPlane) -> None:
    code = ("import os, sys, time\nfrom pathlib import Path\n"
            "from kubedra.explain.kubectl import Kubectl\n"
            "proxy = Kubectl(Path(sys.argv[1])).proxy()\n"
            "proxy.get(['/api/v1/nodes'])\n"
            "print(proxy._process.pid, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(control_plane.admin_kubeconfig)],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    parent.kill()  # SIGKILL: no cleanup runs in the parent
    parent.wait()
    try:
        deadline = time.monotonic() + 30
        while _state(pid) not in ("Z", "gone") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(pid) in ("Z", "gone")  # a zombie until init reaps it
    finally:
        if _state(pid) not in ("Z", "gone"):
            os.kill(pid, signal.SIGTERM)


def _state(pid: int) -> str:
    """The state letter of process ``pid`` (``/proc/PID/stat``), or ``gone``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
