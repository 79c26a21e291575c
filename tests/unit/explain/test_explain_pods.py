"""kubedra explain pod: all of a pod's claims together, as the scheduler allocates them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kubedra.api.resource import ResourceClaim
from kubedra.cli import main
from kubedra.controller.explain_state import ExplainState, Inputs
from kubedra.controller.explanations import explain_messages
from kubedra.explain import ClusterSnapshot, PodPlacement
from kubedra.explain.claims import explain_claim
from kubedra.explain.pods import explain_pod
from kubedra.explain.render import render_explanation, render_pod_explanation
from tests.support.explain_builders import (
    gpu_claim,
    h200_slices,
    node,
    on_node,
    shipped_classes,
)
from tests.support.scenario_builders import (
    CLASSES,
    NIC,
    claim,
    device,
    exact,
    gpus,
    resource_slice,
)
from tests.support.scenario_builders import (
    GPU as GPU_DRIVER,
)

SLICES = [resource_slice("a-gpu", gpus(4), pool="a", node="a"),
          resource_slice("a-nic", [device("nic-0")], pool="a-nic", node="a", driver=NIC),
          resource_slice("b-gpu", gpus(8), pool="b", node="b")]
CLAIMS = [claim("train-0", exact("gpu", "gpu", count=4)),
          claim("train-1", exact("gpu", "gpu", count=4)), claim("net", exact("nic", "nic"))]
POD = PodPlacement("default", "p", claims=("train-0", "train-1", "net"))


def _explain(claims: list[dict[str, Any]]) -> Any:
    snapshot = ClusterSnapshot.from_api(SLICES, CLASSES, [], claims, [node("a"), node("b")])
    return explain_pod(snapshot, POD, [ResourceClaim.from_api(c) for c in claims])


def test_claims_that_each_fit_alone_but_on_no_node_together() -> None:
    explanation = _explain(CLAIMS)
    a = ("a: each claim fits alone, but not all together: default/train-0 and default/train-1 "
         "compete for the same 4 devices (gpu-0, gpu-1, gpu-2, gpu-3): claim default/train-1, "
         "request gpu: cannot find 4 devices that fit together")
    not_nic = 'on b has driver "gpu.example.com", not the "nic.example.com" asked'
    b = ("b: claim default/net does not fit: request nic: 0 of 8 devices are in class nic (1 "
         f"needed): gpu-0 {not_nic}; gpu-1 {not_nic}; gpu-2 {not_nic}; and 5 more devices")
    data = explanation.to_json()
    assert (data["verdict"], data["message"]) == (
        "Unschedulable", f"no node fits all claims of the pod: {a}; {b}")
    assert [(n["node"], n["fits"], [(c["claim"], c["fitsAlone"]) for c in n["claims"]])
            for n in data["nodes"]] == [
        ("a", False, [("default/train-0", True), ("default/train-1", True),
                      ("default/net", True)]),
        ("b", False, [("default/train-0", True), ("default/train-1", True),
                      ("default/net", False)])]
    assert render_pod_explanation(explanation).split("\n\n", 1)[1] == """\
NODE  FIT-ALONE  RESULT
a     3 of 3     fails
b     2 of 3     fails

Why not:
a:
  each claim fits alone, but not all together: default/train-0 and default/train-1 compete for the
    same 4 devices (gpu-0, gpu-1, gpu-2, gpu-3): claim default/train-1, request gpu: cannot find 4
    devices that fit together
b:
  claim default/net does not fit:
    request nic: 0 of 8 devices are in class nic (1 needed)
      gpu-0 on b has driver "gpu.example.com", not the "nic.example.com" asked
        (the same for 7 more devices: gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, …)
        selector of class nic: device.driver == "nic.example.com"
"""


def test_an_allocated_claim_pins_the_pod_to_its_node() -> None:
    pinned = {**CLAIMS[2], "status": {"allocation": {
        "devices": {"results": [{"request": "nic", "driver": NIC, "pool": "a-nic",
                                 "device": "nic-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}
    data = _explain([CLAIMS[0], pinned]).to_json()
    assert data["claims"] == {"allocated": ["default/net"], "pending": ["default/train-0"],
                              "missing": ["default/train-1"]}
    assert [(n["node"], n["fits"], n["excluded"], n["message"]) for n in data["nodes"]] == [
        ("a", True, None, "all claims fit with gpu-0 (default/train-0, request gpu), gpu-1 "
                          "(default/train-0, request gpu), gpu-2 (default/train-0, request gpu), "
                          "gpu-3 (default/train-0, request gpu)"),
        ("b", False, "claim default/net", "excluded: claim default/net is allocated on other "
                                          "nodes")]
    assert data["verdict"] == "Fits"


def test_explain_pod_from_the_command_line(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": n, "resourceClaimName": n}
                                       for n in ("train-0", "train-1", "net")]}}
    kinds = [("ResourceSlice", "resource.k8s.io/v1", SLICES), ("DeviceClass",
             "resource.k8s.io/v1", CLASSES), ("ResourceClaim", "resource.k8s.io/v1", CLAIMS),
             ("Node", "v1", [node("a"), node("b")])]
    items = [{"kind": k, "apiVersion": v, **o} for k, v, objs in kinds for o in objs]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*items, pod]}))
    result = CliRunner().invoke(main, ["explain", "pod", "p", "--from", str(dump)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:3] == [
        "Pod:            default/p",
        "Claims:         default/train-0, default/train-1, default/net (to allocate)",
        "Verdict:        Unschedulable"]


def test_the_operator_tells_each_claim_that_fits_alone_the_pods_reason() -> None:
    inputs = Inputs(slices=SLICES, classes=CLASSES, taint_rules=[], allocated=[],
                    nodes=[node("a"), node("b")], inventory_version=1, claims_version=1)
    messages = explain_messages(ExplainState(), inputs, CLAIMS, POD)
    together = _explain(CLAIMS).message
    assert messages == [f"cannot be allocated with the pod's other claims: {together}"] * 3


def test_a_pod_with_extended_resources_and_no_claim_yet(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """KEP-5004: ``nvidia.com/gpu: 5`` on a pod, the class ``gpu`` backing that name; node a
    has 4 GPUs, b has 8: the claim kube-scheduler would make fits on b only."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    classes = [{**c, "spec": {**c["spec"], "extendedResourceName": "nvidia.com/gpu"}}
               if c["metadata"]["name"] == "gpu" else c for c in CLASSES]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy",
                                                           "namespace": "default"},
           "spec": {"containers": [{"name": "main", "resources": {
               "limits": {"nvidia.com/gpu": "5"}, "requests": {"nvidia.com/gpu": "5"}}}]}}
    kinds = [("ResourceSlice", "resource.k8s.io/v1", SLICES),
             ("DeviceClass", "resource.k8s.io/v1", classes), ("Node", "v1", [node("a"),
                                                                          node("b")])]
    items = [{"kind": k, "apiVersion": v, **o} for k, v, objs in kinds for o in objs]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*items, pod]}))
    result = CliRunner().invoke(main, ["explain", "pod", "legacy", "--from", str(dump),
                                       "-o", "json"])
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert (data["verdict"], data["claims"]) == ("Fits", {
        "allocated": [], "pending": ["default/legacy-extended-resources"], "missing": []})
    assert [(n["node"], n["fits"]) for n in data["nodes"]] == [("a", False), ("b", True)]
    assert "request container-0-request-0" in data["nodes"][0]["claims"][0]["message"]


def test_a_legacy_pod_names_the_device_and_its_holder_as_the_claim_explanation_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's ``legacy`` pod (``nvidia.com/gpu: 1``) while the trainer holds the H200:
    the claim kube-scheduler would make is explained with the same per-device reasons as
    ``explain resourceclaim`` gives."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    trainer = gpu_claim("trainer", allocation=on_node("demo-h200", "demo-h200", "gpu-0"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "demo"},
           "spec": {"containers": [{"name": "main", "resources": {
               "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}}
    kinds = [("ResourceSlice", "resource.k8s.io/v1", h200_slices("demo-h200")),
             ("DeviceClass", "resource.k8s.io/v1", shipped_classes()),
             ("ResourceClaim", "resource.k8s.io/v1", [trainer]),
             ("Node", "v1", [node("demo-h200", type="kwok")])]
    items = [{"kind": k, "apiVersion": v, **o} for k, v, objs in kinds for o in objs]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*items, pod]}))
    result = CliRunner().invoke(main, ["explain", "pod", "legacy", "-n", "demo",
                                       "--from", str(dump)])
    assert result.exit_code == 0, result.output
    assert result.stdout == """\
Pod:            demo/legacy
Claims:         demo/legacy-extended-resources (to allocate)
Verdict:        Unschedulable
Message:        no node fits all claims of the pod: demo-h200: claim demo/legacy-extended-resources
                does not fit: request container-0-request-0: 0 of 1 matching devices are free (1
                needed): gpu-0 on demo-h200 is allocated to claim demo/trainer (request gpu)

NODE       FIT-ALONE  RESULT
demo-h200  0 of 1     fails

Why not:
demo-h200:
  claim demo/legacy-extended-resources does not fit:
    request container-0-request-0: 0 of 1 matching devices are free (1 needed)
      gpu-0 on demo-h200 is allocated to claim demo/trainer (request gpu)
"""


def test_a_claim_is_judged_where_its_pods_other_allocated_claims_hold_them() -> None:
    """Issue 24: the pod's claim ``held`` is allocated on c-n1, so the pod runs only there;
    ``want`` fits on c-n2 but not on c-n1, and explain resourceclaim says so (it said "fits
    on c-n2")."""
    slices = [resource_slice("n1", gpus(1), pool="c-n1", node="c-n1"),
              resource_slice("n2", gpus(1), pool="c-n2", node="c-n2")]
    held = {**claim("held", exact("gpu", "gpu")),
            "status": {"allocation": on_node("c-n1", "c-n1", "gpu-0", driver=GPU_DRIVER)}}
    want = claim("want", exact("gpu", "gpu"))
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [held, want],
                                        [node("c-n1"), node("c-n2")])
    pod = PodPlacement("default", "p", claims=("held", "want"))
    explanation = explain_claim(snapshot, ResourceClaim.from_api(want), [pod])
    data = explanation.to_json()
    assert (data["verdict"], data["message"]) == (
        "Unschedulable", "cannot be allocated: c-n1: request gpu: 0 of 1 matching devices are "
        "free (1 needed): gpu-0 on c-n1 is allocated to claim default/held (request gpu)")
    assert data["nodes"] == {"total": 2, "evaluated": 1, "withoutDevices": 0,
                             "excludedByPods": 0, "excludedByClaims": 1,
                             "holdingClaims": ["default/held"]}
    lines = render_explanation(explanation).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Nodes:"))
    assert lines[at:at + 2] == [
        "Nodes:          1 evaluated, 0 without ResourceSlices, 0 excluded by the pods' node "
        "selection, 1",
        "                excluded by the pods' allocated claims default/held (2 in total)"]
