"""Compiling and evaluating DRA device selectors.

:func:`compile_selector` is the counterpart of the scheduler's ``cel.Cache.GetOrCompile``
(``k8s.io/dynamic-resource-allocation/cel/cache.go``): successful compilations are kept in an
LRU cache, failures are not. :meth:`CompiledSelector.matches` is ``DeviceMatches``
(``compile.go``) plus ``EnhanceRuntimeError`` (``errors.go``).

Runtime cost: upstream evaluates with ``cel.CostLimit(1_000_000)``
(``CELSelectorExpressionMaxCost``). cel-expr-python exposes no cost tracking, so each
compiled selector carries :attr:`CompiledSelector.max_cost`, a worst-case bound of the
runtime cost over all devices (:func:`kubedra.cel.rewrite.estimate_cost`). A selector whose
bound is within the limit can never hit it. One whose bound exceeds the limit — only possible
with comprehensions over lists whose length comes from evaluation, or nested comprehensions
over large literal lists, and which the API server refuses to store when its own estimate is
over the limit — is evaluated without a limit: that is the remaining gap. Conversely, the C++
runtime stops any evaluation after 10,000 comprehension iterations in total ("Iteration budget
exceeded", a :class:`CELRuntimeError`), where upstream allows as many as the cost limit does
(about 250,000 iterations of a trivial body); selectors over a device's at most 32 domains and
ids never come near either limit.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from .device import CELDevice, PreparedDevice
from .errors import CELCompileError, CELRuntimeError
from .library import ENV_CONFIG_YAML, QUANTITY, function_declarations, list_index_extension
from .network import network_declarations
from .protos import VALUE_POOL, AnyWrapper, CheckedExpr
from .rewrite import CheckError, Rewriter, estimate_cost, field_selection_error, format_type

COST_LIMIT = 1_000_000
"""``resourceapi.CELSelectorExpressionMaxCost``: the scheduler's runtime cost limit."""

CACHE_SIZE = 1024
"""Compiled selectors kept (the scheduler keeps 10; a larger cache changes no result)."""

NO_SUCH_KEY_HINT = (". consider using CEL optional chaining (.? followed by orValue()) or "
                    "guarding the check with has() for optional fields")

# Runtime errors the C++ runtime words differently from cel-go.
_GO_WORDING = {"divide by zero": "division by zero", "modulus by zero": "modulus by zero"}

_current_device: ContextVar[PreparedDevice] = ContextVar("kubedra_cel_device")
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")
# `device` is declared as qualified variables, so the C++ checker reports an unknown field
# of it as an undeclared name; upstream's object type reports an undefined field.
_UNDECLARED_DEVICE_FIELD = re.compile(
    r"undeclared reference to 'device\.(\w+)' \(in container ''\)")
# A field that kubedra's message for a Kubernetes value type lacks: upstream's types have none.
_UNDEFINED_VALUE_FIELD = re.compile(
    r"undefined field '\w+' not found in struct '(kubernetes\.\w+|net\.\w+)'")
_MISSING_KEY = re.compile(r'Key not found in map ?: ?"?(.*?)"?$')


def _attribute_domain(domain: str) -> dict[str, Any]:
    return _current_device.get().attribute_domains.get(domain, {})


def _capacity_domain(domain: str) -> dict[str, Any]:
    return _current_device.get().capacity_domains.get(domain, {})


def _new_env() -> Any:
    string, boolean, dyn = cel.Type.STRING, cel.Type.BOOL, cel.Type.DYN
    return cel.NewEnv(
        VALUE_POOL,
        config=cel.NewEnvConfigFromYaml(ENV_CONFIG_YAML),
        variables={
            "device.driver": string,
            "device.allowMultipleAllocations": boolean,
            "device.attributes": cel.Type.Map(string, cel.Type.Map(string, dyn)),
            "device.capacity": cel.Type.Map(string, cel.Type.Map(string, QUANTITY)),
        },
        functions=[*function_declarations(_attribute_domain, _capacity_domain),
                   *network_declarations()],
        extensions=[list_index_extension()],
    )


_ENV = _new_env()


def _status_text(text: str) -> str:
    """Strip the absl status code that cel-expr-python puts around a message."""
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", text.strip()))


def _position_error(expression: str, offset: int, message: str) -> str:
    """cel-go's ``ERROR: <input>:line:col: msg`` block with the caret line."""
    line_start = expression.rfind("\n", 0, offset) + 1
    line_end = expression.find("\n", offset)
    line_text = expression[line_start:] if line_end < 0 else expression[line_start:line_end]
    line = expression.count("\n", 0, offset) + 1
    column = offset - line_start
    return (f"ERROR: <input>:{line}:{column + 1}: {message}\n | {line_text}\n"
            f" | {'.' * column}^")


@dataclass(frozen=True)
class CompiledSelector:
    """A selector compiled for the DRA environment; evaluate it with :meth:`matches`."""

    expression: str
    program: Any = field(repr=False, compare=False)
    max_cost: float = field(compare=False)

    def matches(self, device: CELDevice) -> bool:
        """Whether ``device`` satisfies the selector.

        Raises:
            CELRuntimeError: evaluation failed — a missing attribute id (``no such key: id``
                plus upstream's hint), a function error, a non-bool result, or a device whose
                attributes upstream cannot convert (no value, unparsable version).
        """
        prepared = device.prepared
        if prepared.error is not None:
            raise CELRuntimeError(prepared.error)
        if prepared.activation is None:
            prepared.activation = _ENV.Activation(prepared.variables)
        token = _current_device.set(prepared)
        try:
            result = self.program.eval(prepared.activation)
        except RuntimeError as err:  # the C++ runtime's own limits (iteration budget)
            raise CELRuntimeError(_status_text(str(err))) from None
        finally:
            _current_device.reset(token)
        value = result.value()
        if value is True or value is False:
            return value
        kind = result.type()
        if kind == cel.Type.ERROR:
            raise CELRuntimeError(_runtime_message(str(value)))
        raise CELRuntimeError(f"CEL result of type {_type_name(kind)} could not be converted to "
                              f"bool: unsupported type conversion from '{_type_name(kind)}' "
                              "to bool")


def _type_name(kind: Any) -> str:
    name = str(kind.name())
    return {"INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string",
            "BYTES": "bytes", "NULL": "null_type", "TYPE": "type", "DURATION":
            "google.protobuf.Duration", "TIMESTAMP": "google.protobuf.Timestamp"}.get(
        name, name.lower() if name.isupper() else name)


def _runtime_message(status: str) -> str:
    text = _status_text(status)
    missing = _MISSING_KEY.search(text)
    if missing:
        return f"no such key: {missing.group(1)}{NO_SUCH_KEY_HINT}"
    return _GO_WORDING.get(text, text)


@lru_cache(maxsize=CACHE_SIZE)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile a device selector as the v1.37.2 scheduler does (cached, LRU).

    Raises:
        CELCompileError: syntax or type error (``compilation failed: ERROR: <input>:…``), or
            a result type other than bool/dyn (``must evaluate to bool or the unknown type,
            not …``), as ``CompileCELExpression`` reports them.
    """
    try:
        compiled = _ENV.compile(expression)
    except RuntimeError as err:  # cel-expr-python reports parser and checker errors so
        message = _UNDECLARED_DEVICE_FIELD.sub(r"undefined field '\1'", _status_text(str(err)))
        message = _UNDEFINED_VALUE_FIELD.sub(lambda m: field_selection_error(m.group(1)), message)
        raise CELCompileError("compilation failed: " + message) from None
    checked = CheckedExpr.FromString(AnyWrapper.FromString(compiled.serialize()).value)
    try:
        Rewriter(checked).run()
    except CheckError as err:
        offset = checked.source_info.positions.get(err.node_id, 0)
        raise CELCompileError("compilation failed: " +
                              _position_error(expression, offset, str(err))) from None
    root_type = checked.type_map.get(checked.expr.id, None)
    kind = root_type.WhichOneof("type_kind") if root_type is not None else "dyn"
    if not (kind == "dyn" or (kind == "primitive" and root_type.primitive == 1)):
        raise CELCompileError(f"must evaluate to bool or the unknown type, not "
                              f"{format_type(root_type)}")
    wrapper = AnyWrapper(type_url="type.googleapis.com/cel.expr.CheckedExpr",
                         value=checked.SerializeToString())
    program = _ENV.deserialize(wrapper.SerializeToString())
    return CompiledSelector(expression, program, estimate_cost(checked))
