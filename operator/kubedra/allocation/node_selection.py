"""Which nodes a ResourceSlice or a device is available on.

``NodeMatches`` in ``structured/internal/incubating/pools_incubating.go``: a node name wins over
``allNodes``, which wins over a node selector; a selector is evaluated as
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity.NewNodeSelector`` does (terms are
ORed, empty terms ignored, requirements ANDed; ``matchFields`` support only ``metadata.name``
with ``In``/``NotIn`` of one value). A selector that does not parse is an
:class:`~kubedra.allocation.errors.AllocationError`, as upstream aborts on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubedra.allocation.errors import AllocationError
from kubedra.api.resource import NodeSelector, NodeSelectorRequirement

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT64 = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The parts of a Node the allocator looks at: its name and labels."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    cache_key: tuple[str, frozenset[tuple[str, str]]] = field(init=False, repr=False,
                                                             compare=False)
    """A hashable key: nodes with equal keys see the same pools."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_key", (self.name, frozenset(self.labels.items())))


class NodeSelection:
    """A slice's or device's ``nodeName`` / ``allNodes`` / ``nodeSelector``; the selector is
    parsed on first use, so that a broken selector fails only where upstream evaluates it."""

    __slots__ = ("_compiled", "all_nodes", "node_name", "node_selector")

    def __init__(self, node_name: str | None, all_nodes: bool | None,
                 node_selector: NodeSelector | None) -> None:
        self.node_name = node_name or None
        self.all_nodes = bool(all_nodes)
        self.node_selector = node_selector
        self._compiled: CompiledNodeSelector | None = None

    @property
    def is_set(self) -> bool:
        """Whether any of the three fields is set."""
        return self.node_name is not None or self.all_nodes or self.node_selector is not None

    def matches(self, node: NodeInfo) -> bool:
        """Whether ``node`` is selected; nothing set selects no node.

        Raises:
            AllocationError: the node selector does not parse.
        """
        if self.node_name is not None:
            return node.name == self.node_name
        if self.all_nodes:
            return True
        if self.node_selector is None:
            return False
        if self._compiled is None:
            self._compiled = compile_node_selector(self.node_selector)
        return self._compiled.matches(node)


def _parse_int64(text: str) -> int | None:
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _is_qualified_name(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def _is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(_NAME.match(value)))


def _label_requirement_errors(req: NodeSelectorRequirement) -> list[str]:
    """What ``labels.NewRequirement`` rejects in a matchExpressions entry."""
    errors = []
    values = req.values or []
    if not _is_qualified_name(req.key):
        errors.append(f"invalid label key {req.key!r}")
    if req.operator in ("In", "NotIn") and not values:
        errors.append(f"{req.key}: values must not be empty for {req.operator}")
    elif req.operator in ("Exists", "DoesNotExist") and values:
        errors.append(f"{req.key}: values must be empty for {req.operator}")
    elif req.operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(f"{req.key}: exactly one value is required for {req.operator}")
        errors.extend(f"{req.key}: {v!r} is not an integer" for v in values
                      if _parse_int64(v) is None)
    elif req.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
        errors.append(f"{req.key}: unsupported operator {req.operator!r}")
    errors.extend(f"{req.key}: invalid label value {v!r}" for v in values if not _is_label_value(v))
    return errors


def _field_requirement_errors(req: NodeSelectorRequirement) -> list[str]:
    if req.operator not in ("In", "NotIn"):
        return [f"{req.key}: unsupported field selector operator {req.operator!r}"]
    if len(req.values or []) != 1:
        return [f"{req.key}: field selector values must have one element"]
    return []


def _label_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    values = req.values or []
    present = req.key in labels
    match req.operator:
        case "In":
            return present and labels[req.key] in values
        case "NotIn":
            return not present or labels[req.key] not in values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case _:  # Gt, Lt (validated)
            if not present:
                return False
            have, want = _parse_int64(labels[req.key]), _parse_int64(values[0])
            if have is None or want is None:
                return False
            return have > want if req.operator == "Gt" else have < want


@dataclass(frozen=True, slots=True)
class _Term:
    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...]

    def matches(self, node: NodeInfo) -> bool:
        if not all(_label_matches(req, node.labels) for req in self.expressions):
            return False
        if self.fields and node.name:
            # Only metadata.name is a node field; other keys read as "".
            for req in self.fields:
                value = node.name if req.key == "metadata.name" else ""
                wanted = (req.values or [""])[0]
                if (value == wanted) != (req.operator == "In"):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class CompiledNodeSelector:
    """A parsed node selector: it matches when any of its non-empty terms matches."""

    terms: tuple[_Term, ...]

    def matches(self, node: NodeInfo) -> bool:
        """Whether the node is selected."""
        return any(term.matches(node) for term in self.terms)


def compile_node_selector(selector: NodeSelector) -> CompiledNodeSelector:
    """Parse a node selector as ``nodeaffinity.NewNodeSelector`` does.

    Raises:
        AllocationError: an operator, key or value that upstream rejects.
    """
    terms = []
    errors: list[str] = []
    for term in selector.node_selector_terms:
        expressions = tuple(term.match_expressions or ())
        match_fields = tuple(term.match_fields or ())
        if not expressions and not match_fields:
            continue
        for req in expressions:
            errors.extend(_label_requirement_errors(req))
        for req in match_fields:
            errors.extend(_field_requirement_errors(req))
        terms.append(_Term(expressions, match_fields))
    if errors:
        raise AllocationError("failed to parse node selector: " + "; ".join(errors))
    return CompiledNodeSelector(tuple(terms))
