"""Settings: flags over environment over defaults; the driver follows the backend."""

from pathlib import Path

import pytest

from kubedra.settings import Settings, settings_from_flags


@pytest.mark.parametrize(("backend", "driver"), [
    ("pci", "pci.kubedra.io"), ("static", "pci.kubedra.io"), ("nvml", "gpu.kubedra.io"),
    ("snapshot:hardware/nvidia-h200", "gpu.kubedra.io")])
def test_default_driver_follows_the_backend(backend: str, driver: str) -> None:
    assert Settings(backend=backend).driver == driver


def test_flags_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEDRA_NAMESPACE", "from-env")
    monkeypatch.setenv("KUBEDRA_DRIVER", "env.example.com")
    settings = settings_from_flags(namespace="from-flag", driver=None)
    assert (settings.namespace, settings.driver) == ("from-flag", "env.example.com")


def test_relative_node_paths_become_absolute_against_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = settings_from_flags(kubelet_registry_dir=Path(".cache/node-1/registry"),
                                   kubelet_plugins_dir=Path(".cache/node-1/plugins"),
                                   cdi_dir=Path(".cache/node-1/cdi"), device_root=Path("host"))
    assert settings.kubelet_registry_dir == tmp_path / ".cache/node-1/registry"
    assert settings.kubelet_plugins_dir == tmp_path / ".cache/node-1/plugins"
    assert settings.cdi_dir == tmp_path / ".cache/node-1/cdi"
    assert settings.device_root == tmp_path / "host"
    assert settings.sysfs_root == Path("/sys")
