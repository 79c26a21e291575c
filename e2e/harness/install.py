"""kubedra installed as pods: the image built from the Dockerfile on a real node, applied with
``kubectl apply -k`` through a test overlay of ``manifests/``.

:func:`build_image` runs ``hack/build-image.sh`` (cached: a warm run rebuilds nothing) and
:func:`import_image` loads the archive into a real node's containerd. :func:`write_overlay`
writes a kustomization that takes ``manifests/`` as it is and changes only what this machine
needs:

- the image: :data:`IMAGE` (``imagePullPolicy: Never``: no registry is reachable);
- the agent's discovery backend: the H200 capture replayed (``snapshot:``) with the node's
  stand-in device nodes, and the kubelet's and containerd's directories of the real node
  (the kubelet runs with its own ``--root-dir``), mounted at the same paths as on the host;
- the host network for every pod (the real node has no pod network; nothing leaves
  loopback), with the API server's loopback address in ``KUBERNETES_SERVICE_HOST/PORT``
  (the ``kubernetes`` Service has no endpoints here), and ports of their own: every pod shares
  this machine's one network namespace;
- the operator's health port off (``--liveness-port=0``): its two replicas would bind the same
  host port. Each serves ``/healthz`` on a Unix socket in an ``emptyDir`` of its own pod
  instead (``--health-socket``, :data:`HEALTH_SOCKET`), and its liveness and readiness probes
  ask it there (exec ``kubedra probe``). The agent's probes stay HTTPS (its self-signed
  certificate, as shipped), on a free port of loopback only (``--metrics-address=127.0.0.1``,
  which wins over the pod's address the manifest adds).

Every credential is the token the kubelet projects into the pod: nothing is minted by the
tests for the operator or the agent.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import REPO_ROOT, ControlPlane, free_port
from e2e.harness.realnode import RealNode

IMAGE = "kubedra.invalid/kubedra:0.1.0"
"""What ``hack/build-image.sh`` tags the image built from the Dockerfile."""
NEXT_TAG = "0.1.1"
"""The tag of the image's next version (the same image, another version label): upgrades."""
H200_CAPTURE = REPO_ROOT / "hardware" / "nvidia-h200"
HEALTH_SOCKET = "/run/kubedra/health.sock"
"""Where the operator's pods serve ``/healthz`` in the overlay (an ``emptyDir`` named
``health`` at ``/run/kubedra``)."""


def build_image() -> tuple[Path, Path]:
    """Build (or find cached) the image and its next version (:data:`NEXT_TAG`); returns their
    OCI archives.

    Raises:
        RuntimeError: the build failed; the message ends with its output.
    """
    result = subprocess.run([str(REPO_ROOT / "hack" / "build-image.sh"), "--print-archive",
                             "--next", NEXT_TAG],
                            capture_output=True, text=True, check=False, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"hack/build-image.sh failed (exit status {result.returncode}):\n"
                           f"{result.stderr[-4000:]}")
    archive, next_archive = result.stdout.split()
    return Path(archive), Path(next_archive)


def import_image(node: RealNode, archive: Path) -> str:
    """Import the OCI ``archive`` into ``node``'s containerd (namespace ``k8s.io``); returns
    ctr's output.

    Raises:
        subprocess.CalledProcessError: ctr failed.
    """
    result = subprocess.run(
        [str(node.plane.bin_dir / "ctr"), "--address", str(node.socket), "-n", "k8s.io",
         "images", "import", str(archive)],
        capture_output=True, text=True, check=True, timeout=600)
    return result.stdout


def _api_env(plane: ControlPlane) -> list[dict[str, str]]:
    return [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(plane.api_port)}]


def _operator_patch(plane: ControlPlane) -> list[dict[str, Any]]:
    container = "/spec/template/spec/containers/0"
    probe = {"exec": {"command": ["kubedra", "probe", "--socket", HEALTH_SOCKET]},
             "timeoutSeconds": 20}  # a Python start on a loaded machine
    return [
        {"op": "add", "path": "/spec/template/spec/hostNetwork", "value": True},
        {"op": "replace", "path": f"{container}/imagePullPolicy", "value": "Never"},
        {"op": "replace", "path": f"{container}/args",
         "value": ["operator", "--log-format=json", "--liveness-port=0",
                   f"--health-socket={HEALTH_SOCKET}"]},
        {"op": "remove", "path": f"{container}/ports"},
        {"op": "replace", "path": f"{container}/livenessProbe",
         "value": {**probe, "periodSeconds": 30, "failureThreshold": 3}},
        {"op": "replace", "path": f"{container}/readinessProbe",
         "value": {**probe, "periodSeconds": 5}},
        # liveness counts only once the process serves: its start takes a minute at load 20
        {"op": "add", "path": f"{container}/startupProbe",
         "value": {**probe, "periodSeconds": 5, "failureThreshold": 60}},
        {"op": "add", "path": f"{container}/volumeMounts",
         "value": [{"name": "health", "mountPath": str(Path(HEALTH_SOCKET).parent)}]},
        {"op": "add", "path": "/spec/template/spec/volumes",
         "value": [{"name": "health", "emptyDir": {}}]},
        *({"op": "add", "path": f"{container}/env/-", "value": env} for env in _api_env(plane)),
    ]


def _agent_patch(plane: ControlPlane, node: RealNode, port: int) -> list[dict[str, Any]]:
    container = "/spec/template/spec/containers/0"
    host_dirs = {"plugins-registry": node.root / "plugins_registry",
                 "plugins": node.root / "plugins", "cdi": node.cdi_dir,
                 "device-root": node.device_root}
    settings = {"KUBEDRA_METRICS_PORT": str(port),
                "KUBEDRA_KUBELET_REGISTRY_DIR": str(host_dirs["plugins-registry"]),
                "KUBEDRA_KUBELET_PLUGINS_DIR": str(host_dirs["plugins"]),
                "KUBEDRA_CDI_DIR": str(host_dirs["cdi"]),
                "KUBEDRA_DEVICE_ROOT": str(node.device_root)}
    mounts = [{"name": name, "mountPath": str(path)} for name, path in host_dirs.items()]
    volumes = [{"name": name, "hostPath": {"path": str(path), "type": "DirectoryOrCreate"}}
               for name, path in host_dirs.items()]
    mounts.append({"name": "capture", "mountPath": str(H200_CAPTURE), "readOnly": True})
    volumes.append({"name": "capture", "hostPath": {"path": str(H200_CAPTURE),
                                                    "type": "Directory"}})
    return [
        {"op": "add", "path": "/spec/template/spec/hostNetwork", "value": True},
        {"op": "replace", "path": f"{container}/imagePullPolicy", "value": "Never"},
        {"op": "replace", "path": f"{container}/args",
         "value": ["agent", "--log-format=json", f"--backend=snapshot:{H200_CAPTURE}",
                   "--driver=gpu.kubedra.io", "--metrics-address=127.0.0.1"]},
        {"op": "replace", "path": f"{container}/ports",
         "value": [{"name": "metrics", "containerPort": port}]},
        # the probes as in the manifests, on the host network's loopback address (the node has
        # no address), readiness checked more often
        {"op": "add", "path": f"{container}/livenessProbe/httpGet/host", "value": "127.0.0.1"},
        {"op": "add", "path": f"{container}/readinessProbe/httpGet/host", "value": "127.0.0.1"},
        {"op": "replace", "path": f"{container}/readinessProbe/periodSeconds", "value": 2},
        {"op": "replace", "path": f"{container}/volumeMounts", "value": mounts},
        {"op": "replace", "path": "/spec/template/spec/volumes", "value": volumes},
        *({"op": "add", "path": f"{container}/env/-", "value": env}
          for env in [*_api_env(plane),
                      *({"name": k, "value": v} for k, v in settings.items())]),
    ]


def write_overlay(directory: Path, plane: ControlPlane, node: RealNode, *,
                  tag: str = "0.1.0", agent_port: int | None = None) -> Path:
    """Write the test overlay of ``manifests/`` for ``node`` into ``directory`` (see the module
    docstring); ``tag`` is the image's tag. Returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    name, _tag = IMAGE.rsplit(":", 1)
    patches = {"operator.json": ("Deployment", "kubedra-operator", _operator_patch(plane)),
               "agent.json": ("DaemonSet", "kubedra-agent",
                              _agent_patch(plane, node, agent_port or free_port()))}
    for file, (_kind, _name, patch) in patches.items():
        (directory / file).write_text(json.dumps(patch, indent=1))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT / "manifests", directory)],
        "images": [{"name": "ghcr.io/kubedra/kubedra", "newName": name, "newTag": tag}],
        "patches": [{"path": file, "target": {"kind": kind, "name": obj}}
                    for file, (kind, obj, _patch) in patches.items()],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory
