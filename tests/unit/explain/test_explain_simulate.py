"""kubedra simulate on the H200 capture: copies that fit, exactly, and reading claim files."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kubedra.api.resource import ResourceClaim
from kubedra.explain import ClusterSnapshot, explain_claim, simulate_claim
from kubedra.explain.simulate import ClaimFileError, claim_from_documents
from tests.support.explain_builders import gpu_claim, h200_slices, node, on_node, shipped_classes

PROFILE = 'device.attributes["gpu.kubedra.io"].profile == "{}"'


def cluster(*claims: dict[str, Any]) -> ClusterSnapshot:
    """demo-h200 (a whole H200) and mig-h200 (an H200 published with MIG partitions)."""
    slices = h200_slices("demo-h200") + h200_slices("mig-h200", mig="partitions")
    return ClusterSnapshot.from_api(slices, shipped_classes(), [], list(claims),
                                    [node("mig-h200"), node("demo-h200"), node("cpu-0")])


def mig(profile: str) -> ResourceClaim:
    return ResourceClaim.from_api(gpu_claim(profile, PROFILE.format(profile),
                                            device_class="mig.gpu.kubedra.io"))


@pytest.mark.parametrize(("profile", "devices"), [
    ("1g.18gb", [f"gpu-0-mig-1g18gb-s{s}" for s in range(7)]),
    ("1g.35gb", [f"gpu-0-mig-1g35gb-s{s}" for s in (0, 2, 4, 6)]),
    ("2g.35gb", [f"gpu-0-mig-2g35gb-s{s}" for s in (0, 2, 4)]),
    ("3g.71gb", ["gpu-0-mig-3g71gb-s0", "gpu-0-mig-3g71gb-s4"]),
    ("4g.71gb", ["gpu-0-mig-4g71gb-s0"]),
    ("7g.141gb", ["gpu-0-mig-7g141gb-s0"]),
    # one OFA engine: one media-extension partition at a time
    ("1g.18gb+me", ["gpu-0-mig-1g18gb-me-s0"]),
])
def test_mig_copies_follow_the_placement_table(profile: str, devices: list[str]) -> None:
    simulation = simulate_claim(cluster(), mig(profile))
    assert [(n, [d["device"] for d in ds]) for n, ds in simulation.copies] == [
        ("mig-h200", [d]) for d in devices]
    assert simulation.by_node() == {"mig-h200": len(devices)}
    assert not simulation.limit_reached


def test_whole_gpu_copies_one_per_gpu() -> None:
    simulation = simulate_claim(cluster(), ResourceClaim.from_api(gpu_claim("whole")))
    assert simulation.explanation.verdict == "Fits"
    assert [c.node for c in simulation.explanation.candidates] == ["demo-h200", "mig-h200"]
    assert simulation.copies == [
        ("demo-h200", [{"request": "gpu", "driver": "gpu.kubedra.io", "pool": "demo-h200",
                        "device": "gpu-0"}]),
        ("mig-h200", [{"request": "gpu", "driver": "gpu.kubedra.io", "pool": "mig-h200",
                       "device": "gpu-0"}])]
    assert simulation.message() == "2 copies fit in the cluster now (demo-h200: 1, mig-h200: 1)"


def test_copies_count_what_is_allocated_already() -> None:
    held = gpu_claim("held", PROFILE.format("4g.71gb"), device_class="mig.gpu.kubedra.io",
                     allocation=on_node("mig-h200", "mig-h200", "gpu-0-mig-4g71gb-s0"))
    simulation = simulate_claim(cluster(held), mig("1g.18gb"))
    assert [ds[0]["device"] for _, ds in simulation.copies] == [
        "gpu-0-mig-1g18gb-s4", "gpu-0-mig-1g18gb-s5", "gpu-0-mig-1g18gb-s6"]
    simulation = simulate_claim(cluster(held), ResourceClaim.from_api(gpu_claim("whole")))
    assert simulation.by_node() == {"demo-h200": 1}
    assert simulation.to_json()["copies"] == {
        "count": 1, "limitReached": False, "byNode": {"demo-h200": 1},
        "allocations": [{"node": "demo-h200", "devices": [
            {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "demo-h200",
             "device": "gpu-0"}]}],
        "schedulerTimesOut": [], "schedulerMayTimeOut": []}


def test_nothing_fits() -> None:
    simulation = simulate_claim(cluster(), mig("9g.999gb"))
    assert simulation.copies == []
    assert simulation.explanation.verdict == "Unschedulable"
    assert simulation.message() == "0 copies fit in the cluster now"


def test_the_count_stops_at_the_limit() -> None:
    simulation = simulate_claim(cluster(), mig("1g.18gb"), max_copies=3)
    assert (len(simulation.copies), simulation.limit_reached) == (3, True)
    assert simulation.message() == ("3 copies fit in the cluster now (the limit; more fit) "
                                    "(mig-h200: 3)")
    exact = simulate_claim(cluster(), mig("1g.18gb"), max_copies=7)
    assert (len(exact.copies), exact.limit_reached) == (7, False)
    none = simulate_claim(cluster(), mig("1g.18gb"), max_copies=0)  # it said "0 copies fit"
    assert (none.limit_reached, none.message()) == (
        True, "0 copies fit in the cluster now (the limit; more fit)")


def test_only_the_named_nodes() -> None:
    simulation = simulate_claim(cluster(), ResourceClaim.from_api(gpu_claim("whole")),
                                nodes=["mig-h200"])
    assert simulation.by_node() == {"mig-h200": 1}
    assert simulation.explanation.nodes.total == 1


def test_claim_files() -> None:
    template = yaml.safe_load_all("""
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.kubedra.io}
""")
    found = claim_from_documents(template, None)
    assert (found.metadata.namespace, found.metadata.name) == ("ml", "t")
    assert found.spec.devices.requests[0].exactly.device_class_name == "gpu.kubedra.io"
    plain = claim_from_documents([gpu_claim("c", allocation=on_node("n", "n", "gpu-0"))], "x")
    assert (plain.metadata.namespace, plain.status.allocation) == ("x", None)
    with pytest.raises(ClaimFileError, match="no ResourceClaim or ResourceClaimTemplate"):
        claim_from_documents([{"kind": "Pod"}, None], None)


@pytest.mark.parametrize(("document", "path"), [
    ({"kind": "ResourceClaim", "spec": {}}, "spec.devices.requests"),
    ({"kind": "ResourceClaim", "spec": {"devices": {"requests": []}}}, "spec.devices.requests"),
    ({"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {}}}},
     "spec.spec.devices.requests"),
])
def test_a_claim_without_requests_is_valid_but_there_is_nothing_to_simulate(
        document: dict[str, Any], path: str) -> None:
    """The API server accepts it (``DeviceClaim.requests``: "if empty, nothing needs to be
    allocated"); simulating it would print ``fits with`` nothing and a thousand empty copies."""
    with pytest.raises(ClaimFileError) as raised:
        claim_from_documents([document], None)
    assert str(raised.value) == (
        f"nothing to simulate: the claim has no requests ({path} is empty); the API server "
        "accepts such a claim and kube-scheduler allocates it on any node with no devices")


@pytest.mark.parametrize(("api_version", "refusal"), [
    ("resource.k8s.io/v1beta1",
     "apiVersion: 'resource.k8s.io/v1beta1': simulate reads a ResourceClaim of "
     "resource.k8s.io/v1 or resource.k8s.io/v1beta2 (v1beta1 has deviceClassName, selectors, "
     "count and allocationMode on the request itself; v1 has them under exactly)"),
    ("example.com/v1",
     "apiVersion: 'example.com/v1': simulate reads a ResourceClaim of resource.k8s.io/v1 or "
     "resource.k8s.io/v1beta2"),
])
def test_a_claim_of_another_api_version_is_refused_naming_it(api_version: str,
                                                             refusal: str) -> None:
    """A v1beta1 claim (its request has ``deviceClassName`` itself) was refused for lacking
    ``exactly`` or ``firstAvailable``, which never said the file is of another version."""
    document = {"apiVersion": api_version, "kind": "ResourceClaim", "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [{"name": "gpu",
                                                   "deviceClassName": "gpu.kubedra.io"}]}}}
    with pytest.raises(ClaimFileError) as refused:
        claim_from_documents([document], None)
    assert str(refused.value) == refusal


def test_a_v1beta2_claim_is_read_as_v1() -> None:
    """v1beta2's requests have v1's fields, so its claims are simulated as they are."""
    found = claim_from_documents([gpu_claim("c") | {"apiVersion": "resource.k8s.io/v1beta2"}],
                                 None)
    assert found.spec.devices.requests[0].exactly.device_class_name == "gpu.kubedra.io"


def test_an_unnamed_claim_is_not_given_a_name_that_looks_real() -> None:
    found = claim_from_documents([{"kind": "ResourceClaim", **gpu_claim("x")} | {
        "metadata": {}}], None)
    assert (found.metadata.namespace, found.metadata.name) == ("default", "<unnamed>")


def test_explaining_a_claim_without_requests_says_it_takes_no_devices() -> None:
    empty = {"metadata": {"name": "empty", "namespace": "demo", "uid": "u"}, "spec": {}}
    snapshot = ClusterSnapshot.from_api(h200_slices("demo-h200"), shipped_classes(), [],
                                        [empty], [node("demo-h200")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(empty))
    assert (explanation.verdict, [c.message for c in explanation.candidates]) == (
        "Fits", ["demo-h200: fits with no devices (the claim has no requests: nothing is "
                 "allocated for it)"])


def test_a_selector_that_does_not_compile_is_refused_once_as_the_api_server_refuses_it() -> None:
    """The API server compiles every selector of a claim it is given; simulate reads a file
    that never went through it, so it refuses the claim the same way, once per selector (not
    once per device, as an explanation of the claim would say it)."""
    template = {"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu.kubedra.io",
                                  "selectors": [{"cel": {"expression": "true"}},
                                                {"cel": {"expression": "device.nosuch == 1"}}]}},
        {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu.kubedra.io",
                                          "selectors": [{"cel": {"expression": "1"}}]}]}]}}}}
    with pytest.raises(ClaimFileError) as raised:
        claim_from_documents([template], None)
    assert str(raised.value) == (
        "the API server would refuse this claim: spec.spec.devices.requests[0].exactly."
        "selectors[1].cel.expression: compilation failed: ERROR: <input>:1:7: undefined field "
        "'nosuch'\n | device.nosuch == 1\n | ......^; spec.spec.devices.requests[1]."
        "firstAvailable[0].selectors[0].cel.expression: must evaluate to bool or the unknown "
        "type, not int")


def test_a_claim_of_the_wrong_types_is_refused_in_one_line_naming_each_field() -> None:
    """pydantic's own message (three lines per error, with links) is not what a user reads:
    each field the models refuse, with why, in the words the API server's refusal uses."""
    template = {"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": {"spec": {
        "devices": {"requests": [{"name": 5, "exactly": {"count": "abc"}}]}}}}
    with pytest.raises(ClaimFileError) as refused:
        claim_from_documents([template], None)
    assert str(refused.value) == (
        "the API server would refuse this claim: spec.spec.devices.requests[0].name: Input "
        "should be a valid string; spec.spec.devices.requests[0].exactly.deviceClassName: "
        "Field required; spec.spec.devices.requests[0].exactly.count: Input should be a valid "
        "integer, unable to parse string as an integer")
