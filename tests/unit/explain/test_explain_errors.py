"""When the allocator returns an error, kube-scheduler reports an error for the pod (reason
``SchedulerError``, retried with back-off), not unschedulable: explain's verdict is ``Error``,
worded as the scheduler's condition, even when other nodes fit."""

from __future__ import annotations

from test_explain_claims import demo

from kubedra.api.resource import ResourceClaim
from kubedra.explain import ClusterSnapshot, explain_claim
from kubedra.explain.render import render_explanation
from tests.support.explain_builders import gpu_claim, node
from tests.support.scenario_builders import (
    CLASSES,
    claim,
    device,
    exact,
    gpus,
    resource_slice,
)

FILTER = 'running "DynamicResources" filter plugin: '


def test_selector_that_does_not_compile_is_reported_once_with_its_caret_lines() -> None:
    bad = gpu_claim("bad", 'device.attributes["gpu.kubedra.io"].type = "gpu"')
    explanation = explain_claim(demo(bad), ResourceClaim.from_api(bad))
    error = ("claim demo/bad: selector #0: CEL compile error: compilation failed: ERROR: "
             "<input>:1:42: Syntax error: token recognition error at: '= '\n"
             ' | device.attributes["gpu.kubedra.io"].type = "gpu"\n'
             " | .........................................^\n"
             "ERROR: <input>:1:44: Syntax error: extraneous input '\"gpu\"' expecting <EOF>\n"
             ' | device.attributes["gpu.kubedra.io"].type = "gpu"\n'
             " | ...........................................^")
    data = explanation.to_json()
    assert (data["verdict"], data["message"]) == (
        "Error", "kube-scheduler reports an error, not unschedulable, on node demo-h200: "
        f"{FILTER}{error}")
    assert [(c["node"], c["fits"], c["error"], c["requests"]) for c in data["candidates"]] == [
        ("demo-h200", False, error, [])]
    assert render_explanation(explanation) == """\
ResourceClaim:  demo/bad
Pods:           none
Verdict:        Error
Message:        kube-scheduler reports an error, not unschedulable, on node demo-h200: running
                "DynamicResources" filter plugin: claim demo/bad: selector #0: CEL compile error:
                compilation failed: ERROR: <input>:1:42: Syntax error: token recognition error at:
                '= '
                 | device.attributes["gpu.kubedra.io"].type = "gpu"
                 | .........................................^
                ERROR: <input>:1:44: Syntax error: extraneous input '"gpu"' expecting <EOF>
                 | device.attributes["gpu.kubedra.io"].type = "gpu"
                 | ...........................................^
Nodes:          1 evaluated, 0 without ResourceSlices, 0 excluded by the pods' node selection (1 in
                total)

NODE       REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
demo-h200  -        -       -        -         -         -     -         -         -          error

Why not:
demo-h200:
  error: the one in the Message above
"""


def test_a_selector_the_search_never_reaches_does_not_compile_once_per_claim_not_per_device(
        ) -> None:
    """Request ``r`` fits no device, so kube-scheduler never evaluates ``r2``'s broken
    selector (unschedulable, not an error); explain still says it does not compile, once."""
    wants = claim("c", exact("r", "gpu", "device.attributes[\"gpu.example.com\"].index > 9"),
                  exact("r2", "gpu", "device.nosuch == 1"))
    snapshot = ClusterSnapshot.from_api([resource_slice("a-1", gpus(3), pool="a", node="a")],
                                        CLASSES, [], [wants], [node("a")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    data = explanation.to_json()
    [candidate] = data["candidates"]
    [first, second] = candidate["requests"]
    compile_error = ("compilation failed: ERROR: <input>:1:7: undefined field 'nosuch'\n"
                     " | device.nosuch == 1\n | ......^")
    assert (data["verdict"], [len(first["devices"]), len(second["devices"])],
            second["errors"]) == (
        "Unschedulable", [3, 0], [f"claim default/c: selector #0: CEL compile error: "
                                  f"{compile_error}"])
    text = render_explanation(explanation)
    assert text.count("does not compile") == 1
    assert """\
  request r2: 0 of 3 devices of class gpu match the request's selectors (1 needed)
    selector #0 of request r2 does not compile: compilation failed: ERROR: <input>:1:7: undefined
      field 'nosuch'
       | device.nosuch == 1
       | ......^
""" in text


def test_a_pool_being_updated_makes_an_all_request_an_error_though_another_node_fits() -> None:
    slices = [resource_slice("a-1", [device("gpu-0")], pool="a", node="a", count=2),
              resource_slice("b-1", [device("gpu-0")], pool="b", node="b")]
    wants = claim("c", exact("r", "gpu", allocationMode="All"))
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [wants], [node("a"), node("b")])
    data = explain_claim(snapshot, ResourceClaim.from_api(wants)).to_json()
    error = ("claim default/c, request r: asks for all devices, but resource pool "
             "gpu.example.com/a is currently being updated")
    assert (data["verdict"], data["message"]) == (
        "Error", f"kube-scheduler reports an error, not unschedulable, on node a: {FILTER}{error}")
    assert [(c["node"], c["fits"], c["error"]) for c in data["candidates"]] == [
        ("a", False, error), ("b", True, None)]


def test_more_than_32_devices_is_an_error() -> None:
    wants = claim("c", exact("r", "gpu", count=33))
    snapshot = ClusterSnapshot.from_api([resource_slice("a-1", gpus(40), pool="a", node="a")],
                                        CLASSES, [], [wants], [node("a")])
    data = explain_claim(snapshot, ResourceClaim.from_api(wants)).to_json()
    assert (data["verdict"], data["message"]) == (
        "Error", "kube-scheduler reports an error, not unschedulable, on node a: "
        f"{FILTER}claim default/c, request r: adding 33 devices exceeds the claim limit of 32, "
        "with 0 already accounted for")


def test_a_device_class_that_does_not_exist_is_unschedulable_as_the_schedulers_prefilter_says(
        ) -> None:
    """kube-scheduler checks every request's DeviceClass in its PreFilter, before any node:
    a missing one makes the pod unschedulable (``UnschedulableAndUnresolvable``, "request
    req-1: device class x does not exist"; it waits for a DeviceClass event), not an error
    retried with back-off, though the allocator itself would return one (``validateDeviceClass``
    in pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, and its test case
    "missing-class"). A firstAvailable subrequest is named ``request/subrequest``."""
    missing = gpu_claim("missing", device_class="nosuch.kubedra.io")
    alternatives = {**gpu_claim("alternatives"), "spec": {"devices": {"requests": [
        {"name": "r", "firstAvailable": [
            {"name": "whole", "deviceClassName": "gpu.kubedra.io"},
            {"name": "half", "deviceClassName": "half.kubedra.io"}]}]}}}
    outcomes = {}
    for wanted in (missing, alternatives):
        explanation = explain_claim(demo(wanted), ResourceClaim.from_api(wanted))
        outcomes[wanted["metadata"]["name"]] = (explanation.verdict, explanation.message,
                                                len(explanation.candidates))
    assert outcomes == {
        "missing": ("Unschedulable", "cannot be allocated: request gpu: device class "
                    "nosuch.kubedra.io does not exist (kube-scheduler checks it before any "
                    "node; the pod waits until the DeviceClass is created)", 0),
        "alternatives": ("Unschedulable", "cannot be allocated: request r/half: device class "
                         "half.kubedra.io does not exist (kube-scheduler checks it before any "
                         "node; the pod waits until the DeviceClass is created)", 0)}


def test_a_pod_whose_claim_names_a_missing_class_is_unschedulable_naming_the_claim() -> None:
    from kubedra.explain.pods import explain_pod
    from kubedra.explain.snapshot import PodPlacement

    fine, missing = gpu_claim("fine"), gpu_claim("missing", device_class="nosuch.kubedra.io")
    pod = PodPlacement("demo", "p", claims=("fine", "missing"))
    explanation = explain_pod(demo(fine, missing), pod,
                              [ResourceClaim.from_api(c) for c in (fine, missing)])
    assert (explanation.verdict, explanation.message, explanation.nodes) == (
        "Unschedulable", "cannot be allocated: claim demo/missing, request gpu: device class "
        "nosuch.kubedra.io does not exist (kube-scheduler checks it before any node; the pod "
        "waits until the DeviceClass is created)", [])
