"""kubedra on the local control plane: install the manifests, run the operator and node agents.

The operator and the agents run as local processes (``python -m kubedra …``) under the
ServiceAccount tokens of ``kubedra-operator`` and ``kubedra-agent``, so exactly the RBAC rules
in ``manifests/`` apply — never cluster admin. Each agent's token is bound to a stand-in agent
pod on its node, as a DaemonSet pod's projected token is, so the API server knows the agent's
node. On a kwok node the stand-in is a fake pod; on a real node (:meth:`Kubedra.add_real_node`)
it is a real container that sleeps, and the agent serves the node's kubelet through the
kubelet's own plugin directories.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kubernetes_asyncio.client import ApiClient

from e2e.harness.controlplane import KWOK_NODE_LABEL, REPO_ROOT, Component, ControlPlane
from e2e.harness.images import TEST_IMAGE
from e2e.harness.realnode import RealNode
from e2e.harness.scrape import serving_cert_dir
from kubedra.api.crd import CRD_NAME
from kubedra.controller.leadership import ElectionTiming
from kubedra.kube import make_api_client

NAMESPACE = "kubedra-system"
H200_CAPTURE = REPO_ROOT / "hardware" / "nvidia-h200"
AGENT_POD_LABELS = {"app.kubernetes.io/name": "kubedra-agent"}
HEALTH_HOLD_DOWN = 10.0
"""Seconds a recovered device stays tainted in tests and the demo."""
DRAIN_GRACE = 5.0
"""Seconds a device leaving its pool stays published, tainted, in tests and the demo (the
shipped 30 s would only slow them: here kube-scheduler runs next to the API server)."""


class Cluster(Protocol):
    """A cluster the tools reach with an admin kubeconfig: the harness's :class:`ControlPlane`
    or an existing one (:class:`ExistingCluster`)."""

    @property
    def admin_kubeconfig(self) -> Path: ...


@dataclass(frozen=True)
class ExistingCluster:
    """A cluster the harness did not start (``KUBEDRA_KUBECONFIG``, the kind cluster of
    ``make kind-demo``), known by its admin kubeconfig."""

    admin_kubeconfig: Path


def kubectl(plane: Cluster, *args: str, stdin: str | None = None) -> str:
    """Run kubectl (from the virtual environment) as admin; returns stdout.

    The kubeconfig is passed as ``$KUBECONFIG`` and the virtual environment's ``bin`` leads
    ``$PATH``, so kubectl plugins installed there work too (``kubectl dra explain …``).

    Raises:
        subprocess.CalledProcessError: kubectl failed (its stderr is in the exception).
    """
    bin_dir = str(Path(sys.executable).parent)
    binary = shutil.which("kubectl", path=bin_dir) or "kubectl"
    env = {**os.environ, "KUBECONFIG": str(plane.admin_kubeconfig),
           "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    result = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True,
                            check=True, env=env)
    return result.stdout


def wait_established(plane: ControlPlane, timeout: float = 60.0) -> None:
    """Poll the DeviceInventory CRD until its ``Established`` condition is ``True`` (the API
    server serves its resource), for at most ``timeout`` seconds.

    Not ``kubectl wait --for=condition=Established``: kubectl 1.37.1 fails at once
    (".status.conditions accessor error: <nil> is of the type <nil>") when it reads a CRD
    before the API server has written any condition, which it did in 3 of 9 runs of
    apply-then-wait on a fresh control plane (/work/notes/taintcheck.md).

    Raises:
        ControlPlaneError: not established within ``timeout`` seconds, or a component exited.
    """
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"

    def established() -> bool:
        conditions = (plane.request("GET", path).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in conditions)
    plane.wait(time.monotonic() + timeout, f"CRD {CRD_NAME} Established", established)


class Kubedra:
    """kubedra installed on ``plane``; operator and agents are components of the plane."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.operator: Component | None = None
        self.operator_options: dict[str, Any] = {}
        self.agents: dict[str, Component] = {}

    def install(self) -> None:
        """``kubectl apply -k manifests/`` and wait for the CRD to be served
        (:func:`wait_established`)."""
        kubectl(self.plane, "apply", "-k", str(REPO_ROOT / "manifests"))
        wait_established(self.plane)

    def _env(self, *, metrics_secure: bool = True, **settings: str) -> dict[str, str]:
        """The environment of a kubedra process with ``settings`` (``KUBEDRA_<NAME>``); its
        metrics port serves HTTPS with the harness's certificate
        (:func:`e2e.harness.scrape.serving_cert_dir`) to authorized scrapers, or with
        ``metrics_secure=False`` plain HTTP to anyone."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEDRA_")}
        env.update({f"KUBEDRA_{k.upper()}": v for k, v in settings.items()})
        cert_dir = serving_cert_dir(self.plane) if metrics_secure else None
        env["KUBEDRA_METRICS_SECURE"] = str(metrics_secure).lower()
        if cert_dir is not None:
            env["KUBEDRA_METRICS_CERT_DIR"] = str(cert_dir)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "operator"), str(REPO_ROOT)])
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start_operator(self, *, lease_check_interval: float = 1.0,
                       explain_event_interval: float = 60.0,
                       health_hold_down: float = HEALTH_HOLD_DOWN,
                       drain_grace: float = DRAIN_GRACE,
                       attacher: str = "immediate", liveness_port: int = 0,
                       source: Path | None = None, leader_elect: bool = True,
                       election: ElectionTiming | None = None,
                       metrics_secure: bool = True,
                       feature_detection_interval: float | None = None,
                       pool_selector: str = "",
                       launcher: Sequence[str] = ("-m", "kubedra")) -> Component:
        """Start ``kubedra operator`` as the kubedra-operator ServiceAccount (with a
        ``health_hold_down`` of seconds, not the shipped five minutes, a ``drain_grace`` of
        seconds, and the ``attacher`` of devices with binding conditions); a non-zero
        ``liveness_port`` serves the operator's ``/healthz`` and ``/metrics`` there, over
        HTTPS to authorized scrapers (:mod:`e2e.harness.scrape`), or with
        ``metrics_secure=False`` plain HTTP to anyone. ``source``: another
        checkout's ``operator/`` directory to run instead of this one's (``bench/scale.py
        --baseline``); ``leader_elect=False`` runs it with ``--no-leader-elect``;
        ``election``: leader-election durations other than the shipped ones;
        ``feature_detection_interval``: seconds between two detections of what the cluster
        serves (None: the shipped 300);
        ``pool_selector``: the pools it owns (``KUBEDRA_POOL_SELECTOR``; its log is then
        ``kubedra-operator-<selector>.log``, so that operators of disjoint pools run side by
        side); ``launcher``: the interpreter's arguments that run the ``kubedra`` command
        (``bench.memtrace`` runs it traced; with ``source``, this checkout's root stays on
        the path after it, for such a launcher)."""
        self.operator_options = {"lease_check_interval": lease_check_interval,
                                 "explain_event_interval": explain_event_interval,
                                 "health_hold_down": health_hold_down,
                                 "drain_grace": drain_grace, "attacher": attacher,
                                 "liveness_port": liveness_port, "source": source,
                                 "leader_elect": leader_elect, "election": election,
                                 "metrics_secure": metrics_secure,
                                 "feature_detection_interval": feature_detection_interval,
                                 "pool_selector": pool_selector, "launcher": launcher}
        config = self.plane.kubeconfig_for_service_account(NAMESPACE, "kubedra-operator")
        env = self._env(metrics_secure=metrics_secure, namespace=NAMESPACE,
                        lease_check_interval=str(lease_check_interval),
                        explain_event_interval=str(explain_event_interval),
                        health_hold_down=str(health_hold_down),
                        drain_grace=str(drain_grace), attacher=attacher,
                        pool_selector=pool_selector)
        if feature_detection_interval is not None:
            env["KUBEDRA_FEATURE_DETECTION_INTERVAL"] = str(feature_detection_interval)
        if election is not None:
            env.update(KUBEDRA_LEADER_LEASE_DURATION=str(election.lease_duration),
                       KUBEDRA_LEADER_RENEW_DEADLINE=str(election.renew_deadline),
                       KUBEDRA_LEADER_RETRY_PERIOD=str(election.retry_period))
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(source), str(REPO_ROOT)])
        suffix = "".join(c if c.isalnum() else "-" for c in pool_selector)
        self.operator = self.plane.spawn(
            f"kubedra-operator-{suffix}" if suffix else "kubedra-operator",
            [sys.executable, *launcher, "operator", f"--kubeconfig={config}",
             f"--liveness-port={liveness_port}",
             *([] if leader_elect else ["--no-leader-elect"])], env=env)
        return self.operator

    def kill_operator(self) -> None:
        """SIGKILL the operator (a crash: nothing it holds in memory survives)."""
        if self.operator is not None:
            self.plane.kill_component(self.operator)
            self.operator = None

    def stop_operator(self) -> None:
        """Stop the operator cleanly (SIGTERM: it gives its Lease up, so the next one leads
        at once)."""
        if self.operator is not None:
            self.plane.stop_component(self.operator)
            self.operator = None

    def restart_operator(self) -> Component:
        """Start the operator again with the options it last started with."""
        return self.start_operator(**self.operator_options)

    def add_node(self, node: str, labels: dict[str, str] | None = None,
                 declared_features: list[str] | None = None) -> None:
        """Create kwok node ``node`` (kwok marks it Ready) and the agent's stand-in pod on it;
        ``declared_features``: its ``status.declaredFeatures``, as a kubelet declares them
        (KEP-5328)."""
        all_labels = {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": node,
                      **(labels or {})}
        self.plane.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": all_labels},
            **({"status": {"declaredFeatures": declared_features}} if declared_features
               else {})})
        self.create_agent_pod(f"kubedra-agent-{node}", node, {
            "containers": [{"name": "agent", "image": "ghcr.io/kubedra/kubedra:0.1.0"}]})

    def add_real_node(self, node: str, labels: dict[str, str] | None = None,
                      kubelet_config: dict[str, Any] | None = None) -> RealNode:
        """Start real node ``node`` (:meth:`ControlPlane.add_real_node`, with
        ``kubelet_config``) and the agent's stand-in pod on it (a real container that sleeps,
        on the host network); returns the node when the pod runs."""
        real = self.plane.add_real_node(node, labels, kubelet_config=kubelet_config)
        self.create_real_agent_pod(f"kubedra-agent-{node}", node)
        return real

    def real_node(self, node: str, labels: dict[str, str] | None = None) -> RealNode:
        """Real node ``node``: the one already running (test modules share it), else a new one
        from :meth:`add_real_node`."""
        running = next((n for n in self.plane.real_nodes if n.name == node), None)
        return running if running is not None else self.add_real_node(node, labels)

    def create_real_agent_pod(self, name: str, node: str) -> str:
        """Create a stand-in agent pod ``name`` on real node ``node`` (a container of the test
        image that sleeps, on the host network) and wait until it runs; returns its UID."""
        uid = self.create_agent_pod(name, node, {
            "hostNetwork": True, "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "agent", "image": TEST_IMAGE, "imagePullPolicy": "Never",
                            "args": ["exec sleep 2147483647"]}]})
        real = next(n for n in self.plane.real_nodes if n.name == node)
        self.plane.wait(time.monotonic() + 180, f"pod {NAMESPACE}/{name} Running",
                        lambda: self.plane.request(
                            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
                        )["status"].get("phase") == "Running", components=real.components())
        return uid

    def create_agent_pod(self, name: str, node: str, spec: dict[str, Any]) -> str:
        """Create the agent's stand-in pod ``name`` on ``node`` with the pod ``spec`` given
        (``nodeName``, the ServiceAccount and a toleration of every taint are added); returns
        its UID."""
        pod = self.plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": AGENT_POD_LABELS},
            "spec": {"nodeName": node, "serviceAccountName": "kubedra-agent",
                     "tolerations": [{"operator": "Exists"}], **spec}})
        uid: str = pod["metadata"]["uid"]
        return uid

    def start_agent(self, node: str, *, backend: str = f"snapshot:{H200_CAPTURE}",
                    driver: str = "gpu.kubedra.io", lease_duration: int = 40,
                    rescan_interval: float = 2.0, cdi_check_interval: float = 30.0,
                    pod: str | None = None,
                    pod_uid: str | None = None, device_root: Path | None = None,
                    boot_id_path: Path | None = None, name: str | None = None,
                    module: str = "kubedra", sysfs_root: Path | None = None,
                    metrics_port: int = 0, mig: str | None = None) -> Component:
        """Start ``kubedra agent`` for ``node`` as the kubedra-agent ServiceAccount, with a token
        bound to the stand-in agent pod ``pod`` (default ``kubedra-agent-<node>``).

        ``pod_uid`` gives the agent rolling-update socket names; ``device_root`` is where its
        CDI specs find the device nodes (stand-ins for the replayed capture); ``boot_id_path``
        replaces the kernel's boot ID (tests simulate a reboot with it); ``name`` is the
        component's name (default ``kubedra-agent-<node>``; a second instance needs another);
        ``module`` runs instead of ``kubedra`` (``python -m <module> agent …``, e.g. a test's
        agent with a fake MIG partitioner); ``sysfs_root`` replaces ``/sys`` (a sysfs tree a
        test built for the ``pci`` backend); a non-zero ``metrics_port`` serves ``/metrics``
        and ``/healthz`` there, on loopback only, over HTTPS to authorized scrapers
        (:mod:`e2e.harness.scrape`); ``mig`` is the ``discovery.mig`` of the
        inventory the agent creates (``KUBEDRA_MIG``, as the kustomize component
        ``mig-partitions`` sets it).
        """
        config = self.plane.kubeconfig_for_service_account(
            NAMESPACE, "kubedra-agent", bound_pod=pod or f"kubedra-agent-{node}")
        host = self.node_dir(node)
        settings = {"namespace": NAMESPACE, "node_name": node, "backend": backend,
                    "driver": driver, "lease_duration": str(lease_duration),
                    "rescan_interval": str(rescan_interval), "metrics_port": str(metrics_port),
                    "metrics_address": "127.0.0.1",
                    "cdi_check_interval": str(cdi_check_interval),
                    "kubelet_registry_dir": str(host / "plugins_registry"),
                    "kubelet_plugins_dir": str(host / "plugins"), "cdi_dir": str(host / "cdi")}
        for key, value in (("pod_uid", pod_uid), ("device_root", device_root),
                           ("boot_id_path", boot_id_path), ("sysfs_root", sysfs_root),
                           ("mig", mig)):
            if value is not None:
                settings[key] = str(value)
        agent = self.plane.spawn(
            name or f"kubedra-agent-{node}",
            [sys.executable, "-m", module, "agent", f"--kubeconfig={config}"],
            env=self._env(**settings))
        self.agents[node] = agent
        return agent

    def node_dir(self, node: str) -> Path:
        """Where the agent of ``node`` finds what a node has under /var/lib/kubelet and
        /var/run/cdi (registration and DRA sockets, checkpoint, CDI specs): on a real node
        the kubelet's ``--root-dir`` and containerd's CDI directory are there."""
        real = next((n for n in self.plane.real_nodes if n.name == node), None)
        return real.root if real else self.plane.workdir / "nodes" / node

    def stop_agent(self, node: str, *, crash: bool = False) -> None:
        """Stop the agent of ``node``: SIGTERM, as the kubelet stops a pod (it gives its Lease
        up), or with ``crash`` SIGKILL (its Lease then expires)."""
        self.plane.stop_component(self.agents.pop(node),
                                  sig=signal.SIGKILL if crash else signal.SIGTERM)


@asynccontextmanager
async def own_control_plane(directory: Path, apiserver_args: Sequence[str] = ()
                            ) -> AsyncIterator[tuple[ControlPlane, Kubedra, ApiClient]]:
    """A control plane of a test's own in ``directory`` (kube-apiserver given
    ``apiserver_args`` besides the harness's), with kubedra installed and no operator, and an
    admin API client; the client is closed and the plane stopped when the block ends."""
    plane = ControlPlane(directory, apiserver_args=apiserver_args)
    plane.start()
    try:
        kubedra = Kubedra(plane)
        kubedra.install()
        async with await make_api_client(plane.admin_kubeconfig) as api:
            yield plane, kubedra, api
    finally:
        plane.stop()
