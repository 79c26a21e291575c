"""Consumable capacity (KEP-5075, ``DRAConsumableCapacity``): what a request takes from a device.

Rules from ``structured/internal/incubating/consumable_capacity.go`` (v0.37.2):

- a request naming a capacity the device does not have cannot use the device;
- every capacity of the device is consumed: the requested amount rounded up by the capacity's
  ``requestPolicy`` (``validRange``: at least ``min``, then up to ``min + n*step``;
  ``validValues``: the next listed value), or, when nothing is requested, the policy's
  ``default`` or else the whole capacity;
- the device is unusable when the amount breaks the policy (above ``max``, off the step grid,
  not a listed value) or when already allocated + being allocated + this amount exceeds the
  capacity;
- an amount that cannot be represented (above int64, or not a whole number of milli-units on
  the fractional path) or a negative amount is a fatal error, not a mismatch. Up to 1.36
  (``checked`` false, :data:`~kubedra.allocation.versions.CAPACITY_AMOUNTS_CHECKED`) neither
  is checked: the integer path computes with Go's ``Quantity.Value()``, which is 0 or wrapped
  beyond int64 (:func:`~kubedra.allocation.quantities.go_value`).

From 1.38 (v0.38.0-beta.0, kubernetes#142202) capacity names are fully qualified
(:data:`~kubedra.allocation.versions.CAPACITY_NAMES_QUALIFIED`): ``memory`` on a device of
driver ``gpu.example.com`` and ``gpu.example.com/memory`` are one capacity (the qualified
entry wins where a device spells both), in a request (spelling one both ways is an error) and
in allocated results; a result names a capacity as the slice spells it. A negative request is
an error before any rounding
(:data:`~kubedra.allocation.versions.NEGATIVE_CAPACITY_REQUEST_IS_ERROR`; up to 1.37 a
``validRange`` rounded it up to ``min``).

The static part (which amounts, policy) depends only on the request and the device and is
computed once per pair; :func:`fits` adds what is in use.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubedra.allocation.errors import AllocationError
from kubedra.allocation.quantities import (
    INT64_MAX,
    Number,
    ceil_int,
    go_quotient,
    go_value,
    milli_value,
    number,
    wrap_int64,
)
from kubedra.api.quantity import BINARY_SI, Quantity
from kubedra.api.resource import CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity
from kubedra.cel.gostrings import go_quote


class CapacityError(AllocationError):
    """An amount that upstream refuses to compute with (unrepresentable or negative)."""


Consumption = tuple[tuple[str, Quantity, Number, Number], ...]
"""Per capacity of a device: name, amount consumed (as a quantity and exact number), capacity."""


def _use_milli(valid_range: CapacityRequestPolicyRange, fractional: bool) -> bool:
    if not fractional:
        return False
    for bound in (valid_range.min, valid_range.max, valid_range.step):
        if bound is not None and milli_value(bound) is None:
            return False
    step = valid_range.step
    return step is None or (milli_value(step) or 0) >= 1


def _round_up_range(requested: Quantity, valid_range: CapacityRequestPolicyRange,
                    fractional: bool, checked: bool) -> Quantity:
    minimum = valid_range.min
    if minimum is None:  # the API requires it (validation of CapacityRequestPolicyRange)
        raise CapacityError("requestPolicy.validRange has no min")
    if requested < minimum:
        return minimum
    step = valid_range.step
    if step is None:
        return requested
    if _use_milli(valid_range, fractional):
        wanted = milli_value(requested)
        if wanted is None:
            raise CapacityError(f"request {requested} is not a representable milli value")
        step_m, min_m = milli_value(step) or 1, milli_value(minimum) or 0
        steps = -(-(wanted - min_m) // step_m)
        if steps > (INT64_MAX - min_m) // step_m:
            raise CapacityError(f"rounding request {requested} up to the next step passes the "
                                "milli-value range")
        return Quantity.from_value(Fraction(min_m + step_m * steps, 1000), step.format)
    if not checked:  # up to 1.36: int64 arithmetic, wrapping, in BinarySI
        step_i, min_i = go_value(step), go_value(minimum)
        added = wrap_int64(go_value(requested) - min_i)
        steps = go_quotient(added, step_i)
        steps += added != steps * step_i
        return Quantity.from_value(wrap_int64(min_i + step_i * steps), BINARY_SI)
    if requested.value > INT64_MAX:
        raise CapacityError(f"request {requested} exceeds MaxInt64")
    wanted, step_i, min_i = ceil_int(requested), ceil_int(step), ceil_int(minimum)
    steps = -(-(wanted - min_i) // step_i)
    if min_i >= 0 and steps > (INT64_MAX - min_i) // step_i:
        raise CapacityError(f"rounding request {requested} up to the next step passes MaxInt64")
    return Quantity.from_value(min_i + step_i * steps, step.format)


def consumed_amount(requested: Quantity | None, capacity: DeviceCapacity,
                    fractional: bool, checked: bool = True) -> Quantity:
    """What one capacity of a device gives to a request (``calculateConsumedCapacity``).

    Raises:
        CapacityError: the rounded amount cannot be represented.
    """
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range, fractional, checked)
    if policy.valid_values is not None:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def _violates_range(amount: Quantity, valid_range: CapacityRequestPolicyRange,
                    fractional: bool, checked: bool) -> bool:
    if valid_range.max is not None and amount > valid_range.max:
        return True
    step, minimum = valid_range.step, valid_range.min
    if step is None or minimum is None:
        return False
    if _use_milli(valid_range, fractional):
        value = milli_value(amount)
        if value is None:
            return True
        offset, step_v = value - (milli_value(minimum) or 0), milli_value(step) or 1
    elif checked:
        offset, step_v = ceil_int(amount) - ceil_int(minimum), ceil_int(step)
    else:
        offset, step_v = wrap_int64(go_value(amount) - go_value(minimum)), go_value(step)
    return abs(offset) % abs(step_v) != 0


def violates_policy(amount: Quantity, policy: CapacityRequestPolicy | None,
                    fractional: bool, checked: bool = True) -> bool:
    """Whether an amount breaks a request policy (``violatesPolicy``; the minimum is not
    checked there, rounding has applied it already)."""
    if policy is None or (policy.default is not None and amount == policy.default):
        return False
    if policy.valid_range is not None:
        return _violates_range(amount, policy.valid_range, fractional, checked)
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def qualified(name: str, driver: str) -> str:
    """A capacity name in its fully qualified form: ``driver/name`` where it has no domain
    (``MakeFullyQualifiedName`` in ``k8s.io/dynamic-resource-allocation/api/types.go``)."""
    return name if "/" in name else f"{driver}/{name}"


def _by_qualified_name(capacity: Mapping[str, DeviceCapacity], driver: str
                       ) -> dict[str, tuple[str, DeviceCapacity]]:
    """A device's capacities by fully qualified name, each with the name a result gives it
    (``Convert_v1_To_api_DeviceCapacities``: the qualified spelling wins over the plain one,
    whatever their order; ``capacityNameForStatus``: a result spells it as the slice does)."""
    found: dict[str, tuple[str, DeviceCapacity]] = {}
    for name, cap in capacity.items():
        key = qualified(name, driver)
        if key not in found or "/" in name:
            found[key] = (name, cap)
    return found


def _resolved_requests(requests: Mapping[str, Quantity] | None,
                       entries: Mapping[str, tuple[str, DeviceCapacity]],
                       driver: str) -> dict[str, Quantity] | None:
    """The requested amounts by fully qualified name, or ``None`` when the device lacks a
    requested capacity (``resolveCapacityRequests``).

    Raises:
        CapacityError: the request names one capacity both with and without its domain.
    """
    resolved: dict[str, Quantity] = {}
    for name, amount in (requests or {}).items():
        key = qualified(name, driver)
        if key not in entries:
            return None
        if key in resolved:
            short = key.partition("/")[2]
            other = short if name == key else key
            raise CapacityError(f"capacity {go_quote(short)} requested both as "
                                f"{go_quote(name)} and as {go_quote(other)}")
        resolved[key] = amount
    return resolved


def static_consumption(requests: Mapping[str, Quantity] | None,
                       capacity: Mapping[str, DeviceCapacity] | None,
                       fractional: bool, checked: bool = True,
                       driver: str | None = None,
                       negative_refused: bool = False) -> Consumption | None:
    """What a request would consume from each capacity of a device, or ``None`` when the device
    cannot serve it at all (a requested capacity is missing, or a policy is broken).

    ``checked`` is whether that minor refuses unrepresentable and negative amounts (from 1.37,
    :data:`~kubedra.allocation.versions.CAPACITY_AMOUNTS_CHECKED`). ``driver``, the device's
    driver, is given from 1.38: then names are resolved as fully qualified names (a request's
    and the device's), a negative request is an error, and the consumption names each capacity
    as the slice does (see the module's doc). ``negative_refused``: a negative request is an
    error before its policy rounds it (from 1.38).

    Raises:
        CapacityError: an amount is unrepresentable or negative (checked for every capacity
            before any policy, so the outcome does not depend on the order of capacities), or,
            from 1.38, a request names a capacity both with and without its domain.
    """
    capacity = capacity or {}
    if driver is None:
        if requests and any(name not in capacity for name in requests):
            return None
        entries = {name: (name, cap) for name, cap in capacity.items()}
        wanted = requests or {}
    else:
        entries = _by_qualified_name(capacity, driver)
        found = _resolved_requests(requests, entries, driver)
        if found is None:
            return None
        wanted = found
    amounts = []
    policies = []
    for key, (name, cap) in entries.items():
        requested = wanted.get(key)
        try:
            if negative_refused and requested is not None and requested.value < 0:
                raise CapacityError(f"capacity value is negative: request {requested}")
            amount = consumed_amount(requested, cap, fractional, checked)
        except CapacityError as err:
            raise CapacityError(f"capacity {go_quote(key if driver else name)}: {err}"
                                ) from None
        value = number(amount)
        if value < 0 and checked:
            raise CapacityError(f"capacity {go_quote(name)}: capacity value is negative")
        amounts.append((name, amount, value, value if amount is cap.value else number(cap.value)))
        policies.append(cap.request_policy)
    if any(violates_policy(amount, policy, fractional, checked)
           for (_, amount, _, _), policy in zip(amounts, policies, strict=True)):
        return None
    return tuple(amounts)


def allocated_by_name(consumption: Consumption, allocated: Mapping[str, Number] | None,
                      driver: str | None) -> Mapping[str, Number] | None:
    """What allocated shares consume of a device, by the names of ``consumption``: as the
    results spell them up to 1.37 (``driver`` None), and from 1.38 summed by fully qualified
    name (``NewDeviceConsumedCapacity`` in ``structured/schedulerapi/types.go``,
    v0.38.0-beta.0), since a result may spell a capacity either way."""
    if driver is None or not allocated:
        return allocated
    by_key: dict[str, Number] = {}
    for name, used in allocated.items():
        key = qualified(name, driver)
        by_key[key] = by_key.get(key, 0) + used
    return {name: by_key.get(qualified(name, driver), 0) for name, _, _, _ in consumption}


def fits(consumption: Consumption, allocated: Mapping[str, Number] | None,
         allocating: Mapping[str, Number] | None, driver: str | None = None) -> bool:
    """Whether allocated + being allocated + this consumption stays within every capacity.

    ``driver`` is the device's from 1.38 (:func:`allocated_by_name`)."""
    allocated = allocated_by_name(consumption, allocated, driver)
    for name, _, amount, total in consumption:
        used = amount
        if allocated:
            used += allocated.get(name, 0)
        if allocating:
            used += allocating.get(name, 0)
        if used > total:
            return False
    return True
