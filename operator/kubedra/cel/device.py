"""The ``device`` a selector sees, and its values converted once per device.

``DeviceMatches`` (``k8s.io/dynamic-resource-allocation/cel/compile.go``) files every attribute
and capacity under its domain — the part of the qualified name before ``/``, or the driver
name for an unqualified one — turns version attributes into semver objects and capacities
into quantities, and fails the whole evaluation when an attribute has no value or an
unparsable version. :class:`PreparedDevice` does that work once per :class:`CELDevice`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceAttribute

from .quantity import GoQuantity
from .semver import SemverParseError, parse_semver


@dataclass(frozen=True)
class CELDevice:
    """What a selector sees as ``device``.

    ``attributes`` and ``capacity`` use the keys of the ResourceSlice: ``domain/id``, or a
    bare ``id`` that belongs to the driver's domain. Capacity values are the devices'
    ``capacity[*].value``; the request policy is not visible to CEL.
    """

    driver: str
    attributes: Mapping[str, DeviceAttribute]
    capacity: Mapping[str, Quantity]
    allow_multiple_allocations: bool = False
    list_attributes: bool = True
    """Whether list-typed attributes are values (from Kubernetes 1.37); when not, such an
    attribute fails the evaluation as one without a value does."""

    @cached_property
    def prepared(self) -> PreparedDevice:
        """The converted values, computed on first use and kept with the device."""
        return PreparedDevice.build(self)


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name (``parseQualifiedName``)."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attr: DeviceAttribute, lists: bool) -> Any:
    """The CEL value of one attribute, in ``getAttributeValue``'s order of fields; list values
    only with ``lists``.

    Raises:
        ValueError: no value is set, or a version does not parse (upstream's message).
    """
    for values in (attr.int_values, attr.bool_values, attr.string_values):
        if values is not None and lists:
            return list(values)
    if attr.version_values is not None and lists:
        return [_version(v) for v in attr.version_values]
    for value in (attr.int_value, attr.bool_value, attr.string_value):
        if value is not None:
            return value
    if attr.version_value is not None:
        return _version(attr.version_value)
    raise ValueError("unsupported attribute value")


def _version(text: str) -> Any:
    try:
        return parse_semver(text).to_message()
    except SemverParseError as err:
        raise ValueError(f"parse semantic version: {err}") from None


@dataclass
class PreparedDevice:
    """A device's values in the form cel-expr-python takes.

    ``error`` is set when upstream's ``DeviceMatches`` would fail before evaluating anything;
    then every selector fails on this device with that message.
    """

    variables: dict[str, Any]
    attribute_domains: dict[str, dict[str, Any]]
    capacity_domains: dict[str, dict[str, Any]]
    error: str | None = None
    activation: Any = None

    @classmethod
    def build(cls, device: CELDevice) -> PreparedDevice:
        """Convert ``device`` (no CEL evaluation happens here)."""
        attributes: dict[str, dict[str, Any]] = {}
        error = None
        for name, attr in device.attributes.items():
            try:
                value = _attribute_value(attr, device.list_attributes)
            except ValueError as err:
                error = error or f"attribute {name}: {err}"
                continue
            domain, ident = split_qualified_name(name, device.driver)
            attributes.setdefault(domain, {})[ident] = value
        capacity: dict[str, dict[str, Any]] = {}
        for name, quantity in device.capacity.items():
            domain, ident = split_qualified_name(name, device.driver)
            capacity.setdefault(domain, {})[ident] = GoQuantity.from_api(quantity).to_message()
        variables = {
            "device.driver": device.driver,
            "device.allowMultipleAllocations": device.allow_multiple_allocations,
            "device.attributes": attributes,
            "device.capacity": capacity,
        }
        return cls(variables, attributes, capacity, error)
