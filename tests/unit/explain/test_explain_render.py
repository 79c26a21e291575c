"""The terminal form of kubedra explain and simulate, and the kubectl plugin's command line."""

from __future__ import annotations

from click.testing import CliRunner
from test_explain_claims import TOO_BIG, demo, trainer

from kubedra.api.resource import ResourceClaim
from kubedra.cli import main
from kubedra.explain import PodPlacement, explain_claim, simulate_claim
from kubedra.explain.command import kubectl_dra
from kubedra.explain.render import render_explanation, render_simulation
from tests.support.explain_builders import gpu_claim


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


def test_kubedra_has_the_same_commands() -> None:
    assert main.commands["explain"] is kubectl_dra.commands["explain"]
    assert main.commands["simulate"] is kubectl_dra.commands["simulate"]


def test_unknown_kind_and_bad_file_are_usage_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(kubectl_dra, ["explain", "pod", "x"])
    assert result.exit_code == 2
    assert "'pod' is not one of 'resourceclaim', 'resourceclaims', 'claim'" in result.output
    result = runner.invoke(kubectl_dra, ["simulate", "-f", "-"], input="kind: Pod\n")
    assert result.exit_code == 1
    assert result.output == "Error: <stdin>: no ResourceClaim or ResourceClaimTemplate found\n"
