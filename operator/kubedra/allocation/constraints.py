"""Claim constraints: ``matchAttribute`` and ``distinctAttribute``.

Semantics of ``matchAttributeConstraint`` (``allocator_incubating.go``) and
``distinctAttributeConstraint`` (``constraint.go``) in ``structured/internal/incubating``, v0.37.2:

- a constraint lists requests (``req`` or ``req/subrequest``; a subrequest is also covered by
  its parent's name); an empty list covers all requests;
- a device of a covered request must have the attribute. The fully qualified name is looked up
  as is, then, when its domain is the device's driver, by its short name;
- matchAttribute: the first device fixes the value, every further one must have the same type
  and value; distinctAttribute: the value must differ from every value recorded so far. Values
  are compared by type and value (string, int, bool, version as a string; from 1.38 a version
  by precedence, build metadata ignored:
  :data:`~kubedra.allocation.versions.VERSIONS_COMPARED_BY_PRECEDENCE`);
- constraints are monotonic: once a device is rejected, adding more devices never helps.

Both keep a stack of what was added, and ``remove`` undoes the latest ``add`` (the search
backtracks in reverse order). v0.37.2 keeps the distinct values in a list, so values of *all*
devices are compared. Older minors decide otherwise (:class:`DistinctAttributePerRequest`,
:data:`~kubedra.allocation.versions.DISTINCT_ATTRIBUTE_EVERY_DEVICE` and
:data:`~kubedra.allocation.versions.DISTINCT_ATTRIBUTE_VALUES_COMPARED`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from kubedra.allocation.versions import (
    DISTINCT_ATTRIBUTE_EVERY_DEVICE,
    DISTINCT_ATTRIBUTE_VALUES_COMPARED,
    KubeVersion,
)
from kubedra.api.resource import DeviceAttribute
from kubedra.cel.semver import Semver, SemverParseError, parse_semver

if TYPE_CHECKING:
    from kubedra.allocation.pools import DeviceEntry

AttributeKey = tuple[str, object] | None
"""``(type, value)`` of an attribute; ``None`` for an attribute without a scalar value."""


class _Missing(enum.Enum):
    MISSING = "missing"


MISSING = _Missing.MISSING
"""What :func:`lookup_attribute` returns for a device without the attribute."""

Lookup = AttributeKey | _Missing
"""The attribute key of a device, or :data:`MISSING`."""


def attribute_key(attribute: DeviceAttribute, *, versions_parsed: bool = False) -> AttributeKey:
    """The comparable ``(type, value)`` of an attribute; the first scalar field set wins, in
    upstream's order (string, int, bool, version).

    A version is its text up to 1.37, and with ``versions_parsed`` (from 1.38,
    :data:`~kubedra.allocation.versions.VERSIONS_COMPARED_BY_PRECEDENCE`) the parsed version
    without build metadata, so that ``1.0.0+a`` and ``1.0.0+b`` are one value; a text that does
    not parse has no value (None)."""
    if attribute.string_value is not None:
        return ("string", attribute.string_value)
    if attribute.int_value is not None:
        return ("int", attribute.int_value)
    if attribute.bool_value is not None:
        return ("bool", attribute.bool_value)
    if attribute.version_value is not None:
        if not versions_parsed:
            return ("version", attribute.version_value)
        parsed = _parsed_version(attribute.version_value)
        return None if parsed is None else ("version", parsed)
    return None


@lru_cache(maxsize=4096)
def _parsed_version(text: str) -> Semver | None:
    """``semver.New`` of the text, as ``attrValue`` in
    ``k8s.io/dynamic-resource-allocation/api/conversion.go`` (v0.38.0-beta.0) calls it: the
    version (its build metadata dropped: ``Version.Equals`` ignores it), or None where it does
    not parse (then the attribute has no value)."""
    try:
        return parse_semver(text)
    except SemverParseError:
        return None


def lookup_attribute(device: DeviceEntry, name: str, *, versions_parsed: bool = False) -> Lookup:
    """The attribute key of a device for a fully qualified name, or ``MISSING``
    (``lookupAttribute``); ``versions_parsed`` as in :func:`attribute_key`."""
    attributes = device.attributes
    if name in attributes:
        return attribute_key(attributes[name], versions_parsed=versions_parsed)
    domain, slash, short = name.partition("/")
    if slash and domain == device.driver and short in attributes:
        return attribute_key(attributes[short], versions_parsed=versions_parsed)
    return MISSING


class Constraint:
    """One constraint of a claim, with the state of the current search branch."""

    __slots__ = ("attribute", "requests")

    def __init__(self, attribute: str, requests: Iterable[str] | None) -> None:
        self.attribute = attribute
        self.requests = frozenset(requests or ())

    def applies_to(self, request: str, subrequest: str | None) -> bool:
        """Whether devices of this request (or subrequest of it) are constrained."""
        if not self.requests or request in self.requests:
            return True
        return subrequest is not None and f"{request}/{subrequest}" in self.requests

    def add(self, key: Lookup, request: str, device: object) -> bool:
        """Record a device's attribute key (``MISSING`` when it lacks the attribute) for a
        device of ``request`` (its base name), ``device`` being the device's ID; return False
        (and record nothing) when the constraint rejects it."""
        raise NotImplementedError

    def remove(self, request: str) -> None:
        """Undo the latest successful :meth:`add` (of a device of ``request``)."""
        raise NotImplementedError


class MatchAttribute(Constraint):
    """All devices share one value of the attribute."""

    __slots__ = ("count", "value")

    def __init__(self, attribute: str, requests: Iterable[str] | None) -> None:
        super().__init__(attribute, requests)
        self.value: AttributeKey = None
        self.count = 0

    def add(self, key: Lookup, request: str, device: object) -> bool:
        if key is MISSING:
            return False
        if self.count == 0:
            self.value = key
        elif key is None or key != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str) -> None:
        self.count -= 1

    def fixed_value(self) -> Lookup:
        """The value every further device must have, or ``MISSING`` while no device is in."""
        return self.value if self.count else MISSING


class DistinctAttribute(Constraint):
    """No two devices share a value of the attribute."""

    __slots__ = ("seen", "stack")

    def __init__(self, attribute: str, requests: Iterable[str] | None) -> None:
        super().__init__(attribute, requests)
        self.stack: list[AttributeKey] = []
        self.seen: dict[AttributeKey, int] = {}

    def add(self, key: Lookup, request: str, device: object) -> bool:
        if key is MISSING:
            return False
        if key is None:
            # No comparable value: upstream rejects it unless nothing was recorded yet.
            if self.stack:
                return False
        elif key in self.seen:
            return False
        self.stack.append(key)
        if key is not None:
            self.seen[key] = self.seen.get(key, 0) + 1
        return True

    def remove(self, request: str) -> None:
        key = self.stack.pop()
        if key is not None:
            left = self.seen[key] - 1
            if left:
                self.seen[key] = left
            else:
                del self.seen[key]


    def rejects(self, key: Lookup) -> bool:
        """Whether a device with this key would be rejected now and on every deeper branch
        (the search's shortcut; ``MISSING`` is the caller's to check)."""
        return key in self.seen or (key is None and bool(self.stack))


class DistinctAttributePerRequest(DistinctAttribute):
    """``distinctAttribute`` as 1.34 to 1.36 decide it: one value remembered per request, the
    latest device's (``attributes map[string]DeviceAttribute`` in ``constraint.go``), so a
    device repeating the value of an earlier device of the same request that a later one
    overwrote passes; ``remove`` forgets the request's value (even while earlier devices of
    it stay). With ``by_identity`` (1.34) values are compared as Go pointers, so only the same
    device repeats a value.

    Source: ``structured/internal/experimental/constraint.go`` of v0.34.4 and v0.35.4,
    ``structured/internal/incubating/constraint.go`` of v0.36.3 (kubedra's rules
    :data:`~kubedra.allocation.versions.DISTINCT_ATTRIBUTE_EVERY_DEVICE`,
    :data:`~kubedra.allocation.versions.DISTINCT_ATTRIBUTE_VALUES_COMPARED`).
    """

    __slots__ = ("by_identity", "count", "values")

    def __init__(self, attribute: str, requests: Iterable[str] | None, *,
                 by_identity: bool) -> None:
        super().__init__(attribute, requests)
        self.by_identity = by_identity
        self.values: dict[str, tuple[AttributeKey, object]] = {}
        self.count = 0

    def add(self, key: Lookup, request: str, device: object) -> bool:
        if key is MISSING:
            return False
        if self.count and any(self._repeats(key, device, *kept) for kept in self.values.values()):
            return False
        self.values[request] = (key, device)
        self.count += 1
        return True

    def _repeats(self, key: AttributeKey, device: object, kept: AttributeKey,
                 kept_device: object) -> bool:
        if key is None:  # no comparable value: upstream's "type unknown" is a duplicate
            return True
        return key == kept and (not self.by_identity or device == kept_device)

    def remove(self, request: str) -> None:
        self.values.pop(request, None)
        self.count -= 1

    def rejects(self, key: Lookup) -> bool:
        # not monotonic: a later device of a request overwrites its value, so a value rejected
        # now may pass deeper in the branch
        return False


def distinct_attribute(version: KubeVersion, attribute: str,
                       requests: Iterable[str] | None) -> DistinctAttribute:
    """The ``distinctAttribute`` constraint as ``version``'s scheduler decides it."""
    if version.follows(DISTINCT_ATTRIBUTE_EVERY_DEVICE):
        return DistinctAttribute(attribute, requests)
    return DistinctAttributePerRequest(
        attribute, requests, by_identity=not version.follows(DISTINCT_ATTRIBUTE_VALUES_COMPARED))
