"""The pools a process owns: a Kubernetes label selector over DeviceInventories, carried onto
the slices published from them.

One operator process owns the pools of the inventories its selector matches (all of them
when it is empty). Every cache of pool objects is filtered by it on the API server (the
inventories kopf watches, the slices of :mod:`kubedra.controller.slices`), and every slice
published carries the inventory's labels of the keys the selector names
(:func:`pool_labels`), so that the slices of a pool match the selector of the process that
owns the pool: a process sees its own slices only, and never takes another's for the
slices of a deleted inventory. Sharding pools across replicas is then a choice of selectors
(e.g. ``kubedra.dev/shard=a``), with no change to a cache or a reconciler.

The syntax is the API server's (``k8s.io/apimachinery/pkg/labels/selector.go``, ``Parse``):
requirements joined by commas, each ``key``, ``!key``, ``key=value``, ``key==value``,
``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``; the API server applies it, this
module only finds its keys and rejects what is plainly not a selector.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubedra.api.names import is_label_key, is_label_value

_REQUIREMENT = re.compile(
    r"^(?P<not>!)?\s*(?P<key>[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?)\s*"
    r"(?:(?:=|==|!=)\s*(?P<value>[-A-Za-z0-9_.]*)|\s(?:in|notin)\s*\((?P<values>[^()]*)\))?$")


def selector_keys(selector: str) -> tuple[str, ...]:
    """The label keys ``selector`` names, in order, each once (empty for an empty selector).

    Raises:
        ValueError: a requirement is not one of the forms above, or its key or a value is not
            a label's (the message quotes it).
    """
    keys: list[str] = []
    for requirement in _requirements(selector):
        match = _REQUIREMENT.match(requirement)
        if match is None or (match["not"] and (match["value"] is not None
                                               or match["values"] is not None)):
            raise ValueError(f"not a label selector requirement: {requirement!r} (give key, "
                             "!key, key=value, key!=value, key in (a,b) or key notin (a,b))")
        _check_label(requirement, match["key"], [
            v.strip() for v in ([match["value"]] if match["value"] is not None else
                                (match["values"] or "").split(",")
                                if match["values"] is not None else [])])
        if match["key"] not in keys:
            keys.append(match["key"])
    return tuple(keys)


def _check_label(requirement: str, key: str, values: list[str]) -> None:
    """Refuse a key or value the API server would refuse as a label's (``Parse`` validates
    them with ``validateLabelKey`` / ``validateLabelValue``): the error names which.

    Raises:
        ValueError: ``key`` is not a label key or a value not a label value.
    """
    if not is_label_key(key):
        raise ValueError(f"{requirement!r}: the key {key!r} is not a label key (name or "
                         "prefix/name: a DNS subdomain of at most 253 characters, '/', and at "
                         "most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends)")
    for value in values:
        if not is_label_value(value):
            raise ValueError(f"{requirement!r}: {value!r} is not a label value (at most 63 "
                             "alphanumerics, '-', '_' or '.', alphanumeric at both ends)")


def _requirements(selector: str) -> list[str]:
    """``selector`` split at the commas outside parentheses, each part stripped."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip() or parts:
        parts.append(current.strip())
    return parts


def pool_labels(selector: str, inventory_labels: Mapping[str, str] | None
                ) -> dict[str, str]:
    """The labels the slices of an inventory with ``inventory_labels`` carry so that they
    match ``selector`` exactly when the inventory does: the inventory's labels of the keys
    ``selector`` names (an empty dict for an empty selector).

    Raises:
        ValueError: ``selector`` is not a label selector (see :func:`selector_keys`).
    """
    labels = inventory_labels or {}
    return {key: labels[key] for key in selector_keys(selector) if key in labels}
