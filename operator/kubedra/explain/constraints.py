"""Why a claim's constraints cannot be met across its requests.

The allocator's diagnosis counts, per request, how many of its fitting devices can satisfy each
constraint together; a ``matchAttribute`` over two requests can still fail when each request
alone is fine — the GPU's ``pcieRoot`` is ``pci-a``, the NIC's ``pci-b``. This module looks at
the fitting devices of every request a constraint covers (semantics as in
:func:`kubedra.allocation.lookup_attribute`: a device without the attribute cannot be used; values
compare by type and value) and says which values each request's devices have.

It is an explanation, not a search: it names the values that make a constraint impossible
among the devices that pass every check, which is what the allocator found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubedra.allocation import (
    FITS,
    MISSING,
    AttributeKey,
    DeviceEntry,
    RequestDiagnosis,
    lookup_attribute,
)
from kubedra.api.resource import DeviceConstraint

VALUES_NAMED = 3
"""Values named per request; devices named per value."""


@dataclass(frozen=True)
class ConstraintConflict:
    """A constraint that the fitting devices of the requests it covers cannot meet.

    Attributes:
        constraint: ``matchAttribute <name>`` or ``distinctAttribute <name>``.
        requests: the requests it covers, as named in the diagnosis (``r`` or ``r/sub``).
        reason: the values each request's devices have, in words.
    """

    constraint: str
    requests: tuple[str, ...]
    reason: str


def _value(key: AttributeKey) -> str:
    return "no value" if key is None else str(key[1])


def _covers(constraint: DeviceConstraint, request: str) -> bool:
    names = constraint.requests or ()
    return not names or request in names or request.partition("/")[0] in names


def _by_value(devices: Iterable[DeviceEntry], attribute: str, versions_parsed: bool
              ) -> tuple[dict[AttributeKey, list[str]], list[str]]:
    """Device names per attribute value (versions as the minor compares them:
    ``versions_parsed``), and the devices without the attribute."""
    values: dict[AttributeKey, list[str]] = {}
    missing = []
    for device in devices:
        key = lookup_attribute(device, attribute, versions_parsed=versions_parsed)
        if key is MISSING:
            missing.append(device.name)
        else:
            values.setdefault(key, []).append(device.name)
    return values, missing


def _describe(request: str, values: Mapping[AttributeKey, list[str]], missing: list[str]) -> str:
    parts = []
    for key, names in sorted(values.items(), key=lambda kv: (-len(kv[1]), _value(kv[0])))[
            :VALUES_NAMED]:
        shown = ", ".join(names[:VALUES_NAMED]) + (", …" if len(names) > VALUES_NAMED else "")
        parts.append(f"{_value(key)} ({shown})")
    if len(values) > VALUES_NAMED:
        parts.append(f"{len(values) - VALUES_NAMED} more values")
    if missing:
        parts.append(f"{len(missing)} without the attribute")
    return f"request {request}: " + ("; ".join(parts) if parts else "no fitting device")


def _match_conflict(attribute: str, groups: Mapping[str, tuple[int, list[DeviceEntry]]],
                    versions_parsed: bool) -> str | None:
    per_request = {r: _by_value(devices, attribute, versions_parsed)
                   for r, (_, devices) in groups.items()}
    candidates = set.intersection(*(set(values) for values, _ in per_request.values()))
    if any(all(len(per_request[r][0][key]) >= needed for r, (needed, _) in groups.items())
           for key in candidates):
        return None
    described = "; ".join(_describe(r, *per_request[r]) for r in groups)
    return f"no value is shared by enough fitting devices of every request: {described}"


def _distinct_conflict(attribute: str, groups: Mapping[str, tuple[int, list[DeviceEntry]]],
                       versions_parsed: bool) -> str | None:
    needed = sum(n for n, _ in groups.values())
    everything = [d for _, devices in groups.values() for d in devices]
    values, _ = _by_value(everything, attribute, versions_parsed)
    if len(values) >= needed:
        return None
    described = "; ".join(_describe(r, *_by_value(devices, attribute, versions_parsed))
                          for r, (_, devices) in groups.items())
    return (f"{needed} devices with different values are needed, the fitting devices have "
            f"{len(values)}: {described}")


def cross_request_conflicts(constraints: Sequence[DeviceConstraint],
                            diagnoses: Sequence[RequestDiagnosis],
                            devices: Mapping[str, DeviceEntry], *,
                            versions_parsed: bool = False) -> list[ConstraintConflict]:
    """The constraints over two or more requests that their fitting devices cannot meet.

    Args:
        constraints: the claim's constraints (``spec.devices.constraints``).
        diagnoses: the diagnosis of each request (and subrequest) on one node; for a
            ``firstAvailable`` request only its first alternative is looked at.
        devices: the node's devices by ``repr`` (the keys of a diagnosis' verdicts).
        versions_parsed: whether version values compare as parsed versions, build metadata
            ignored (from 1.38, ``VERSIONS_COMPARED_BY_PRECEDENCE``), else as texts.
    """
    seen_parents: set[str] = set()
    groups: dict[str, tuple[int, list[DeviceEntry]]] = {}
    for diagnosis in diagnoses:
        parent = diagnosis.request.partition("/")[0]
        if parent in seen_parents:
            continue
        seen_parents.add(parent)
        fitting = [devices[key] for key, verdict in diagnosis.verdicts.items()
                   if verdict == FITS and key in devices]
        groups[diagnosis.request] = (diagnosis.needed, fitting)
    found = []
    for constraint in constraints:
        covered = {r: g for r, g in groups.items() if _covers(constraint, r)}
        if len(covered) < 2:
            continue
        if constraint.match_attribute:
            name, reason = (f"matchAttribute {constraint.match_attribute}",
                            _match_conflict(constraint.match_attribute, covered,
                                            versions_parsed))
        elif constraint.distinct_attribute:
            name, reason = (f"distinctAttribute {constraint.distinct_attribute}",
                            _distinct_conflict(constraint.distinct_attribute, covered,
                                               versions_parsed))
        else:
            continue
        if reason is not None:
            found.append(ConstraintConflict(name, tuple(covered), reason))
    return found
