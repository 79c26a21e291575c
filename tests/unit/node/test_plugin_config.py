"""Opaque device configuration: schema, errors, which entries apply, merge order."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.api.resource import DeviceAllocationConfiguration, OpaqueDeviceConfiguration
from kubedra.node.config import (
    ConfigError,
    EffectiveConfig,
    GpuConfig,
    driver_configs,
    effective_config,
    parse_config,
    request_matches,
)

DRIVER = "gpu.kubedra.io"
API = "gpu.kubedra.io/v1alpha1"


def entry(source: str, parameters: Any, requests: list[str] | None = None,
          driver: str = DRIVER) -> DeviceAllocationConfiguration:
    return DeviceAllocationConfiguration(source=source, requests=requests,
                                         opaque=OpaqueDeviceConfiguration(driver=driver,
                                                                          parameters=parameters))


def test_valid_gpu_config() -> None:
    config = parse_config(DRIVER, {"apiVersion": API, "kind": "GpuConfig",
                                   "driverCapabilities": ["compute"], "env": {"A": "1"}})
    assert config == GpuConfig(api_version=API, kind="GpuConfig",
                               driver_capabilities=["compute"], env={"A": "1"})


@pytest.mark.parametrize(("parameters", "message"), [
    ("text", "parameters must be an object with apiVersion gpu.kubedra.io/v1alpha1"),
    ({"kind": "GpuConfig"}, "apiVersion is None, want 'gpu.kubedra.io/v1alpha1'"),
    ({"apiVersion": "gpu.kubedra.io/v1", "kind": "GpuConfig"},
     "apiVersion is 'gpu.kubedra.io/v1', want 'gpu.kubedra.io/v1alpha1'"),
    ({"apiVersion": API, "kind": "TpuConfig"},
     "parameters: Input tag 'TpuConfig' found using 'kind' does not match any of the expected "
     "tags: 'GpuConfig', 'PciConfig'"),
    ({"apiVersion": API, "kind": "GpuConfig", "sharing": "timeSlicing"},
     "GpuConfig.sharing: Extra inputs are not permitted"),
    ({"apiVersion": API, "kind": "GpuConfig", "driverCapabilities": ["compute", "warp"]},
     "GpuConfig.driverCapabilities.1: Input should be 'compute', 'utility', 'graphics', "
     "'video', 'display' or 'compat32'"),
    ({"apiVersion": API, "kind": "GpuConfig", "env": {"1BAD": "x"}},
     "GpuConfig.env: Value error, '1BAD' is not a valid environment variable name"),
    ({"apiVersion": API, "kind": "GpuConfig", "env": {"NVIDIA_VISIBLE_DEVICES": "all"}},
     "GpuConfig.env: Value error, NVIDIA_VISIBLE_DEVICES is set by kubedra and cannot be "
     "configured"),
])
def test_bad_config_says_what_is_wrong(parameters: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(DRIVER, parameters)
    assert str(raised.value) == message


def test_request_matching() -> None:
    assert request_matches(None, "gpu")
    assert request_matches([], "gpu/big")
    assert request_matches(["gpu"], "gpu/big")
    assert request_matches(["gpu/big"], "gpu/big")
    assert not request_matches(["gpu/small"], "gpu/big")
    assert not request_matches(["nic"], "gpu")


def test_class_first_then_claim_and_other_drivers_ignored() -> None:
    configs = driver_configs([
        entry("FromClaim", {"apiVersion": API, "kind": "GpuConfig", "env": {"A": "claim"},
                            "driverCapabilities": ["utility"]}),
        entry("FromClass", {"apiVersion": API, "kind": "GpuConfig", "env": {"A": "class",
                                                                             "B": "class"},
                            "driverCapabilities": ["compute"]}),
        entry("FromClaim", "not even an object", driver="other.example.com"),
        entry("FromClaim", {"apiVersion": API, "kind": "GpuConfig", "env": {"C": "nic"}},
              requests=["nic"]),
    ], DRIVER)
    assert [(c.index, c.source) for c in configs] == [(1, "FromClass"), (0, "FromClaim"),
                                                     (3, "FromClaim")]
    assert effective_config(configs, "gpu/big", "gpu", "gpu-0") == EffectiveConfig(
        kind="GpuConfig", env={"A": "claim", "B": "class"}, driver_capabilities=["utility"])
    assert effective_config(configs, "nic", "mig", "m") == EffectiveConfig(
        kind="GpuConfig", env={"A": "claim", "B": "class", "C": "nic"},
        driver_capabilities=["utility"])


def test_invalid_entry_fails_even_when_it_applies_to_no_request() -> None:
    with pytest.raises(ConfigError) as raised:
        driver_configs([entry("FromClass", {"apiVersion": API, "kind": "GpuConfig"}),
                        entry("FromClaim", {"apiVersion": API, "kind": "GpuConfig", "x": 1},
                              requests=["unused"])], DRIVER)
    assert str(raised.value) == ("config[1] (FromClaim) for gpu.kubedra.io is invalid: "
                                 "GpuConfig.x: Extra inputs are not permitted")


def test_kind_must_fit_the_device() -> None:
    configs = driver_configs([entry("FromClaim", {"apiVersion": API, "kind": "PciConfig"})],
                             DRIVER)
    with pytest.raises(ConfigError) as raised:
        effective_config(configs, "gpu", "gpu", "gpu-0")
    assert str(raised.value) == ("config[0] (FromClaim): kind PciConfig does not apply to gpu "
                                 "device gpu-0 (request gpu)")
