"""A real node for the local control plane: containerd, runc and a kubelet v1.37.2 (or
``KUBELET_VERSION``'s, :func:`~e2e.harness.controlplane.kubelet_version`).

:meth:`RealNode.start` runs containerd and a kubelet as components of a
:class:`~e2e.harness.controlplane.ControlPlane` (by PID, logs in ``<workdir>/logs``), with
everything a node keeps on disk under :attr:`RealNode.root`, ``/tmp/kubedra-<hash>`` (unix
socket paths must stay under 108 bytes, and the DRA socket of an agent with a pod UID is
``<root>/plugins/<driver>/dra-<pod UID>.sock``), linked from ``<workdir>/nodes/<name>``:

=====================  ===============================================================
``<root>``             the kubelet's ``--root-dir``: ``pods/``, ``plugins/<driver>/``
                       (DRA sockets, the agent's checkpoint), ``plugins_registry/``
``<root>/containerd``  containerd's root, state, config and socket ``containerd.sock``
``<root>/cdi``         the CDI spec directory containerd reads and the agent writes
``<root>/cni``         a loopback-only CNI config (the runtime reports NetworkReady);
                       pods use ``hostNetwork: true``, so no address leaves loopback
``<root>/host``        the agent's device root for replayed hardware: stand-in device nodes
                       ``<root>/host/dev/...`` (:func:`stand_in_devices`)
=====================  ===============================================================

The kubelet authenticates as ``system:node:<name>`` (group ``system:nodes``) with a client
certificate from the harness CA, so the Node authorizer and NodeRestriction apply as on a
real cluster. It listens on 127.0.0.1 only and has no InternalIP (it refuses a loopback
``--node-ip``), so nothing reaches it from outside and ``kubectl logs``/``exec`` do not work:
tests read container output from termination messages. Its pods run in the cgroup
:attr:`RealNode.cgroup_root` (cgroupfs driver, cgroup v1 allowed with ``failCgroupV1: false``,
KEP-5573). The kubelet sets the kernel tunables it always sets (``vm.overcommit_memory=1``,
``kernel.panic=10``, ``kernel.panic_on_oops=1``) because ``protectKernelDefaults`` is false.

:meth:`RealNode.stop` leaves nothing behind, even after a failure: kubelet stopped; every
process in the node's cgroups (the containers; frozen cgroups thawed first) killed; every
containerd shim serving this node's containerd (found by its ``-address``) killed by PID;
containerd stopped; every mount under ``<root>`` unmounted; the node's cgroups removed. What
failed on the way to a working node on this machine kind is in
``shared/reference/real-node.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import Component, ControlPlane, ControlPlaneError, free_port
from e2e.harness.images import PAUSE_IMAGE, write_node_images

NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "loopback")
CGROUP_FS = Path("/sys/fs/cgroup")
_MNT_DETACH = 2


class RealNodeError(RuntimeError):
    """The node cannot start here (not root, a binary missing, an earlier run's leftovers) or
    did not become Ready; the message says what and carries the log tails."""


def stand_in_devices(root: Path, paths: list[str]) -> list[Path]:
    """Create stand-in character devices for ``paths`` (``/dev/nvidia0`` …) under ``root``
    (``<root>/dev/nvidia0`` …), with the numbers of ``/dev/null`` so that a container given
    one can open it and reaches no hardware. Existing ones are kept; returns their paths.

    Raises:
        PermissionError: not root (``mknod`` needs CAP_MKNOD).
    """
    null = os.stat("/dev/null").st_rdev
    made = []
    for path in paths:
        node = root / path.lstrip("/")
        node.parent.mkdir(parents=True, exist_ok=True)
        if not node.exists():
            os.mknod(node, 0o666 | stat.S_IFCHR, null)
        made.append(node)
    return made


class RealNode:
    """One real node of ``plane`` named ``name`` (see the module docstring).

    Args:
        plane: the running control plane (its CA signs the kubelet's certificate).
        name: the Node's name; also the kubelet's hostname.
        labels: Node labels the kubelet registers with (only those NodeRestriction allows).
        kubelet_config: KubeletConfiguration fields that replace the harness's (e.g.
            ``{"syncFrequency": "10s"}``: a pod whose sync failed is retried sooner).
    """

    def __init__(self, plane: ControlPlane, name: str, labels: dict[str, str] | None = None,
                 kubelet_config: dict[str, Any] | None = None) -> None:
        self.plane = plane
        self.name = name
        self.labels = dict(labels or {})
        self.kubelet_config = dict(kubelet_config or {})
        self.link = plane.workdir / "nodes" / name
        digest = hashlib.sha256(str(self.link).encode()).hexdigest()[:10]
        self.root = Path(f"/tmp/kubedra-{digest}")
        self.containerd_dir = self.root / "containerd"
        self.socket = self.containerd_dir / "containerd.sock"
        self.cdi_dir = self.root / "cdi"
        self.device_root = self.root / "host"
        """Stand-in device nodes go under ``<device_root>/dev`` (the agent's device root)."""
        self.cgroup_root = f"/{self.root.name}"
        """The cgroup (cgroupfs path) the kubelet puts its pods under: named as the root."""
        self.kubelet: Component | None = None
        self.containerd: Component | None = None

    # --- state (for ``cluster-down`` from another process) ----------------------------------

    def to_state(self) -> dict[str, Any]:
        """What :meth:`from_state` needs to stop this node."""
        return {"name": self.name, "labels": self.labels}

    @classmethod
    def from_state(cls, plane: ControlPlane, state: dict[str, Any]) -> RealNode:
        """The node recorded by :meth:`to_state`, with its components from ``plane``."""
        node = cls(plane, state["name"], state.get("labels"))
        for comp in plane.components:
            if comp.name == f"kubelet-{node.name}":
                node.kubelet = comp
            elif comp.name == f"containerd-{node.name}":
                node.containerd = comp
        return node

    # --- start ------------------------------------------------------------------------------

    def start(self, timeout: float = 180.0) -> None:
        """Start containerd, import the images, start the kubelet and wait until the Node is
        Ready.

        Anything an earlier run of this node left (its processes, mounts, cgroups: the test
        process was killed, say) is cleaned first.

        Raises:
            RealNodeError: see the class, or an earlier run's leftovers cannot be cleaned; what
                was started is stopped again first.
        """
        self._check_host()
        left = self.stop()
        if left:
            raise RealNodeError(f"an earlier run of node {self.name} left {left}")
        deadline = time.monotonic() + timeout
        try:
            self._start_containerd(deadline)
            self._start_kubelet(deadline)
        except BaseException:
            self.stop()
            raise

    def _check_host(self) -> None:
        if os.geteuid() != 0:
            raise RealNodeError("a real node needs root (containerd, runc, mounts, cgroups)")
        missing = [str(self.plane.binary(b)) for b in NODE_BINARIES
                   if not self.plane.binary(b).exists()]
        if missing:  # the kubelet of a KUBELET_VERSION is not in bin_dir
            raise RealNodeError(f"missing node binaries: {', '.join(missing)}; build them "
                                "with `make binaries` "
                                "(hack/build-node-binaries.sh; a kubelet of KUBELET_VERSION=X "
                                "with hack/build-kube-version.sh X)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.link.parent.mkdir(parents=True, exist_ok=True)
        if not self.link.is_symlink():
            self.link.symlink_to(self.root)

    def _start_containerd(self, deadline: float) -> None:
        for sub in ("root", "state", "opt", "tmp"):
            (self.containerd_dir / sub).mkdir(parents=True, exist_ok=True)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        cni_bin = self.root / "cni" / "bin"
        cni_conf = self.root / "cni" / "net.d"
        cni_bin.mkdir(parents=True, exist_ok=True)
        cni_conf.mkdir(parents=True, exist_ok=True)
        link = cni_bin / "loopback"
        if not link.exists():
            link.symlink_to(self.plane.bin_dir / "loopback")
        (cni_conf / "10-loopback.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "kubedra-loopback",
            "plugins": [{"type": "loopback"}]}))
        config = self.containerd_dir / "config.toml"
        config.write_text(self._containerd_config(cni_bin, cni_conf))
        env = {**os.environ,
               "PATH": os.pathsep.join([str(self.plane.bin_dir), os.environ.get("PATH", "")])}
        self.containerd = self.plane.spawn(
            f"containerd-{self.name}",
            [str(self.plane.bin_dir / "containerd"), "--config", str(config)], env=env)
        self._wait(deadline, "containerd", lambda: self._ctr("version").returncode == 0)
        archive = self.containerd_dir / "images.tar"
        write_node_images(archive)
        imported = self._ctr("-n", "k8s.io", "images", "import", str(archive))
        if imported.returncode != 0:
            raise RealNodeError(f"ctr images import failed: {imported.stdout}")

    def _containerd_config(self, cni_bin: Path, cni_conf: Path) -> str:
        d = self.containerd_dir
        runtime = "plugins.'io.containerd.cri.v1.runtime'"
        return f"""\
# containerd for real node {self.name} (written by e2e/harness/realnode.py)
version = 3
root = "{d / 'root'}"
state = "{d / 'state'}"
temp = "{d / 'tmp'}"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.socket}.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "{d / 'opt'}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[{runtime}]
  cdi_spec_dirs = ["{self.cdi_dir}"]
  # root cannot lower oom_score_adj on this machine kind: runc would fail to start containers
  restrict_oom_score_adj = true
  [{runtime}.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"
  [{runtime}.containerd]
    default_runtime_name = "runc"
    [{runtime}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{runtime}.containerd.runtimes.runc.options]
        BinaryName = "{self.plane.bin_dir / 'runc'}"
        Root = "{d / 'state' / 'runc'}"
        SystemdCgroup = false
"""

    def _start_kubelet(self, deadline: float) -> None:
        assert self.plane.ca is not None, "the control plane is not started"
        cert = self.plane.ca.issue(f"kubelet-{self.name}", f"system:node:{self.name}",
                                   organizations=("system:nodes",))
        kubeconfig = self.plane.write_kubeconfig(f"kubelet-{self.name}", cert)
        self._make_cgroup_root()
        config = self.root / "kubelet.yaml"
        config.write_text(yaml.safe_dump(self._kubelet_config()))
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        self.kubelet = self.plane.spawn(f"kubelet-{self.name}", [
            str(self.plane.binary("kubelet")), f"--config={config}",
            f"--kubeconfig={kubeconfig}", f"--root-dir={self.root}",
            f"--cert-dir={self.root / 'pki'}", f"--hostname-override={self.name}",
            # refused as loopback ("nodeIP can't be loopback address"): the Node then has no
            # address, and the kubelet never picks a non-loopback one of this machine
            "--node-ip=127.0.0.1",
            *([f"--node-labels={labels}"] if labels else []),
            # plugin registration and every NodePrepare/NodeUnprepareResources call in the log
            "--v=2", "--vmodule=dra_plugin=4,dra_plugin_manager=4",
        ])
        self._wait(deadline, f"node {self.name} Ready", self._ready)

    def _kubelet_config(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "127.0.0.1", "port": free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(self.plane.pki / "ca.crt")}},
            "authorization": {"mode": "AlwaysAllow"},
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup_root,
            "failCgroupV1": False, "failSwapOn": False, "resolvConf": "",
            "podLogsDir": str(self.root / "pod-logs"),
            "volumePluginDir": str(self.root / "volume-plugins"),
            # the node's images come from an archive: never garbage-collect them
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%"},
            "serializeImagePulls": False, "registerNode": True,
            **self.kubelet_config,
        }

    def _make_cgroup_root(self) -> None:
        """The kubelet refuses a ``cgroupRoot`` that does not exist in every hierarchy."""
        for hierarchy in _hierarchies():
            path = hierarchy / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset starts empty
                parent = hierarchy / name
                if parent.exists() and not (path / name).read_text().strip():
                    (path / name).write_text(parent.read_text())

    def _ready(self) -> bool:
        node = self.plane.request("GET", f"/api/v1/nodes/{self.name}")
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in (node.get("status") or {}).get("conditions") or [])

    def components(self) -> list[Component]:
        """The node's running components (containerd, kubelet)."""
        return [c for c in (self.containerd, self.kubelet) if c is not None]

    def _wait(self, deadline: float, what: str, ready: Any) -> None:
        try:  # only the node's own components count (others may restart meanwhile)
            self.plane.wait(deadline, what, ready, components=self.components())
        except ControlPlaneError as err:
            raise RealNodeError(str(err)) from None

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.plane.bin_dir / "ctr"), "--address", str(self.socket),
                               *args], capture_output=True, text=True, timeout=120, check=False)

    def restart_kubelet(self, timeout: float = 120.0) -> None:
        """Stop the kubelet (SIGTERM; containers keep running) and start it again.

        Raises:
            RealNodeError: it did not come back Ready.
        """
        if self.kubelet is not None:
            self.plane.stop_component(self.kubelet)
            self.kubelet = None
        self._start_kubelet(time.monotonic() + timeout)

    def shut_down(self) -> None:
        """What a reboot does to the node before it comes back: every process of it ends
        (containers included), its mounts and cgroups go, and containerd's state directory
        and the CDI directory (tmpfs on a real node) are emptied. :meth:`start` boots it again
        from what is left on disk.

        Raises:
            RealNodeError: something could not be cleaned.
        """
        problems = self.stop()
        if problems:
            raise RealNodeError(f"node {self.name} could not be stopped: {problems}")
        for volatile in (self.containerd_dir / "state", self.cdi_dir):
            shutil.rmtree(volatile, ignore_errors=True)

    # --- stop -------------------------------------------------------------------------------

    def remove_files(self) -> None:
        """Delete :attr:`root` and its link (after :meth:`stop` left nothing mounted)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.link.unlink(missing_ok=True)

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Stop everything of this node (see the module docstring). Safe to call twice and
        after a failed start. Returns what could not be cleaned (empty when all is gone)."""
        deadline = time.monotonic() + timeout
        if self.kubelet is not None:
            self.plane.stop_component(self.kubelet)
            self.kubelet = None
        self._thaw_all()
        self._kill_until_gone(deadline, self.container_pids)
        self._kill_until_gone(deadline, self._other_node_pids)
        if self.containerd is not None:
            self.plane.stop_component(self.containerd)
            self.containerd = None
        problems = [f"mount {m} still there" for m in _unmount_under(self.root)]
        problems += [f"cgroup {c} still there" for c in self._remove_cgroups(deadline)]
        problems += [f"process {pid} still there" for pid in
                     self.container_pids() + self.node_pids()]
        return problems

    def freeze_pod(self, pod_uid: str, frozen: bool = True) -> None:
        """Freeze (or thaw) the processes of pod ``pod_uid`` (cgroup v1 freezer): a frozen
        container cannot end, so its pod stays on the node, e.g. after a force deletion.

        Raises:
            RealNodeError: the pod has no freezer cgroup on this node.
        """
        top = CGROUP_FS / "freezer" / self.cgroup_root.lstrip("/")
        found = list(top.rglob(f"pod{pod_uid}")) if top.exists() else []
        if not found:
            raise RealNodeError(f"pod {pod_uid} has no freezer cgroup under {top}")
        (found[0] / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def kill_container(self, container_id: str) -> list[int]:
        """SIGKILL every process of container ``container_id`` (``containerd://<id>``, as
        ``status.containerStatuses[].containerID`` gives it, or the bare ID): the kubelet then
        starts it again, as a container that crashed. Returns the PIDs killed.

        Raises:
            RealNodeError: the container has no process on this node.
        """
        name = container_id.rsplit("://", 1)[-1]
        pids: set[int] = set()
        for hierarchy in _hierarchies():
            for procs in _find(hierarchy / self.cgroup_root.lstrip("/"), "cgroup.procs"):
                if procs.parent.name == name:
                    with contextlib.suppress(OSError):
                        pids.update(int(p) for p in procs.read_text().split())
        if not pids:
            raise RealNodeError(f"container {name} has no process on node {self.name}")
        for pid in sorted(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return sorted(pids)

    def _thaw_all(self) -> None:
        """Thaw every frozen cgroup of the node (a frozen process ignores SIGKILL)."""
        top = CGROUP_FS / "freezer" / self.cgroup_root.lstrip("/")
        for state in _find(top, "freezer.state"):
            with contextlib.suppress(OSError):
                if state.read_text().strip() != "THAWED":
                    state.write_text("THAWED")

    def container_pids(self) -> list[int]:
        """PIDs of every process in the node's cgroups (its containers)."""
        pids: set[int] = set()
        for hierarchy in _hierarchies():
            top = hierarchy / self.cgroup_root.lstrip("/")
            for procs in _find(top, "cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        return sorted(pids)

    def node_pids(self) -> list[int]:
        """PIDs of the processes whose command line names this node's directory: its
        containerd, its kubelet and every shim serving its containerd (``-address
        <root>/containerd/containerd.sock``), of this run or an earlier one."""
        root = str(self.root).encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg == root or arg.startswith(root + b"/") or b"=" + root + b"/" in arg
                   for arg in argv):
                found.append(int(proc.name))
        return found

    def _other_node_pids(self) -> list[int]:
        """:meth:`node_pids` but this run's containerd (stopped gracefully afterwards)."""
        ours = self.containerd.pid if self.containerd is not None else None
        return [pid for pid in self.node_pids() if pid != ours]

    def _kill_until_gone(self, deadline: float, pids: Any) -> None:
        while (alive := pids()) and time.monotonic() < deadline:
            for pid in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _remove_cgroups(self, deadline: float) -> list[Path]:
        """rmdir the node's cgroups, deepest first, retrying while killed processes leave."""
        left: list[Path] = []
        while True:
            left = []
            for hierarchy in _hierarchies():
                top = hierarchy / self.cgroup_root.lstrip("/")
                if not top.exists():
                    continue
                nested = sorted((p for p in _find(top, "*") if p.is_dir()),
                                key=lambda p: len(p.parts), reverse=True)
                for cgroup in [*nested, top]:
                    try:
                        cgroup.rmdir()
                    except FileNotFoundError:
                        pass
                    except OSError:
                        left.append(cgroup)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)


def _find(top: Path, pattern: str) -> list[Path]:
    """``top.rglob(pattern)`` over cgroups that runc may be removing meanwhile (a directory
    vanishing during the walk starts it again); empty when ``top`` does not exist."""
    while True:
        try:
            return list(top.rglob(pattern)) if top.exists() else []
        except FileNotFoundError:
            continue


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers and the v2 ``unified`` one)."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    points = [_unescape(line.split()[4]) for line in mounts
              if line.split(" - ", 1)[1].split()[0] in ("cgroup", "cgroup2")]
    return [Path(p) for p in points if p.startswith(str(CGROUP_FS))]


def _unescape(field: str) -> str:
    """A mountinfo path field (spaces and the like are octal escapes)."""
    return field.encode().decode("unicode_escape")


def mounts_under(root: Path) -> list[str]:
    """Mount points at or under ``root``, newest first."""
    prefix = str(root)
    points = [_unescape(line.split()[4])
              for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in reversed(points) if p == prefix or p.startswith(prefix + "/")]


def _unmount_under(root: Path) -> list[str]:
    """Unmount (lazily) every mount under ``root``; returns those still mounted."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    for point in mounts_under(root):
        libc.umount2(point.encode(), _MNT_DETACH)
    return mounts_under(root)
