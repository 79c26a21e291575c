"""The real reason is in the text, not only in the JSON: constraints across requests with the
values that differ, and every pool the search left out with why."""

from __future__ import annotations

from typing import Any

from kubedra.allocation import KubeVersion, features_for
from kubedra.api.resource import ResourceClaim
from kubedra.explain import ClusterSnapshot, explain_claim
from kubedra.explain.render import render_explanation
from tests.support.explain_builders import node
from tests.support.scenario_builders import (
    CLASSES,
    attrs,
    claim,
    device,
    exact,
    resource_slice,
)

KIND = 'device.attributes["gpu.example.com"].kind == "{}"'
MODEL_NEW = 'device.attributes["gpu.example.com"].model == "new"'


def _explain(slices: list[dict[str, Any]], wants: dict[str, Any]) -> tuple[dict[str, Any], str]:
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [], [node("node-a")])
    explanation = explain_claim(snapshot, ResourceClaim.from_api(wants))
    return explanation.to_json(), render_explanation(explanation)


def _why_not(text: str) -> list[str]:
    return text.split("Why not:\n")[1].splitlines()


def test_match_attribute_across_two_requests_names_the_values_that_differ() -> None:
    slices = [resource_slice("s", [device("g0", attributes=attrs(kind="gpu", pcieRoot="pci-a")),
                                   device("n0", attributes=attrs(kind="nic", pcieRoot="pci-b"))],
                             pool="node-a", node="node-a")]
    wants = claim("c", exact("gpu", "gpu", KIND.format("gpu")),
                  exact("nic", "gpu", KIND.format("nic")),
                  constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    data, text = _explain(slices, wants)
    reason = ("request nic: 1 device fits on its own, but constraint matchAttribute "
              "resource.kubernetes.io/pcieRoot over requests gpu, nic cannot be met: no value is "
              "shared by enough fitting devices of every request: request gpu: pci-a (g0); "
              "request nic: pci-b (n0)")
    assert data["message"] == f"cannot be allocated: node-a: {reason}"
    [candidate] = data["candidates"]
    assert [(r["request"], r["failedAt"], r["message"]) for r in candidate["requests"]] == [
        ("gpu", None, "request gpu: 1 device fits (1 needed)"), ("nic", "constraints", reason)]
    assert _why_not(text) == [
        "node-a:",
        "  request nic: 1 device fits on its own, but constraint matchAttribute",
        "    resource.kubernetes.io/pcieRoot over requests gpu, nic cannot be met: no value is "
        "shared by",
        "    enough fitting devices of every request: request gpu: pci-a (g0); request nic: "
        "pci-b (n0)"]


def test_distinct_attribute_across_requests_counts_the_values() -> None:
    devices = [device(f"g{i}", attributes=attrs(kind="gpu", pcieRoot=f"pci-{i}")) for i in (0, 1)]
    devices.append(device("n0", attributes=attrs(kind="nic", pcieRoot="pci-0")))
    wants = claim("c", exact("gpu", "gpu", KIND.format("gpu"), count=2),
                  exact("nic", "gpu", KIND.format("nic")),
                  constraints=[{"distinctAttribute": "resource.kubernetes.io/pcieRoot"}])
    data, _ = _explain([resource_slice("s", devices, pool="node-a", node="node-a")], wants)
    [candidate] = data["candidates"]
    assert [(r["request"], r["failedAt"]) for r in candidate["requests"]] == [
        ("gpu", None), ("nic", "constraints")]
    assert candidate["requests"][1]["message"] == (
        "request nic: 1 device fits on its own, but constraint distinctAttribute "
        "resource.kubernetes.io/pcieRoot over requests gpu, nic cannot be met: 3 devices with "
        "different values are needed, the fitting devices have 2: request gpu: pci-0 (g0); "
        "pci-1 (g1); request nic: pci-0 (n0)")


def test_versions_differing_in_build_metadata_are_one_value_as_1_38() -> None:
    """From 1.38 (VERSIONS_COMPARED_BY_PRECEDENCE) 1.0.0+a and 1.0.0+b are one value, so a
    distinctAttribute over a GPU and a NIC with them fails, and explain says so with the
    version as compared; before, it counted two values and named no conflict."""
    devices = [device("g0", attributes=attrs(kind="gpu", driverVersion="1.0.0+a")),
               device("n0", attributes=attrs(kind="nic", driverVersion="1.0.0+b"))]
    wants = claim("c", exact("gpu", "gpu", KIND.format("gpu")),
                  exact("nic", "gpu", KIND.format("nic")),
                  constraints=[{"distinctAttribute": "gpu.example.com/driverVersion"}])
    snapshot = ClusterSnapshot.from_api(
        [resource_slice("s", devices, pool="node-a", node="node-a")], CLASSES, [], [],
        [node("node-a")], features_for(KubeVersion(1, 38)))
    data = explain_claim(snapshot, ResourceClaim.from_api(wants)).to_json()
    [candidate] = data["candidates"]
    assert candidate["requests"][1]["message"] == (
        "request nic: 1 device fits on its own, but constraint distinctAttribute "
        "gpu.example.com/driverVersion over requests gpu, nic cannot be met: 2 devices with "
        "different values are needed, the fitting devices have 1: request gpu: 1.0.0 (g0); "
        "request nic: 1.0.0 (n0)")


def test_an_incomplete_pool_is_named_with_its_slices() -> None:
    slices = [resource_slice("ok", [device("d-ok", attributes=attrs(model="old"))],
                             pool="pool-ok", node="node-a"),
              resource_slice("new-1", [device("d-new", attributes=attrs(model="new"))],
                             pool="pool-new", node="node-a", count=2)]
    data, text = _explain(slices, claim("c", exact("r", "gpu", MODEL_NEW)))
    note = ("pool gpu.example.com/pool-new is incomplete (1 of 2 slices published): its devices "
            "were not considered")
    assert data["message"] == (
        "cannot be allocated: node-a: request r: 0 of 1 devices of class gpu match the "
        'request\'s selectors (1 needed): d-ok on node-a has model "old", not the "new" asked; '
        f"{note}")
    [request] = data["candidates"][0]["requests"]
    assert request["unusablePools"] == [{"pool": "gpu.example.com/pool-new",
                                         "reason": "incomplete (1 of 2 slices published)"}]
    assert _why_not(text) == [
        "node-a:",
        "  request r: 0 of 1 devices of class gpu match the request's selectors (1 needed)",
        '    d-ok on node-a has model "old", not the "new" asked',
        '      selector of request r: device.attributes["gpu.example.com"].model == "new"',
        "    pool gpu.example.com/pool-new is incomplete (1 of 2 slices published): its devices "
        "were not",
        "      considered"]


def test_a_pool_whose_newer_generation_is_being_published_is_named() -> None:
    slices = [resource_slice("p-1", [device("d-1", attributes=attrs(model="new"))], pool="p",
                             node="node-a", count=2, generation=1),
              resource_slice("p-2", [device("d-2")], pool="p", node="node-b", count=2,
                             generation=2)]
    data, _ = _explain(slices, claim("c", exact("r", "gpu", MODEL_NEW)))
    assert data["nodes"] == {"total": 1, "evaluated": 1, "withoutDevices": 0,
                             "excludedByPods": 0}
    assert data["message"] == (
        "cannot be allocated: node-a: request r: 0 devices in the node's usable pools (1 "
        "needed): pool gpu.example.com/p is being updated (its slices for the node are of "
        "generation 1, a newer one is published): its devices were not considered")
