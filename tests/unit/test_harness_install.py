"""``Kubedra.install`` waits for the CRD by polling its status, not with ``kubectl wait``.

kubectl 1.37.1 ``wait --for=condition=Established`` fails at once (".status.conditions
accessor error: <nil> is of the type <nil>") when it reads a just-created CRD before the API
server has written any condition: 3 of 9 apply-then-wait runs on a fresh control plane
(/work/notes/taintcheck.md). The API answers are replayed here in that order: no status, then
conditions without Established, then Established.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import kubedra as harness
from e2e.harness.controlplane import ControlPlane, ControlPlaneError

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deviceinventories.kubedra.io"
NOT_YET: list[dict[str, Any]] = [
    {"metadata": {"name": "deviceinventories.kubedra.io"}},
    {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}},
    {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                               {"type": "Established", "status": "False"}]}},
]
ESTABLISHED = {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                         {"type": "Established", "status": "True"}]}}


class _Plane(ControlPlane):
    """A control plane that is never started, whose API answers the CRD reads in order."""

    def __init__(self, workdir: Path, answers: list[dict[str, Any]]) -> None:
        super().__init__(workdir)
        self.answers = answers
        self.reads: list[str] = []

    def request(self, method: str, path: str, body: Any = None) -> Any:
        self.reads.append(f"{method} {path}")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _kubectl(calls: list[tuple[str, ...]]) -> Any:
    def run(_plane: Any, *args: str, stdin: str | None = None) -> str:
        calls.append(args)
        if args[0] == "wait":  # what kubectl 1.37.1 does while the CRD has no condition
            raise subprocess.CalledProcessError(1, ["kubectl", *args], stderr=(
                "error: .status.conditions accessor error: <nil> is of the type <nil>, "
                "expected []interface{}"))
        return ""
    return run


def test_install_polls_the_crd_until_it_is_established(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(harness, "kubectl", _kubectl(calls))
    plane = _Plane(tmp_path, [*NOT_YET, ESTABLISHED])
    harness.Kubedra(plane).install()
    assert calls == [("apply", "-k", str(harness.REPO_ROOT / "manifests"))]
    assert plane.reads == [f"GET {CRD_PATH}"] * 4


def test_a_crd_never_established_fails_after_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "kubectl", _kubectl([]))
    plane = _Plane(tmp_path, NOT_YET[:1])
    with pytest.raises(ControlPlaneError, match=r"^timed out waiting for CRD "
                                                r"deviceinventories\.kubedra\.io Established"):
        harness.wait_established(plane, timeout=0.5)
    assert len(plane.reads) >= 2
