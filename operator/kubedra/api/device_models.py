"""Device models: the attributes and capacities that whole devices share, reported once.

Every GPU of one kind reports the same product name, architecture, compute capability, driver
and CUDA versions, memory and multiprocessors; only its UUID, minor number and PCI address (and,
on a real host, its PCIe root and NUMA node) differ. In the full form ``status.discovered``
spells all of it out per device: 7,313 B as listed for an 8-H200 node's inventory against
5,976 B for the ResourceSlice published from it (``bench/RESULTS.md``, scale, round 14).

The compact form: ``status.discovered.deviceModels`` lists, once per kind, a model's name and
its attributes and capacity; a device naming it (``deviceModel``) lists only the entries whose
values differ from the model's. The device published is the model's entries, in the model's
order, with the device's own values in their place, then the device's entries the model lacks
(:func:`unfold`; a Python dict merge ``{**model, **own}``). **The device's value wins on a name
collision**: that is what lets a model hold every entry of its devices, the varying ones
(``uuid``) with one device's value, so that the published order is the model's and the slices
are the same byte for byte as from the full form, which keeps the order discovery gave.

A device naming no ``deviceModels`` entry, or one whose entries together with the model's
would exceed :data:`~kubedra.api.limits.RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE`
(32, the API server's limit per device; the CRD checks each side alone), is left out of the
pool and in ``rejected``, its field ``status.discovered.devices[<device>].deviceModel``: without
its model it is not the device the agent found.

The agent folds its report (:func:`fold`) after the MIG compact form
(:func:`kubedra.api.mig.compact`); the operator unfolds it first, before MIG partitions are
expanded from the GPUs (:func:`kubedra.api.mig.expand`, which every reader of discovered
devices goes through). Fold is lossless by construction: it returns the report unchanged unless
:func:`unfold` gives back the same devices, compared as JSON bytes (order included).
"""

from __future__ import annotations

import json
import re
from collections import Counter as Tally
from collections.abc import Mapping, Sequence
from typing import Any

from kubedra.api.inventory import (
    MAX_DEVICE_MODELS,
    DeviceModel,
    DiscoveredDevice,
    DiscoveredState,
    Rejection,
)
from kubedra.api.limits import RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE

_ENTRIES = ("attributes", "capacity")


def model_name(attributes: Mapping[str, Any], fallback: str) -> str:
    """A DNS label naming the kind of a device with ``attributes``: its ``productName``
    (``NVIDIA H200`` → ``nvidia-h200``), else ``pci-<vendorID>-<deviceID>`` (the pci backend:
    ``pci-15b3-101d``), else ``fallback``."""
    def text(name: str) -> str:
        value = attributes.get(name)
        return str(getattr(value, "string_value", None) or "")
    words = text("productName") or (
        f"pci {text('vendorID')} {text('deviceID')}" if text("vendorID") else "")
    words = re.sub(r"0x([0-9a-f]+)", r"\1", words.lower())
    return re.sub(r"[^a-z0-9]+", "-", words).strip("-")[:50].strip("-") or fallback


def unfold(discovered: DiscoveredState) -> tuple[list[DiscoveredDevice], list[Rejection]]:
    """The devices of ``discovered`` with every ``deviceModel`` written out (rules in the
    module docstring), in report order, and the devices left out, each with the field and why.
    A device without ``deviceModel`` comes back as it is (``migModel`` is kept on all)."""
    models = {model.name: model for model in discovered.device_models or []}
    devices: list[DiscoveredDevice] = []
    rejected: list[Rejection] = []
    for device in discovered.devices:
        if device.device_model is None:
            devices.append(device)
            continue
        field = f"status.discovered.devices[{device.name}].deviceModel"
        model = models.get(device.device_model)
        if model is None:
            rejected.append(Rejection(name=device.name, field=field, message=(
                f"no deviceModels entry {device.device_model!r}")))
            continue
        attributes = {**model.attributes, **device.attributes}
        capacity = {**model.capacity, **device.capacity}
        entries = len(attributes) + len(capacity)
        if entries > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
            rejected.append(Rejection(name=device.name, field=field, message=(
                f"with deviceModels[{model.name}] the device has {entries} attributes and "
                f"capacities; a device may have at most "
                f"{RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}")))
            continue
        devices.append(device.model_copy(update={
            "attributes": attributes, "capacity": capacity, "device_model": None}))
    return devices, rejected


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _shared(maps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per name (the maps share names and order), the value most devices have (the first
    device's of those as common)."""
    shared: dict[str, Any] = {}
    for name in maps[0]:
        tally = Tally(_text(m[name]) for m in maps)
        top = max(tally.values())
        shared[name] = next(m[name] for m in maps if tally[_text(m[name])] == top)
    return shared


def _own(device: dict[str, Any], shared: dict[str, dict[str, Any]], model: str
         ) -> dict[str, Any]:
    """Device ``device`` (its JSON) naming ``model``: its attributes and capacity only where
    they differ from ``shared`` (a map left empty is left out)."""
    own: dict[str, Any] = {}
    for key, value in device.items():
        if key not in _ENTRIES:
            own[key] = value
        elif differ := {k: v for k, v in value.items() if _text(v) != _text(shared[key][k])}:
            own[key] = differ
    return {**own, "deviceModel": model}


def fold(state: DiscoveredState) -> DiscoveredState:
    """``state`` with its devices in the compact form where that is smaller: devices whose
    attribute and capacity names are the same, in the same order, and that have no
    ``deviceModel`` yet share one ``deviceModels`` entry holding, per name, the value most of
    them have; each lists only the values that differ. A group is folded only if its devices
    and model together take fewer bytes than its devices in full. Lossless: ``state`` comes
    back unchanged unless :func:`unfold` gives back the devices it gives of ``state``, as JSON
    bytes."""
    listed = [device.to_api() for device in state.devices]
    groups: dict[tuple[tuple[str, ...], ...], list[int]] = {}
    for index, (device, api) in enumerate(zip(state.devices, listed, strict=True)):
        if device.device_model is None and (device.attributes or device.capacity):
            key = tuple(tuple(api.get(part) or {}) for part in _ENTRIES)
            groups.setdefault(key, []).append(index)
    taken = {model.name for model in state.device_models or []}
    models = list(state.device_models or [])
    folded = list(listed)
    for members in groups.values():
        if len(members) < 2 or len(models) >= MAX_DEVICE_MODELS:
            continue
        shared = {part: _shared([listed[i].get(part) or {} for i in members]) for part in _ENTRIES}
        base = model_name(state.devices[members[0]].attributes, "device")
        name, suffix = base, 1
        while name in taken:
            suffix += 1
            name = f"{base[:60]}-{suffix}"
        compact = {i: _own(listed[i], shared, name) for i in members}
        model = {"name": name, **{part: values for part, values in shared.items() if values}}
        # the list's own bytes: `,"deviceModels":[]` for the first model, a comma after
        listing = len(',"deviceModels":[]') if not models else 1
        if listing + len(_text(model)) + sum(len(_text(d)) for d in compact.values()) >= sum(
                len(_text(listed[i])) for i in members):
            continue
        taken.add(name)
        models.append(DeviceModel.model_validate(model))
        for index, own in compact.items():
            folded[index] = own
    if len(models) == len(state.device_models or []):
        return state
    result = state.model_copy(update={
        "devices": [DiscoveredDevice.model_validate(d) for d in folded], "device_models": models})
    # compared with the report written out: a device naming a model already stays as it is
    before, refused = unfold(state)
    if any(device.device_model is not None for device in state.devices):
        listed = [device.to_api() for device in before]
    back, rejected = unfold(result)
    if rejected != refused or _text([d.to_api() for d in back]) != _text(listed):
        return state
    return result
