"""Which API errors mean "this claim's status can never be written"
(``kube.refuses_claim_status_writes``): the wording of the immutability error differs between
releases (measured on v1.34.4 and v1.37.2)."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio.client import ApiException

from kubedra import kube


def _refusal(status: int, field: str, message: str) -> ApiException:
    err = ApiException(status=status, reason="Unprocessable Entity")
    err.body = json.dumps({"kind": "Status", "code": status, "details": {"causes": [
        {"reason": "FieldValueInvalid", "field": field, "message": message}]}})
    return err


@pytest.mark.parametrize("message", [
    "Invalid value: {\"Devices\": ...}: field cannot be modified once set",  # v1.37.2
    "Invalid value: {\"Devices\": ...}: field is immutable",  # v1.34.4
])
def test_an_immutable_allocation_of_either_release_is_a_refusal(message: str) -> None:
    assert kube.refuses_claim_status_writes(_refusal(422, "status.allocation", message))


@pytest.mark.parametrize(("status", "field", "message"), [
    (422, "status.devices", "Invalid value: x: field is immutable"),
    (409, "status.allocation", "field is immutable"),
    (422, "status.allocation", "Required value"),
])
def test_other_errors_are_not(status: int, field: str, message: str) -> None:
    assert not kube.refuses_claim_status_writes(_refusal(status, field, message))
