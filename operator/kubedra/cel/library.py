"""The function libraries of the DRA CEL environment, declared for cel-expr-python.

What a v1.37.2 scheduler compiles selectors with is ``environment.MustBaseEnvSet`` in its
``StoredExpressions`` form plus the DRA additions (``k8s.io/apiserver/pkg/cel/environment/
base.go``, ``k8s.io/dynamic-resource-allocation/cel/compile.go``). The C++ runtime behind
cel-expr-python brings the CEL standard library and the ``strings`` (v2), ``sets``, ``lists``,
``optional``, ``bindings`` and two-variable comprehension extensions; this module adds the
Kubernetes libraries in Python:

* quantity (``library/quantity.go``) on :class:`~kubedra.cel.quantity.GoQuantity`;
* semver (``library/semverlib.go``, version 1 with the ``normalize`` overloads);
* lists (``library/lists.go``, version 1: ``isSorted``, ``sum``, ``min``, ``max``,
  ``indexOf``, ``lastIndexOf``, ``includes``);
* regex ``find``/``findAll`` (``library/regex.go``);
* URL, IP and CIDR in :mod:`kubedra.cel.network`;
* the cross-type numeric ordering operators (``cel.CrossTypeNumericComparisons``), which the
  C++ runtime implements but whose checker declarations must be supplied.

The C++ runtime dispatches Python functions by argument *kind*, and every message type has
the same kind, so an overload of a Quantity and a Semver receiver cannot both carry an
implementation: one implementation per kind signature is registered and dispatches on the
message it receives (``_dispatch``), while the other overloads are declared for the checker
only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from cel_expr_python import cel

from .protos import QUANTITY_TYPE, SEMVER_TYPE, SemverMessage
from .quantity import GoQuantity, QuantityParseError, parse_quantity, quantity_equals
from .semver import Semver, SemverParseError, parse_semver, parse_semver_normalized

QUANTITY = cel.Type(QUANTITY_TYPE)
SEMVER = cel.Type(SEMVER_TYPE)
_B, _I, _U, _D, _S = cel.Type.BOOL, cel.Type.INT, cel.Type.UINT, cel.Type.DOUBLE, cel.Type.STRING
_BYTES, _DUR, _TS, _DYN = cel.Type.BYTES, cel.Type.DURATION, cel.Type.TIMESTAMP, cel.Type.DYN

# Internal functions that kubedra.cel.rewrite puts into checked expressions.
ATTRIBUTE_DOMAIN = "@kubedra.attributeDomain"
CAPACITY_DOMAIN = "@kubedra.capacityDomain"
QUANTITY_EQUALS = "@kubedra.quantityEquals"
QUANTITY_NOT_EQUALS = "@kubedra.quantityNotEquals"
ATTRIBUTE_DOMAIN_OVERLOAD = "kubedra_attribute_domain_string"
CAPACITY_DOMAIN_OVERLOAD = "kubedra_capacity_domain_string"
QUANTITY_EQUALS_OVERLOAD = "kubedra_quantity_equals"
QUANTITY_NOT_EQUALS_OVERLOAD = "kubedra_quantity_not_equals"
INTERNAL_PREFIX = "@kubedra."

ATTRIBUTES_DOMAIN_TYPE = cel.Type.Map(_S, _DYN)
CAPACITY_DOMAIN_TYPE = cel.Type.Map(_S, QUANTITY)


def _int64(value: int) -> int:
    """Go's ``types.Int(uint64)`` conversion: wrap into the int64 range."""
    return (value + 2**63) % 2**64 - 2**63


def _quantity(message: Any) -> GoQuantity:
    return GoQuantity.from_message(message)


def _to_quantity(text: str) -> Any:
    try:
        return parse_quantity(text).to_message()
    except QuantityParseError as err:
        raise ValueError(str(err)) from None


def accepts(parse: Callable[[str], object], error: type[Exception]) -> Callable[[str], bool]:
    """An ``is…`` function (``isQuantity``, ``isURL``): whether ``parse`` accepts the text."""
    def test(text: str) -> bool:
        try:
            parse(text)
        except error:
            return False
        return True
    return test


_is_quantity = accepts(parse_quantity, QuantityParseError)


def _as_integer(message: Any) -> int:
    value = _quantity(message).as_int64()
    if value is None:
        raise ValueError("cannot convert value to integer")
    return value


def _to_semver(text: str, normalize: bool = False) -> Any:
    try:
        parsed = parse_semver_normalized(text) if normalize else parse_semver(text)
    except SemverParseError as err:
        raise ValueError(str(err)) from None
    return parsed.to_message()


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _ = parse_semver_normalized(text) if normalize else parse_semver(text)
    except SemverParseError:
        return False
    return True


def _compare(left: Any, right: Any) -> int:
    """``compareTo`` of two Quantities or two Semvers (the checker guarantees same types)."""
    if isinstance(left, SemverMessage):
        return Semver.from_message(left).compare(Semver.from_message(right))
    return _quantity(left).compare(_quantity(right))


def _add(left: Any, right: Any) -> Any:
    other = GoQuantity.from_int(right) if isinstance(right, int) else _quantity(right)
    return _quantity(left).add(other).to_message()


def _sub(left: Any, right: Any) -> Any:
    other = GoQuantity.from_int(right) if isinstance(right, int) else _quantity(right)
    return _quantity(left).sub(other).to_message()


def _quantity_equals(left: Any, right: Any) -> bool:
    try:
        return quantity_equals(_quantity(left), _quantity(right))
    except LookupError as err:
        raise ValueError(str(err)) from None


# --- lists (library/lists.go) -------------------------------------------------------------

def _check_comparable(items: Sequence[Any]) -> None:
    kinds = {type(i) for i in items}
    if len(kinds) > 1 and not kinds <= {int, float}:
        raise ValueError("no such overload")


def _is_sorted(items: list[Any]) -> bool:
    _check_comparable(items)
    return all(not (a > b) for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    if not items:
        return 0
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _extreme(name: str, prefer_later: Callable[[Any, Any], bool]) -> Callable[[list[Any]], Any]:
    def pick(items: list[Any]) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        _check_comparable(items)
        result = items[0]
        for item in items[1:]:
            if prefer_later(result, item):
                result = item
        return result
    return pick


def _index_of(items: list[Any], item: Any) -> int:
    for i, candidate in enumerate(items):
        if _cel_equal(candidate, item):
            return i
    return -1


def _last_index_of(items: list[Any], item: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if _cel_equal(items[i], item):
            return i
    return -1


def _includes(target: Any, item: Any) -> bool:
    if isinstance(target, list):
        return any(_cel_equal(candidate, item) for candidate in target)
    return _cel_equal(target, item)


def _cel_equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality on converted values (numbers compare across types)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


# --- regex (library/regex.go) -------------------------------------------------------------

def _compile_regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"error parsing regexp: {err}") from None


def _find(text: str, pattern: str) -> str:
    match = _compile_regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _compile_regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _overload(oid: str, result: cel.Type, params: list[cel.Type], member: bool = False,
              impl: Callable[..., Any] | None = None) -> cel.Overload:
    if impl is None:
        return cel.Overload(oid, result, params, is_member=member)
    return cel.Overload(oid, result, params, is_member=member, impl=impl)


def _comparison_declarations() -> list[cel.FunctionDecl]:
    """``_<_``, ``_<=_``, ``_>_``, ``_>=_`` with the cross-type numeric overloads (checker only).

    The standard declarations are excluded in :data:`ENV_CONFIG_YAML` and declared again here
    with the overload ids of the C++ runtime, which implements all of them.
    """
    same = {"bool": _B, "int64": _I, "uint64": _U, "double": _D, "string": _S, "bytes": _BYTES,
            "timestamp": _TS, "duration": _DUR}
    cross = [("int64", "uint64"), ("uint64", "int64"), ("int64", "double"), ("double", "int64"),
             ("uint64", "double"), ("double", "uint64")]
    decls = []
    for op, prefix in COMPARISON_OPERATORS.items():
        overloads = [_overload(f"{prefix}_{name}", _B, [t, t]) for name, t in same.items()]
        overloads += [_overload(f"{prefix}_{a}_{b}", _B, [same[a], same[b]]) for a, b in cross]
        decls.append(cel.FunctionDecl(op, overloads))
    return decls


COMPARISON_OPERATORS = {"_<_": "less", "_<=_": "less_equals", "_>_": "greater",
                        "_>=_": "greater_equals"}

# Extensions of the C++ runtime that match upstream's StoredExpressions set: ext.Strings(v2),
# ext.Sets(), ext.Lists (v3 upstream, which only adds cost estimators to v2, the C++
# runtime's newest), ext.TwoVarComprehensions(), ext.Bindings(), cel.OptionalTypes().
ENV_CONFIG_YAML = """\
extensions:
  - name: "strings"
    version: 2
  - name: "sets"
  - name: "lists"
    version: 2
  - name: "two-var-comprehensions"
  - name: "bindings"
  - name: "optional"
stdlib:
  exclude_functions:
""" + "".join(f'    - name: "{op}"\n' for op in [*COMPARISON_OPERATORS, "string"])


_COMPARABLE = {"int": _I, "uint": _U, "double": _D, "bool": _B, "duration": _DUR,
               "timestamp": _TS, "string": _S, "bytes": _BYTES}
_SUMMABLE = {"int": _I, "uint": _U, "double": _D, "duration": _DUR}


# A list type no selector can build (struct literals of kubernetes.* types are rejected):
# overloads on it carry the implementation of a templated list function, with a dyn result so
# that the runtime converts whatever element type the checker chose.
_DISPATCH_LIST = cel.Type.List(cel.Type("kubernetes.Semver.PreRelease"))


def _templated(function: str, pattern: str, result_is_element: bool,
               names: dict[str, cel.Type], impl: Callable[..., Any]) -> cel.FunctionDecl:
    """One declared overload per element type, plus the hidden one with the implementation.

    The runtime registers one implementation per argument *kind* (all lists are one kind) and
    converts its result with that overload's declared result type.
    """
    overloads = [_overload(pattern.format(name=name), t if result_is_element else _B,
                           [cel.Type.List(t)], True) for name, t in names.items()]
    overloads.append(_overload(f"kubedra_{function}_dispatch",
                               _DYN if result_is_element else _B, [_DISPATCH_LIST], True, impl))
    return cel.FunctionDecl(function, overloads)


def list_index_extension() -> cel.CelExtension:
    """``indexOf``, ``lastIndexOf`` and ``includes`` on lists (``library/lists.go``).

    The strings extension already declares the first two for strings; an extension (unlike a
    configured function) merges its overloads into that declaration, and it registers ``dyn``
    parameters as the runtime's wildcard kind.
    """
    list_dyn = cel.Type.List(_DYN)
    return cel.CelExtension("kubernetes.lists.index", [
        cel.FunctionDecl("indexOf", [_overload("list_a_index_of_int", _I, [list_dyn, _DYN], True,
                                               _index_of)]),
        cel.FunctionDecl("lastIndexOf", [_overload("list_a_last_index_of_int", _I,
                                                   [list_dyn, _DYN], True, _last_index_of)]),
        cel.FunctionDecl("includes", [_overload("list_includes_dyn_dyn", _B, [_DYN, _DYN], True,
                                                _includes)]),
    ])


def function_declarations(attribute_domain: Callable[[str], Any],
                          capacity_domain: Callable[[str], Any]) -> list[cel.FunctionDecl]:
    """Every function the DRA environment adds to cel-expr-python's standard library.

    ``attribute_domain``/``capacity_domain`` back the internal lookups that replace
    ``device.attributes[domain]`` and ``device.capacity[domain]`` (see
    :mod:`kubedra.cel.rewrite`).
    """
    q, s = QUANTITY, SEMVER
    return [
        cel.FunctionDecl("quantity", [_overload("string_to_quantity", q, [_S], impl=_to_quantity)]),
        cel.FunctionDecl("isQuantity", [_overload("is_quantity_string", _B, [_S],
                                                  impl=_is_quantity)]),
        cel.FunctionDecl("sign", [_overload("quantity_sign", _I, [q],
                                            impl=lambda m: _quantity(m).sign())]),
        cel.FunctionDecl("isGreaterThan", [
            _overload("quantity_is_greater_than", _B, [q, q], True,
                      lambda a, b: _compare(a, b) == 1),
            _overload("semver_is_greater_than", _B, [s, s], True)]),
        cel.FunctionDecl("isLessThan", [
            _overload("quantity_is_less_than", _B, [q, q], True,
                      lambda a, b: _compare(a, b) == -1),
            _overload("semver_is_less_than", _B, [s, s], True)]),
        cel.FunctionDecl("compareTo", [
            _overload("quantity_compare_to", _I, [q, q], True, _compare),
            _overload("semver_compare_to", _I, [s, s], True)]),
        cel.FunctionDecl("asApproximateFloat", [_overload(
            "quantity_get_float", _D, [q], True, lambda m: _quantity(m).as_approximate_float())]),
        cel.FunctionDecl("asInteger", [_overload("quantity_get_int", _I, [q], True, _as_integer)]),
        cel.FunctionDecl("isInteger", [_overload(
            "quantity_is_integer", _B, [q], True, lambda m: _quantity(m).as_int64() is not None)]),
        cel.FunctionDecl("add", [_overload("quantity_add", q, [q, q], True, _add),
                                 _overload("quantity_add_int", q, [q, _I], True, _add)]),
        cel.FunctionDecl("sub", [_overload("quantity_sub", q, [q, q], True, _sub),
                                 _overload("quantity_sub_int", q, [q, _I], True, _sub)]),
        cel.FunctionDecl("semver", [
            _overload("string_to_semver", s, [_S], impl=_to_semver),
            _overload("string_bool_to_semver", s, [_S, _B], impl=_to_semver)]),
        cel.FunctionDecl("isSemver", [
            _overload("is_semver_string", _B, [_S], impl=_is_semver),
            _overload("is_semver_string_bool", _B, [_S, _B], impl=_is_semver)]),
        cel.FunctionDecl("major", [_overload("semver_major", _I, [s], True,
                                             lambda m: _int64(m.major))]),
        cel.FunctionDecl("minor", [_overload("semver_minor", _I, [s], True,
                                             lambda m: _int64(m.minor))]),
        cel.FunctionDecl("patch", [_overload("semver_patch", _I, [s], True,
                                             lambda m: _int64(m.patch))]),
        _templated("isSorted", "list_{name}_is_sorted_bool", False, _COMPARABLE, _is_sorted),
        _templated("sum", "list_{name}_sum_{name}", True, _SUMMABLE, _sum),
        _templated("max", "list_{name}_max_{name}", True, _COMPARABLE,
                   _extreme("max", lambda cur, nxt: bool(cur < nxt))),
        _templated("min", "list_{name}_min_{name}", True, _COMPARABLE,
                   _extreme("min", lambda cur, nxt: bool(cur > nxt))),
        cel.FunctionDecl("find", [_overload("string_find_string", _S, [_S, _S], True, _find)]),
        cel.FunctionDecl("findAll", [
            _overload("string_find_all_string", cel.Type.List(_S), [_S, _S], True, _find_all),
            _overload("string_find_all_string_int", cel.Type.List(_S), [_S, _S, _I], True,
                      _find_all)]),
        *_comparison_declarations(),
        cel.FunctionDecl(ATTRIBUTE_DOMAIN, [_overload(
            ATTRIBUTE_DOMAIN_OVERLOAD, ATTRIBUTES_DOMAIN_TYPE, [_S], impl=attribute_domain)]),
        cel.FunctionDecl(CAPACITY_DOMAIN, [_overload(
            CAPACITY_DOMAIN_OVERLOAD, CAPACITY_DOMAIN_TYPE, [_S], impl=capacity_domain)]),
        cel.FunctionDecl(QUANTITY_EQUALS, [_overload(QUANTITY_EQUALS_OVERLOAD, _B, [q, q],
                                                     impl=_quantity_equals)]),
        cel.FunctionDecl(QUANTITY_NOT_EQUALS, [_overload(
            QUANTITY_NOT_EQUALS_OVERLOAD, _B, [q, q],
            impl=lambda a, b: not _quantity_equals(a, b))]),
    ]

