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


def static_consumption(requests: Mapping[str, Quantity] | None,
                       capacity: Mapping[str, DeviceCapacity] | None,
                       fractional: bool, checked: bool = True) -> Consumption | None:
    """What a request would consume from each capacity of a device, or ``None`` when the device
    cannot serve it at all (a requested capacity is missing, or a policy is broken).

    ``checked`` is whether that minor refuses unrepresentable and negative amounts (from 1.37,
    :data:`~kubedra.allocation.versions.CAPACITY_AMOUNTS_CHECKED`).

    Raises:
        CapacityError: an amount is unrepresentable or negative (checked for every capacity
            before any policy, so the outcome does not depend on the order of capacities).
    """
    capacity = capacity or {}
    if requests and any(name not in capacity for name in requests):
        return None
    amounts = []
    for name, cap in capacity.items():
        try:
            amount = consumed_amount(requests.get(name) if requests else None, cap, fractional,
                                     checked)
        except CapacityError as err:
            raise CapacityError(f"capacity {name!r}: {err}") from None
        value = number(amount)
        if value < 0 and checked:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
        amounts.append((name, amount, value, value if amount is cap.value else number(cap.value)))
    if any(violates_policy(amount, capacity[name].request_policy, fractional, checked)
           for name, amount, _, _ in amounts):
        return None
    return tuple(amounts)


def fits(consumption: Consumption, allocated: Mapping[str, Number] | None,
         allocating: Mapping[str, Number] | None) -> bool:
    """Whether allocated + being allocated + this consumption stays within every capacity."""
    for name, _, amount, total in consumption:
        used = amount
        if allocated:
            used += allocated.get(name, 0)
        if allocating:
            used += allocating.get(name, 0)
        if used > total:
            return False
    return True
