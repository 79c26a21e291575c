"""The DRA CEL environment: device selectors evaluated as a v1.37.2 kube-scheduler does.

``compile_selector(expression).matches(CELDevice(...))`` gives the answer of upstream's
``cel.Cache.GetOrCompile(expression).DeviceMatches(...)`` (``k8s.io/dynamic-resource-
allocation/cel``), on cel-expr-python. See :mod:`kubedra.cel.selector` for the one gap
(runtime cost tracking).
"""

from .device import CELDevice
from .errors import CELCompileError, CELError, CELRuntimeError
from .selector import CompiledSelector, compile_selector

__all__ = ["CELCompileError", "CELDevice", "CELError", "CELRuntimeError", "CompiledSelector",
           "compile_selector"]
