"""The API server's rules for a claim's ``spec.devices``, as ``kubedra simulate -f`` checks a
file (issue 13, item 4: simulate said "Fits", 1000 copies, of claims ``kubectl apply`` refuses:
a request named ``Bad Name`` with count -1, a constraint over an unknown request)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from kubedra.api.claim_validation import device_claim_errors
from kubedra.api.resource import DeviceClaim
from kubedra.explain.command import simulate_command

P = "spec.devices"


def _errors(devices: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in device_claim_errors(DeviceClaim.from_api(devices))]


def exact(cls: str = "gpu.kubedra.io", **fields: Any) -> dict[str, Any]:
    return {"deviceClassName": cls, **fields}


def test_valid_claims_have_no_errors() -> None:
    assert _errors({"requests": [
        {"name": "gpu", "exactly": exact(count=2, selectors=[{"cel": {"expression": "true"}}],
                                         tolerations=[{"operator": "Exists"}])},
        {"name": "any", "exactly": exact(allocationMode="All")},
        {"name": "alt", "firstAvailable": [exact(name="big"), exact(name="small", count=0)]}],
        "constraints": [{"requests": ["gpu", "alt/big"], "matchAttribute": "gpu.kubedra.io/x"}],
        "config": [{"requests": ["alt"]}]}) == []


@pytest.mark.parametrize(("devices", "errors"), [
    ({"requests": [{"name": "Bad Name", "exactly": exact(count=-1)}]},
     [(f"{P}.requests[0].name", "'Bad Name' is not a DNS label (at most 63 lower-case "
       "letters, digits and '-', starting and ending with a letter or digit)"),
      (f"{P}.requests[0].exactly.count", "must be greater than zero")]),
    ({"requests": [{"name": "a"}, {"name": "a", "exactly": exact()}]},
     [(f"{P}.requests[1].name", "duplicate name 'a'"),
      (f"{P}.requests[0]", "exactly one of `exactly` or `firstAvailable` is required")]),
    ({"requests": [{"name": "a", "exactly": exact("", allocationMode="Some")}]},
     [(f"{P}.requests[0].exactly.deviceClassName", "required"),
      (f"{P}.requests[0].exactly.allocationMode", "'Some' is not one of ExactCount, All")]),
    ({"requests": [{"name": "a", "exactly": exact("Bad_Class", allocationMode="All",
                                                  count=2)}]},
     [(f"{P}.requests[0].exactly.deviceClassName", "'Bad_Class' is not a DNS subdomain"),
      (f"{P}.requests[0].exactly.count", "must not be specified when allocationMode is 'All'")]),
    ({"requests": [{"name": "a", "exactly": exact(selectors=[{"cel": {"expression": ""}}],
                                                  tolerations=[{"operator": "Exists",
                                                                "value": "v",
                                                                "effect": "X"}])}]},
     [(f"{P}.requests[0].exactly.selectors[0].cel.expression", "required"),
      (f"{P}.requests[0].exactly.tolerations[0].value",
       "must be empty when operator is 'Exists'"),
      (f"{P}.requests[0].exactly.tolerations[0].effect", "'X' is not one of None, "
       "NoSchedule, NoExecute")]),
    ({"requests": [{"name": "a", "firstAvailable": [exact(name="x")] * 9}]},
     [(f"{P}.requests[0].firstAvailable", "9 items; at most 8 are allowed"),
      *[(f"{P}.requests[0].firstAvailable[{i}].name", "duplicate name 'x'")
        for i in range(1, 9)]]),
    ({"requests": [{"name": "a", "exactly": exact()}],
      "constraints": [{"requests": ["nope", "a/x"], "matchAttribute": "model"},
                      {"matchAttribute": "gpu.kubedra.io/m", "distinctAttribute": "d.io/i"}]},
     [(f"{P}.constraints[0].requests[0]", "'nope': must be the name of a request in the claim "
       "or the name of a request and a subrequest separated by '/'"),
      (f"{P}.constraints[0].requests[1]", "'a/x': must be the name of a request in the claim "
       "or the name of a request and a subrequest separated by '/'"),
      (f"{P}.constraints[0].matchAttribute", "'model': must be fully qualified: a domain, '/' "
       "and a name (e.g. gpu.kubedra.io/model)"),
      (f"{P}.constraints[1]", "exactly one of matchAttribute or distinctAttribute is required")]),
])
def test_each_rule_names_its_field(devices: dict[str, Any], errors: list[tuple[str, str]]
                                   ) -> None:
    assert _errors(devices) == errors


def test_simulate_refuses_a_claim_the_api_server_refuses(tmp_path: Any) -> None:
    claim = tmp_path / "claim.yaml"
    claim.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
                     "metadata: {name: t}\nspec: {spec: {devices: {requests: [\n"
                     "  {name: gpu, exactly: {deviceClassName: gpu.kubedra.io, count: -1}}]}}}\n")
    result = CliRunner().invoke(simulate_command, ["-f", str(claim), "--from", str(tmp_path)])
    assert (result.exit_code, result.output) == (1, (
        f"Error: {claim}: the API server would refuse this claim: "
        "spec.spec.devices.requests[0].exactly.count: must be greater than zero\n"))


NONE_TOLERATION = {"requests": [{"name": "gpu", "exactly": exact(tolerations=[
    {"key": "kubedra.io/maintenance", "operator": "Exists", "effect": "None"}])}]}


def test_a_toleration_of_effect_none_is_valid_from_1_35() -> None:
    """``validateDeviceToleration`` checks the effect against ``validDeviceTaintEffects``,
    which has None from v1.35.4 (no gate) and not in v1.34.4; simulate refused it on every
    minor."""
    assert _errors(NONE_TOLERATION) == []
    assert [(e.field, e.message) for e in device_claim_errors(
        DeviceClaim.from_api(NONE_TOLERATION), effect_none=False)] == [
        (f"{P}.requests[0].exactly.tolerations[0].effect",
         "'None' is not one of NoSchedule, NoExecute")]


@pytest.mark.parametrize(("minor", "refused"), [("1.34", True), ("1.35", False),
                                                ("1.37", False)])
def test_simulate_checks_a_toleration_as_the_clusters_minor(
        tmp_path: Any, minor: str, refused: bool) -> None:
    claim = tmp_path / "claim.yaml"
    claim.write_text(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 "metadata": {"name": "c"}, "spec": {"devices": NONE_TOLERATION}}))
    result = CliRunner().invoke(simulate_command, ["-f", str(claim), "--from", str(tmp_path),
                                                   "--kube-version", minor])
    error = (f"Error: {claim}: the API server would refuse this claim: spec.devices.requests[0]"
             ".exactly.tolerations[0].effect: 'None' is not one of NoSchedule, NoExecute\n")
    assert (result.exit_code, result.output.endswith(error)) == (1, True) if refused else (
        result.exit_code, "the API server would refuse" in result.output) == (0, False)
