"""The hack/ scripts' command lines: a missing or unknown argument is one ``usage:`` line (or
``error:`` line) naming the script, and nothing is built. A missing argument was bash's
``line 13: 1: unbound variable``, and an unknown one was ignored (``build-binaries.sh 1.36.3``
built v1.37.2).

Each runs without ``go`` on ``PATH`` and with an empty ``KUBEDRA_CACHE``: a script that got past
its arguments stops at its check for Go, so these tests never build anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *command: str) -> tuple[int, str]:
    ran = subprocess.run([str(ROOT / command[0]), *command[1:]], capture_output=True, text=True,
                         check=False, cwd=tmp_path, stdin=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "KUBEDRA_CACHE": str(tmp_path)})
    return ran.returncode, ran.stdout + ran.stderr


@pytest.mark.parametrize(("command", "expected"), [
    (["hack/build-kube-version.sh"],
     "usage: hack/build-kube-version.sh X.Y.Z [--force] (a release pinned in hack/k8s-versions/: "
     "1.34.4, 1.35.4, 1.36.3)"),
    (["hack/build-kube-version.sh", "1.34.4", "--forse"],
     "usage: hack/build-kube-version.sh X.Y.Z [--force] (a release pinned in hack/k8s-versions/: "
     "1.34.4, 1.35.4, 1.36.3)"),
    (["hack/pin-kube-version.sh"], "usage: hack/pin-kube-version.sh vX.Y.Z (e.g. v1.38.0)"),
    (["hack/build-binaries.sh", "1.36.3"], "usage: hack/build-binaries.sh [--force]"),
    (["hack/build-node-binaries.sh", "--forse"], "usage: hack/build-node-binaries.sh [--force]"),
    (["hack/build-kind.sh", "now"], "usage: hack/build-kind.sh [--force]"),
    (["hack/build-reference-allocators.sh", "1.35"],
     "usage: hack/build-reference-allocators.sh [--force]"),
    (["hack/build-image.sh", "--next"],
     "usage: hack/build-image.sh [--print-archive] [--next TAG] [--force] (--next needs a tag)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_missing_or_unknown_argument_is_a_usage_line(command: list[str], expected: str,
                                                       tmp_path: Path) -> None:
    assert _run(tmp_path, *command) == (2, expected + "\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("release", "expected"), [
    ("banana", "build-kube-version: error: 'banana' is not a Kubernetes release X.Y.Z (e.g. "
               "1.35.4); pinned in hack/k8s-versions/: 1.34.4, 1.35.4, 1.36.3"),
    ("1.33.0", "build-kube-version: error: Kubernetes v1.33.0 is not pinned: run "
               "hack/pin-kube-version.sh v1.33.0 (pinned in hack/k8s-versions/: 1.34.4, 1.35.4, "
               "1.36.3)"),
    ("1.37.2", "build-kube-version: Kubernetes v1.37.2 is the default release, which "
               "hack/build-binaries.sh and hack/build-node-binaries.sh build (make binaries)"),
])
def test_a_release_that_is_not_pinned_is_named(release: str, expected: str,
                                               tmp_path: Path) -> None:
    status = 0 if release == "1.37.2" else 1
    assert _run(tmp_path, "hack/build-kube-version.sh", release) == (status, expected + "\n")
