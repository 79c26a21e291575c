"""The releases the e2e harness runs (``KUBE_VERSION``, ``KUBELET_VERSION``): a value that is
not one of them is one line naming the variable and the releases there are, before a test is
collected (``KUBELET_VERSION=banana`` was an ``IndexError`` while collecting a test file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e.harness.versions import HarnessVersionError, kube_version, kubelet_version, releases

ROOT = Path(__file__).resolve().parents[2]
RELEASES = "1.34.4, 1.35.4, 1.36.3, 1.37.2"


def test_the_releases_are_the_default_and_those_pinned() -> None:
    assert ", ".join(releases()) == RELEASES


@pytest.mark.parametrize(("variables", "expected"), [
    ({}, ("1.37.2", "1.37.2")),
    ({"KUBE_VERSION": "v1.35.4"}, ("1.35.4", "1.35.4")),
    ({"KUBELET_VERSION": "1.34.4"}, ("1.37.2", "1.34.4")),
    ({"KUBE_VERSION": "", "KUBELET_VERSION": ""}, ("1.37.2", "1.37.2")),
])
def test_a_release_of_the_matrix_is_taken(variables: dict[str, str], expected: tuple[str, str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBE_VERSION", raising=False)
    monkeypatch.delenv("KUBELET_VERSION", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert (kube_version(), kubelet_version()) == expected


@pytest.mark.parametrize(("variables", "message"), [
    ({"KUBELET_VERSION": "banana"},
     "KUBELET_VERSION=banana is not a Kubernetes release (X.Y.Z); the harness runs "
     f"{RELEASES} (hack/k8s-versions/; hack/pin-kube-version.sh vX.Y.Z pins another)"),
    ({"KUBE_VERSION": "1.33.0"},
     f"KUBE_VERSION=1.33.0 is not pinned; the harness runs {RELEASES} (hack/k8s-versions/; "
     "hack/pin-kube-version.sh vX.Y.Z pins another)"),
    ({"KUBE_VERSION": "1.35.4", "KUBELET_VERSION": "1.36.3"},
     "KUBELET_VERSION=1.36.3 is newer than the control plane's 1.35.4: a kubelet may not be "
     "newer than kube-apiserver (version-skew-policy); choose one of 1.34.4, 1.35.4"),
])
def test_a_release_the_harness_does_not_run_is_one_line(
        variables: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBE_VERSION", raising=False)
    monkeypatch.delenv("KUBELET_VERSION", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(HarnessVersionError) as refused:
        kube_version() if "KUBELET_VERSION" not in variables else kubelet_version()
    assert str(refused.value) == message


def test_pytest_stops_before_collecting_with_that_line(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "--collect-only", "e2e/test_node_contracts.py"], cwd=ROOT,
                         capture_output=True, text=True, check=False,
                         env={"PATH": "/usr/bin:/bin", "KUBELET_VERSION": "banana"})
    assert (ran.returncode, ran.stderr.strip(), ran.stdout) == (
        4, "ERROR: KUBELET_VERSION=banana is not a Kubernetes release (X.Y.Z); the harness "
           f"runs {RELEASES} (hack/k8s-versions/; hack/pin-kube-version.sh vX.Y.Z pins another)",
        "")


def test_cluster_up_starts_nothing_and_says_so(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "e2e.harness", "up"], cwd=ROOT,
                         capture_output=True, text=True, check=False,
                         env={"PATH": "/usr/bin:/bin", "KUBE_VERSION": "1.36",
                              "KUBEDRA_CLUSTER_DIR": str(tmp_path / "cluster")})
    assert (ran.returncode, ran.stderr, ran.stdout) == (
        1, f"cluster not started: KUBE_VERSION=1.36 is not a Kubernetes release (X.Y.Z); the "
           f"harness runs {RELEASES} (hack/k8s-versions/; hack/pin-kube-version.sh vX.Y.Z pins "
           "another)\n", "")
    assert not (tmp_path / "cluster").exists()


@pytest.mark.parametrize(("target", "variable", "loop"), [
    ("test-skew", "KUBELET_VERSION", "for k in 1.35.4; do"),
    ("test-matrix", "KUBE_VERSION", "for v in 1.36.3; do"),
])
def test_make_runs_the_release_the_variable_names(target: str, variable: str, loop: str) -> None:
    """``KUBELET_VERSION=1.35.4 make test-skew`` runs that kubelet (the recipe set the variable
    itself, from ``SKEW_KUBELETS``, so it was ignored; ``KUBE_VERSION`` and ``test-matrix``
    alike); ``banana`` then reaches hack/build-kube-version.sh, which names it."""
    release = loop.split()[3].removesuffix(";")
    ran = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", variable: release})
    assert loop in ran.stdout, ran.stdout
