"""The operator's probe for the device taint effect None, against the real v1.37.2
kube-apiserver refusing that effect (newcomer14).

No 1.34 kube-apiserver is built here, and 1.37 takes the effect, so the refused branch of
:func:`kubedra.controller.features.detect` had only been seen with the default server taking
it. A ValidatingAdmissionPolicy that refuses a ResourceSlice with a taint of effect None, as
``validDeviceTaintEffects`` of v1.34.4 does (pkg/apis/resource/validation/validation.go: 422
Invalid), makes the real server answer the probe's dry-run create as 1.34 with
``DRADeviceTaints`` on would; dry-run requests go through admission policies
(ValidatingAdmissionPolicy has no side effects).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, ApiException

from e2e.harness.wait import eventually
from kubedra import kube
from kubedra.controller.features import PROBE_DRIVER, detect
from kubedra.publishing.features import probe_effect_none_slice, probe_slice

pytestmark = pytest.mark.cluster

POLICY = "newcomer14-refuse-effect-none"
REFUSES_NONE = ("!has(object.spec.devices) || object.spec.devices.all(d, !has(d.taints) || "
                "d.taints.all(t, t.effect != 'None'))")
"""True for a slice none of whose devices has a taint of effect None."""


def policy(reason: str) -> dict[str, Any]:
    """The policy refusing a created ResourceSlice with a taint of effect None, with the HTTP
    ``reason`` (``Invalid``: 422, as 1.34's validation; ``Forbidden``: 403)."""
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": POLICY},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{
                         "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
                         "operations": ["CREATE", "UPDATE"],
                         "resources": ["resourceslices"]}]},
                     "validations": [{"expression": REFUSES_NONE, "reason": reason,
                                      "message": "Unsupported value: \"None\""}]}}


BINDING = {"apiVersion": "admissionregistration.k8s.io/v1",
           "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": POLICY},
           "spec": {"policyName": POLICY, "validationActions": ["Deny"]}}


@pytest.fixture
async def refusing(admin_api: ApiClient, request: pytest.FixtureRequest
                   ) -> AsyncIterator[None]:
    """The policy (``request.param``: its reason) and its binding, served until the probe is
    refused; both deleted afterwards."""
    admission = client.AdmissionregistrationV1Api(admin_api)
    await admission.create_validating_admission_policy(policy(request.param))
    await admission.create_validating_admission_policy_binding(BINDING)

    async def refused() -> int:
        try:
            await kube.dry_run_resource_slice(admin_api, probe_effect_none_slice(PROBE_DRIVER))
        except ApiException as err:
            return int(err.status)
        return 0
    await eventually(refused, timeout=30.0, what="the policy refusing the probe")
    try:
        yield
    finally:
        await admission.delete_validating_admission_policy_binding(POLICY)
        await admission.delete_validating_admission_policy(POLICY)


@pytest.mark.parametrize("refusing", ["Invalid"], indirect=True)
async def test_a_server_refusing_the_effect_none_is_detected(admin_api: ApiClient,
                                                             refusing: None) -> None:
    served = await detect(admin_api, PROBE_DRIVER)
    assert (served.device_taints, served.taint_effect_none) == (True, False)
    assert served.to_json()["taintEffectNone"] is False
    # the other probe (a NoSchedule taint) is still taken: only the effect is refused
    kept = await kube.dry_run_resource_slice(admin_api, probe_slice(PROBE_DRIVER))
    assert kept["spec"]["devices"][0]["taints"][0]["effect"] == "NoSchedule"


@pytest.mark.parametrize("refusing", ["Forbidden"], indirect=True)
async def test_a_forbidden_effect_none_keeps_what_the_other_probes_learned(
        admin_api: ApiClient, refusing: None) -> None:
    """An admission webhook or policy refusing the effect None answers 403, not 422. Before,
    that 403 failed the whole detection, and the operator assumed the defaults (counters
    kept, no ``skipNodeOperations``) whatever the other probes had just read; the first probe
    was taken with the same permissions, so this 403 can only be the effect refused."""
    served = await detect(admin_api, PROBE_DRIVER)
    assert (served.device_taints, served.taint_effect_none) == (True, False)
    version = await client.VersionApi(admin_api).get_code()
    assert (served.server_version, served.resource_versions[0]) == (version.git_version, "v1")
