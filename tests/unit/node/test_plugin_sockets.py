"""Socket paths, including upstream's rolling-update names.

The expected names were produced by k8s.io/dynamic-resource-allocation v0.37.2's own
``kubeletplugin.RollingUpdateRegistrarSocketFile`` (a Go program run against the module cache).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedra.node.sockets import (
    UNIX_PATH_MAX,
    dra_socket,
    registration_socket,
)
from kubedra.settings import DEFAULT_PLUGINS_DIR, DEFAULT_REGISTRY_DIR

UID = "ad4af911-5bcd-47c5-a554-f35cea869472"


def test_default_names() -> None:
    assert registration_socket(DEFAULT_REGISTRY_DIR, "gpu.kubedra.io") == Path(
        "/var/lib/kubelet/plugins_registry/gpu.kubedra.io-reg.sock")
    assert dra_socket(DEFAULT_PLUGINS_DIR, "gpu.kubedra.io") == Path(
        "/var/lib/kubelet/plugins/gpu.kubedra.io/dra.sock")


@pytest.mark.parametrize(("driver", "uid", "want"), [
    ("gpu.kubedra.io", "11111111-2222-3333-4444-555555555555",
     "gpu.kubedra.io-11111111-2222-3333-4444-555555555555-reg.sock"),
    ("gpu.dra-example-driver.sigs.k8s.io", UID,
     "gpu.dra-example-driver.sigs.k8s.io-Jk8-oymVURI-reg.sock"),
    ("a" * 100, UID, "dra-0XAjsR3nLFWHa0HL1OOe6g-reg.sock"),
])
def test_rolling_update_names_match_upstream(driver: str, uid: str, want: str) -> None:
    path = registration_socket(DEFAULT_REGISTRY_DIR, driver, uid)
    assert path.name == want
    assert len(str(path)) <= UNIX_PATH_MAX


def test_rolling_update_dra_socket() -> None:
    assert dra_socket(Path("/p"), "gpu.kubedra.io", UID) == Path(
        f"/p/gpu.kubedra.io/dra-{UID}.sock")
