"""Exact numbers for counter and capacity arithmetic.

Upstream adds and compares ``resource.Quantity`` values exactly; kubedra does the same with
Python integers, falling back to :class:`fractions.Fraction` for values below one unit (``500m``).
"""

from __future__ import annotations

import math
from fractions import Fraction

from kubedra.api.quantity import BINARY_SI, Quantity

Number = int | Fraction
"""An exact value: an ``int`` when whole, else a ``Fraction``."""

INT64_MAX = 2**63 - 1


def number(quantity: Quantity) -> Number:
    """The exact value of a quantity (an ``int`` when it is whole)."""
    value = quantity.value
    return value.numerator if value.denominator == 1 else value


def ceil_int(quantity: Quantity) -> int:
    """``Quantity.Value()``: the value rounded up to an integer (away from zero)."""
    value = quantity.value
    return math.ceil(value) if value >= 0 else math.floor(value)


def milli_value(quantity: Quantity) -> int | None:
    """The value in milli-units when that is exact and fits int64 (``safeMilliValue`` in
    ``structured/internal/incubating/consumable_capacity.go``), else ``None``."""
    milli = quantity.value * 1000
    if milli.denominator != 1 or not -(2**63) <= milli.numerator <= INT64_MAX:
        return None
    return milli.numerator


def go_value(quantity: Quantity) -> int:
    """``Quantity.Value()`` as Go computes it, overflow included: within int64 the value
    rounded up (:func:`ceil_int`); beyond it, 0 for a decimal quantity of at most 18 digits
    (kept as ``int64Amount``, whose ``AsScaledInt64`` gives 0 on overflow) and the low 64 bits
    (two's complement) for one kept as ``inf.Dec`` (binary suffixes, longer mantissas;
    ``scaledValue`` in ``apimachinery/pkg/api/resource/scale_int.go``). The digits are those
    of the value without trailing zeros, as it is usually written."""
    value = ceil_int(quantity)
    if -(2**63) <= value <= INT64_MAX:
        return value
    if quantity.format != BINARY_SI and quantity.value.denominator == 1:
        digits = str(abs(value)).rstrip("0")
        if len(digits) <= 18:
            return 0
    return wrap_int64(value)


def wrap_int64(value: int) -> int:
    """``value`` as Go's int64 arithmetic leaves it: its low 64 bits, two's complement."""
    low = value & (2**64 - 1)
    return low - 2**64 if low > INT64_MAX else low


def go_quotient(dividend: int, divisor: int) -> int:
    """Go's integer ``/``: the quotient truncated toward zero."""
    quotient = abs(dividend) // abs(divisor)
    return quotient if (dividend < 0) == (divisor < 0) else -quotient
