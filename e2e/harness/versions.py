"""The Kubernetes releases the harness runs: ``KUBE_VERSION`` (the control plane's, and the real
nodes' kubelet's) and ``KUBELET_VERSION`` (the kubelet's on its own, for a kubelet older than
its control plane).

A release is the default (:data:`DEFAULT_KUBE_VERSION`, built by ``hack/build-binaries.sh``) or
one pinned in ``hack/k8s-versions/v<release>/`` (``hack/pin-kube-version.sh``); a kubelet is
never newer than its kube-apiserver and at most three minors older (Kubernetes'
``version-skew-policy``). Anything else is :class:`HarnessVersionError`, one line naming the
variable and the releases there are.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_KUBE_VERSION = "1.37.2"
"""The release CI tests in full (hack/k8s, hack/kubelet)."""
PINNED = Path(__file__).resolve().parents[2] / "hack" / "k8s-versions"
"""Where the other releases of the version matrix are pinned, one folder ``v<release>``."""
KUBELET_SKEW = 3
"""Minors a kubelet may be older than kube-apiserver (``version-skew-policy``)."""


class HarnessVersionError(ValueError):
    """``KUBE_VERSION`` or ``KUBELET_VERSION`` names no release the harness runs."""


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))


def releases() -> list[str]:
    """The releases the harness runs, oldest first (``1.34.4`` …): the default and every one
    pinned in :data:`PINNED`."""
    pinned = {d.name.removeprefix("v") for d in PINNED.glob("v*") if (d / "go.mod").is_file()}
    return sorted(pinned | {DEFAULT_KUBE_VERSION}, key=_key)


def _release(variable: str, default: str) -> str:
    value = os.environ.get(variable) or default
    release = value.removeprefix("v")
    known = releases()
    if release in known:
        return release
    what = "is not pinned" if re.fullmatch(r"\d+\.\d+\.\d+", release) else \
        "is not a Kubernetes release (X.Y.Z)"
    raise HarnessVersionError(f"{variable}={value} {what}; the harness runs {', '.join(known)} "
                              "(hack/k8s-versions/; hack/pin-kube-version.sh vX.Y.Z pins another)")


def kube_version() -> str:
    """``$KUBE_VERSION`` without a leading ``v`` (default :data:`DEFAULT_KUBE_VERSION`).

    Raises:
        HarnessVersionError: not a release of :func:`releases`.
    """
    return _release("KUBE_VERSION", DEFAULT_KUBE_VERSION)


def kubelet_version() -> str:
    """``$KUBELET_VERSION`` without a leading ``v`` (default :func:`kube_version`): the real
    nodes' kubelet release, which may be older than the control plane's, by at most
    :data:`KUBELET_SKEW` minors.

    Raises:
        HarnessVersionError: not a release of :func:`releases`, or outside that skew.
    """
    plane = kube_version()
    kubelet = _release("KUBELET_VERSION", plane)
    behind = _key(plane)[1] - _key(kubelet)[1]
    if 0 <= behind <= KUBELET_SKEW:
        return kubelet
    fits = [r for r in releases() if 0 <= _key(plane)[1] - _key(r)[1] <= KUBELET_SKEW]
    why = (f"newer than the control plane's {plane}: a kubelet may not be newer than "
           "kube-apiserver" if behind < 0 else
           f"more than {KUBELET_SKEW} minors older than the control plane's {plane}")
    raise HarnessVersionError(f"KUBELET_VERSION={kubelet} is {why} (version-skew-policy); "
                              f"choose one of {', '.join(fits)}")
