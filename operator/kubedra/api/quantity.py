"""Kubernetes resource quantities (``resource.Quantity``) with exact arithmetic.

A quantity is a decimal number with an optional suffix: binary SI (``Ki`` … ``Ei``), decimal SI
(``n``, ``u``, ``m``, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent (``e3``).
Values are kept as exact :class:`fractions.Fraction` numbers, rounded up to nano units as the
API server does. :meth:`Quantity.canonical` gives the string the API server stores, following
``CanonicalizeBytes`` in ``k8s.io/apimachinery/pkg/api/resource/quantity.go``: binary values of
at least 1024 that are whole numbers keep a binary suffix, everything else is written with a
decimal suffix whose exponent is a multiple of 3.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_BY_EXPONENT = {exp // 10: suffix for suffix, exp in _BINARY.items()}
QUANTITY_PATTERN = (r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
                    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
"""A quantity's grammar (``resource.Quantity``'s: a signed decimal number and a binary,
decimal or exponent suffix), as Python's ``re`` and Go's ``regexp`` (the CRD's ``pattern``)
both read it."""
_PATTERN = re.compile(QUANTITY_PATTERN)
_NANO = Fraction(1, 10**9)

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """Raised for a string that is not a Kubernetes quantity."""


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a multiple of 1e-9, as ``ParseQuantity`` does."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    rounded = math.ceil(abs(scaled))
    return Fraction(rounded if value > 0 else -rounded) * _NANO


class Quantity:
    """An exact, immutable Kubernetes quantity.

    ``Quantity("143771Mi").value == 150754820096``; comparison and hashing use the numeric
    value, so ``Quantity("1Gi") == Quantity("1024Mi")``. ``str()`` gives the canonical form.

    Raises:
        QuantityError: the string is not a quantity (``ParseQuantity`` rules).
    """

    __slots__ = ("_format", "_text", "_value")
    _value: Fraction
    _format: str
    _text: str
    """:meth:`canonical`'s answer, set by its first call (a quantity is immutable; one shared
    by hundreds of MIG partitions is written out in every slice of each)."""

    def __init__(self, text: str | int | Quantity, *, fmt: str | None = None) -> None:
        if isinstance(text, Quantity):
            self._value, self._format = text._value, text._format
            return
        if isinstance(text, bool):
            raise QuantityError(f"quantity must be a string or an integer, not {text!r}")
        if isinstance(text, int):
            self._value = Fraction(text)
            self._format = fmt or DECIMAL_SI
            return
        match = _PATTERN.match(text.strip()) if isinstance(text, str) else None
        if not match or match.group("number") in {"+", "-", "."}:
            raise QuantityError(f"quantities must match the regular expression "
                                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
        number = Fraction(match.group("number"))
        suffix = match.group("suffix") or ""
        if suffix in _BINARY:
            value = number * 2 ** _BINARY[suffix]
            self._format = BINARY_SI
        elif suffix in _DECIMAL:
            value = number * Fraction(10) ** _DECIMAL[suffix]
            self._format = DECIMAL_SI
        else:
            value = number * Fraction(10) ** int(suffix[1:])
            self._format = DECIMAL_EXPONENT
        self._value = _round_up_to_nano(value)

    @classmethod
    def from_value(cls, value: Fraction | int, fmt: str = DECIMAL_SI) -> Quantity:
        """Build a quantity from an exact number, keeping ``fmt`` for :meth:`canonical`."""
        q = cls.__new__(cls)
        q._value = _round_up_to_nano(Fraction(value))
        q._format = fmt
        return q

    @property
    def value(self) -> Fraction:
        """The exact value (bytes for memory, units for counts)."""
        return self._value

    @property
    def format(self) -> str:
        """``BinarySI``, ``DecimalSI`` or ``DecimalExponent``: how :meth:`canonical` writes it."""
        return self._format

    def canonical(self) -> str:
        """The API server's canonical string (``CanonicalizeBytes``), worked out once."""
        try:
            return self._text
        except AttributeError:
            self._text = self._canonical()
            return self._text

    def _canonical(self) -> str:
        value = self._value
        if value == 0:
            return "0"
        fmt = self._format
        if fmt == BINARY_SI and (abs(value) < 1024 or value.denominator != 1):
            fmt = DECIMAL_SI
        if fmt == BINARY_SI:
            amount, exponent = int(value), 0
            while amount % 1024 == 0 and exponent < 6:
                amount //= 1024
                exponent += 1
            return f"{amount}{_BINARY_BY_EXPONENT.get(exponent, '')}"
        # decimal: mantissa * 10**exponent, exponent a multiple of 3, mantissa an integer
        exponent = 0
        mantissa = value
        while mantissa.denominator != 1:
            mantissa *= 10
            exponent -= 1
        amount = int(mantissa)
        while amount != 0 and amount % 10 == 0:
            amount //= 10
            exponent += 1
        while exponent % 3 != 0:
            amount *= 10
            exponent -= 1
        if fmt == DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
            return f"{amount}{_DECIMAL_BY_EXPONENT[exponent]}"
        return f"{amount}e{exponent}" if exponent else str(amount)

    def as_int(self) -> int:
        """The value rounded up to a whole number (``Value()`` in Go)."""
        return math.ceil(self._value)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity.from_value(self._value + other._value, self._format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity.from_value(self._value - other._value, self._format)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        return self._value < other._value

    def __le__(self, other: Quantity) -> bool:
        return self._value <= other._value

    def __gt__(self, other: Quantity) -> bool:
        return self._value > other._value

    def __ge__(self, other: Quantity) -> bool:
        return self._value >= other._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, _source: Any, _handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        def parse(value: Any) -> Quantity:
            if isinstance(value, Quantity):
                return value
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                try:
                    return _parsed(value)
                except QuantityError as err:
                    raise ValueError(str(err)) from None
            raise ValueError(
                f"a quantity must be a string or an integer, not {type(value).__name__}")

        return core_schema.no_info_plain_validator_function(
            parse,
            json_schema_input_schema=core_schema.union_schema(
                [core_schema.int_schema(), core_schema.str_schema()]),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda q: q.canonical(), when_used="always"),
        )


@functools.lru_cache(maxsize=4096)
def _parsed(text: str | int) -> Quantity:
    """``Quantity(text)``, remembered: a fleet repeats the same few quantities in every device
    (``143771Mi``, ``132``), and parsing with exact fractions dominated decoding slices and
    inventories (bench/scale.py). Quantities are immutable, so sharing one is safe."""
    return Quantity(text)
