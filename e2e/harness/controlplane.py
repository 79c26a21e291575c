"""A real Kubernetes control plane on loopback ports, started from locally built binaries.

:class:`ControlPlane` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok (which fakes kubelets for nodes labelled ``type=kwok``) in a working directory, with client
certificate authentication, ServiceAccount tokens (TokenRequest works), authorization
``Node,RBAC`` and the DRA controllers. It writes an admin kubeconfig, mints kubeconfigs for
ServiceAccounts, and stops exactly the processes it started (by PID).

Binaries come from ``$KUBEDRA_CACHE/bin`` (default ``<repo>/.cache/bin``), built by
``hack/build-binaries.sh``; with ``KUBE_VERSION`` set to another release of the version matrix
(``1.34.4``), kube-apiserver, kube-controller-manager, kube-scheduler and the real nodes'
kubelet come from ``$KUBEDRA_CACHE/bin-v<version>`` (``hack/build-kube-version.sh``);
``KUBELET_VERSION`` (default ``KUBE_VERSION``'s) selects the kubelet's release on its own, for
a kubelet older than its control plane (the version skew Kubernetes supports).

Three ways to use it: the ``control_plane`` pytest fixture in
``tests/conftest.py``, ``make cluster-up`` / ``make cluster-down`` (``python -m e2e.harness``),
and directly from Python (``with ControlPlane(workdir) as cp: ...``), as ``make demo`` does.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.client import HTTPSConnection
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml

from e2e.harness.certs import CertificateAuthority, CertPair, write_service_account_key
from e2e.harness.versions import DEFAULT_KUBE_VERSION, kube_version, kubelet_version

if TYPE_CHECKING:
    from e2e.harness.realnode import RealNode

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "v1.37.2"
KWOK_NODE_LABEL = ("type", "kwok")
"""Nodes with this label are managed by kwok (fake kubelet)."""
KWOK_NODE_IP = "127.0.0.2"
KWOK_POD_CIDR = "127.64.0.0/16"
"""Addresses kwok writes into its nodes' and pods' status: loopback, never another host."""

NODE_MONITOR_GRACE_S = 50
"""kube-controller-manager's ``--node-monitor-grace-period`` by default (seconds, since v1.32)."""
HEARTBEAT_JITTER = 0.1
"""A kwok Node's status period is drawn from [period, 1.1 * period] (kwok's
``jitterDurationMilliseconds`` is the upper bound of the delay)."""

CONTROLLERS = (
    "resourceclaim-controller",
    "node-lifecycle-controller",
    "device-taint-eviction-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "pod-garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "root-ca-certificate-publisher-controller",
)
"""kube-controller-manager controllers the tests need. Workload controllers (deployment,
replicaset, daemonset) are off: kubedra's operator and agent run as local processes, so the
installed Deployment and DaemonSet must not turn into fake pods on kwok nodes."""
WORKLOAD_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
)
"""The controllers that run kubedra's own Deployment and DaemonSet, for a control plane that
installs kubedra as pods on real nodes (``ControlPlane(..., workloads=True)``; no kwok nodes
are created there, so no fake pods either)."""

_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """A component failed to start or become ready; the message carries its log tail."""


KUBE_BINARIES = frozenset({"kube-apiserver", "kube-controller-manager", "kube-scheduler",
                           "kubelet"})
"""The binaries that ``KUBE_VERSION`` selects (the kubelet: ``KUBELET_VERSION``); etcd, kwok
and the node runtime stay."""


def default_bin_dir() -> Path:
    """``$KUBEDRA_CACHE/bin``, or ``<repo>/.cache/bin``."""
    return Path(os.environ.get("KUBEDRA_CACHE", REPO_ROOT / ".cache")) / "bin"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _kubeconfig(server: str, ca: Path, user: str, *, cert: CertPair | None = None,
                token: str | None = None) -> dict[str, Any]:
    creds: dict[str, str] = ({"client-certificate": str(cert.cert), "client-key": str(cert.key)}
                             if cert else {"token": token or ""})
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "kubedra-test",
        "clusters": [{"name": "kubedra-test",
                      "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "kubedra-test",
                      "context": {"cluster": "kubedra-test", "user": user}}],
    }


@dataclass
class Component:
    """A started process: its name, PID, command line and log file."""

    name: str
    pid: int
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)


class ControlPlane:
    """A local control plane in ``workdir``.

    Args:
        workdir: directory for certificates, kubeconfigs, etcd data and logs (created).
        bin_dir: directory with the binaries (default :func:`default_bin_dir`).
        detached: keep the processes running after this Python process exits (``cluster-up``);
            otherwise they get SIGTERM when it dies, even on SIGKILL.
        apiserver_args: more kube-apiserver flags (``bench/scale.py`` turns on an audit log).
        kcm_args: more kube-controller-manager flags (``e2e/test_pool_status.py`` turns on an
            alpha feature gate).
        scheduler_args: more kube-scheduler flags (``bench/scale.py --scheduler-qps`` raises
            its client's QPS).
        node_status_period_s: seconds between two status updates of a kwok Node (None:
            kwok's heartbeat stage as built, 20 to 25 s). A real kubelet posts an unchanged
            Node status every ``nodeStatusReportFrequency`` (5 min) and heartbeats through its
            Lease in ``kube-node-lease``, which kwok here does not renew; so with a period set,
            kube-controller-manager's ``--node-monitor-grace-period`` is raised to the period
            plus its default 50 s, and a Node stays Ready on its status updates alone.
        workloads: run :data:`WORKLOAD_CONTROLLERS` too.
        feature_gates: ``--feature-gates`` of kube-apiserver, kube-controller-manager and
            kube-scheduler alike (``DRADeviceTaints=false,...``; they must agree: a scheduler
            with a gate on that the API server has off waits for RBAC the server never grants).
    """

    def __init__(self, workdir: Path, bin_dir: Path | None = None, *, detached: bool = False,
                 apiserver_args: Sequence[str] = (), kcm_args: Sequence[str] = (),
                 scheduler_args: Sequence[str] = (), workloads: bool = False,
                 feature_gates: str = "", node_status_period_s: float | None = None):
        self.workdir = workdir.resolve()
        self.gate_args = [f"--feature-gates={feature_gates}"] if feature_gates else []
        self.apiserver_args = [*apiserver_args, *self.gate_args]
        self.node_status_period_s = node_status_period_s
        self.kcm_args = list(kcm_args)
        if node_status_period_s is not None:
            grace = NODE_MONITOR_GRACE_S + node_status_period_s * (1 + HEARTBEAT_JITTER)
            self.kcm_args.append(f"--node-monitor-grace-period={grace:.0f}s")
        self.scheduler_args = list(scheduler_args)
        self.controllers = CONTROLLERS + (WORKLOAD_CONTROLLERS if workloads else ())
        self.bin_dir = (bin_dir or default_bin_dir()).resolve()
        self.detached = detached
        self.components: list[Component] = []
        self.api_port = 0
        self.pki = self.workdir / "pki"
        self.logs = self.workdir / "logs"
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.state_file = self.workdir / "state.json"
        self._admin: CertPair | None = None
        self.ca: CertificateAuthority | None = None
        """The CA of every certificate (None before :meth:`start`)."""
        self.real_nodes: list[RealNode] = []

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def server(self) -> str:
        """The API server URL, ``https://127.0.0.1:<port>``."""
        return f"https://127.0.0.1:{self.api_port}"

    def start(self, timeout: float = 120.0) -> None:
        """Start every component and wait until each is ready.

        Raises:
            ControlPlaneError: a binary is missing, a process exited, or readiness timed out;
                the processes started so far are stopped first.
        """
        missing = [str(self.binary(b)) for b in ("etcd", "kube-apiserver",
                                                  "kube-controller-manager", "kube-scheduler",
                                                  "kwok") if not self.binary(b).exists()]
        if missing:
            raise ControlPlaneError(
                f"missing binaries: {', '.join(missing)}; build them with `make binaries` "
                "(hack/build-binaries.sh; for KUBE_VERSION=X hack/build-kube-version.sh X)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        try:
            self._start_all(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        self._write_state()

    def _start_all(self, deadline: float) -> None:
        ca = self.ca = CertificateAuthority(self.pki)
        serving = ca.issue("apiserver", "kube-apiserver",
                           server_hosts=("127.0.0.1", "localhost", "kubernetes.default.svc"))
        self._admin = ca.issue("admin", "kubedra-admin", organizations=("system:masters",))
        sa_key = write_service_account_key(self.pki / "sa.key")
        self.api_port = free_port()
        kcm_cfg = self.write_kubeconfig(
            "controller-manager", ca.issue("kcm", "system:kube-controller-manager"))
        sched_cfg = self.write_kubeconfig(
            "scheduler", ca.issue("scheduler", "system:kube-scheduler"))
        kwok_cfg = self.write_kubeconfig(
            "kwok", ca.issue("kwok", "kwok-controller", organizations=("system:masters",)))
        self.admin_kubeconfig.write_text(yaml.safe_dump(
            _kubeconfig(self.server, ca.pair.cert, "kubedra-admin", cert=self._admin)))

        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [
            "--name=kubedra-test", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=kubedra-test=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true", "--log-level=warn", "--quota-backend-bytes=4294967296",
        ])
        self.wait(deadline, "etcd", lambda: self._http_ok(f"{etcd_url}/health"))

        self._spawn("kube-apiserver", [
            f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
            f"--secure-port={self.api_port}", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={ca.pair.cert}",
            "--authorization-mode=Node,RBAC", "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_key}", f"--service-account-signing-key-file={sa_key}",
            "--api-audiences=https://kubernetes.default.svc.cluster.local",
            "--enable-admission-plugins=NodeRestriction",
            "--profiling=false", "--cert-dir", str(self.pki / "apiserver-generated"),
            *self.apiserver_args,
        ])
        self.wait(deadline, "kube-apiserver", lambda: self._api_ok("/readyz"))

        kcm_port, sched_port = free_port(), free_port()
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={kcm_cfg}", f"--authentication-kubeconfig={kcm_cfg}",
            f"--authorization-kubeconfig={kcm_cfg}", "--leader-elect=false",
            f"--controllers={','.join(self.controllers)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={sa_key}", f"--root-ca-file={ca.pair.cert}",
            "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
            "--cert-dir", str(self.pki / "kcm-generated"), "--profiling=false",
            "--authentication-skip-lookup=true", *self.gate_args, *self.kcm_args,
        ])
        self._spawn("kube-scheduler", [
            f"--kubeconfig={sched_cfg}", f"--authentication-kubeconfig={sched_cfg}",
            f"--authorization-kubeconfig={sched_cfg}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={sched_port}",
            "--cert-dir", str(self.pki / "scheduler-generated"), "--profiling=false",
            "--authentication-skip-lookup=true", *self.gate_args, *self.scheduler_args,
        ])
        self._spawn("kwok", [
            f"--kubeconfig={kwok_cfg}", f"--config={self._write_kwok_config()}",
            f"--manage-nodes-with-label-selector={KWOK_NODE_LABEL[0]}={KWOK_NODE_LABEL[1]}",
            # fake node and pod addresses in loopback: a stray connection stays on this host
            f"--cidr={KWOK_POD_CIDR}", f"--node-ip={KWOK_NODE_IP}",
            "--server-address=127.0.0.1:0",
        ])
        self.wait(deadline, "kube-controller-manager",
                   lambda: self._http_ok(f"https://127.0.0.1:{kcm_port}/healthz"))
        self.wait(deadline, "kube-scheduler",
                   lambda: self._http_ok(f"https://127.0.0.1:{sched_port}/healthz"))
        # ServiceAccount admission needs the default ServiceAccount, made by KCM's controller.
        self.wait(deadline, "serviceaccount-controller",
                   lambda: self._api_ok("/api/v1/namespaces/default/serviceaccounts/default"))

    def add_real_node(self, name: str, labels: dict[str, str] | None = None,
                      timeout: float = 180.0,
                      kubelet_config: dict[str, Any] | None = None) -> RealNode:
        """Start a real node ``name`` (containerd, runc, kubelet with ``kubelet_config``'s
        fields; see :mod:`e2e.harness.realnode`) and wait until it is Ready; :meth:`stop`
        stops it.

        Raises:
            e2e.harness.realnode.RealNodeError: it cannot run here, or did not get Ready.
        """
        from e2e.harness.realnode import RealNode

        node = RealNode(self, name, labels, kubelet_config)
        self.real_nodes.append(node)
        self._write_state_if_recorded()
        try:
            node.start(timeout)
        except BaseException:
            self.real_nodes.remove(node)
            self._write_state_if_recorded()
            raise
        return node

    def stop(self, timeout: float = 15.0) -> list[str]:
        """Stop the real nodes (containers, shims, mounts, cgroups: see
        :meth:`RealNode.stop`; their files are deleted when nothing is left), then SIGTERM
        every started process (newest first), SIGKILL those still alive after ``timeout``
        seconds. Safe to call twice. Returns what a real node could not clean up (empty when
        all is gone)."""
        problems = []
        for node in reversed(self.real_nodes):
            left = node.stop()
            if not left:
                node.remove_files()
            problems += left
        self.real_nodes.clear()
        for comp in reversed(self.components):
            _signal(comp, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for comp in reversed(self.components):
            _reap(comp, deadline)
        self.components.clear()
        self.state_file.unlink(missing_ok=True)
        return problems

    @classmethod
    def stop_from_state(cls, workdir: Path) -> bool:
        """Stop a detached control plane recorded in ``workdir/state.json``, its real nodes
        included; False if none."""
        from e2e.harness.realnode import RealNode

        plane = cls(workdir)
        if not plane.state_file.exists():
            return False
        state = json.loads(plane.state_file.read_text())
        plane.components = [Component(c["name"], c["pid"], c["args"], Path(c["log"]))
                            for c in state["components"]]
        plane.real_nodes = [RealNode.from_state(plane, n) for n in state.get("realNodes", [])]
        for problem in plane.stop():
            print(f"left behind: {problem}")
        return True

    # --- credentials ---------------------------------------------------------------------

    def kubeconfig_for_service_account(self, namespace: str, name: str, *,
                                       bound_pod: str | None = None,
                                       duration_s: int = 86400) -> Path:
        """Mint a token for ServiceAccount ``namespace/name`` with TokenRequest and write a
        kubeconfig using it to ``<workdir>/sa-<namespace>-<name>.kubeconfig``.

        ``bound_pod`` binds the token to that pod in the same namespace; the API server then
        adds the pod's node to the token, as for a kubelet-projected token.

        Raises:
            ControlPlaneError: the ServiceAccount does not exist or the request failed.
        """
        spec: dict[str, Any] = {"expirationSeconds": duration_s}
        if bound_pod:
            pod = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{bound_pod}")
            spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": bound_pod,
                                      "uid": pod["metadata"]["uid"]}
        review = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        suffix = f"-{bound_pod}" if bound_pod else ""
        path = self.workdir / f"sa-{namespace}-{name}{suffix}.kubeconfig"
        path.write_text(yaml.safe_dump(_kubeconfig(
            self.server, self.pki / "ca.crt", f"system:serviceaccount:{namespace}:{name}",
            token=review["status"]["token"])))
        return path

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """An admin API call; returns the decoded JSON body (text for non-JSON answers).

        Raises:
            ControlPlaneError: the server answered with a status >= 400.
        """
        conn = HTTPSConnection("127.0.0.1", self.api_port, context=self._admin_tls(), timeout=30)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            is_json = resp.getheader("Content-Type", "").startswith("application/json")
        finally:
            conn.close()
        if resp.status >= 400:
            raise ControlPlaneError(
                f"{method} {path}: HTTP {resp.status}: {payload.decode()[:500]}")
        return json.loads(payload) if is_json else payload.decode()

    # --- diagnostics ---------------------------------------------------------------------

    def log_tails(self, lines: int = 25) -> str:
        """The last ``lines`` lines of every component's log, for failure reports."""
        parts = []
        for comp in self.components:
            text = comp.log.read_text(errors="replace").splitlines() if comp.log.exists() else []
            parts.append(f"----- {comp.name} (pid {comp.pid}, {comp.log}) -----")
            parts.extend(text[-lines:])
        return "\n".join(parts)

    # --- internals -----------------------------------------------------------------------

    def write_kubeconfig(self, name: str, cert: CertPair) -> Path:
        """Write ``<workdir>/<name>.kubeconfig`` for the client certificate ``cert``."""
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(_kubeconfig(self.server, self.pki / "ca.crt", name,
                                                   cert=cert)))
        return path

    def _write_kwok_config(self) -> Path:
        stage_dir = self.bin_dir.parent / "kwok-stages"
        stages = sorted(stage_dir.glob("*.yaml"))
        if not stages:
            raise ControlPlaneError(f"no kwok stages in {stage_dir}; run `make binaries`")
        texts = [s.read_text() for s in stages]
        if self.node_status_period_s is not None:
            period_ms = int(self.node_status_period_s * 1000)
            documents = [yaml.safe_load(text) for text in texts]
            heartbeat, = (d for d in documents if d["metadata"]["name"] == "node-heartbeat")
            heartbeat["spec"]["delay"] = {
                "durationMilliseconds": period_ms,
                "jitterDurationMilliseconds": int(period_ms * (1 + HEARTBEAT_JITTER))}
            texts = [yaml.safe_dump(d) for d in documents]
        path = self.workdir / "kwok.yaml"
        path.write_text("\n---\n".join(texts))
        return path

    def binary(self, name: str) -> Path:
        """Path of binary ``name``: from ``bin-v<KUBE_VERSION>`` (the kubelet:
        ``bin-v<KUBELET_VERSION>``) beside :attr:`bin_dir` for :data:`KUBE_BINARIES` of a
        release other than the default, else in :attr:`bin_dir`."""
        version = kubelet_version() if name == "kubelet" else kube_version()
        if name in KUBE_BINARIES and version != DEFAULT_KUBE_VERSION:
            return self.bin_dir.parent / f"bin-v{version}" / name
        return self.bin_dir / name

    def _spawn(self, name: str, args: list[str]) -> None:
        self.spawn(name, [str(self.binary(name)), *args])

    def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None
              ) -> Component:
        """Start ``command`` as a component of this control plane: its output goes to
        ``logs/<name>.log`` (shown on test failures) and :meth:`stop` stops it too."""
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, start_new_session=True, env=env,
                preexec_fn=None if self.detached else _die_with_parent)
        component = Component(name, proc.pid, command, log, proc)
        self.components.append(component)
        self._write_state_if_recorded()
        return component

    def stop_component(self, component: Component, timeout: float = 10.0,
                       sig: signal.Signals = signal.SIGTERM) -> None:
        """Send ``sig`` (SIGTERM: a clean stop; SIGKILL: a crash) to one component, SIGKILL it
        after ``timeout`` seconds, and forget it."""
        _signal(component, sig)
        _reap(component, time.monotonic() + timeout)
        self.components.remove(component)
        self._write_state_if_recorded()

    def kill_component(self, component: Component) -> None:
        """SIGKILL one component (a crash: no cleanup runs), collect it and forget it."""
        _signal(component, signal.SIGKILL)
        _reap(component, time.monotonic())
        self.components.remove(component)
        if self.state_file.exists():
            self._write_state()

    def restart_component(self, name: str, timeout: float = 90.0,
                          extra_args: Sequence[str] = ()) -> Component:
        """SIGKILL component ``name`` (etcd keeps its data directory) and start it again with
        the same command line (and ``extra_args`` after it: ``--feature-gates=…`` flips a
        gate); returns once the API server answers ``/readyz`` again.

        Raises:
            ControlPlaneError: no such component, or not ready within ``timeout`` seconds.
        """
        old = next((c for c in self.components if c.name == name), None)
        if old is None:
            raise ControlPlaneError(f"no component {name}")
        self.kill_component(old)
        new = self.spawn(name, [*old.args, *extra_args])
        # only the restarted one counts: another may exit meanwhile on purpose (the operator's
        # leader stops when it cannot renew its Lease while the API server is away)
        self.wait(time.monotonic() + timeout, f"{name} restarted",
                   lambda: self._api_ok("/readyz"), components=[new])
        return new

    @property
    def etcd_url(self) -> str:
        """etcd's client URL, ``http://127.0.0.1:<port>``.

        Raises:
            ControlPlaneError: etcd is not a running component.
        """
        etcd = next((c for c in self.components if c.name == "etcd"), None)
        if etcd is None:
            raise ControlPlaneError("etcd is not running")
        return next(a.split("=", 1)[1] for a in etcd.args
                    if a.startswith("--listen-client-urls="))

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision, physically, as kube-apiserver
        does every ``--etcd-compaction-interval``: a watch served from etcd that resumes from
        an older resourceVersion is then answered 410 Gone. Uses etcd's JSON gateway
        (``/v3/kv/range`` for the revision, ``/v3/kv/compaction``).

        Returns:
            The revision compacted to.

        Raises:
            OSError: etcd did not answer, or refused the compaction.
        """
        from urllib.request import Request, urlopen

        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = Request(f"{self.etcd_url}{path}", data=json.dumps(body).encode(),
                              headers={"Content-Type": "application/json"})
            with urlopen(request, timeout=30) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer
        revision = int(call("/v3/kv/range", {"key": "Lw==", "limit": 1})["header"]["revision"])
        call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def cut_connections(self, pid: int) -> int:
        """Abort every established TCP connection of process ``pid`` to the API server (the
        kernel resets it, as a failing network would): its watches end and resume from their
        last resourceVersion. Uses ``ss -K`` (iproute2; needs root and a kernel with socket
        destroy, ``CONFIG_INET_DIAG_DESTROY``).

        Returns:
            How many connections were cut.

        Raises:
            subprocess.CalledProcessError: ``ss`` failed to list the connections.
        """
        api = ["dport", "=", f":{self.api_port}"]
        listing = subprocess.run(["ss", "-tnpH", "state", "established", *api],
                                 capture_output=True, text=True, check=True).stdout
        ports = [line.split()[2].rsplit(":", 1)[1] for line in listing.splitlines()
                 if f"pid={pid}," in line]
        for port in ports:
            subprocess.run(["ss", "-K", "state", "established", "sport", "=", f":{port}", *api],
                           capture_output=True, check=False)
        return len(ports)

    def wait(self, deadline: float, what: str, ready: Callable[[], bool],
             components: Sequence[Component] | None = None) -> None:
        """Poll ``ready()`` until ``deadline`` (monotonic seconds); OS, API and subprocess
        errors count as not ready.

        Raises:
            ControlPlaneError: one of ``components`` (default: every component) exited, or
                the deadline passed (with log tails).
        """
        while time.monotonic() < deadline:
            for comp in self.components if components is None else components:
                if comp.process is not None and comp.process.poll() is not None:
                    raise ControlPlaneError(
                        f"{comp.name} exited with code {comp.process.returncode} while waiting "
                        f"for {what}\n{self.log_tails()}")
            try:
                if ready():
                    return
            except (OSError, ControlPlaneError, subprocess.SubprocessError):
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"timed out waiting for {what}\n{self.log_tails()}")

    def _admin_tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if self._admin is None:
            self._admin = CertPair(self.pki / "admin.crt", self.pki / "admin.key")
        ctx.load_cert_chain(str(self._admin.cert), str(self._admin.key))
        return ctx

    def _api_ok(self, path: str) -> bool:
        try:
            self.request("GET", path)
        except (OSError, ControlPlaneError):
            return False
        return True

    @staticmethod
    def _http_ok(url: str) -> bool:
        from urllib.request import urlopen

        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # self-signed component certs
        try:
            with urlopen(url, timeout=2, context=ctx) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _write_state_if_recorded(self) -> None:
        if self.state_file.exists():
            self._write_state()

    def _write_state(self) -> None:
        self.state_file.write_text(json.dumps({
            "server": self.server, "kubeconfig": str(self.admin_kubeconfig),
            "components": [{"name": c.name, "pid": c.pid, "args": c.args, "log": str(c.log)}
                           for c in self.components],
            "realNodes": [n.to_state() for n in self.real_nodes],
        }, indent=2))


def _alive(comp: Component) -> bool:
    if comp.process is not None:
        return comp.process.poll() is None
    return _is_ours(comp)


def _is_ours(comp: Component) -> bool:
    """True if PID ``comp.pid`` still runs ``comp.args[0]`` (guards against PID reuse)."""
    try:
        cmdline = Path(f"/proc/{comp.pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{comp.pid}/stat").read_text()
    except OSError:
        return False
    return cmdline[0].decode(errors="replace") == comp.args[0] and ") Z " not in stat


def _reap(comp: Component, deadline: float) -> None:
    """Wait until ``comp`` exits after SIGTERM, SIGKILL it at ``deadline``, collect it."""
    while _alive(comp) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(comp):
        _signal(comp, signal.SIGKILL)
    if comp.process is not None:
        comp.process.wait(timeout=5)


def _signal(comp: Component, sig: signal.Signals) -> None:
    if _alive(comp):
        with contextlib.suppress(ProcessLookupError):
            os.kill(comp.pid, sig)

