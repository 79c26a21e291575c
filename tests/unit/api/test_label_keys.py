"""Label keys and values as the API server checks them (``IsLabelKey``, ``IsLabelValue`` in
k8s.io/apimachinery v0.37.2, pkg/api/validate/content/kube.go): one definition
(:mod:`kubedra.api.names`) for device taints, claim tolerations and label selectors."""

from __future__ import annotations

import pytest

from kubedra.api.claim_validation import device_claim_errors
from kubedra.api.names import is_label_key, is_label_value
from kubedra.api.resource import DeviceClaim, DeviceTaint
from kubedra.api.validation import taint_errors

PREFIX_253 = ".".join(["a" * 63] * 4)[:253]


@pytest.mark.parametrize(("key", "valid"), [
    ("unhealthy", True),
    ("kubedra.io/unhealthy", True),
    ("Under_score.dot-dash", True),
    ("a" * 63, True),
    ("a" * 64, False),
    (f"{PREFIX_253}/x", True),
    (f"a{PREFIX_253}/x", False),  # 254 characters of prefix
    ("/unhealthy", False),  # upstream: "prefix part must be non-empty"
    ("kubedra.io/", False),
    ("a/b/c", False),
    ("Kubedra.io/x", False),  # a DNS subdomain is lower case
    ("bad key!", False),
    ("-x", False),
    ("unhealthy\n", False),
    ("", False),
])
def test_is_label_key(key: str, valid: bool) -> None:
    assert is_label_key(key) is valid


@pytest.mark.parametrize(("value", "valid"), [
    ("", True), ("Over-heated_95.C", True), ("a" * 63, True), ("a" * 64, False),
    ("bad value", False), ("-x", False), ("x-", False), ("x\n", False), ("ü", False),
])
def test_is_label_value(value: str, valid: bool) -> None:
    assert is_label_value(value) is valid


def test_a_taint_key_with_an_empty_prefix_is_refused() -> None:
    """``/unhealthy`` was taken for a name without a prefix, and its ResourceSlice write
    failed: the API server refuses an empty prefix."""
    taint = DeviceTaint(key="/unhealthy", effect="NoSchedule")
    assert [(e.field, e.message) for e in taint_errors(taint)] == [
        ("key", "'/unhealthy' is not a label key: an optional DNS subdomain and '/', then at "
                "most 63 letters, digits, '-', '_' or '.'")]


def test_a_toleration_key_with_an_empty_prefix_is_refused() -> None:
    claim = DeviceClaim.from_api({"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.kubedra.io",
        "tolerations": [{"key": "/unhealthy", "operator": "Exists"}]}}]})
    assert [(e.field, e.message) for e in device_claim_errors(claim)] == [
        ("spec.devices.requests[0].exactly.tolerations[0].key", "'/unhealthy' is not a label key")]
