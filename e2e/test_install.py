"""kubedra installed for real: the image built from the Dockerfile, ``kubectl apply -k`` of
``manifests/`` (through the test overlay of :mod:`e2e.harness.install`), the operator's two
replicas and the agent's DaemonSet pod running on a real node, failover, uninstall.

This module runs a control plane of its own, with the workload controllers (deployment,
replicaset, daemonset) and one real node ``real-h200`` labelled ``kubedra.io/gpu=true``, and
no kwok node: every pod here is a real container. Tests run in file order and build on each
other (installed → used → failover → uninstalled).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness import ControlPlane
from e2e.harness.controlplane import free_port
from e2e.harness.install import (
    HEALTH_SOCKET,
    IMAGE,
    NEXT_TAG,
    build_image,
    import_image,
    write_overlay,
)
from e2e.harness.kubedra import kubectl
from e2e.harness.realnode import CGROUP_FS, RealNode, stand_in_devices
from e2e.harness.wait import eventually
from e2e.kube_objects import (
    create_claim_template,
    create_reporting_pod,
    pod_claim,
    read_inventory,
    running_report,
)
from e2e.test_real_node import H200_REPORT
from kubedra.controller.leadership import LEASE_NAME
from kubedra.kube import make_api_client
from kubedra.node.claimspec import spec_path
from kubedra.node.edits import NVIDIA_CONTROL_NODES
from kubedra.probe import get_health

# the first test's time includes the image build when it is not cached (minutes on a fresh
# machine: mmdebstrap, pip downloads)
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1800)]

NODE = "real-h200"
DRIVER = "gpu.kubedra.io"
INVENTORY = f"{NODE}-{DRIVER}"
NAMESPACE = "kubedra-system"
TIMEOUT = 240.0
"""Seconds for pods to start (the machine is shared and slow under load)."""


@dataclass
class Install:
    """The cluster of this module and kubedra installed on it."""

    plane: ControlPlane
    node: RealNode
    overlay: Path
    agent_port: int


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """Image built (cached), control plane with workload controllers and the real node, the
    image imported into its containerd, the overlay applied."""
    archive, next_archive = build_image()
    plane = ControlPlane(tmp_path_factory.mktemp("install-plane"), workloads=True)
    plane.start()
    try:
        node = plane.add_real_node(NODE, {"kubedra.io/gpu": "true"})
        stand_in_devices(node.device_root, ["/dev/nvidia0", *NVIDIA_CONTROL_NODES])
        import_image(node, archive)
        import_image(node, next_archive)
        port = free_port()
        overlay = write_overlay(plane.workdir / "overlay", plane, node, agent_port=port)
        kubectl(plane, "apply", "-k", str(overlay))
        yield Install(plane, node, overlay, port)
    finally:
        for node in plane.real_nodes:  # the pods' logs, kept with the plane's (no kubectl logs)
            if (node.root / "pod-logs").exists():
                shutil.copytree(node.root / "pod-logs", plane.logs / "pods", dirs_exist_ok=True)
        left = plane.stop()
        assert not left, f"left behind: {left}"


@pytest.fixture(scope="module")
async def api(install: Install) -> AsyncIterator[ApiClient]:
    """Admin client of this module's control plane."""
    admin = await make_api_client(install.plane.admin_kubeconfig)
    async with admin:
        yield admin


async def _pods(api: ApiClient, name: str) -> list[dict[str, Any]]:
    """The pods of app ``name`` in kubedra's namespace, but those being deleted."""
    listed = await client.CoreV1Api(api).list_namespaced_pod(
        NAMESPACE, label_selector=f"app.kubernetes.io/name={name}")
    return [api.sanitize_for_serialization(p) for p in listed.items
            if not p.metadata.deletion_timestamp]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


async def _lease_identity(api: ApiClient) -> str | None:
    """The leader-election Lease's holder: ``<pod name>_<uuid>``, one uuid per process."""
    try:
        lease = await client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, NAMESPACE)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return lease.spec.holder_identity or None


async def _lease_holder(api: ApiClient) -> str | None:
    """The pod whose operator holds the leader-election Lease."""
    identity = await _lease_identity(api)
    return identity.rsplit("_", 1)[0] if identity else None


async def _namespace(api: ApiClient, name: str) -> str:
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


async def test_image_runs_kubedra_as_uid_65532(install: Install, api: ApiClient) -> None:
    ns = await _namespace(api, "t-image")
    await client.CoreV1Api(api).create_namespaced_pod(ns, {
        "metadata": {"name": "version"},
        "spec": {"nodeName": NODE, "hostNetwork": True, "restartPolicy": "Never",
                 "automountServiceAccountToken": False,
                 "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                 "command": ["/bin/sh", "-c",
                                             "{ kubedra --version; id -u; id -g; } "
                                             "> /dev/termination-log"]}]}})

    async def done() -> dict[str, Any] | None:
        pod = await client.CoreV1Api(api).read_namespaced_pod("version", ns)
        for status in pod.status.container_statuses or []:
            if status.state.terminated is not None:
                return {"exit": status.state.terminated.exit_code,
                        "message": status.state.terminated.message}
        return None
    result = await eventually(done, timeout=TIMEOUT, what="kubedra --version in the image")
    assert result == {"exit": 0, "message": "kubedra, version 0.1.0\n65532\n65532\n"}


async def test_operator_and_agent_run_from_the_manifests(install: Install,
                                                         api: ApiClient) -> None:
    apps = client.AppsV1Api(api)

    async def available() -> bool:
        deployment = await apps.read_namespaced_deployment("kubedra-operator", NAMESPACE)
        agents = await apps.read_namespaced_daemon_set("kubedra-agent", NAMESPACE)
        return bool(deployment.status.available_replicas == 2
                    and agents.status.number_ready == 1)
    await eventually(available, timeout=TIMEOUT,
                     what="operator Deployment Available (2) and agent DaemonSet Ready (1)")
    [agent] = await _pods(api, "kubedra-agent")
    assert agent["spec"]["nodeName"] == NODE
    assert _ready(agent)
    # the readiness probe's endpoint, read here too: the agent serves and is registered (over
    # HTTPS with its self-signed certificate, which the kubelet's probe does not verify either)
    async with aiohttp.ClientSession() as http, http.get(
            f"https://127.0.0.1:{install.agent_port}/healthz", ssl=False) as response:
        health = json.loads(await response.read())
    assert (health["ok"], health["serving"], health["registered"]) == (True, True, True)
    operators = await _pods(api, "kubedra-operator")
    assert sorted(p["spec"]["securityContext"]["runAsUser"] for p in operators) == [65532] * 2
    # each replica is Ready through its own probe's endpoint, which says which one leads
    probe = ["kubedra", "probe", "--socket", HEALTH_SOCKET]
    for pod in operators:
        container = pod["spec"]["containers"][0]
        assert container["readinessProbe"]["exec"]["command"] == probe
        assert container["livenessProbe"]["exec"]["command"] == probe
        assert _ready(pod)

    async def roles() -> tuple[str, dict[str, tuple[bool, str]]] | None:
        # the Lease names a new leader a moment before its /healthz says so: read both until
        # they agree
        holder = await _lease_holder(api)
        said = {}
        for pod in operators:
            health = json.loads(_health_over_socket(install.node, pod["metadata"]["uid"]))
            said[pod["metadata"]["name"]] = (health["ok"], health["role"])
        leads = {name: (True, "leader" if name == holder else "standby") for name in said}
        return (str(holder), said) if holder and said == leads else None
    holder, _ = await eventually(roles, timeout=TIMEOUT,
                                 what="one replica leading, as the Lease and its /healthz say")
    assert holder in {p["metadata"]["name"] for p in operators}

    async def published() -> dict[str, Any] | None:
        status = (await read_inventory(api, INVENTORY) or {}).get("status") or {}
        return status if status.get("deviceCount") == 1 else None
    status = await eventually(published, timeout=TIMEOUT, what=f"{INVENTORY} published")
    assert status["pool"]["name"] == NODE


async def _run_gpu_pod(api: ApiClient, ns: str, name: str) -> None:
    """In a new namespace ``ns``, a pod ``name`` with a claim for the H200; returns when it
    runs, after checking what its container saw."""
    await _namespace(api, ns)
    await create_claim_template(api, ns, "h200")
    await create_reporting_pod(api, ns, name, NODE, template="h200")
    pod = await eventually(lambda: running_report(api, ns, name), timeout=TIMEOUT,
                           what=f"pod {name} running")
    assert pod["report"] == H200_REPORT


async def _delete_and_unprepare(install: Install, api: ApiClient, ns: str, name: str,
                                claim_uid: str) -> None:
    """Delete pod ``name`` and wait until its claim's CDI spec is gone from the node."""
    await client.CoreV1Api(api).delete_namespaced_pod(name, ns)

    async def unprepared() -> bool:
        return not spec_path(install.node.cdi_dir, DRIVER, claim_uid).exists()
    await eventually(unprepared, timeout=TIMEOUT, what=f"the claim of {name} unprepared")


async def test_a_claim_is_prepared_by_the_agent_pod(install: Install, api: ApiClient) -> None:
    ns = "t-claim"
    await _run_gpu_pod(api, ns, "trainer")
    claim = await pod_claim(api, ns, "trainer")
    assert claim is not None
    [device] = claim["status"]["devices"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in device["conditions"]}
    assert conditions == {"Ready": ("True", "Allocated"),
                          "Prepared": ("True", "DevicePrepared")}
    assert spec_path(install.node.cdi_dir, DRIVER, claim["metadata"]["uid"]).exists()
    await _delete_and_unprepare(install, api, ns, "trainer", claim["metadata"]["uid"])


def _health_over_socket(node: RealNode, pod_uid: str) -> str:
    """/healthz of operator pod ``pod_uid``, read on the node as its exec probe reads it:
    over the Unix socket in the pod's ``emptyDir`` (through a short link: a socket's path is
    at most 107 bytes)."""
    volume = (node.root / "pods" / pod_uid / "volumes" / "kubernetes.io~empty-dir" / "health")
    with tempfile.TemporaryDirectory(prefix="probe-") as short:
        link = Path(short) / "h"
        link.symlink_to(volume)
        status, body = get_health(str(link / Path(HEALTH_SOCKET).name))
    assert status == 200, body
    return body


def _projected_token(node: RealNode, pod_uid: str) -> str:
    """The ServiceAccount token the kubelet projected into pod ``pod_uid``."""
    [token] = (node.root / "pods" / pod_uid / "volumes" / "kubernetes.io~projected").glob(
        "kube-api-access-*/token")
    return token.read_text()


async def test_the_agent_pods_own_token_is_confined_to_its_node(install: Install,
                                                                api: ApiClient) -> None:
    [agent] = await _pods(api, "kubedra-agent")
    token = _projected_token(install.node, agent["metadata"]["uid"])
    configuration = client.Configuration(host=install.plane.server)
    configuration.api_key["BearerToken"] = f"Bearer {token}"
    configuration.ssl_ca_cert = str(install.plane.pki / "ca.crt")
    async with ApiClient(configuration) as as_agent:
        review = await client.AuthenticationV1Api(as_agent).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review.status.user_info.username == (
            "system:serviceaccount:kubedra-system:kubedra-agent")
        assert review.status.user_info.extra["authentication.kubernetes.io/node-name"] == [NODE]
        with pytest.raises(ApiException) as denied:
            await client.CustomObjectsApi(as_agent).create_cluster_custom_object(
                "kubedra.io", "v1alpha1", "deviceinventories", {
                    "apiVersion": "kubedra.io/v1alpha1", "kind": "DeviceInventory",
                    "metadata": {"name": f"other-{DRIVER}"},
                    "spec": {"driver": DRIVER, "nodeName": "other"}})
        assert denied.value.status == 403
        assert "may only write the DeviceInventory of the node its pod runs on" in (
            denied.value.body or "")
        with pytest.raises(ApiException) as denied:
            await client.CoordinationV1Api(as_agent).create_namespaced_lease(NAMESPACE, {
                "metadata": {"name": "kubedra-agent-other"},
                "spec": {"holderIdentity": "other", "leaseDurationSeconds": 40}})
        assert denied.value.status == 403
        assert "may only renew the Lease of the node its pod runs on" in (
            denied.value.body or "")
        own = await client.CoordinationV1Api(as_agent).read_namespaced_lease(
            f"kubedra-agent-{NODE}", NAMESPACE)
        assert own.spec.holder_identity == NODE


def _kill_pod(node: RealNode, pod_uid: str) -> None:
    """SIGKILL every process of pod ``pod_uid`` on ``node`` (a crash: nothing is released)."""
    top = CGROUP_FS / "freezer" / node.cgroup_root.lstrip("/")
    [cgroup] = top.rglob(f"pod{pod_uid}")
    pids = {int(pid) for procs in cgroup.rglob("cgroup.procs") for pid in procs.read_text().split()}
    assert pids, f"pod {pod_uid} has no processes"
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _failover(install: Install, api: ApiClient, stop_leader: Any) -> tuple[float, str]:
    """Stop the leader with ``stop_leader(pod)`` and, at the same moment, delete the published
    slice; returns the seconds until the slice is recreated (the new leader's first write) and
    the new leader's pod: the standby, or the Deployment's replacement replica (or the killed
    leader's restarted container) when it asks first (a free Lease goes to whichever candidate
    retries first)."""
    resource = client.ResourceV1Api(api)
    selector = f"kubedra.io/inventory={INVENTORY}"

    async def leader_and_standby() -> tuple[str, dict[str, Any], Any] | None:
        # right after a start no replica may hold the Lease yet (a released Lease names no
        # one), nor have published: wait for one of the two replicas to hold it, and the slice
        identity = await _lease_identity(api)
        leader = identity.rsplit("_", 1)[0] if identity else None
        pods = {p["metadata"]["name"]: p for p in await _pods(api, "kubedra-operator")}
        slices = (await resource.list_resource_slice(label_selector=selector)).items
        ready = leader in pods and len(pods) == 2 and len(slices) == 1
        return (str(identity), pods, slices[0]) if ready else None
    identity, pods, old_slice = await eventually(leader_and_standby, timeout=TIMEOUT,
                                                 what="a leader, a standby and the slice")
    started = time.monotonic()
    await stop_leader(pods[identity.rsplit("_", 1)[0]])
    await resource.delete_resource_slice(old_slice.metadata.name)

    async def recreated() -> bool:
        slices = (await resource.list_resource_slice(label_selector=selector)).items
        return any(s.metadata.uid != old_slice.metadata.uid for s in slices)
    await eventually(recreated, timeout=TIMEOUT, what="the slice recreated by the new leader")
    failover = time.monotonic() - started
    # another process leads: the standby, the Deployment's replacement replica, or, after a
    # SIGKILL, the leader's container restarted in place by the kubelet (same pod, new uuid:
    # it too waits for the Lease to run out)
    new_identity = await _lease_identity(api)
    assert new_identity is not None
    assert new_identity != identity
    return failover, new_identity.rsplit("_", 1)[0]


async def test_the_standby_takes_over_when_the_leader_pod_goes(
        install: Install, api: ApiClient) -> None:
    """Failover, twice: the leader pod deleted (graceful: it releases the Lease), then the new
    leader's processes killed (SIGKILL: its Lease must run out). Each time the published slice
    is deleted once the old leader has stopped (released the Lease, or been killed) and the
    standby recreates it; the times from the pod's deletion or the kill are printed
    (bench/RESULTS.md)."""
    async def delete(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        await client.CoreV1Api(api).delete_namespaced_pod(name, NAMESPACE)

        # graceful: the leader works on until the kubelet's SIGTERM reaches it, and may itself
        # recreate a slice deleted meanwhile; it stops its work before it releases the Lease
        async def released() -> bool:
            return await _lease_holder(api) != name
        await eventually(released, timeout=TIMEOUT, what=f"{name} to release the Lease")

    async def kill(pod: dict[str, Any]) -> None:
        _kill_pod(install.node, pod["metadata"]["uid"])

    deleted, _ = await _failover(install, api, delete)
    print(f"failover: leader pod deleted -> slice recreated by the new leader in {deleted:.1f} s")

    async def two_replicas() -> bool:
        return len([p for p in await _pods(api, "kubedra-operator") if _ready(p)]) == 2
    await eventually(two_replicas, timeout=TIMEOUT, what="the replacement replica running")
    killed, _ = await _failover(install, api, kill)
    print(f"failover: leader processes killed -> slice recreated by the new leader in "
          f"{killed:.1f} s")
    assert deleted < 15
    assert killed < 15 + 2 + 15  # Lease duration + a retry period + kopf's start


async def test_upgrade_rolls_the_agent_and_hands_the_lease_to_a_new_replica(
        install: Install, api: ApiClient) -> None:
    """The next image version applied: the DaemonSet surges a new agent pod next to the old
    one (per-pod socket names), a claim prepared during the update works, the old pod's
    sockets go; the Deployment's new replicas take the Lease from the old ones."""
    apps = client.AppsV1Api(api)
    [old_agent] = await _pods(api, "kubedra-agent")
    old_uid = old_agent["metadata"]["uid"]
    old_operators = {p["metadata"]["name"] for p in await _pods(api, "kubedra-operator")}
    plugins = install.node.root / "plugins" / DRIVER
    assert (plugins / f"dra-{old_uid}.sock").exists()
    # a port of its own for the new agent pod: both pods share the host's network namespace
    write_overlay(install.overlay, install.plane, install.node, tag=NEXT_TAG,
                  agent_port=free_port())
    kubectl(install.plane, "apply", "-k", str(install.overlay))
    await _run_gpu_pod(api, "t-upgrade", "during")  # prepared during the update

    old_logs = install.node.root / "pod-logs" / (
        f"{NAMESPACE}_{old_agent['metadata']['name']}_{old_uid}")

    async def rolled() -> list[dict[str, Any]] | None:
        if old_logs.exists():  # kept: the kubelet deletes them with the pod
            shutil.copytree(old_logs, install.plane.logs / "old-agent", dirs_exist_ok=True)
        agents = await _pods(api, "kubedra-agent")
        deployment = await apps.read_namespaced_deployment("kubedra-operator", NAMESPACE)
        operators = await _pods(api, "kubedra-operator")
        done = (len(agents) == 1 and agents[0]["metadata"]["uid"] != old_uid
                and _ready(agents[0]) and deployment.status.updated_replicas == 2
                and deployment.status.available_replicas == 2 and len(operators) == 2
                and not old_operators & {p["metadata"]["name"] for p in operators})
        return agents + operators if done else None
    pods: list[dict[str, Any]] = await eventually(rolled, timeout=TIMEOUT,
                                                  what="agent and operator rolled")
    next_image = f"{IMAGE.rsplit(':', 1)[0]}:{NEXT_TAG}"
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {next_image}
    new_uid = pods[0]["metadata"]["uid"]
    assert (plugins / f"dra-{new_uid}.sock").exists()
    assert not (plugins / f"dra-{old_uid}.sock").exists()
    # one registration socket left: the new pod's (the old pod removed its own)
    assert len(list((install.node.root / "plugins_registry").glob("*reg.sock"))) == 1
    new_operators = {p["metadata"]["name"] for p in pods[1:]}

    async def new_leader() -> bool:
        return await _lease_holder(api) in new_operators
    await eventually(new_leader, timeout=TIMEOUT, what="a new replica leading")
    # the claim prepared during the update is unprepared by the new agent
    claim = await pod_claim(api, "t-upgrade", "during")
    assert claim is not None
    await _delete_and_unprepare(install, api, "t-upgrade", "during", claim["metadata"]["uid"])


async def test_uninstall_with_a_claim_in_use_leaves_nothing_named_kubedra(
        install: Install, api: ApiClient) -> None:
    """One command, ``kubectl delete -k``, while a pod uses a claim: it returns, nothing named
    kubedra is left in the API, and the pod keeps running with its device (its CDI spec stays
    on the node: no agent is left to unprepare it). Installed again, the new agent unprepares
    the claim when the pod goes, and the next uninstall leaves nothing either."""
    ns = "t-inuse"
    await _run_gpu_pod(api, ns, "inuse")
    claim = await pod_claim(api, ns, "inuse")
    assert claim is not None
    cdi_spec = spec_path(install.node.cdi_dir, DRIVER, claim["metadata"]["uid"])
    before = _main_container(await running_report(api, ns, "inuse"))
    started = time.monotonic()
    kubectl(install.plane, "delete", "-k", str(install.overlay), "--wait=true",
            "--timeout=180s")
    print(f"uninstall with a claim in use: kubectl delete -k took "
          f"{time.monotonic() - started:.1f} s")
    await eventually(lambda: _nothing_named_kubedra(install), timeout=TIMEOUT,
                     what="nothing named kubedra in the API")
    pod = await running_report(api, ns, "inuse")
    assert _main_container(pod) == before  # the same container, still running, not restarted
    assert cdi_spec.exists()
    still = await pod_claim(api, ns, "inuse")
    assert still is not None
    assert still["status"]["allocation"] == claim["status"]["allocation"]

    kubectl(install.plane, "apply", "-k", str(install.overlay))

    async def agent_ready() -> bool:
        agents = await client.AppsV1Api(api).read_namespaced_daemon_set("kubedra-agent",
                                                                        NAMESPACE)
        return bool(agents.status.number_ready == 1)
    await eventually(agent_ready, timeout=TIMEOUT, what="the agent installed again")
    await _delete_and_unprepare(install, api, ns, "inuse", claim["metadata"]["uid"])
    kubectl(install.plane, "delete", "-k", str(install.overlay), "--wait=true",
            "--timeout=180s")
    await eventually(lambda: _nothing_named_kubedra(install), timeout=TIMEOUT,
                     what="nothing named kubedra in the API")


def _main_container(pod: dict[str, Any] | None) -> tuple[str, int, bool]:
    """(container ID, restart count, running) of a reporting pod's ``main`` container."""
    assert pod is not None
    [main] = [c for c in pod["status"]["containerStatuses"] if c["name"] == "main"]
    return main["containerID"], main["restartCount"], "running" in main["state"]


async def _nothing_named_kubedra(install: Install) -> bool:
    found = kubectl(install.plane, "get", _listable_kinds(install.plane), "-A",
                    "--ignore-not-found", "-o", "name")
    return not [line for line in found.splitlines() if "kubedra" in line]


def _listable_kinds(plane: ControlPlane) -> str:
    """Every resource type that can be listed, as ``kubectl get``'s comma-separated list."""
    kinds = kubectl(plane, "api-resources", "--verbs=list", "-o", "name").split()
    return ",".join(k for k in kinds if k not in {"events", "events.events.k8s.io"})
