"""kubedra on the local control plane: install the manifests, run the operator and node agents.

The operator and the agents run as local processes (``python -m kubedra …``) under the
ServiceAccount tokens of ``kubedra-operator`` and ``kubedra-agent``, so exactly the RBAC rules
in ``manifests/`` apply — never cluster admin. Each agent's token is bound to a stand-in agent
pod on its kwok node, as a DaemonSet pod's projected token is, so the API server knows the
agent's node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from e2e.harness.controlplane import KWOK_NODE_LABEL, REPO_ROOT, Component, ControlPlane

NAMESPACE = "kubedra-system"
H200_CAPTURE = REPO_ROOT / "hardware" / "nvidia-h200"


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> str:
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


class Kubedra:
    """kubedra installed on ``plane``; operator and agents are components of the plane."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.operator: Component | None = None
        self.operator_options: dict[str, float] = {}
        self.agents: dict[str, Component] = {}

    def install(self) -> None:
        """``kubectl apply -k manifests/`` and wait for the CRD to be served."""
        kubectl(self.plane, "apply", "-k", str(REPO_ROOT / "manifests"))
        kubectl(self.plane, "wait", "--for=condition=Established", "--timeout=60s",
                "crd/deviceinventories.kubedra.io")

    def _env(self, **settings: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEDRA_")}
        env.update({f"KUBEDRA_{k.upper()}": v for k, v in settings.items()})
        env["PYTHONPATH"] = str(REPO_ROOT / "operator")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start_operator(self, *, lease_check_interval: float = 1.0,
                       explain_event_interval: float = 60.0) -> Component:
        """Start ``kubedra operator`` as the kubedra-operator ServiceAccount."""
        self.operator_options = {"lease_check_interval": lease_check_interval,
                                 "explain_event_interval": explain_event_interval}
        config = self.plane.kubeconfig_for_service_account(NAMESPACE, "kubedra-operator")
        self.operator = self.plane.spawn(
            "kubedra-operator",
            [sys.executable, "-m", "kubedra", "operator", "--liveness-port=0"],
            env=self._env(kubeconfig=str(config), namespace=NAMESPACE,
                          lease_check_interval=str(lease_check_interval),
                          explain_event_interval=str(explain_event_interval)))
        return self.operator

    def kill_operator(self) -> None:
        """SIGKILL the operator (a crash: nothing it holds in memory survives)."""
        if self.operator is not None:
            self.plane.kill_component(self.operator)
            self.operator = None

    def restart_operator(self) -> Component:
        """Start the operator again with the options it last started with."""
        return self.start_operator(**self.operator_options)

    def add_node(self, node: str, labels: dict[str, str] | None = None) -> None:
        """Create kwok node ``node`` (kwok marks it Ready) and the agent's stand-in pod on it."""
        all_labels = {KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1], "kubernetes.io/hostname": node,
                      **(labels or {})}
        self.plane.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": all_labels}})
        self.plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"kubedra-agent-{node}",
                         "labels": {"app.kubernetes.io/name": "kubedra-agent"}},
            "spec": {"nodeName": node, "serviceAccountName": "kubedra-agent",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "agent", "image": "ghcr.io/kubedra/kubedra:0.1.0"}]},
        })

    def start_agent(self, node: str, *, backend: str = f"snapshot:{H200_CAPTURE}",
                    driver: str = "gpu.kubedra.io", lease_duration: int = 40,
                    rescan_interval: float = 2.0, metrics_port: int = 0) -> Component:
        """Start ``kubedra agent`` for ``node`` as the kubedra-agent ServiceAccount, with a token
        bound to the node's stand-in agent pod (``metrics_port`` 0: no /metrics, /healthz)."""
        config = self.plane.kubeconfig_for_service_account(
            NAMESPACE, "kubedra-agent", bound_pod=f"kubedra-agent-{node}")
        host = self.node_dir(node)
        agent = self.plane.spawn(
            f"kubedra-agent-{node}",
            [sys.executable, "-m", "kubedra", "agent"],
            env=self._env(kubeconfig=str(config), namespace=NAMESPACE, node_name=node,
                          backend=backend, driver=driver, lease_duration=str(lease_duration),
                          rescan_interval=str(rescan_interval), metrics_port=str(metrics_port),
                          kubelet_registry_dir=str(host / "plugins_registry"),
                          kubelet_plugins_dir=str(host / "plugins"),
                          cdi_dir=str(host / "cdi")))
        self.agents[node] = agent
        return agent

    def node_dir(self, node: str) -> Path:
        """Where the agent of ``node`` keeps what a real node has under /var/lib/kubelet and
        /var/run/cdi (registration and DRA sockets, checkpoint, CDI specs)."""
        return self.plane.workdir / "nodes" / node

    def stop_agent(self, node: str) -> None:
        """Stop the agent of ``node`` (its Lease then expires)."""
        self.plane.stop_component(self.agents.pop(node))
