"""TEMPORARY stand-in for ``kubedra.cel`` until it lands on main (delete it then).

Evaluates selectors with cel-expr-python over a plain map; no quantity or semver library, and
an unknown attribute domain is an error instead of an empty map. Only the tests of this folder
use it, through ``conftest.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel

from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceAttribute


class CELError(Exception):
    pass


class CELCompileError(CELError):
    pass


class CELRuntimeError(CELError):
    pass


class CELDevice:
    def __init__(self, driver: str, attributes: Mapping[str, DeviceAttribute],
                 capacity: Mapping[str, Quantity],
                 allow_multiple_allocations: bool = False) -> None:
        by_domain: dict[str, dict[str, Any]] = {}
        for name, attribute in attributes.items():
            domain, _, short = name.rpartition("/")
            by_domain.setdefault(domain or driver, {})[short] = attribute.value()
        self.value = {"driver": driver, "attributes": by_domain,
                      "allowMultipleAllocations": allow_multiple_allocations}


_ENV = cel.NewEnv(variables={"device": cel.Type.DYN})


class CompiledSelector:
    def __init__(self, expression: str) -> None:
        try:
            self._program = _ENV.compile(expression)
        except RuntimeError as err:
            raise CELCompileError(str(err)) from None

    def matches(self, device: CELDevice) -> bool:
        result = self._program.eval(data={"device": device.value})
        if result.type() != cel.Type.BOOL:
            raise CELRuntimeError(str(result.value()))
        return bool(result.value())


@functools.cache
def compile_selector(expression: str) -> CompiledSelector:
    return CompiledSelector(expression)
