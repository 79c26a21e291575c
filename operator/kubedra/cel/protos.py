"""Protobuf schemas that kubedra.cel builds at import time.

Two pools, kept apart so that selectors cannot name the AST types:

* ``VALUE_POOL`` holds the message types that carry the Kubernetes CEL object types through
  cel-expr-python, which has no opaque values: ``kubernetes.Quantity`` (a
  ``resource.Quantity`` in Go's own representation, see :mod:`kubedra.cel.quantity`) and
  ``kubernetes.Semver`` (see :mod:`kubedra.cel.semver`), ``kubernetes.URL``, ``net.IP`` and
  ``net.CIDR`` (see :mod:`kubedra.cel.network`). The names are upstream's type names
  (``k8s.io/apiserver/pkg/cel``), so ``type(x)`` and error messages read the same.
* ``AST_POOL`` holds the subset of ``cel.expr.CheckedExpr`` (cel-spec ``syntax.proto`` and
  ``checked.proto``; field numbers are the spec's) that kubedra reads and rewrites. Fields it
  does not declare survive a parse/serialize round trip as unknown fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# (name, number, type, label, type_name, oneof index)
_Field = tuple[str, int, int, int, str, int | None]


def _message(file: descriptor_pb2.FileDescriptorProto | descriptor_pb2.DescriptorProto,
             name: str, fields: list[_Field], oneofs: tuple[str, ...] = (),
             map_entry: bool = False) -> descriptor_pb2.DescriptorProto:
    msg = (file.message_type.add(name=name) if isinstance(file, descriptor_pb2.FileDescriptorProto)
           else file.nested_type.add(name=name))
    if map_entry:
        msg.options.map_entry = True
    for oneof in oneofs:
        msg.oneof_decl.add(name=oneof)
    for fname, number, ftype, label, type_name, oneof_index in fields:
        field = msg.field.add(name=fname, number=number, type=ftype, label=label)
        if type_name:
            field.type_name = type_name
        if oneof_index is not None:
            field.oneof_index = oneof_index
    return msg


def _value_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="kubedra/cel/values.proto", package="kubernetes",
                                           syntax="proto3")
    _message(f, "Quantity", [
        ("dec", 1, _F.TYPE_BOOL, _OPTIONAL, "", None),
        ("unscaled", 2, _F.TYPE_STRING, _OPTIONAL, "", None),
        ("exponent", 3, _F.TYPE_SINT32, _OPTIONAL, "", None),
        ("pointer", 4, _F.TYPE_BOOL, _OPTIONAL, "", None),
    ])
    semver = _message(f, "Semver", [
        ("major", 1, _F.TYPE_UINT64, _OPTIONAL, "", None),
        ("minor", 2, _F.TYPE_UINT64, _OPTIONAL, "", None),
        ("patch", 3, _F.TYPE_UINT64, _OPTIONAL, "", None),
        ("pre", 4, _F.TYPE_MESSAGE, _REPEATED, ".kubernetes.Semver.PreRelease", None),
    ])
    _message(semver, "PreRelease", [
        ("is_num", 1, _F.TYPE_BOOL, _OPTIONAL, "", None),
        ("num", 2, _F.TYPE_UINT64, _OPTIONAL, "", None),
        ("str", 3, _F.TYPE_STRING, _OPTIONAL, "", None),
    ])
    url = [("scheme", 1), ("opaque", 2), ("user", 3), ("host", 4), ("path", 5), ("raw_path", 6),
           ("raw_query", 7), ("fragment", 8), ("raw_fragment", 9)]
    _message(f, "URL", [(name, n, _F.TYPE_STRING, _OPTIONAL, "", None) for name, n in url] + [
        ("has_user", 10, _F.TYPE_BOOL, _OPTIONAL, "", None),
        ("force_query", 11, _F.TYPE_BOOL, _OPTIONAL, "", None),
        ("omit_host", 12, _F.TYPE_BOOL, _OPTIONAL, "", None),
    ])
    return f


def _net_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="kubedra/cel/net.proto", package="net",
                                           syntax="proto3")
    _message(f, "IP", [("octets", 1, _F.TYPE_BYTES, _OPTIONAL, "", None)])
    _message(f, "CIDR", [
        ("octets", 1, _F.TYPE_BYTES, _OPTIONAL, "", None),
        ("bits", 2, _F.TYPE_INT32, _OPTIONAL, "", None),
    ])
    return f


def _ast_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="kubedra/cel/checked.proto", package="cel.expr",
                                           syntax="proto3")
    msg, rep, i64, s = _F.TYPE_MESSAGE, _REPEATED, _F.TYPE_INT64, _F.TYPE_STRING
    expr = _message(f, "Expr", [
        ("id", 2, i64, _OPTIONAL, "", None),
        ("const_expr", 3, msg, _OPTIONAL, ".cel.expr.Constant", 0),
        ("ident_expr", 4, msg, _OPTIONAL, ".cel.expr.Expr.Ident", 0),
        ("select_expr", 5, msg, _OPTIONAL, ".cel.expr.Expr.Select", 0),
        ("call_expr", 6, msg, _OPTIONAL, ".cel.expr.Expr.Call", 0),
        ("list_expr", 7, msg, _OPTIONAL, ".cel.expr.Expr.CreateList", 0),
        ("struct_expr", 8, msg, _OPTIONAL, ".cel.expr.Expr.CreateStruct", 0),
        ("comprehension_expr", 9, msg, _OPTIONAL, ".cel.expr.Expr.Comprehension", 0),
    ], oneofs=("expr_kind",))
    _message(expr, "Ident", [("name", 1, s, _OPTIONAL, "", None)])
    _message(expr, "Select", [
        ("operand", 1, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("field", 2, s, _OPTIONAL, "", None),
        ("test_only", 3, _F.TYPE_BOOL, _OPTIONAL, "", None),
    ])
    _message(expr, "Call", [
        ("target", 1, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("function", 2, s, _OPTIONAL, "", None),
        ("args", 3, msg, rep, ".cel.expr.Expr", None),
    ])
    _message(expr, "CreateList", [
        ("elements", 1, msg, rep, ".cel.expr.Expr", None),
        ("optional_indices", 2, _F.TYPE_INT32, rep, "", None),
    ])
    struct = _message(expr, "CreateStruct", [
        ("message_name", 1, s, _OPTIONAL, "", None),
        ("entries", 2, msg, rep, ".cel.expr.Expr.CreateStruct.Entry", None),
    ])
    _message(struct, "Entry", [
        ("id", 1, i64, _OPTIONAL, "", None),
        ("field_key", 2, s, _OPTIONAL, "", 0),
        ("map_key", 3, msg, _OPTIONAL, ".cel.expr.Expr", 0),
        ("value", 4, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("optional_entry", 5, _F.TYPE_BOOL, _OPTIONAL, "", None),
    ], oneofs=("key_kind",))
    _message(expr, "Comprehension", [
        ("iter_var", 1, s, _OPTIONAL, "", None),
        ("iter_range", 2, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("accu_var", 3, s, _OPTIONAL, "", None),
        ("accu_init", 4, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("loop_condition", 5, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("loop_step", 6, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("result", 7, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("iter_var2", 8, s, _OPTIONAL, "", None),
    ])
    _message(f, "Constant", [
        ("null_value", 1, _F.TYPE_INT32, _OPTIONAL, "", 0),
        ("bool_value", 2, _F.TYPE_BOOL, _OPTIONAL, "", 0),
        ("int64_value", 3, i64, _OPTIONAL, "", 0),
        ("uint64_value", 4, _F.TYPE_UINT64, _OPTIONAL, "", 0),
        ("double_value", 5, _F.TYPE_DOUBLE, _OPTIONAL, "", 0),
        ("string_value", 6, s, _OPTIONAL, "", 0),
        ("bytes_value", 7, _F.TYPE_BYTES, _OPTIONAL, "", 0),
    ], oneofs=("constant_kind",))
    typ = _message(f, "Type", [
        ("dyn", 1, msg, _OPTIONAL, ".cel.expr.Type.Empty", 0),
        ("null", 2, _F.TYPE_INT32, _OPTIONAL, "", 0),
        ("primitive", 3, _F.TYPE_INT32, _OPTIONAL, "", 0),
        ("wrapper", 4, _F.TYPE_INT32, _OPTIONAL, "", 0),
        ("well_known", 5, _F.TYPE_INT32, _OPTIONAL, "", 0),
        ("list_type", 6, msg, _OPTIONAL, ".cel.expr.Type.ListType", 0),
        ("map_type", 7, msg, _OPTIONAL, ".cel.expr.Type.MapType", 0),
        ("message_type", 9, s, _OPTIONAL, "", 0),
        ("type_param", 10, s, _OPTIONAL, "", 0),
        ("type", 11, msg, _OPTIONAL, ".cel.expr.Type", 0),
        ("error", 12, msg, _OPTIONAL, ".cel.expr.Type.Empty", 0),
        ("abstract_type", 14, msg, _OPTIONAL, ".cel.expr.Type.AbstractType", 0),
    ], oneofs=("type_kind",))
    _message(typ, "Empty", [])
    _message(typ, "ListType", [("elem_type", 1, msg, _OPTIONAL, ".cel.expr.Type", None)])
    _message(typ, "MapType", [
        ("key_type", 1, msg, _OPTIONAL, ".cel.expr.Type", None),
        ("value_type", 2, msg, _OPTIONAL, ".cel.expr.Type", None),
    ])
    _message(typ, "AbstractType", [
        ("name", 1, s, _OPTIONAL, "", None),
        ("parameter_types", 2, msg, rep, ".cel.expr.Type", None),
    ])
    _message(f, "Reference", [
        ("name", 1, s, _OPTIONAL, "", None),
        ("overload_id", 3, s, rep, "", None),
        ("value", 4, msg, _OPTIONAL, ".cel.expr.Constant", None),
    ])
    source = _message(f, "SourceInfo", [
        ("location", 2, s, _OPTIONAL, "", None),
        ("line_offsets", 3, _F.TYPE_INT32, rep, "", None),
        ("positions", 4, msg, rep, ".cel.expr.SourceInfo.PositionsEntry", None),
    ])
    _message(source, "PositionsEntry", [
        ("key", 1, i64, _OPTIONAL, "", None), ("value", 2, _F.TYPE_INT32, _OPTIONAL, "", None),
    ], map_entry=True)
    checked = _message(f, "CheckedExpr", [
        ("reference_map", 2, msg, rep, ".cel.expr.CheckedExpr.ReferenceMapEntry", None),
        ("type_map", 3, msg, rep, ".cel.expr.CheckedExpr.TypeMapEntry", None),
        ("expr", 4, msg, _OPTIONAL, ".cel.expr.Expr", None),
        ("source_info", 5, msg, _OPTIONAL, ".cel.expr.SourceInfo", None),
    ])
    _message(checked, "ReferenceMapEntry", [
        ("key", 1, i64, _OPTIONAL, "", None),
        ("value", 2, msg, _OPTIONAL, ".cel.expr.Reference", None),
    ], map_entry=True)
    _message(checked, "TypeMapEntry", [
        ("key", 1, i64, _OPTIONAL, "", None),
        ("value", 2, msg, _OPTIONAL, ".cel.expr.Type", None),
    ], map_entry=True)
    # google.protobuf.Any as cel-expr-python serializes a compiled expression.
    _message(f, "AnyWrapper", [
        ("type_url", 1, s, _OPTIONAL, "", None), ("value", 2, _F.TYPE_BYTES, _OPTIONAL, "", None),
    ])
    return f


def _build(*files: descriptor_pb2.FileDescriptorProto) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return pool


VALUE_POOL = _build(_value_file(), _net_file())
AST_POOL = _build(_ast_file())


def _cls(pool: descriptor_pool.DescriptorPool, name: str) -> Any:
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


QuantityMessage: Any = _cls(VALUE_POOL, "kubernetes.Quantity")
SemverMessage: Any = _cls(VALUE_POOL, "kubernetes.Semver")
URLMessage: Any = _cls(VALUE_POOL, "kubernetes.URL")
IPMessage: Any = _cls(VALUE_POOL, "net.IP")
CIDRMessage: Any = _cls(VALUE_POOL, "net.CIDR")
CheckedExpr: Any = _cls(AST_POOL, "cel.expr.CheckedExpr")
Expr: Any = _cls(AST_POOL, "cel.expr.Expr")
Type: Any = _cls(AST_POOL, "cel.expr.Type")
AnyWrapper: Any = _cls(AST_POOL, "cel.expr.AnyWrapper")

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"
URL_TYPE = "kubernetes.URL"
IP_TYPE = "net.IP"
CIDR_TYPE = "net.CIDR"
