"""kubedra explain on synthetic clusters: the exact explanation of each kind of failure, of an
allocated claim, and the node selection of pods."""

from __future__ import annotations

from typing import Any

from kubedra.api.resource import ResourceClaim
from kubedra.explain import ClusterSnapshot, PodPlacement, explain_claim
from tests.support.explain_builders import gpu_claim, h200_slices, node, on_node, shipped_classes
from tests.support.scenario_builders import (
    CLASSES,
    attrs,
    claim,
    device,
    exact,
    resource_slice,
)

TOO_BIG = 'device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0'
FITS = ('device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("140Gi")) >= 0 && '
        'device.attributes["gpu.kubedra.io"].cudaComputeCapability.compareTo('
        'semver("9.0.0")) >= 0')
DEMO_REASON = ("gpu-0 on demo-h200 has 150754820096 bytes, less than the 151397597184 asked "
               "(gpu.kubedra.io/memory: 143771Mi < 141Gi)")
FUNNEL = ("devices", "inClass", "matchRequest", "free", "capacity", "counters", "untainted")


def funnel(*counts: int) -> dict[str, int]:
    return dict(zip(FUNNEL, counts, strict=True))


def demo(*claims: dict[str, Any], rules: list[dict[str, Any]] | None = None,
         nodes: tuple[str, ...] = ("demo-h200",)) -> ClusterSnapshot:
    return ClusterSnapshot.from_api(h200_slices("demo-h200"), shipped_classes(), rules or [],
                                    list(claims), [node(n, type="kwok") for n in nodes])


def trainer() -> dict[str, Any]:
    return gpu_claim("trainer", FITS, allocation=on_node("demo-h200", "demo-h200", "gpu-0"))


def test_demo_claim_asking_more_memory_than_the_h200_has() -> None:
    too_big = gpu_claim("too-big", TOO_BIG)
    snapshot = demo(trainer(), too_big, nodes=("demo-h200", "cpu-0"))
    pod = PodPlacement("demo", "too-big", node_selector={"type": "kwok"}, claims=("too-big",))
    explanation = explain_claim(snapshot, ResourceClaim.from_api(too_big), [pod])
    message = ("demo-h200: request gpu: 0 of 1 devices of class gpu.kubedra.io match the "
               f"request's selectors (1 needed): {DEMO_REASON}")
    assert explanation.to_json() == {
        "apiVersion": "kubedra.io/v1alpha1", "kind": "ResourceClaimExplanation",
        "claim": {"namespace": "demo", "name": "too-big", "uid": "uid-too-big"},
        "kubeVersion": "1.37", "pods": ["demo/too-big"], "verdict": "Unschedulable",
        "message": f"cannot be allocated: {message}",
        "nodes": {"total": 2, "evaluated": 1, "withoutDevices": 1, "excludedByPods": 0},
        "candidates": [{
            "node": "demo-h200", "fits": False, "message": message, "error": None,
            "devices": [],
            "requests": [{
                "request": "gpu", "deviceClass": "gpu.kubedra.io", "needed": 1,
                "funnel": funnel(1, 1, 0, 0, 0, 0, 0), "failedAt": "matchRequest",
                "message": "request gpu: 0 of 1 devices of class gpu.kubedra.io match the "
                           "request's selectors (1 needed)",
                "devices": [{
                    "device": "gpu-0", "driver": "gpu.kubedra.io", "pool": "demo-h200",
                    "check": "matchRequest", "reason": DEMO_REASON,
                    "selector": {"source": "request gpu", "expression": TOO_BIG,
                                 "conjunct": TOO_BIG},
                    "comparison": {"name": "gpu.kubedra.io/memory", "relation": ">=",
                                   "device": "150754820096", "asked": "151397597184",
                                   "deviceQuantity": "143771Mi", "askedQuantity": "141Gi"}}],
                "constraints": [], "unusablePools": [], "errors": [],
                "chosen": None, "allocationMode": "ExactCount"}],
            "schedulerSearch": {
                "outcome": "Finishes", "steps": 1, "stepsExact": True,
                "finishesWithin": 200_000, "timesOutAfter": 30_000_000, "timeoutSeconds": 10,
                "reason": "", "suggestions": []}}],
        "allocation": None}


def test_device_held_by_another_claim() -> None:
    whole = gpu_claim("whole")
    explanation = explain_claim(demo(trainer(), whole), ResourceClaim.from_api(whole))
    [request] = explanation.candidates[0].requests
    assert request.funnel == funnel(1, 1, 1, 0, 0, 0, 0)
    assert [(d.device, d.check, d.held_by) for d in request.devices] == [
        ("gpu-0", "free", ["claim demo/trainer (request gpu)"])]
    assert explanation.message == (
        "cannot be allocated: demo-h200: request gpu: 0 of 1 matching devices are free "
        "(1 needed): gpu-0 on demo-h200 is allocated to claim demo/trainer (request gpu)")


def test_free_device_fits_and_says_which() -> None:
    whole = gpu_claim("whole")
    explanation = explain_claim(demo(whole), ResourceClaim.from_api(whole))
    assert explanation.verdict == "Fits"
    assert explanation.message == ("fits on 1 node (demo-h200); first: demo-h200: fits with "
                                   "gpu-0 (request gpu)")
    assert explanation.candidates[0].devices == [
        {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "demo-h200", "device": "gpu-0"}]
    pod = PodPlacement("demo", "p", claims=("whole", "other"))
    assert explain_claim(demo(whole), ResourceClaim.from_api(whole), [pod]).message == (
        "fits on 1 node (demo-h200); first: demo-h200: fits with gpu-0 (request gpu); on its "
        "own the claim fits, so the pod waits for something else (its other claims, or a "
        "scheduler retry)")


def test_device_taint_rule_names_the_rule() -> None:
    rule = {"metadata": {"name": "fan"}, "spec": {
        "deviceSelector": {"driver": "gpu.kubedra.io", "device": "gpu-0"},
        "taint": {"key": "maintenance", "value": "fan", "effect": "NoSchedule"}}}
    whole = gpu_claim("whole")
    explanation = explain_claim(demo(whole, rules=[rule]), ResourceClaim.from_api(whole))
    [request] = explanation.candidates[0].requests
    assert request.funnel == funnel(1, 1, 1, 1, 1, 1, 0)
    assert request.devices[0].taints == ["maintenance=fan:NoSchedule"]
    assert explanation.message == (
        "cannot be allocated: demo-h200: request gpu: 0 of 1 devices have no taint that the "
        "request does not tolerate (1 needed): gpu-0 on demo-h200 has taint "
        "maintenance=fan:NoSchedule (DeviceTaintRule fan), which the request does not tolerate")
    tolerant = gpu_claim("tolerant", tolerations=[{"key": "maintenance",
                                                   "operator": "Exists"}])
    assert explain_claim(demo(tolerant, rules=[rule]),
                         ResourceClaim.from_api(tolerant)).verdict == "Fits"


def test_mig_partition_names_the_counters_that_ran_out() -> None:
    mig = 'device.attributes["gpu.kubedra.io"].profile == "{}"'
    small = gpu_claim("small", mig.format("1g.18gb"), device_class="mig.gpu.kubedra.io",
                      allocation=on_node("mig-h200", "mig-h200", "gpu-0-mig-1g18gb-s0"))
    full = gpu_claim("full", mig.format("7g.141gb"), device_class="mig.gpu.kubedra.io")
    snapshot = ClusterSnapshot.from_api(h200_slices("mig-h200", mig="partitions"),
                                        shipped_classes(), [], [small, full], [node("mig-h200")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(full))
    [request] = explanation.candidates[0].requests
    # 26 devices: the whole GPU is not in the MIG class, the 7g.141gb is the only match
    assert request.funnel == funnel(26, 25, 1, 1, 1, 0, 0)
    assert request.failed_at == "counters"
    [finding] = request.devices
    held = ("gpu-0-mig-1g18gb-s0 of claim demo/small (request gpu)",)
    assert [(c.counter_set, c.counter, c.needed, c.left, c.held_by)
            for c in finding.counters] == [
        ("gpu-0-counters", "compute-slices", "7", "6", held),
        ("gpu-0-counters", "copy-engines", "8", "7", held),
        ("gpu-0-counters", "decoders", "7", "6", held),
        ("gpu-0-counters", "jpeg-engines", "7", "6", held),
        ("gpu-0-counters", "memory-slice-0", "1", "0", held)]
    assert explanation.message == (
        "cannot be allocated: mig-h200: request gpu: 0 of 1 devices have the shared counters "
        "left (1 needed): gpu-0-mig-7g141gb-s0 on mig-h200 needs more of counter set "
        "gpu-0-counters than is left: compute-slices (needs 7, 6 left), copy-engines (needs 8, "
        "7 left), decoders (needs 7, 6 left), jpeg-engines (needs 7, 6 left), memory-slice-0 "
        "(needs 1, 0 left); in use by gpu-0-mig-1g18gb-s0 of claim demo/small (request gpu)")


def test_consumable_capacity_left_on_a_shared_device() -> None:
    shared = device("gpu-0", memory="80Gi", allowMultipleAllocations=True)
    share = {"metadata": {"name": "a", "namespace": "default"},
             "spec": {"devices": {"requests": [exact("r", "gpu")]}},
             "status": {"allocation": {"devices": {"results": [{
                 "request": "r", "driver": "gpu.example.com", "pool": "node-a",
                 "device": "gpu-0", "shareID": "11111111-1111-1111-1111-111111111111",
                 "consumedCapacity": {"memory": "60Gi"}}]}}}}
    wants = claim("b", exact("r", "gpu", capacity={"requests": {"memory": "30Gi"}}))
    snapshot = ClusterSnapshot.from_api([resource_slice("s", [shared])], CLASSES, [],
                                        [share, wants], [node("node-a")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    [request] = explanation.candidates[0].requests
    assert request.funnel == funnel(1, 1, 1, 1, 0, 0, 0)
    assert request.devices[0].reason == (
        "gpu-0 on node-a needs memory 32212254720 (30Gi), 21474836480 (20Gi) of 85899345920 "
        "(80Gi) left (shared with claim default/a (request r))")
    assert request.devices[0].to_json()["capacity"] == [{
        "capacity": "memory", "needed": "32212254720", "left": "21474836480",
        "total": "85899345920", "neededQuantity": "30Gi", "leftQuantity": "20Gi",
        "totalQuantity": "80Gi"}]


def test_constraint_that_no_set_of_devices_meets() -> None:
    devices = [device(f"d{i}", attributes=attrs(pcieRoot=f"r{i // 2}")) for i in range(4)]
    wants = claim("c", exact("r", count=3),
                  constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    snapshot = ClusterSnapshot.from_api([resource_slice("s", devices)], CLASSES, [], [wants],
                                        [node("node-a")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    [request] = explanation.candidates[0].requests
    assert (request.failed_at, request.constraints) == (
        "constraints", [("matchAttribute resource.kubernetes.io/pcieRoot", 2)])
    assert explanation.message == (
        "cannot be allocated: node-a: request r: 4 devices fit, at most 2 of them satisfy "
        "matchAttribute resource.kubernetes.io/pcieRoot together (3 needed)")


def test_nodes_failing_alike_are_grouped() -> None:
    slices = [resource_slice(f"s-{n}", [device("gpu-0", attributes=attrs(model="small"))],
                             pool=n, node=n) for n in ("a", "b", "c")]
    wants = claim("c", exact("r", "gpu", 'device.attributes["gpu.example.com"].model == "big"'))
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [wants],
                                        [node(n) for n in ("c", "a", "b")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    assert [c.node for c in explanation.candidates] == ["a", "b", "c"]
    assert explanation.message == (
        "cannot be allocated: a: request r: 0 of 1 devices of class gpu match the request's "
        'selectors (1 needed): gpu-0 on a has model "small", not the "big" asked (the same on '
        "2 more nodes: b, c)")


def test_selector_error_is_reported_per_node() -> None:
    wants = gpu_claim("bad", 'device.attributes["gpu.kubedra.io"].profile == "x"')
    explanation = explain_claim(demo(wants), ResourceClaim.from_api(wants))
    [outcome] = explanation.candidates
    assert outcome.error is not None
    assert outcome.error.startswith("claim demo/bad: selector #0 on device "
                                    "gpu.kubedra.io/demo-h200/gpu-0: CEL runtime error: no such "
                                    "key: profile")
    assert explanation.verdict == "Error"
    assert explanation.message == (
        "kube-scheduler reports an error, not unschedulable, on node demo-h200: running "
        f'"DynamicResources" filter plugin: {outcome.error}')


def test_pods_node_selection_limits_the_nodes() -> None:
    whole = gpu_claim("whole")
    snapshot = demo(whole, nodes=("demo-h200", "other"))
    pinned = PodPlacement("demo", "p", node_selector={"kubernetes.io/hostname": "other"})
    explanation = explain_claim(snapshot, ResourceClaim.from_api(whole), [pinned])
    assert explanation.nodes.to_json() == {"total": 2, "evaluated": 0, "withoutDevices": 1,
                                           "excludedByPods": 1}
    assert explanation.message == ("cannot be allocated: no node has devices for it (1 node "
                                   "without ResourceSlices; 1 excluded by the node selection "
                                   "of pod demo/p)")
    affinity = PodPlacement.from_api({
        "metadata": {"namespace": "demo", "name": "q"},
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In",
                      "values": ["demo-h200"]}]}]}}},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "whole"}]}})
    assert affinity.claims == ("whole",)
    explanation = explain_claim(snapshot, ResourceClaim.from_api(whole), [affinity])
    assert [c.node for c in explanation.candidates] == ["demo-h200"]
    assert explanation.nodes.excluded_by_pods == 1


def test_allocated_claim_says_why_its_device_fits() -> None:
    explanation = explain_claim(demo(trainer()), ResourceClaim.from_api(trainer()))
    assert explanation.verdict == "Allocated"
    assert explanation.message == ("allocated on node demo-h200: gpu-0 of pool demo-h200 "
                                   "(gpu.kubedra.io) for request gpu")
    assert explanation.to_json()["allocation"] == {"node": "demo-h200", "devices": [{
        "request": "gpu", "driver": "gpu.kubedra.io", "pool": "demo-h200", "device": "gpu-0",
        "deviceClass": "gpu.kubedra.io",
        "reasons": [
            {"source": "class gpu.kubedra.io", "conjunct": 'device.driver == "gpu.kubedra.io"',
             "reason": 'gpu-0 on demo-h200 has driver "gpu.kubedra.io", as asked'},
            {"source": "class gpu.kubedra.io",
             "conjunct": 'has(device.attributes["gpu.kubedra.io"].type)',
             "reason": "gpu-0 on demo-h200 has attribute gpu.kubedra.io/type"},
            {"source": "class gpu.kubedra.io",
             "conjunct": 'device.attributes["gpu.kubedra.io"].type == "gpu"',
             "reason": 'gpu-0 on demo-h200 has type "gpu", as asked'},
            {"source": "request gpu",
             "conjunct": 'device.capacity["gpu.kubedra.io"].memory.compareTo('
                         'quantity("140Gi")) >= 0',
             "reason": "gpu-0 on demo-h200 has 150754820096 bytes, at least the 150323855360 "
                       "asked (gpu.kubedra.io/memory: 143771Mi >= 140Gi)"},
            {"source": "request gpu",
             "conjunct": 'device.attributes["gpu.kubedra.io"].cudaComputeCapability.compareTo('
                         'semver("9.0.0")) >= 0',
             "reason": "gpu-0 on demo-h200 has cudaComputeCapability 9.0.0, at least the "
                       "9.0.0 asked"}],
        "values": {"driver": '"gpu.kubedra.io"', "gpu.kubedra.io/type": '"gpu"',
                   "gpu.kubedra.io/memory": "150754820096",
                   "gpu.kubedra.io/cudaComputeCapability": "9.0.0"}}]}


def test_every_alternative_of_first_available_is_explained() -> None:
    big = {"name": "big", "deviceClassName": "gpu.kubedra.io",
           "selectors": [{"cel": {"expression": TOO_BIG}}]}
    wants = {"metadata": {"name": "fa", "namespace": "demo"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "firstAvailable": [
            big, {"name": "mig", "deviceClassName": "mig.gpu.kubedra.io"}]}]}}}
    explanation = explain_claim(demo(wants), ResourceClaim.from_api(wants))
    assert [(r.request, r.failed_at) for r in explanation.candidates[0].requests] == [
        ("gpu/big", "matchRequest"), ("gpu/mig", "inClass")]
    assert explanation.message == (
        "cannot be allocated: demo-h200: request gpu/big: 0 of 1 devices of class "
        f"gpu.kubedra.io match the request's selectors (1 needed): {DEMO_REASON}; request "
        "gpu/mig: 0 of 1 devices are in class mig.gpu.kubedra.io (1 needed): gpu-0 on "
        'demo-h200 has type "gpu", not the "mig" asked')
    fallback = {"name": "any", "deviceClassName": "gpu.kubedra.io"}
    wants["spec"]["devices"]["requests"][0]["firstAvailable"] = [big, fallback]
    explanation = explain_claim(demo(wants), ResourceClaim.from_api(wants))
    assert explanation.message == ("fits on 1 node (demo-h200); first: demo-h200: fits with "
                                   "gpu-0 (request gpu/any)")
