"""ResourceSlices of a whole fleet parsed with each distinct attribute and capacity validated once.

A fleet's slices repeat themselves: of a GPU's 14 attributes ten are the same on every GPU of the
model (``productName``, ``driverVersion``…), and so are its capacities. :class:`SliceDecoder`
gives the same :class:`~kubedra.api.resource.ResourceSlice` models as
``ResourceSlice.from_api``, but validates each distinct attribute value (``{"string": "gpu"}``)
and each distinct capacity (``{"value": "143771Mi"}``) once and hands pydantic the validated
model for every later device that has it (pydantic takes a model instance for a model field as
it is, ``revalidate_instances="never"``), so the devices share those models: the slice itself,
its pool, every device's name and every other field are still validated by pydantic, per slice.

Bad input fails as before, naming the field: a value that does not validate alone is left as
it was written, so the slice's own validation reports it at its place
(``spec.devices.3.attributes.minor.int``). Nothing here may mutate a shared model; no reader
of slices does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kubedra.api.resource import DeviceAttribute, DeviceCapacity, ResourceSlice

_M = TypeVar("_M", bound=BaseModel)


class SliceDecoder:
    """Parses ResourceSlices (plain dicts as the API server returns them), sharing the models
    of equal attribute values and capacities across every slice it parses.

    One decoder lives as long as the snapshot it builds: its caches hold one model per
    distinct value seen.
    """

    def __init__(self) -> None:
        self._attributes: dict[tuple[Any, ...], DeviceAttribute | None] = {}
        self._capacities: dict[tuple[Any, ...], DeviceCapacity | None] = {}

    def decode(self, data: Mapping[str, Any]) -> ResourceSlice:
        """The slice ``data`` as :meth:`ResourceSlice.from_api` parses it.

        Raises:
            pydantic.ValidationError: ``data`` does not parse (the same error, at the same
                location, as ``ResourceSlice.from_api`` gives).
        """
        spec = data.get("spec")
        if not isinstance(spec, dict) or not isinstance(devices := spec.get("devices"), list):
            return ResourceSlice.model_validate(data)
        prepared = [self._device(d) if isinstance(d, dict) else d for d in devices]
        return ResourceSlice.model_validate({**data, "spec": {**spec, "devices": prepared}})

    def _device(self, device: dict[str, Any]) -> dict[str, Any]:
        """``device`` with its attributes and capacities replaced by shared models where
        they validate."""
        attributes, capacity = device.get("attributes"), device.get("capacity")
        changed = dict(device)
        if type(attributes) is dict:
            changed["attributes"] = _shared_map(self._attributes, DeviceAttribute, attributes)
        if type(capacity) is dict:
            changed["capacity"] = _shared_map(self._capacities, DeviceCapacity, capacity)
        return changed


def _shared_map(cache: dict[tuple[Any, ...], _M | None], model: type[_M],
                values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (attribute or capacity name -> value) with each value that is a dict of
    hashable values (scalars) replaced by its shared model, validated the first time it is
    seen; a value holding anything else (a list), or one that does not validate, stays as it
    is (the caller's validation then parses it in place, or reports it there). The key holds
    each value's type too: ``{"bool": 1.0}`` is not ``{"bool": true}``. One loop, one lookup
    per value: most values of a fleet's devices are seen before, a few (UUIDs, PCI addresses)
    never.

    A value of one field (every attribute, and a capacity without a request policy) is keyed
    ``(field, scalar, type)``, built from its one item without unpacking the dict twice; a
    value of more fields by all its items and then their types (a key of another length, so
    the two never meet). On the 2,000-node dump the decoder's CPU went from 0.19-0.20 s to
    0.15-0.16 s (bench/RESULTS.md "Cold start")."""
    shared: dict[str, Any] = {}
    for name, value in values.items():
        if type(value) is dict:
            if len(value) == 1:
                for field, scalar in value.items():
                    key: tuple[Any, ...] = (field, scalar, type(scalar))
            else:
                key = (*value.items(), *map(type, value.values()))
            try:
                found = cache[key]
            except KeyError:
                try:
                    found = cache[key] = model.model_validate(value)
                except ValidationError:
                    found = cache[key] = None
            except TypeError:  # unhashable: a list value
                found = None
            if found is not None:
                value = found
        shared[name] = value
    return shared
