"""Opaque device configuration for kubedra's drivers: schema, validation, merging.

A DeviceClass or a claim may carry ``config: [{requests, opaque: {driver, parameters}}]``; the
scheduler copies both into ``status.allocation.devices.config`` (class entries with source
``FromClass``, claim entries ``FromClaim``). Only entries whose ``opaque.driver`` is ours are
read; the API server never looks inside ``parameters`` (up to 10 KiB), so the node agent is
where a bad one is caught, as a prepare error for the claim.

Schema (``apiVersion: <driver>/v1alpha1``, e.g. ``gpu.kubedra.io/v1alpha1``; unknown fields
are errors)::

    kind: GpuConfig            # for gpu and mig devices
    driverCapabilities: [compute, utility]   # -> NVIDIA_DRIVER_CAPABILITIES=compute,utility
    env: {NAME: value}         # extra environment for the containers using these devices

    kind: PciConfig            # for pci devices
    env: {NAME: value}

An entry applies to the requests it lists (``<request>`` covers all its subrequests,
``<request>/<subrequest>`` one of them), or to all requests when it lists none. Entries apply
in order, class entries before claim entries, so a claim overrides its class: ``env`` keys
merge (the later value wins) and a later ``driverCapabilities`` replaces an earlier one.
Rules from k8s.io/api resource/v1 ``DeviceClaimConfiguration`` and
``DeviceAllocationConfiguration``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from kubedra.api.resource import DeviceAllocationConfiguration

CONFIG_VERSION = "v1alpha1"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
DRIVER_CAPABILITIES_ENV = "NVIDIA_DRIVER_CAPABILITIES"
PCI_BUS_IDS_ENV = "KUBEDRA_PCI_BUS_IDS"
DEVICES_ENV = "KUBEDRA_DEVICES"
RESERVED_ENV = frozenset({VISIBLE_DEVICES_ENV, DRIVER_CAPABILITIES_ENV, PCI_BUS_IDS_ENV,
                          DEVICES_ENV})
"""Variables kubedra sets itself (see :mod:`kubedra.node.edits`); ``env`` cannot set them."""

DriverCapability = Literal["compute", "utility", "graphics", "video", "display", "compat32"]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """An opaque config entry for our driver is invalid or does not fit the device."""


class _DeviceConfig(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    api_version: str
    env: dict[str, str] | None = Field(default=None, description="Extra environment variables.")

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str] | None) -> dict[str, str] | None:
        for name in env or {}:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if name in RESERVED_ENV:
                raise ValueError(f"{name} is set by kubedra and cannot be configured")
        return env


class GpuConfig(_DeviceConfig):
    """Configuration of GPU and MIG devices."""

    kind: Literal["GpuConfig"]
    driver_capabilities: list[DriverCapability] | None = Field(
        default=None, description="NVIDIA driver capabilities the containers need.")


class PciConfig(_DeviceConfig):
    """Configuration of PCI devices."""

    kind: Literal["PciConfig"]


DeviceConfig = Annotated[GpuConfig | PciConfig, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[GpuConfig | PciConfig] = TypeAdapter(DeviceConfig)
CONFIG_KIND_FOR_DEVICE = {"gpu": "GpuConfig", "mig": "GpuConfig", "pci": "PciConfig"}
"""Which config kind applies to which device type."""


class EffectiveConfig(BaseModel):
    """The merged configuration of one request's devices."""

    kind: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    driver_capabilities: list[str] | None = None


def parse_config(driver: str, parameters: Any) -> GpuConfig | PciConfig:
    """Validate one ``opaque.parameters`` object for ``driver``.

    Raises:
        ConfigError: not an object, wrong apiVersion, unknown kind, unknown or bad fields; the
            message names each bad field.
    """
    want = f"{driver}/{CONFIG_VERSION}"
    if not isinstance(parameters, dict):
        raise ConfigError(f"parameters must be an object with apiVersion {want}")
    if parameters.get("apiVersion") != want:
        raise ConfigError(f"apiVersion is {parameters.get('apiVersion')!r}, want {want!r}")
    try:
        return _ADAPTER.validate_python(parameters)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'parameters'}: {e['msg']}"
            for e in err.errors())
        raise ConfigError(problems) from None


def request_matches(config_requests: list[str] | None, request: str) -> bool:
    """Whether a config entry listing ``config_requests`` applies to allocation result request
    ``request`` (``<request>`` or ``<request>/<subrequest>``)."""
    if not config_requests:
        return True
    return request in config_requests or request.split("/", 1)[0] in config_requests


class DriverConfig(BaseModel):
    """One validated config entry of our driver: its index in
    ``status.allocation.devices.config``, source, requests and parsed parameters."""

    index: int
    source: str
    requests: list[str] | None
    config: GpuConfig | PciConfig


def driver_configs(configs: list[DeviceAllocationConfiguration],
                   driver: str) -> list[DriverConfig]:
    """Validate every entry of ``driver`` (applicable or not) and return them in the order they
    apply: class entries first, then claim entries, each in their original order.

    Raises:
        ConfigError: an entry is invalid; the message gives its index, source and the problem.
    """
    ordered = sorted(enumerate(configs), key=lambda ic: ic[1].source != "FromClass")
    parsed: list[DriverConfig] = []
    for index, entry in ordered:
        if entry.opaque is None or entry.opaque.driver != driver:
            continue
        try:
            config = parse_config(driver, entry.opaque.parameters)
        except ConfigError as err:
            raise ConfigError(
                f"config[{index}] ({entry.source}) for {driver} is invalid: {err}") from None
        parsed.append(DriverConfig(index=index, source=entry.source, requests=entry.requests,
                                   config=config))
    return parsed


def effective_config(configs: list[DriverConfig], request: str, device_type: str,
                     device: str) -> EffectiveConfig:
    """Merge the entries of :func:`driver_configs` that apply to ``request`` for one device of
    ``device_type`` (``gpu``, ``mig``, ``pci``) named ``device``.

    Raises:
        ConfigError: an applicable entry's kind does not fit the device.
    """
    merged = EffectiveConfig()
    for entry in configs:
        if not request_matches(entry.requests, request):
            continue
        config = entry.config
        if config.kind != CONFIG_KIND_FOR_DEVICE.get(device_type):
            raise ConfigError(f"config[{entry.index}] ({entry.source}): kind {config.kind} does "
                              f"not apply to {device_type} device {device} (request {request})")
        merged.kind = config.kind
        merged.env.update(config.env or {})
        if isinstance(config, GpuConfig) and config.driver_capabilities is not None:
            merged.driver_capabilities = list(config.driver_capabilities)
    return merged
