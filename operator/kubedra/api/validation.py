"""The rules the API server applies to one device or counter set of a ResourceSlice.

Each function returns every problem as a :class:`FieldError` (a path relative to the checked
object, and what is wrong) instead of raising, so that callers can leave out the one device
that breaks a rule and publish the others: the node agent before it reports discovered
devices, and the operator before it publishes a pool. Source: ``validateDevice``,
``validateDeviceAttribute``, ``validateCounterSet`` and ``validateDeviceCounterConsumption`` in
``k8s.io/kubernetes/pkg/apis/resource/validation/validation.go`` (v1.37). Lengths of values
are bytes of UTF-8, as Go's ``len`` counts them there ("é" is 2), not characters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from kubedra.api.limits import (
    BINDING_CONDITIONS_NEED_FAILURES,
    BINDING_FAILURES_NEED_CONDITIONS,
    BINDING_OVERLAP,
    DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH,
    RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE,
    RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
    RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION,
    RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE,
)
from kubedra.api.names import is_label_key, is_label_value, qualified_name_error
from kubedra.api.resource import (
    DEVICE_TAINT_EFFECTS,
    SEMVER_PATTERN,
    CounterSet,
    DeviceAttribute,
    DeviceTaint,
)
from kubedra.api.time import is_time

if TYPE_CHECKING:  # claim validation (explain, simulate) needs no inventory models: 60 ms
    from kubedra.api.inventory import InventoryDevice, Rejection

_SEMVER = re.compile(SEMVER_PATTERN)


@dataclass(frozen=True)
class FieldError:
    """One rule broken: ``field`` is the path below the checked object (e.g.
    ``attributes[productName].string``), ``message`` says what is wrong."""

    field: str
    message: str


def byte_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8: how the API server measures a string value."""
    return len(text.encode())


def _value_errors(path: str, text: str, *, version: bool) -> list[FieldError]:
    errors = []
    if version and not _SEMVER.match(text):
        errors.append(FieldError(path, f"{text!r} is not a semantic version (semver.org 2.0.0)"))
    size = byte_length(text)
    if size > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
        errors.append(FieldError(path, f"{size} bytes ({len(text)} characters); the API server "
                                       f"allows at most {DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH} bytes"))
    return errors


def attribute_errors(name: str, attribute: DeviceAttribute) -> list[FieldError]:
    """Problems of one attribute: its qualified name, exactly one value, value lengths in
    bytes, semantic versions, non-empty lists.

    An attribute without a list value is checked once per name, set fields and text
    (:func:`_single_value_errors`): a MIG node's 208 devices hold 2,500 attributes of a few
    dozen distinct ones (bench/RESULTS.md, scale, round 19)."""
    if (attribute.int_values is None and attribute.bool_values is None
            and attribute.string_values is None and attribute.version_values is None):
        return list(_single_value_errors(
            name, attribute.int_value is not None, attribute.bool_value is not None,
            attribute.string_value, attribute.version_value))
    return _attribute_errors(name, attribute)


@functools.lru_cache(maxsize=4096)
def _single_value_errors(name: str, has_int: bool, has_bool: bool, string: str | None,
                         version: str | None) -> tuple[FieldError, ...]:
    """:func:`_attribute_errors` of an attribute without list values (what an int or bool
    value is does not matter to them); built unvalidated, so that any text is checked here."""
    return tuple(_attribute_errors(name, DeviceAttribute.model_construct(
        int_value=0 if has_int else None, bool_value=False if has_bool else None,
        string_value=string, version_value=version)))


def _attribute_errors(name: str, attribute: DeviceAttribute) -> list[FieldError]:
    path = f"attributes[{name}]"
    errors = []
    bad_name = qualified_name_error(name)
    if bad_name:
        errors.append(FieldError(path, bad_name))
    if len(attribute.set_fields()) != 1:
        errors.append(FieldError(path, "exactly one of int, bool, string, version (or ints, "
                                       "bools, strings, versions) must be set"))
    if attribute.string_value is not None:
        errors += _value_errors(f"{path}.string", attribute.string_value, version=False)
    if attribute.version_value is not None:
        errors += _value_errors(f"{path}.version", attribute.version_value, version=True)
    for field, values in (("ints", attribute.int_values), ("bools", attribute.bool_values),
                          ("strings", attribute.string_values),
                          ("versions", attribute.version_values)):
        if values is not None and not values:
            errors.append(FieldError(f"{path}.{field}", "must not be empty if set"))
    for i, text in enumerate(attribute.string_values or []):
        errors += _value_errors(f"{path}.strings[{i}]", text, version=False)
    for i, text in enumerate(attribute.version_values or []):
        errors += _value_errors(f"{path}.versions[{i}]", text, version=True)
    return errors


def _attribute_values(attribute: DeviceAttribute) -> int:
    items = 0
    for values in (attribute.int_values, attribute.bool_values, attribute.string_values,
                   attribute.version_values):
        if values:
            items += len(values)
    return items or 1


def device_errors(device: InventoryDevice) -> list[FieldError]:
    """Problems of one device on its own (its counter consumption against the pool's counter
    sets is :func:`consumption_errors`): sizes, attributes, capacity names, request policies
    (forbidden: an inventory device never allows multiple allocations), consumption shape."""
    errors = []
    entries = len(device.attributes) + len(device.capacity)
    if entries > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        errors.append(FieldError("attributes", f"{entries} attributes and capacities; at most "
                                 f"{RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}"))
    values = sum(_attribute_values(a) for a in device.attributes.values())
    if values > RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE:
        errors.append(FieldError("attributes", f"{values} attribute values; at most "
                                 f"{RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE}"))
    for name, attribute in device.attributes.items():
        errors += attribute_errors(name, attribute)
    for name, capacity in device.capacity.items():
        bad_name = qualified_name_error(name)
        if bad_name:
            errors.append(FieldError(f"capacity[{name}]", bad_name))
        if capacity.request_policy is not None:
            errors.append(FieldError(f"capacity[{name}].requestPolicy",
                                     "forbidden: the device does not allow multiple "
                                     "allocations"))
    consumption = device.consumes_counters or []
    if len(consumption) > RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE:
        errors.append(FieldError("consumesCounters", "a device may consume from at most "
                                 f"{RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE} "
                                 "counter sets"))
    seen: set[str] = set()
    for i, use in enumerate(consumption):
        if use.counter_set in seen:
            errors.append(FieldError(f"consumesCounters[{i}].counterSet",
                                     f"counter set {use.counter_set!r} is listed twice"))
        seen.add(use.counter_set)
        errors += _counters_errors(f"consumesCounters[{i}].counters", len(use.counters),
                                   RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION)
    return errors


def _counters_errors(path: str, count: int, limit: int) -> list[FieldError]:
    if count == 0:
        return [FieldError(path, "required: at least one counter")]
    if count > limit:
        return [FieldError(path, f"{count} counters; at most {limit}")]
    return []


def counter_set_errors(counter_set: CounterSet) -> list[FieldError]:
    """Problems of one shared counter set: at least one counter, at most 32."""
    return _counters_errors("counters", len(counter_set.counters),
                            RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET)


def consumption_errors(device: InventoryDevice,
                       counter_sets: Mapping[str, CounterSet]) -> list[FieldError]:
    """What the device consumes that ``counter_sets`` (the pool's usable sets by name) lack:
    a set, a counter of a set, or more than a counter holds (the allocator would ignore the
    whole pool: ``checkAvailableCounters`` in structured/internal)."""
    errors = []
    for i, use in enumerate(device.consumes_counters or []):
        counter_set = counter_sets.get(use.counter_set)
        if counter_set is None:
            errors.append(FieldError(f"consumesCounters[{i}].counterSet",
                                     f"no usable counter set named {use.counter_set!r}"))
            continue
        for counter, amount in use.counters.items():
            available = counter_set.counters.get(counter)
            path = f"consumesCounters[{i}].counters[{counter}]"
            if available is None:
                errors.append(FieldError(path, f"counter set {use.counter_set!r} has no "
                                               f"counter {counter!r}"))
            elif amount.value > available.value:
                errors.append(FieldError(path, f"consumes {amount.value} but counter set "
                                               f"{use.counter_set!r} holds only "
                                               f"{available.value}"))
    return errors


def taint_errors(taint: DeviceTaint) -> list[FieldError]:
    """Problems of one device taint: the key a label key (``[prefix/]name``), the value a label
    value, the effect one of None, NoSchedule, NoExecute (``validateDeviceTaint``), ``timeAdded``
    a ``metav1.Time`` (:data:`~kubedra.api.time.TIME_PATTERN`; the slice write fails to decode
    another). The CRD refuses them too; this finds those stored before it did."""
    errors = []
    if not is_label_key(taint.key):
        errors.append(FieldError("key", f"{taint.key!r} is not a label key: an optional DNS "
                                        "subdomain and '/', then at most 63 letters, digits, "
                                        "'-', '_' or '.'"))
    value = taint.value or ""
    if not is_label_value(value):
        errors.append(FieldError("value", f"{value!r} is not a label value: at most 63 "
                                          "letters, digits, '-', '_' or '.'"))
    if taint.effect not in DEVICE_TAINT_EFFECTS:
        errors.append(FieldError("effect", f"{taint.effect!r} is not one of "
                                           f"{', '.join(DEVICE_TAINT_EFFECTS)}"))
    if taint.time_added is not None and not is_time(taint.time_added):
        errors.append(FieldError("timeAdded", f"{taint.time_added!r} is not a time the API "
                                              "server reads (RFC 3339, e.g. "
                                              "2026-12-03T10:00:00Z)"))
    return errors


def binding_condition_errors(conditions: Sequence[str],
                             failures: Sequence[str]) -> list[FieldError]:
    """Problems of a device's ``bindingConditions`` and ``bindingFailureConditions``
    (KEP-5007), as ``validateDeviceBindingParameters`` in
    k8s.io/kubernetes v1.37.2 ``pkg/apis/resource/validation/validation.go`` finds them (the
    same from v1.35.4; v1.34.4 differs only in how the size error is reported): every entry a
    label key (``ValidateLabelName``), no entry twice in one list, no failure condition that
    is also a binding condition, and neither list set without the other. At most 4 entries
    each (``BindingConditionsMaxSize``) is the model's rule, and the CRD's since the fields
    exist; ``bindsToNode`` has no rule upstream. The CRD refuses all of these too; this finds
    those stored before it did (an item's path is ``bindingConditions[1]``)."""
    if not conditions and not failures:  # nearly every device: 3.3 % of a MIG fleet's publish
        return []
    lists = (("bindingConditions", conditions), ("bindingFailureConditions", failures))
    errors = [FieldError(f"{path}[{i}]", f"{name!r} is not a label key: an optional DNS "
                                         "subdomain of at most 253 characters and '/', then "
                                         "at most 63 letters, digits, '-', '_' or '.'")
              for path, names in lists for i, name in enumerate(names)
              if not is_label_key(name)]
    for path, names in lists:
        errors += [FieldError(f"{path}[{i}]", f"duplicate value {name!r}")
                   for i, name in enumerate(names) if name in names[:i]]
    errors += [FieldError(f"bindingFailureConditions[{i}]", f"{name!r}: {BINDING_OVERLAP}")
               for i, name in enumerate(failures) if name in conditions]
    if failures and not conditions:
        errors.append(FieldError("bindingConditions", BINDING_FAILURES_NEED_CONDITIONS))
    if conditions and not failures:
        errors.append(FieldError("bindingFailureConditions", BINDING_CONDITIONS_NEED_FAILURES))
    return errors


def model_rejections(name: str, err: ValidationError) -> list[Rejection]:
    """Each error of a model that could not be built for device ``name`` (a value the models
    refuse, e.g. a name that is not a DNS label), as a :class:`Rejection`."""
    from kubedra.api.inventory import Rejection

    return [Rejection(name=name, field=f"devices[{name}]." + ".".join(str(p) for p in e["loc"]),
                      message=e["msg"]) for e in err.errors()]
