"""Exact numbers for counter and capacity arithmetic.

Upstream adds and compares ``resource.Quantity`` values exactly; kubedra does the same with
Python integers, falling back to :class:`fractions.Fraction` for values below one unit (``500m``).
"""

from __future__ import annotations

import math
from fractions import Fraction

from kubedra.api.quantity import Quantity

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
