"""kubedra.cel's Go-faithful quantity and semver values, the cache, and device conversion.

Expected values follow ``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (``ParseQuantity``
keeps ``2000m`` as ``2000 x 10^-3``; fractional binary values become ``inf.Dec`` rounded to
nano) and ``github.com/blang/semver/v4`` (``Parse``, ``Compare``).
"""

from __future__ import annotations

import pytest

from kubedra.api.quantity import Quantity
from kubedra.api.resource import DeviceAttribute
from kubedra.cel import CELDevice, CELRuntimeError, compile_selector
from kubedra.cel.quantity import GoQuantity, QuantityParseError, parse_quantity
from kubedra.cel.semver import PreRelease, Semver, SemverParseError, parse_semver


@pytest.mark.parametrize(("text", "expected"), [
    ("1", GoQuantity(1, 0)),
    ("2000m", GoQuantity(2000, -3)),
    ("140Gi", GoQuantity(150323855360, 0)),
    ("1.5Gi", GoQuantity(1610612736000000000, -9, dec=True)),
    ("9Ei", GoQuantity(2**63 - 1, 0, dec=True)),  # BinarySI capped at maxAllowed
    ("1e3", GoQuantity(1, 3)),
    ("1.G", GoQuantity(1, 9)),
    ("+", GoQuantity(0, 0)),
    ("0.0000000001", GoQuantity(1, -9, dec=True)),  # rounded up to 1n
])
def test_parse_quantity_keeps_go_representation(text: str, expected: GoQuantity) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "quantities must match"), (" 1", "quantities must match"),
    ("1ki", "unable to parse quantity's suffix"), ("1.2.3", "quantities must match"),
])
def test_parse_quantity_errors(text: str, message: str) -> None:
    with pytest.raises(QuantityParseError, match=message):
        parse_quantity(text)


def test_quantity_arithmetic_follows_int64_amount_then_dec() -> None:
    assert parse_quantity("1k").add(parse_quantity("1")) == GoQuantity(1001, 0, pointer=True)
    overflow = parse_quantity("9223372036854775807").add(GoQuantity.from_int(1))
    assert overflow == GoQuantity(2**63 * 10**9, -9, dec=True, pointer=True)  # 19 digits: Dec
    assert overflow.as_int64() is None
    assert parse_quantity("2000m").as_int64() is None
    assert parse_quantity("1e3").as_int64() == 1000
    assert parse_quantity("1.5Gi").as_approximate_float() == 1610612736.0


def test_capacity_is_reparsed_from_the_canonical_string() -> None:
    assert GoQuantity.from_api(Quantity("2000m")) == GoQuantity(2, 0)
    assert GoQuantity.from_api(Quantity("143771Mi")) == GoQuantity(150754820096, 0)


def test_parse_semver() -> None:
    assert parse_semver("1.2.3-rc.1+b.5") == Semver(1, 2, 3, (PreRelease(False, text="rc"),
                                                             PreRelease(True, 1)))
    with pytest.raises(SemverParseError, match='leading zeroes "01"'):
        parse_semver("01.2.3")
    assert parse_semver("1.0.0-alpha").compare(parse_semver("1.0.0-alpha.1")) == -1
    assert parse_semver("1.0.0-beta.11").compare(parse_semver("1.0.0-beta.2")) == 1
    assert parse_semver("1.0.0").compare(parse_semver("1.0.0-rc.1")) == 1


def test_compiled_selectors_are_cached() -> None:
    expression = 'device.driver == "cache.kubedra.io"'
    assert compile_selector(expression) is compile_selector(expression)


def test_device_with_bad_version_fails_every_selector() -> None:
    # the API server rejects such a slice; the environment still fails as upstream's does
    bad = DeviceAttribute.model_construct(version_value="1.0")
    device = CELDevice("gpu.kubedra.io", {"v": bad}, {})
    with pytest.raises(CELRuntimeError, match=r"^attribute v: parse semantic version: "
                                             "No Major.Minor.Patch elements found$"):
        compile_selector("true").matches(device)


def test_unqualified_names_belong_to_the_driver_domain() -> None:
    device = CELDevice("gpu.kubedra.io", {"index": DeviceAttribute(int=3),
                                          "x.io/index": DeviceAttribute(int=4)},
                       {"memory": Quantity("80Gi")})
    assert compile_selector('device.attributes["gpu.kubedra.io"].index == 3 && '
                            'device.attributes["x.io"].index == 4 && '
                            'device.capacity["gpu.kubedra.io"].memory == quantity("80Gi")'
                            ).matches(device)


def test_cost_bound() -> None:
    assert compile_selector('device.attributes["a.io"].x == 1').max_cost < 100
    assert compile_selector("lists.range(2000).all(i, lists.range(2000).all(j, true))"
                            ).max_cost > 1_000_000
