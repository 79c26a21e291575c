"""Settings: flags over environment over defaults; the driver follows the backend."""

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
