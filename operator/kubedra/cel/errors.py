"""Errors raised by :mod:`kubedra.cel`.

The scheduler distinguishes the same two kinds (``k8s.io/dynamic-resource-allocation/cel``):
an expression that does not compile (``CompilationResult.Error``) and one that fails while it
is evaluated for a device (``DeviceMatches`` returns an error, which aborts the allocation).
"""

from __future__ import annotations


class CELError(Exception):
    """Base class of the errors of a DRA CEL selector."""


class CELCompileError(CELError):
    """The selector does not compile: syntax error, type error, or a result that cannot be bool.

    The message follows upstream's ``CompileCELExpression`` (``compilation failed: ERROR:
    <input>:line:col: …`` or ``must evaluate to bool or the unknown type, not …``).
    """


class CELRuntimeError(CELError):
    """Evaluating the selector for one device failed (upstream: ``DeviceMatches`` error).

    A missing attribute id gives ``no such key: <id>`` followed by upstream's hint from
    ``EnhanceRuntimeError`` (``dynamic-resource-allocation/cel/errors.go``).
    """
