"""Compact copies of API objects for the operator's caches (the kopf indexes).

The operator keeps every DeviceInventory and ResourceSlice in memory. Decoded from JSON, a
device costs about 4.5 KiB in Python, most of it in small dicts such as
``{"string": "NVIDIA H200"}`` or ``{"value": "143771Mi"}`` that are equal across the GPUs of a
fleet. :class:`Compactor` copies an object giving the attribute, capacity and counter values of
its devices and counter sets one shared dict per distinct value, with interned names
(``bench/scale.py`` figures in ``bench/RESULTS.md``).

Shared dicts must never be changed in place: the caches are read-only (reconcilers build new
objects; :func:`kubedra.controller.conditions.set_condition` copies).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

SHARED_VALUES = 200_000
"""Distinct values remembered at most; beyond it the memory starts afresh (objects already
cached keep theirs), so values that never come back cannot pile up."""

_DEVICE_MAPS = ("attributes", "capacity")
_SCALARS = (str, int, float, bool)


class Compactor:
    """Copies API objects sharing equal device attribute, capacity and counter values."""

    def __init__(self, limit: int = SHARED_VALUES) -> None:
        self.limit = limit
        self._values: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._last: tuple[tuple[str, str], dict[str, Any]] | None = None

    def copy(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of API object ``obj`` without ``metadata.managedFields``, its devices
        (``spec.devices``, ``status.discovered.devices`` and ``deviceModels``) and counter sets
        (``spec.sharedCounters``, ``status.discovered.counterSets``) compacted; other nested
        values are shared with ``obj``.

        Two calls for the same object version (UID and resourceVersion, as when several
        indexes store the same watch event) return the same copy.
        """
        meta = dict(obj.get("metadata") or {})
        version = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        if self._last is not None and version[1] and self._last[0] == version:
            return self._last[1]
        meta.pop("managedFields", None)
        copied = {**obj, "metadata": meta}
        if isinstance(spec := obj.get("spec"), Mapping):
            copied["spec"] = self.holder(spec, "devices", "sharedCounters")
        if isinstance(status := obj.get("status"), Mapping) and isinstance(
                discovered := status.get("discovered"), Mapping):
            held = self.holder(discovered, "devices", "counterSets")
            if isinstance(models := discovered.get("deviceModels"), list):
                held["deviceModels"] = [self._device(m) for m in models]
            copied["status"] = {**status, "discovered": held}
        self._last = (version, copied)
        return copied

    def holder(self, holder: Mapping[str, Any], devices: str, counter_sets: str
               ) -> dict[str, Any]:
        """A copy of ``holder`` (a slice's spec, an inventory's ``status.discovered``) with
        its ``devices`` and ``counter_sets`` lists compacted."""
        copied = dict(holder)
        if isinstance(listed := holder.get(devices), list):
            copied[devices] = [self._device(d) for d in listed]
        if isinstance(sets := holder.get(counter_sets), list):
            copied[counter_sets] = [self._counters(s) for s in sets]
        return copied

    def _device(self, device: Mapping[str, Any]) -> dict[str, Any]:
        copied = dict(device)
        for name in _DEVICE_MAPS:
            if isinstance(values := device.get(name), Mapping):
                copied[name] = self._map(values)
        if isinstance(consumed := device.get("consumesCounters"), list):
            copied["consumesCounters"] = [self._counters(c) for c in consumed]
        return copied

    def _counters(self, holder: Mapping[str, Any]) -> dict[str, Any]:
        copied = dict(holder)
        if isinstance(counters := holder.get("counters"), Mapping):
            copied["counters"] = self._map(counters)
        return copied

    def _map(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``{name: {kind: scalar}}`` with interned names and shared values."""
        shared = self._values
        copied = {}
        for name, value in values.items():
            if isinstance(value, dict) and len(value) == 1:
                ((kind, scalar),) = value.items()
                if isinstance(scalar, _SCALARS):  # list-type attributes are not shared
                    key = (kind, type(scalar), scalar)  # 1, 1.0 and True differ
                    value = shared.get(key) or self._remember(key, value)
            copied[sys.intern(name)] = value
        return copied

    def _remember(self, key: tuple[Any, ...], value: dict[str, Any]) -> dict[str, Any]:
        if len(self._values) >= self.limit:
            self._values.clear()
        self._values[key] = value
        return value
