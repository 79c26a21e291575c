"""Quantities as the Kubernetes CEL quantity library sees them.

CEL's quantity functions (``k8s.io/apiserver/pkg/cel/library/quantity.go``) work on Go's
``resource.Quantity``, whose results depend on its internal representation, not only on its
value: ``quantity("2000m").isInteger()`` is false because the parser keeps ``2000 x 10^-3``,
and ``quantity("1.5Gi")`` is held as an arbitrary-precision decimal for which ``AsInt64``
always fails. :class:`GoQuantity` therefore keeps the same two representations as
``k8s.io/apimachinery/pkg/api/resource`` (``quantity.go``, ``amount.go``): an ``int64Amount``
(``value x 10^scale`` with an int64 value) or an ``inf.Dec`` (an unbounded unscaled integer
with a scale), and follows ``ParseQuantity``, ``Add``, ``Sub``, ``AsInt64``,
``AsApproximateFloat64``, ``Sign`` and ``Cmp`` on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubedra.api.quantity import Quantity

from .protos import QuantityMessage

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_INT64_FACTORS = 18  # decimal digits that always fit an int64 (maxInt64Factors)
_NANO_EXPONENT = -9
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                     "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")

ERR_FORMAT = ("quantities must match the regular expression "
              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"


class QuantityParseError(ValueError):
    """``resource.ParseQuantity`` rejected the string; the message is Go's error text."""


def _fits_int64(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


@dataclass(frozen=True, slots=True)
class GoQuantity:
    """A ``resource.Quantity`` in Go's representation: ``unscaled x 10^exponent``.

    ``dec`` is True for the ``inf.Dec`` form; otherwise ``unscaled`` fits an int64.
    ``pointer`` marks results of ``add``/``sub``, which upstream returns as ``*Quantity`` (see
    :func:`quantity_equals`).
    """

    unscaled: int
    exponent: int
    dec: bool = False
    pointer: bool = False

    @property
    def value(self) -> Fraction:
        """The exact value."""
        if self.exponent >= 0:
            return Fraction(self.unscaled * 10**self.exponent)
        return Fraction(self.unscaled, 10**-self.exponent)

    def sign(self) -> int:
        """-1, 0 or 1 (``Quantity.Sign``)."""
        return (self.unscaled > 0) - (self.unscaled < 0)

    def compare(self, other: GoQuantity) -> int:
        """-1, 0 or 1 by value (``Quantity.Cmp``)."""
        a, b = self.value, other.value
        return (a > b) - (a < b)

    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: None when it reports failure (always for the Dec form)."""
        if self.dec or self.exponent < 0:
            return None
        result = self.unscaled * 10**self.exponent
        return result if _fits_int64(result) else None

    def as_approximate_float(self) -> float:
        """``Quantity.AsApproximateFloat64``: ``float(unscaled) * 10^exponent``, in that order."""
        try:
            base = float(self.unscaled)
        except OverflowError:  # big.Float.Float64 saturates to ±Inf
            base = math.copysign(math.inf, self.unscaled)
        if self.exponent == 0:
            return base
        return base * _pow10(self.exponent)

    def add(self, other: GoQuantity) -> GoQuantity:
        """``Quantity.Add`` on a copy (the receiver keeps its representation when it can)."""
        if not self.dec and not other.dec:
            summed = _int64_amount_add(self, other)
            if summed is not None:
                return GoQuantity(summed[0], summed[1], pointer=True)
        return _dec_add(self, other)

    def sub(self, other: GoQuantity) -> GoQuantity:
        """``Quantity.Sub`` on a copy."""
        return self.add(GoQuantity(-other.unscaled, other.exponent, other.dec))

    def to_message(self) -> Any:
        """The ``kubernetes.Quantity`` message that carries this value through CEL."""
        return QuantityMessage(dec=self.dec, unscaled=str(self.unscaled), exponent=self.exponent,
                               pointer=self.pointer)

    @classmethod
    def from_message(cls, message: Any) -> GoQuantity:
        """Inverse of :meth:`to_message`."""
        return cls(int(message.unscaled or "0"), message.exponent, message.dec, message.pointer)

    @classmethod
    def from_int(cls, value: int) -> GoQuantity:
        """``resource.NewQuantity(value, DecimalExponent)`` (``add``/``sub`` with an int)."""
        return cls(value, 0)

    @classmethod
    def from_api(cls, quantity: Quantity) -> GoQuantity:
        """What the scheduler holds for a capacity value read from the API.

        The API server stores the canonical string, and the scheduler's informer parses that
        string again, so the representation is the one ``ParseQuantity`` gives for it.
        """
        return parse_quantity(quantity.canonical())


_POW10_TAB = [float(f"1e{i}") for i in range(32)]
_POW10_POS32 = [float(f"1e{32 * i}") for i in range(10)]
_POW10_NEG32 = [float(f"1e-{32 * i}") for i in range(11)]


def _pow10(exponent: int) -> float:
    """``math.Pow10``, computed from the same two tables so the rounding matches."""
    if 0 <= exponent <= 308:
        return _POW10_POS32[exponent // 32] * _POW10_TAB[exponent % 32]
    if -323 <= exponent < 0:
        return _POW10_NEG32[-exponent // 32] / _POW10_TAB[-exponent % 32]
    return math.inf if exponent > 0 else 0.0


def _scale_up(value: int, by: int) -> int | None:
    """``positiveScaleInt64``: ``value x 10^by`` or None on int64 overflow."""
    result = value * 10**by
    return result if _fits_int64(result) else None


def _int64_amount_add(a: GoQuantity, b: GoQuantity) -> tuple[int, int] | None:
    """``int64Amount.Add``: the sum aligned to the smaller scale, None on overflow."""
    if b.unscaled == 0:
        return a.unscaled, a.exponent
    if a.unscaled == 0:
        return b.unscaled, b.exponent
    if a.exponent == b.exponent:
        total = a.unscaled + b.unscaled
        return (total, a.exponent) if _fits_int64(total) else None
    if a.exponent > b.exponent:
        scaled = _scale_up(a.unscaled, a.exponent - b.exponent)
        if scaled is None or not _fits_int64(scaled + b.unscaled):
            return None
        return scaled + b.unscaled, b.exponent
    scaled = _scale_up(b.unscaled, b.exponent - a.exponent)
    if scaled is None or not _fits_int64(a.unscaled + scaled):
        return None
    return a.unscaled + scaled, a.exponent


def _dec_add(a: GoQuantity, b: GoQuantity) -> GoQuantity:
    """``inf.Dec.Add``: exact, at the larger of the two scales (the smaller exponent)."""
    exponent = min(a.exponent, b.exponent)
    total = a.unscaled * 10 ** (a.exponent - exponent) + b.unscaled * 10 ** (b.exponent - exponent)
    return GoQuantity(total, exponent, dec=True, pointer=True)


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, numeric text, integer digits, fraction, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise QuantityParseError(ERR_FORMAT)
    return positive, value, num, denom, text[suffix_start:]


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, as ``quantitySuffixer.interpret``."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if body.isascii() and body.isdigit():
            exponent = int(digits)
            if _fits_int64(exponent):
                # Go truncates the parsed int64 to int32.
                return 10, (exponent + 2**31) % 2**32 - 2**31, "DecimalExponent"
    raise QuantityParseError(ERR_SUFFIX)


def parse_quantity(text: str) -> GoQuantity:
    """``resource.ParseQuantity`` with Go's resulting representation.

    Raises:
        QuantityParseError: with Go's message (format, numeric part, or suffix).
    """
    if not text:
        raise QuantityParseError(ERR_FORMAT)
    if text == "0":
        return GoQuantity(0, 0)
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret_suffix(suffix)
    if fmt == "BinarySI":
        precision = (14 - len(num) - int(exponent * 3 / 10)) if not denom else -1
    else:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale = (0 if fmt == "BinarySI" else exponent) - len(denom)
        if scale >= _NANO_EXPONENT:
            shifted = int(num + denom)
            mantissa = 1 << exponent if fmt == "BinarySI" else 1
            if _fits_int64(shifted) and _fits_int64(shifted * mantissa):
                result = shifted * mantissa
                return GoQuantity(result if positive else -result, scale)
    return _parse_dec(value, exponent, base, fmt)


def _parse_dec(value: str, exponent: int, base: int, fmt: str) -> GoQuantity:
    """The ``inf.Dec`` branch of ``ParseQuantity``: exact, rounded up to nano, binary capped."""
    body = value[1:] if value[:1] in ("+", "-") else value
    negative = value[:1] == "-"
    int_part, _, frac_part = body.partition(".")
    digits = int_part + frac_part
    if not digits or not digits.isdigit():
        raise QuantityParseError(ERR_NUMERIC)
    unscaled, dec_exponent = int(digits), -len(frac_part)
    if base == 10:
        dec_exponent += exponent
    else:
        unscaled <<= exponent
    if unscaled != 0:
        # amount.Round(amount, Nano, RoundUp): rescale to exactly 9 fraction digits.
        target = _NANO_EXPONENT
        if dec_exponent >= target:
            unscaled *= 10 ** (dec_exponent - target)
        else:
            unscaled = -(-unscaled // 10 ** (target - dec_exponent))
        dec_exponent = target
        if fmt == "BinarySI" and Fraction(unscaled, 10**9) > _INT64_MAX:
            unscaled, dec_exponent = _INT64_MAX, 0
    return GoQuantity(-unscaled if negative else unscaled, dec_exponent, dec=True)


def quantity_equals(left: GoQuantity, right: GoQuantity) -> bool:
    """``Quantity.Equal`` as CEL's ``==`` calls it: ``left.Equal(right)``.

    Upstream's ``Equal`` accepts only a ``Quantity`` value on the right; ``add``/``sub`` return
    a ``*Quantity``, so such a right operand is a "no such overload" error.

    Raises:
        LookupError: the right operand is the result of ``add``/``sub``.
    """
    if right.pointer:
        raise LookupError("no such overload")
    return left.compare(right) == 0
