"""Which of a device's values a selector reads, so that its outcome can be shared.

A selector's outcome is a function of the values it reads (CEL has no side effects). When every
use of ``device`` in the expression is one of ``device.driver``,
``device.allowMultipleAllocations``, ``device.attributes["<domain>"].<id>`` or
``device.capacity["<domain>"].<id>`` (``has(...)`` of these too), two devices that agree on
those values (present or absent) get the same outcome, and a fleet of 16,000 GPUs with one
memory size is evaluated once. An expression that uses ``device`` any other way (a whole domain
map, ``.?`` chaining, a comprehension over the attributes) reads everything: :func:`reads`
returns None and the caller evaluates per device.

Beyond the values read, every selector fails on a device whose attributes upstream cannot
convert (``DeviceMatches`` in ``k8s.io/dynamic-resource-allocation/cel/compile.go``: no value,
an unparsable version), so the key carries that error too (:func:`values_key`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kubedra.api.resource import DeviceAttribute, DeviceCapacity

from .library import accepts
from .semver import SemverParseError, parse_semver

Reads = tuple[tuple[str, str, str], ...]
"""What a selector reads: (``attributes`` | ``capacity`` | ``driver`` | ``allow``, domain, id)."""

_USE = re.compile(r'device\s*\.\s*(?:(attributes|capacity)\s*\[\s*"([^"\\]*)"\s*\]\s*\.\s*'
                  r"([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()|(driver|allowMultipleAllocations)\b)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")
_DEVICE = re.compile(r"\bdevice\b")


@lru_cache(maxsize=1024)
def reads(expression: str) -> Reads | None:
    """The values ``expression`` reads, or None when it may read any (see the module)."""
    found: list[tuple[str, str, str]] = []

    def keep(match: re.Match[str]) -> str:
        if match.group(4):
            found.append(("driver" if match.group(4) == "driver" else "allow", "", ""))
        else:
            found.append((match.group(1), match.group(2), match.group(3)))
        return " "

    rest = _USE.sub(keep, expression)
    uses = len(_DEVICE.findall(_STRING.sub(" ", expression)))
    if uses != len(found) or _DEVICE.search(_STRING.sub(" ", rest)):
        return None
    return tuple(sorted(set(found)))


def values_key(reads_: Reads, error: str | None, driver: str,
               attributes: Mapping[str, DeviceAttribute],
               capacity: Mapping[str, DeviceCapacity], allow_multiple: bool) -> tuple[Any, ...]:
    """The values of a device that ``reads_`` names, and its :func:`conversion_error`
    ``error`` (hashable):
    devices with equal keys get the same outcome from the selector. ``capacity`` is the
    device's ``capacity`` (values compared with their format, ``80Gi`` apart from
    ``85899345920``, as their canonical strings differ)."""
    key: list[Any] = [error]
    for kind, domain, ident in reads_:
        if kind == "driver":
            key.append(driver)
        elif kind == "allow":
            key.append(allow_multiple)
        elif kind == "attributes":
            key.append(_value(attributes.get(f"{domain}/{ident}")))
            key.append(_value(attributes.get(ident)) if domain == driver else None)
        else:
            qualified, bare = capacity.get(f"{domain}/{ident}"), capacity.get(ident)
            key.append(None if qualified is None else _quantity(qualified))
            key.append(None if bare is None or domain != driver else _quantity(bare))
    return tuple(key)


def _quantity(capacity: DeviceCapacity) -> tuple[int, int, str]:
    """A capacity's value (numerator and denominator of the reduced fraction) and format:
    what its canonical string is made from (equal triples have equal strings), without
    writing the string (``Quantity.canonical`` was most of this key's cost) and without the
    ``Fraction`` in the key, whose hash is computed in Python at every look-up."""
    quantity = capacity.value
    value = quantity.value
    return value.numerator, value.denominator, quantity.format


def _value(attr: DeviceAttribute | None) -> Any:
    if attr is None:
        return None
    return (attr.int_value, attr.bool_value, attr.string_value, attr.version_value,
            *(None if v is None else tuple(v) for v in (
                attr.int_values, attr.bool_values, attr.string_values, attr.version_values)))


def conversion_error(driver: str, attributes: Mapping[str, DeviceAttribute],
                     list_attributes: bool = True) -> str | None:
    """Whether :class:`~kubedra.cel.device.PreparedDevice` would fail on these attributes
    (a marker naming the first failing attribute), without converting them;
    ``list_attributes`` as :attr:`~kubedra.cel.device.CELDevice.list_attributes`.

    The fields are read in the order of ``_attribute_value`` (``getAttributeValue``): the
    lists ``ints``, ``bools``, ``strings`` (with ``list_attributes``), then ``versions``, then
    ``int``, ``bool``, ``string``, then ``version``; the first set decides. A scalar attribute
    without ``versions`` (nearly every attribute) is decided by the first test.
    """
    for name, attr in attributes.items():
        if attr.version_values is None and (attr.string_value is not None
                                            or attr.int_value is not None
                                            or attr.bool_value is not None):
            continue  # a list before it converts too; a version after it is not read
        if list_attributes and (attr.int_values is not None or attr.bool_values is not None
                                or attr.string_values is not None):
            continue
        if list_attributes and attr.version_values is not None:
            if not all(_version_parses(v) for v in attr.version_values):
                return name
            continue
        if attr.string_value is not None or attr.int_value is not None \
                or attr.bool_value is not None:
            continue
        if attr.version_value is None or not _version_parses(attr.version_value):
            return name
    return None


_version_parses = lru_cache(maxsize=4096)(accepts(parse_semver, SemverParseError))
"""Whether a version attribute's text parses (upstream's ``semver.Parse``), cached."""
