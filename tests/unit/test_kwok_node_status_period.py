"""ControlPlane(node_status_period_s=...): kwok's heartbeat stage posts a Node's status at a
kubelet's cadence, and kube-controller-manager's grace period covers it."""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.harness import ControlPlane

HEARTBEAT = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  delay:
    durationMilliseconds: 20000
    jitterDurationMilliseconds: 25000
  next:
    statusTemplate: |
      conditions: {{ NodeConditions }}
"""
INITIALIZE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  next: {}
"""


def _plane(tmp_path: Path, period: float | None) -> ControlPlane:
    stages = tmp_path / "kwok-stages"
    stages.mkdir(exist_ok=True)
    (stages / "node-heartbeat.yaml").write_text(HEARTBEAT)
    (stages / "node-initialize.yaml").write_text(INITIALIZE)
    (tmp_path / "bin").mkdir(exist_ok=True)
    workdir = tmp_path / f"plane-{period}"
    workdir.mkdir()
    return ControlPlane(workdir, tmp_path / "bin", node_status_period_s=period)


def test_a_kubelets_period_sets_the_heartbeat_stage_and_the_grace(tmp_path: Path) -> None:
    plane = _plane(tmp_path, 300)
    heartbeat, initialize = sorted(yaml.safe_load_all(plane._write_kwok_config().read_text()),
                                   key=lambda d: d["metadata"]["name"])
    assert heartbeat["spec"]["delay"] == {"durationMilliseconds": 300_000,
                                          "jitterDurationMilliseconds": 330_000}
    assert heartbeat["spec"]["next"] == {
        "statusTemplate": "conditions: {{ NodeConditions }}\n"}
    assert initialize["spec"] == {"next": {}}
    assert plane.kcm_args == ["--node-monitor-grace-period=380s"]


def test_without_a_period_the_stages_are_kwoks_as_built(tmp_path: Path) -> None:
    plane = _plane(tmp_path, None)
    assert plane._write_kwok_config().read_text() == "\n---\n".join([HEARTBEAT, INITIALIZE])
    assert plane.kcm_args == []
