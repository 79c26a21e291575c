"""The alerts of manifests/monitoring: a valid kustomize component, not part of the default
install, every rule unit-tested by Prometheus's own ``promtool test rules``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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
    assert component["resources"] == ["prometheusrule.yaml"]
    [dashboard] = component["configMapGenerator"]
    assert dashboard["files"] == ["dashboards/kubedra.json"]
    assert (MONITORING / "dashboards" / "kubedra.json").is_file()
    default = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    assert "monitoring" not in default.get("resources", [])
    assert "components" not in default
