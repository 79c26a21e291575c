"""Quantities parse and print exactly as the API server does (apimachinery resource.Quantity)."""

from fractions import Fraction

import pytest

from kubedra.api.quantity import Quantity, QuantityError


@pytest.mark.parametrize(("text", "value", "canonical"), [
    ("143771Mi", 150754820096, "143771Mi"),
    ("150754820096", 150754820096, "150754820096"),
    ("1024Mi", 1073741824, "1Gi"),
    ("1.5Gi", 1610612736, "1536Mi"),
    ("1000", 1000, "1k"),
    ("1500", 1500, "1500"),
    ("0.5", Fraction(1, 2), "500m"),
    ("100m", Fraction(1, 10), "100m"),
    ("1e3", 1000, "1e3"),
    ("512Ki", 524288, "512Ki"),
    ("1023Ki", 1047552, "1023Ki"),
    ("512", 512, "512"),
    ("0.1n", Fraction(1, 10**9), "1n"),  # rounded up to nano, like ParseQuantity
    ("-1.5", Fraction(-3, 2), "-1500m"),
    ("0", 0, "0"),
    ("141Gi", 151397597184, "141Gi"),
])
def test_parse_and_canonical(text: str, value: Fraction | int, canonical: str) -> None:
    q = Quantity(text)
    assert q.value == value
    assert q.canonical() == canonical


def test_binary_below_1024_prints_decimal() -> None:
    assert Quantity.from_value(1000, "BinarySI").canonical() == "1k"
    assert Quantity.from_value(1024, "BinarySI").canonical() == "1Ki"


def test_compares_by_value() -> None:
    assert Quantity("1Gi") == Quantity("1024Mi")
    assert Quantity("143771Mi") < Quantity("141Gi")
    assert len({Quantity("1k"), Quantity("1000")}) == 1
    assert (Quantity("1Gi") + Quantity("512Mi")).canonical() == "1536Mi"
    assert (Quantity("1Gi") - Quantity("1Gi")).canonical() == "0"


@pytest.mark.parametrize("text", ["", "Gi", "1.2.3", "1GB", "--1", "1 Gi", "."])
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity(text)
