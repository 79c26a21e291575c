"""``kubedra simulate --kube-version`` on the claims of 1.38's new allocator rules, from a dump
(newcomer14): each rule's scenario of ``RULE_SCENARIOS``, written out as ``kubectl get -o
json`` writes its objects, gives the verdicts docs/developing.md states for 1.37 and 1.38
(``versions-compared-by-precedence``, ``capacity-names-qualified``,
``negative-capacity-request-is-error``). The rule tests run the allocator on the scenario;
this runs the command a user types, so the flag must reach the allocator through the dump's
reading and the claim's admission checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubedra.cli import main
from tests.unit.allocation.test_allocation_minors import RULE_SCENARIOS


def _written(scenario: dict[str, Any], directory: Path) -> tuple[Path, Path]:
    """The scenario's slices, classes and node as one ``List`` (the dump), and its first claim
    without status (the ``-f`` file)."""
    items = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **s}
             for s in scenario["slices"]]
    items += [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", **c}
              for c in scenario["classes"]]
    node = scenario["node"]
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": node["name"], "labels": node.get("labels") or {}}})
    dump, claim = directory / "dump.json", directory / "claim.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    first = {key: value for key, value in scenario["claims"][0].items() if key != "status"}
    claim.write_text(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 **first, "metadata": {"namespace": "default",
                                                       **first["metadata"]}}))
    return dump, claim


@pytest.mark.parametrize(("rule", "verdicts"), [
    ("versions-with-build", {"1.37": "Unschedulable", "1.38": "Fits"}),
    ("qualified-capacity-request", {"1.37": "Unschedulable", "1.38": "Fits"}),
    ("negative-capacity-request", {"1.37": "Fits", "1.38": "Error"}),
])
def test_simulate_decides_each_1_38_rule_as_the_minor_asked(
        rule: str, verdicts: dict[str, str], tmp_path: Path) -> None:
    scenario, _ = RULE_SCENARIOS[rule]
    dump, claim = _written(scenario, tmp_path)
    seen = {}
    for minor in verdicts:
        result = CliRunner().invoke(main, ["simulate", "--kube-version", minor,
                                           "--from", str(dump), "-f", str(claim)])
        [verdict] = [line.split()[1] for line in result.output.splitlines()
                     if line.startswith("Verdict:")]
        seen[minor] = verdict
    assert seen == verdicts
