"""The terminal form of kubedra explain and simulate, and the kubectl plugin's command line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_explain_claims import TOO_BIG, demo, trainer

from kubedra.api.resource import ResourceClaim
from kubedra.cli import kubectl_dra, main
from kubedra.explain import ClusterSnapshot, PodPlacement, explain_claim, simulate_claim
from kubedra.explain.render import render_explanation, render_simulation
from tests.support.explain_builders import gpu_claim, h200_slices, node, shipped_classes
from tests.support.scenario_builders import (
    CLASSES,
    attrs,
    claim,
    device,
    exact,
    first_available,
    resource_slice,
    sub,
)


def test_pending_claim_table() -> None:
    too_big = gpu_claim("too-big", TOO_BIG)
    pod = PodPlacement("demo", "too-big", node_selector={"type": "kwok"}, claims=("too-big",))
    explanation = explain_claim(demo(trainer(), too_big, nodes=("demo-h200", "cpu-0")),
                                ResourceClaim.from_api(too_big), [pod])
    assert render_explanation(explanation) == """\
ResourceClaim:  demo/too-big
Pods:           demo/too-big
Verdict:        Unschedulable
Message:        cannot be allocated: demo-h200: request gpu: 0 of 1 devices of class gpu.kubedra.io
                match the request's selectors (1 needed): gpu-0 on demo-h200 has 150754820096 bytes,
                less than the 151397597184 asked (gpu.kubedra.io/memory: 143771Mi < 141Gi)
Nodes:          1 evaluated, 1 without ResourceSlices, 0 excluded by the pods' node selection (2 in
                total)

NODE       REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
demo-h200  gpu      1       1        1         0         0     0         0         0          fails at matchRequest

Why not:
demo-h200:
  request gpu: 0 of 1 devices of class gpu.kubedra.io match the request's selectors (1 needed)
    gpu-0 on demo-h200 has 150754820096 bytes, less than the 151397597184 asked
      (gpu.kubedra.io/memory: 143771Mi < 141Gi)
      selector of request gpu: device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0
"""  # noqa: E501


def test_allocated_claim_table() -> None:
    explanation = explain_claim(demo(trainer()), ResourceClaim.from_api(trainer()))
    assert render_explanation(explanation) == """\
ResourceClaim:  demo/trainer
Pods:           none
Verdict:        Allocated
Message:        allocated on node demo-h200: gpu-0 of pool demo-h200 (gpu.kubedra.io) for request
                gpu
Node:           demo-h200

gpu-0 (pool demo-h200, driver gpu.kubedra.io) for request gpu, class gpu.kubedra.io:
  class gpu.kubedra.io: gpu-0 on demo-h200 has driver "gpu.kubedra.io", as asked
  class gpu.kubedra.io: gpu-0 on demo-h200 has attribute gpu.kubedra.io/type
  class gpu.kubedra.io: gpu-0 on demo-h200 has type "gpu", as asked
  request gpu: gpu-0 on demo-h200 has 150754820096 bytes, at least the 150323855360 asked
    (gpu.kubedra.io/memory: 143771Mi >= 140Gi)
  request gpu: gpu-0 on demo-h200 has cudaComputeCapability 9.0.0, at least the 9.0.0 asked
"""


def test_simulation_table_ends_with_the_copies() -> None:
    simulation = simulate_claim(demo(), ResourceClaim.from_api(gpu_claim("whole")))
    assert render_simulation(simulation).endswith("""\
NODE       REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
demo-h200  gpu      1       1        1         1         1     1         1         1          fits: gpu-0

Copies:         1 copy fits in the cluster now (demo-h200: 1)

COPY  NODE       DEVICES
1     demo-h200  gpu-0 (gpu)
""")  # noqa: E501


def test_kubectl_plugin_help_lists_its_commands() -> None:
    result = CliRunner().invoke(kubectl_dra, ["--help"], prog_name="kubectl dra")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: kubectl dra [OPTIONS] COMMAND [ARGS]...\n")
    assert "  explain   Why a ResourceClaim is pending, or why its devices fit.\n" in result.output
    assert "  simulate  Where a claim would fit now, and how many copies fit.\n" in result.output
    assert "kubectl dra explain resourceclaim my-claim -n my-namespace" in result.output
    # it decides as the cluster's minor, not always as v1.37 (its help said so)
    assert " ".join(result.output.split()).count(
        "decides as the kube-scheduler of the cluster's Kubernetes minor does (1.34 to 1.38; "
        "--kube-version chooses another)") == 1


@pytest.mark.parametrize("command", ["explain", "simulate", "dump", "status"])
def test_the_kubeconfig_is_found_in_kubectls_order(command: str) -> None:
    """These commands read the cluster through kubectl, which takes $KUBECONFIG and
    ~/.kube/config before the in-cluster account: their help said the operator's order."""
    result = CliRunner().invoke(kubectl_dra, [command, "--help"], prog_name="kubectl dra")
    assert result.exit_code == 0
    assert " ".join(result.output.split()).count(
        "Kubeconfig file [env KUBEDRA_KUBECONFIG; default kubectl's: $KUBECONFIG, then "
        "~/.kube/config, then in-cluster]") == 1


def test_kubedra_has_the_same_commands() -> None:
    for name in ("explain", "simulate"):
        assert main.get_command(None, name) is kubectl_dra.get_command(None, name)  # type: ignore[arg-type]


def test_unknown_kind_and_bad_file_are_usage_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(kubectl_dra, ["explain", "node", "x"])
    assert result.exit_code == 2
    assert ("'node' is not one of 'resourceclaim', 'resourceclaims', 'claim', 'pod', 'pods', "
            "'po'") in result.output
    result = runner.invoke(kubectl_dra, ["simulate", "-f", "-"], input="kind: Pod\n")
    assert result.exit_code == 1
    assert result.output == "Error: <stdin>: no ResourceClaim or ResourceClaimTemplate found\n"


def _three_hundred_h200_nodes() -> ClusterSnapshot:
    names = [f"node-{i:03d}" for i in range(300)]
    return ClusterSnapshot.from_api([s for n in names for s in h200_slices(n)],
                                    shipped_classes(), [], [], [node(n) for n in names])


def test_three_hundred_nodes_failing_alike_take_the_lines_of_one() -> None:
    explanation = explain_claim(_three_hundred_h200_nodes(),
                                ResourceClaim.from_api(gpu_claim("too-big", TOO_BIG)))
    text = render_explanation(explanation)
    assert len(text.splitlines()) < 40
    assert text.split("\n\n", 1)[1] == """\
NODE                  REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
node-000 (+299 more)  gpu      1       1        1         0         0     0         0         0          fails at matchRequest

Why not:
node-000 (the same on 299 more nodes: node-001, node-002, node-003, node-004, node-005, …):
  request gpu: 0 of 1 devices of class gpu.kubedra.io match the request's selectors (1 needed)
    gpu-0 on node-000 has 150754820096 bytes, less than the 151397597184 asked
      (gpu.kubedra.io/memory: 143771Mi < 141Gi)
      selector of request gpu: device.capacity["gpu.kubedra.io"].memory.compareTo(quantity("141Gi")) >= 0
"""  # noqa: E501
    every = render_explanation(explanation, every_node=True)
    assert len(every.splitlines()) == 12 + 300 + 1 + 300 * 5
    assert "\nnode-299  gpu      1       1 " in every


def test_fitting_nodes_come_first_and_devices_failing_alike_fold() -> None:
    small = [device(f"gpu-{i}", attributes=attrs(model="small")) for i in range(7)]
    slices = [resource_slice("s-a", small, pool="a", node="a"),
              resource_slice("s-z", [device("gpu-0", attributes=attrs(model="big"))],
                             pool="z", node="z")]
    wants = claim("c", exact("r", "gpu", 'device.attributes["gpu.example.com"].model == "big"'))
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [wants], [node("a"), node("z")])
    text = render_explanation(explain_claim(snapshot, ResourceClaim.from_api(wants)))
    assert text.split("\n\n", 1)[1] == """\
NODE  REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
z     r        1       1        1         1         1     1         1         1          fits: gpu-0
a     r        1       7        7         0         0     0         0         0          fails at matchRequest

Why not:
a:
  request r: 0 of 7 devices of class gpu match the request's selectors (1 needed)
    gpu-0 on a has model "small", not the "big" asked
      (the same for 6 more devices: gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, …)
      selector of request r: device.attributes["gpu.example.com"].model == "big"
"""  # noqa: E501


def test_each_first_available_alternative_shows_its_own_outcome() -> None:
    roots = [device(f"gpu-{i}", attributes=attrs(pcieRoot=f"r{i}")) for i in range(2)]
    slices = [resource_slice("a-1", roots, pool="a", node="a")]
    wants = claim("c", first_available("r", sub("three", "gpu", count=3),
                                       sub("pair", "gpu", count=2), sub("one", "gpu"),
                                       sub("any", "gpu")),
                  constraints=[{"requests": ["r"],
                                "matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    snapshot = ClusterSnapshot.from_api(slices, CLASSES, [], [], [node("a")])
    simulation = simulate_claim(snapshot, ResourceClaim.from_api(wants), max_copies=1)
    table_lines = render_simulation(simulation).split("\n\n")[1]
    assert table_lines == """\
NODE  REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
a     r/three  3       2        2         2         2     2         2         2          fails at devices
a     r/pair   2       2        2         2         2     2         2         2          fails at together
a     r/one    1       2        2         2         2     2         2         2          fits: gpu-0 (chosen)
a     r/any    1       2        2         2         2     2         2         2          fits, not chosen"""  # noqa: E501
    [candidate] = simulation.explanation.to_json()["candidates"]
    assert [(r["request"], r["failedAt"], r["chosen"]) for r in candidate["requests"]] == [
        ("r/three", "devices", False), ("r/pair", "together", False), ("r/one", None, True),
        ("r/any", None, False)]
    assert candidate["requests"][1]["message"] == (
        "request r/pair: cannot be met together with the claim's other requests and "
        "constraints; a later alternative was chosen")
