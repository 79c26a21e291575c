"""Socket paths of the kubelet plugin: registration socket and DRA service socket.

The kubelet's plugin watcher looks for sockets in its registry directory (default
``/var/lib/kubelet/plugins_registry``, ignoring names that start with ``.``), calls GetInfo on
each, and dials the endpoint it is told, the DRA socket in the plugins directory (default
``/var/lib/kubelet/plugins/<driver>/``). Both paths must be the same inside and outside the
agent's container (hostPath mounts).

Names, from k8s.io/dynamic-resource-allocation v0.37.2 ``kubeletplugin/draplugin.go``:

- registration: ``<driver>-reg.sock``; during rolling updates (two agent pods on a node at
  once, kubelet >= 1.33) the pod UID makes it unique, using the first of these whose full
  path fits (``unixPathMax``): ``<driver>-<pod UID>-reg.sock``,
  ``<driver>-<b64(sha256(pod UID)[:8])>-reg.sock``,
  ``dra-<b64(sha256(driver NUL pod UID)[:16])>-reg.sock`` (the last one regardless);
  b64 is URL-safe base64 without padding (``RawURLEncoding``).
- DRA service: ``dra.sock``, or ``dra-<pod UID>.sock`` during rolling updates.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

UNIX_PATH_MAX = 107
"""Longest unix socket path gRPC can bind, in bytes: ``sun_path`` is 108 bytes with the
terminating NUL. (Upstream's Go check allows 108, which gRPC's C core refuses, so a name
exactly at that length falls back to the next candidate here.)"""


def _b64_sha256(data: str, size: int) -> str:
    digest = hashlib.sha256(data.encode()).digest()[:size]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def registration_socket(registry_dir: Path, driver: str, pod_uid: str | None = None) -> Path:
    """Path of the registration socket in ``registry_dir`` (see the module docstring)."""
    if not pod_uid:
        return registry_dir / f"{driver}-reg.sock"
    candidates = [
        f"{driver}-{pod_uid}-reg.sock",
        f"{driver}-{_b64_sha256(pod_uid, 8)}-reg.sock",
        f"dra-{_b64_sha256(driver + chr(0) + pod_uid, 16)}-reg.sock",
    ]
    for name in candidates:
        if len(str(registry_dir / name).encode()) <= UNIX_PATH_MAX:
            return registry_dir / name
    return registry_dir / candidates[-1]


def plugin_data_dir(plugins_dir: Path, driver: str) -> Path:
    """The driver's directory in the kubelet's plugins directory (DRA socket, checkpoint)."""
    return plugins_dir / driver


def dra_socket(plugins_dir: Path, driver: str, pod_uid: str | None = None) -> Path:
    """Path of the DRA service socket (see the module docstring)."""
    name = f"dra-{pod_uid}.sock" if pod_uid else "dra.sock"
    return plugin_data_dir(plugins_dir, driver) / name
