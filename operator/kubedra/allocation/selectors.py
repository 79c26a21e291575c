"""CEL device selectors of a request: its class's selectors, then its own.

As in ``selectorsMatch`` (``structured/internal/incubating/allocator_incubating.go``), the
selectors are evaluated in order and the first ``false`` decides; an expression is compiled only
when it is first evaluated, so a broken selector behind a ``false`` one never fails. A compile
or runtime error aborts the allocation (:class:`~kubedra.allocation.errors.AllocationError`).

A selector's outcome depends only on the expression and the device, so outcomes are cached per
device for as long as the snapshot lives (upstream caches per ``Allocate`` call), and per
distinct set of the values the expression reads (:mod:`kubedra.cel.reads`): a selector on
memory is evaluated once for a fleet of GPUs that all have the same memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocation.errors import AllocationError
from kubedra.allocation.pools import DeviceEntry
from kubedra.cel import CELCompileError, CELRuntimeError, CompiledSelector, compile_selector
from kubedra.cel.reads import reads, values_key


class SelectorError(AllocationError):
    """A selector failed to compile or evaluate.

    Attributes:
        index: position of the selector in the class's or the request's list.
        from_class: whether it is a DeviceClass selector.
        on_device: whether it failed evaluating a device (a runtime error), not compiling.
    """

    def __init__(self, message: str, *, index: int, from_class: bool, on_device: bool) -> None:
        super().__init__(message)
        self.index = index
        self.from_class = from_class
        self.on_device = on_device

    def in_context(self, class_name: str, claim: str, device: DeviceEntry) -> AllocationError:
        """The error as upstream words it (``isSelectable``): the class or claim, and for a
        runtime error the device (``claim ns/c: selector #0 on device d/p/x: CEL runtime
        error: …``; a compile error names no device)."""
        owner = f"class {class_name}" if self.from_class else f"claim {claim}"
        where = f" on device {device}" if self.on_device else ""
        return AllocationError(f"{owner}: selector #{self.index}{where}: {self}")


class SelectorSet:
    """The selectors of one (class, request) combination with their cached outcomes.

    ``outcomes[uid]`` is True, False, or the :class:`SelectorError` the device raised.
    """

    __slots__ = ("_compiled", "_reads", "_reads_known", "_shared", "class_count", "expressions",
                 "outcomes")

    def __init__(self, class_expressions: Sequence[str], request_expressions: Sequence[str]):
        self.expressions = (*class_expressions, *request_expressions)
        self.class_count = len(class_expressions)
        self._compiled: list[CompiledSelector | None] = [None] * len(self.expressions)
        self.outcomes: dict[int, bool | SelectorError] = {}
        self._reads = [reads(e) for e in self.expressions]
        self._reads_known = any(r is not None for r in self._reads)
        """Whether any selector's outcome is shared by the values it reads (then a device's
        key needs its conversion error)."""
        self._shared: list[dict[tuple[object, ...], bool | SelectorError]] = [
            {} for _ in self.expressions]

    def _error(self, position: int, what: str, err: Exception) -> SelectorError:
        from_class = position < self.class_count
        index = position if from_class else position - self.class_count
        return SelectorError(f"{what}: {err}", index=index, from_class=from_class,
                             on_device=isinstance(err, CELRuntimeError))

    def _evaluate(self, device: DeviceEntry) -> bool | SelectorError:
        error = device.conversion_error() if self._reads_known else None
        for position, expression in enumerate(self.expressions):
            read = self._reads[position]
            key = None if read is None else values_key(
                read, error, device.driver, device.attributes, device.capacity or {},
                device.allow_multiple)
            shared = None if key is None else self._shared[position].get(key)
            if shared is None:
                shared = self._evaluate_one(position, expression, device)
                if key is not None:
                    self._shared[position][key] = shared
            if shared is not True:
                return shared
        return True

    def _evaluate_one(self, position: int, expression: str,
                      device: DeviceEntry) -> bool | SelectorError:
        """Selector ``position`` on ``device``: True, False, or the error it raises."""
        compiled = self._compiled[position]
        if compiled is None:
            try:
                compiled = compile_selector(expression)
            except CELCompileError as err:
                return self._error(position, "CEL compile error", err)
            self._compiled[position] = compiled
        try:
            return compiled.matches(device.cel_device())
        except CELRuntimeError as err:
            return self._error(position, "CEL runtime error", err)

    def outcome(self, device: DeviceEntry) -> bool | SelectorError:
        """Whether the device passes all selectors, or the error it raises (cached)."""
        found = self.outcomes.get(device.uid)
        if found is None:
            found = self.outcomes[device.uid] = self._evaluate(device)
        return found
