"""Checks and rewrites of a checked expression that make cel-expr-python behave as upstream.

cel-expr-python type-checks with the C++ checker and hands back the checked AST
(``cel.expr.CheckedExpr``). Before the program is planned, kubedra:

* rejects what upstream's checker rejects but the C++ checker, given kubedra's value
  types, would accept: field selection on and construction of ``kubernetes.Quantity``,
  ``kubernetes.Semver``, ``kubernetes.URL``, ``net.IP`` and ``net.CIDR`` (types without
  fields upstream), and mixed-type list or map literals
  (``cel.HomogeneousAggregateLiterals``);
* checks the result type as ``validateOutputType`` does (``bool`` or ``dyn``);
* replaces lookups of a domain in ``device.attributes`` / ``device.capacity`` with calls of
  internal functions that return an empty map for an unknown domain — upstream wraps these
  maps so that ``Find`` never misses (``newStringInterfaceMapWithDefault``): indexing, field
  selection, ``has()`` and optional selection see every domain, while ``in``, ``size()`` and
  iteration see only the real ones;
* replaces ``==``/``!=`` between two Quantities with a call that compares values, as
  ``Quantity.Equal`` does (the message representation would compare representations);
* computes a worst-case cost bound (see :func:`estimate_cost`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .library import (
    ATTRIBUTE_DOMAIN,
    ATTRIBUTE_DOMAIN_OVERLOAD,
    CAPACITY_DOMAIN,
    CAPACITY_DOMAIN_OVERLOAD,
    QUANTITY_EQUALS,
    QUANTITY_EQUALS_OVERLOAD,
    QUANTITY_NOT_EQUALS,
    QUANTITY_NOT_EQUALS_OVERLOAD,
)
from .protos import CIDR_TYPE, IP_TYPE, QUANTITY_TYPE, SEMVER_TYPE, URL_TYPE, Expr, Type

ATTRIBUTES_VARIABLE = "device.attributes"
CAPACITY_VARIABLE = "device.capacity"
_DOMAIN_FUNCTIONS = {ATTRIBUTES_VARIABLE: (ATTRIBUTE_DOMAIN, ATTRIBUTE_DOMAIN_OVERLOAD),
                     CAPACITY_VARIABLE: (CAPACITY_DOMAIN, CAPACITY_DOMAIN_OVERLOAD)}
_OPAQUE_TYPES = (QUANTITY_TYPE, SEMVER_TYPE, IP_TYPE, CIDR_TYPE)


def field_selection_error(type_name: str) -> str:
    """cel-go's compile error for selecting a field of a Kubernetes value type.

    Upstream declares ``kubernetes.Quantity``, ``kubernetes.Semver`` and ``kubernetes.URL`` as
    object types its type provider cannot resolve, ``net.IP`` and ``net.CIDR`` as opaque types.
    """
    if type_name.startswith("kubernetes."):
        return f"unexpected failed resolution of '{type_name}'"
    return f"type '{type_name}' does not support field selection"
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}

# Sizes upstream's estimator assumes for the device (compile.go: DeviceMaxIDLength,
# ResourceSliceMaxAttributesAndCapacitiesPerDevice, DeviceAttributeMaxValueLength, ...).
_VARIABLE_SIZES = {"device.driver": 63, ATTRIBUTES_VARIABLE: 32, CAPACITY_VARIABLE: 32,
                   "device.allowMultipleAllocations": 1}
_DOMAIN_SIZE = 32
_VALUE_SIZE = 64


class CheckError(ValueError):
    """An upstream compile error found in the checked AST: message and node id."""

    def __init__(self, message: str, node_id: int) -> None:
        super().__init__(message)
        self.node_id = node_id


def format_type(t: Any) -> str:
    """A checked type in cel-go's notation (``int``, ``map(string, dyn)``, ``list(int)``)."""
    kind = t.WhichOneof("type_kind")
    if kind == "primitive":
        return _PRIMITIVES.get(t.primitive, "unknown")
    if kind == "wrapper":
        return f"wrapper({_PRIMITIVES.get(t.wrapper, 'unknown')})"
    if kind == "well_known":
        return _WELL_KNOWN.get(t.well_known, "unknown")
    if kind == "list_type":
        return f"list({format_type(t.list_type.elem_type)})"
    if kind == "map_type":
        return f"map({format_type(t.map_type.key_type)}, {format_type(t.map_type.value_type)})"
    if kind == "message_type":
        return str(t.message_type)
    if kind == "type_param":
        return str(t.type_param)
    if kind == "type":
        return f"type({format_type(t.type)})"
    if kind == "abstract_type":
        params = ", ".join(format_type(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else str(t.abstract_type.name)
    if kind == "null":
        return "null_type"
    if kind == "error":
        return "*error*"
    return "dyn"


@dataclass
class Rewriter:
    """Walks one checked expression; see the module docstring for what it does."""

    checked: Any
    next_id: int = 0
    aliases: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.next_id = max([*self._ids(self.checked.expr), 0]) + 1

    def _ids(self, e: Any) -> Iterator[int]:
        yield e.id
        for child in _children(e):
            yield from self._ids(child)

    def type_of(self, e: Any) -> Any:
        """The checked type of node ``e`` (dyn when the checker recorded none)."""
        return self.checked.type_map[e.id] if e.id in self.checked.type_map else Type(dyn={})

    def run(self) -> None:
        """Validate and rewrite the whole expression.

        Raises:
            CheckError: an upstream compile error.
        """
        self._visit(self.checked.expr)

    def _map_variable(self, e: Any) -> str | None:
        """``device.attributes``/``device.capacity`` when ``e`` is that map (or a binding of it)."""
        if e.WhichOneof("expr_kind") != "ident_expr":
            return None
        name = e.ident_expr.name
        for scope in reversed(self.aliases):
            if name in scope:
                return scope[name] or None
        ref = self.checked.reference_map.get(e.id) if e.id in self.checked.reference_map else None
        target = ref.name if ref is not None else name
        return target if target in _DOMAIN_FUNCTIONS else None

    def _new_const(self, text: str) -> Any:
        node = Expr(id=self._take_id())
        node.const_expr.string_value = text
        self.checked.type_map[node.id].CopyFrom(Type(primitive=5))
        return node

    def _take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _domain_call(self, target: Any, variable: str, key: Any, node_id: int) -> None:
        """Turn ``target`` (node ``node_id``) into ``<domain function>(key)``."""
        function, overload = _DOMAIN_FUNCTIONS[variable]
        key_copy = Expr()
        key_copy.CopyFrom(key)
        target.Clear()
        target.id = node_id
        target.call_expr.function = function
        target.call_expr.args.append(key_copy)
        self.checked.reference_map[node_id].Clear()
        self.checked.reference_map[node_id].name = function
        self.checked.reference_map[node_id].overload_id.append(overload)

    def _visit(self, e: Any) -> None:
        kind = e.WhichOneof("expr_kind")
        if kind == "select_expr":
            self._visit_select(e)
        elif kind == "call_expr":
            self._visit_call(e)
        elif kind == "struct_expr":
            name = e.struct_expr.message_name
            if name:
                raise CheckError(f"undeclared reference to '{name}' (in container '')", e.id)
            for entry in e.struct_expr.entries:
                self._visit(entry.map_key)
                self._visit(entry.value)
            self._check_homogeneous(e, [en.map_key for en in e.struct_expr.entries], set())
            self._check_homogeneous(e, [en.value for en in e.struct_expr.entries],
                                    {i for i, en in enumerate(e.struct_expr.entries)
                                     if en.optional_entry})
        elif kind == "list_expr":
            for element in e.list_expr.elements:
                self._visit(element)
            self._check_homogeneous(e, list(e.list_expr.elements),
                                    set(e.list_expr.optional_indices))
        elif kind == "comprehension_expr":
            self._visit_comprehension(e)

    def _visit_select(self, e: Any) -> None:
        operand = e.select_expr.operand
        operand_type = self.type_of(operand)
        if operand_type.WhichOneof("type_kind") == "message_type" and \
                operand_type.message_type in (*_OPAQUE_TYPES, URL_TYPE):
            raise CheckError(field_selection_error(operand_type.message_type), e.id)
        variable = self._map_variable(operand)
        if variable is None:
            self._visit(operand)
            return
        if e.select_expr.test_only:  # has(m.x) is true: the wrapped Find never misses
            node_id = e.id
            e.Clear()
            e.id = node_id
            e.const_expr.bool_value = True
            return
        self._domain_call(e, variable, self._new_const(e.select_expr.field), e.id)

    def _visit_call(self, e: Any) -> None:
        call = e.call_expr
        args = list(call.args)
        variable = self._map_variable(args[0]) if args and not call.HasField("target") else None
        if variable is not None and call.function == "_[_]":
            self._visit(args[1])
            self._domain_call(e, variable, args[1], e.id)
            return
        if variable is not None and call.function in ("_[?_]", "_?._"):
            self._visit(args[1])
            inner = Expr(id=self._take_id())
            self.checked.type_map[inner.id].CopyFrom(
                self.checked.type_map[e.id].abstract_type.parameter_types[0])
            self._domain_call(inner, variable, args[1], inner.id)
            e.call_expr.Clear()
            e.call_expr.function = "optional.of"
            e.call_expr.args.append(inner)
            self.checked.reference_map[e.id].Clear()
            self.checked.reference_map[e.id].name = "optional.of"
            self.checked.reference_map[e.id].overload_id.append("optional_of")
            return
        if call.HasField("target"):
            self._visit(call.target)
        for arg in call.args:
            self._visit(arg)
        if call.function == "matches" and args and args[-1].WhichOneof("expr_kind") == \
                "const_expr" and not _valid_regex(args[-1].const_expr.string_value):
            raise CheckError("invalid matches argument", args[-1].id)  # ValidateRegexLiterals
        if call.function in ("_==_", "_!=_") and all(
                _is_message(self.type_of(a), QUANTITY_TYPE) for a in args):
            function, overload = ((QUANTITY_EQUALS, QUANTITY_EQUALS_OVERLOAD)
                                  if call.function == "_==_"
                                  else (QUANTITY_NOT_EQUALS, QUANTITY_NOT_EQUALS_OVERLOAD))
            call.function = function
            self.checked.reference_map[e.id].Clear()
            self.checked.reference_map[e.id].name = function
            self.checked.reference_map[e.id].overload_id.append(overload)

    def _visit_comprehension(self, e: Any) -> None:
        comp = e.comprehension_expr
        self._visit(comp.iter_range)
        self._visit(comp.accu_init)
        # cel.bind(x, device.attributes, ...) binds the wrapped map itself.
        scope = {comp.iter_var: "", comp.iter_var2: "",
                 comp.accu_var: self._map_variable(comp.accu_init) or ""}
        scope.pop("", None)
        self.aliases.append(scope)
        try:
            for part in (comp.loop_condition, comp.loop_step, comp.result):
                self._visit(part)
        finally:
            self.aliases.pop()

    def _check_homogeneous(self, e: Any, elements: list[Any], optional: set[int]) -> None:
        first: Any = None
        for i, element in enumerate(elements):
            t = self.type_of(element)
            if i in optional and t.WhichOneof("type_kind") == "abstract_type" and \
                    t.abstract_type.parameter_types:
                t = t.abstract_type.parameter_types[0]
            if first is None:
                first = t
            elif t.SerializeToString(deterministic=True) != \
                    first.SerializeToString(deterministic=True):
                raise CheckError(f"expected type '{format_type(first)}' but found "
                                 f"'{format_type(t)}'", element.id)


def _valid_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _is_message(t: Any, name: str) -> bool:
    return bool(t.WhichOneof("type_kind") == "message_type" and t.message_type == name)


def _children(e: Any) -> Iterator[Any]:
    kind = e.WhichOneof("expr_kind")
    if kind == "select_expr":
        yield e.select_expr.operand
    elif kind == "call_expr":
        if e.call_expr.HasField("target"):
            yield e.call_expr.target
        yield from e.call_expr.args
    elif kind == "list_expr":
        yield from e.list_expr.elements
    elif kind == "struct_expr":
        for entry in e.struct_expr.entries:
            if entry.HasField("map_key"):
                yield entry.map_key
            yield entry.value
    elif kind == "comprehension_expr":
        c = e.comprehension_expr
        yield from (c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result)


# --- cost --------------------------------------------------------------------------------

_LIST_PRODUCERS = {"split", "findAll", "range", "flatten", "sort", "sortBy", "distinct",
                   "reverse", "slice", "keys", "values"}


def estimate_cost(checked: Any) -> float:
    """A worst-case bound of upstream's runtime cost for any device (``math.inf`` if none).

    Not upstream's estimator, but an upper bound of its cost model (``cel-go`` runtime cost
    plus ``k8s.io/apiserver/pkg/cel/library/cost.go``): every node is charged at least the
    runtime's unit cost, string functions are charged by the maximum string length, and a
    comprehension is charged its body once per element of the largest possible range. Sizes
    come from the device limits upstream uses (32 domains and ids, 64-character values).
    Lists whose size depends on evaluation (``split``, ``lists.range(x)``, ...) make the bound
    infinite.
    """
    return _cost(checked.expr, {})[0]


def _cost(e: Any, sizes: dict[str, float]) -> tuple[float, float]:
    """(cost bound, size bound of the value) of node ``e``."""
    kind = e.WhichOneof("expr_kind")
    if kind == "const_expr":
        const = e.const_expr
        return 0.0, float(len(const.string_value) or len(const.bytes_value) or 1)
    if kind == "ident_expr":
        name = e.ident_expr.name
        return 1.0, sizes.get(name, _VARIABLE_SIZES.get(name, _VALUE_SIZE))
    if kind == "select_expr":
        cost, _ = _cost(e.select_expr.operand, sizes)
        return cost + 1, _VALUE_SIZE
    if kind == "list_expr":
        parts = [_cost(x, sizes) for x in e.list_expr.elements]
        return 10 + sum(c for c, _ in parts), float(len(parts))
    if kind == "struct_expr":
        total = 40.0
        for entry in e.struct_expr.entries:
            total += _cost(entry.value, sizes)[0]
            if entry.HasField("map_key"):
                total += _cost(entry.map_key, sizes)[0]
        return total, float(len(e.struct_expr.entries))
    if kind == "comprehension_expr":
        c = e.comprehension_expr
        range_cost, range_size = _cost(c.iter_range, sizes)
        init_cost, _ = _cost(c.accu_init, sizes)
        inner = dict(sizes)
        inner.update({c.iter_var: _VALUE_SIZE, c.accu_var: range_size})
        if c.iter_var2:
            inner[c.iter_var2] = _VALUE_SIZE
        body = _cost(c.loop_condition, inner)[0] + _cost(c.loop_step, inner)[0]
        result_cost, _ = _cost(c.result, inner)
        return range_cost + init_cost + range_size * (body + 1) + result_cost, range_size
    # call
    call = e.call_expr
    parts = [_cost(a, sizes) for a in ([call.target] if call.HasField("target") else [])]
    parts += [_cost(a, sizes) for a in call.args]
    cost = 1 + sum(c for c, _ in parts) + 0.1 * sum(s for _, s in parts if math.isfinite(s))
    if any(math.isinf(s) for _, s in parts):
        cost = math.inf if call.function not in ("_&&_", "_||_", "size", "_==_", "_!=_") \
            else cost
    size: float = _DOMAIN_SIZE if call.function.startswith("@kubedra.") else _VALUE_SIZE
    if call.function == "lists.range" and call.args and \
            call.args[0].WhichOneof("expr_kind") == "const_expr":
        size = float(max(call.args[0].const_expr.int64_value, 0))
    elif call.function in _LIST_PRODUCERS or call.function == "lists.range":
        size = math.inf
    return cost, size
