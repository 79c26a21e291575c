"""The operator's explainer: which pods it explains, its rate limits and its caches."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kubedra.allocation import DEFAULT_FEATURES, KubeVersion, features_for, pools
from kubedra.allocation.versions import rules_of
from kubedra.api.resource import ResourceClaim
from kubedra.controller.explain_state import (
    EVALUATION_INTERVAL,
    EVENT_INTERVAL,
    ExplainState,
    Inputs,
)
from kubedra.controller.explanations import unschedulable_for_claims
from kubedra.explain import ClusterSnapshot, explain_claim
from tests.support.explain_builders import gpu_claim, h200_slices, node, shipped_classes

SCHEDULER_MESSAGE = ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 "
                     "nodes are available: 1 Preemption is not helpful for scheduling.")


def pod(*, claims: bool = True, status: str = "False", reason: str = "Unschedulable",
        message: str = SCHEDULER_MESSAGE) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return {"metadata": {"namespace": "demo", "name": "p"}, "spec": spec,
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": status, "reason": reason,
                 "message": message}]}}


@pytest.mark.parametrize(("body", "explained"), [
    (pod(), True),
    (pod(claims=False), False),
    (pod(message="0/3 nodes are available: 3 Insufficient cpu."), False),
    (pod(reason="SchedulerError"), False),
    (pod(reason="SchedulerError", message='running "DynamicResources" filter plugin: claim '
         "demo/bad: selector #0: CEL compile error: compilation failed: …"), True),
    (pod(reason="SchedulerError", message='running "DynamicResources" filter plugin: node a: '
         "timed out trying to allocate devices"), True),
    (pod(reason="SchedulerError", message='running "NodeAffinity" filter plugin: x'), False),
    (pod(status="True", reason=""), False),
    ({"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "gpu"}]}}, False),
])
def test_only_pods_unschedulable_because_of_claims(body: dict[str, Any],
                                                   explained: bool) -> None:
    assert unschedulable_for_claims(body) is explained


def test_a_pod_is_evaluated_at_most_every_interval() -> None:
    state = ExplainState()
    assert state.evaluation_delay(("ns", "p"), 100.0) == 0.0
    assert state.evaluation_delay(("ns", "p"), 102.0) == EVALUATION_INTERVAL - 2.0
    assert state.evaluation_delay(("ns", "q"), 102.0) == 0.0
    assert state.evaluation_delay(("ns", "p"), 100.0 + EVALUATION_INTERVAL) == 0.0
    state.forget_pod(("ns", "p"))
    assert state.evaluation_delay(("ns", "p"), 106.0) == 0.0


def test_an_event_is_posted_when_the_message_changes_and_at_most_every_interval() -> None:
    state, claim = ExplainState(), ("ns", "c")
    assert state.event_delay(claim, "one", 10.0) == 0.0
    state.event_posted(claim, "one", 10.0)
    assert state.event_delay(claim, "one", 11.0) is None
    assert state.event_delay(claim, "one", 10.0 + 10 * EVENT_INTERVAL) is None
    assert state.event_delay(claim, "two", 25.0) == EVENT_INTERVAL - 15.0
    assert state.event_delay(claim, "two", 10.0 + EVENT_INTERVAL) == 0.0
    state.forget_claim(claim)
    assert state.event_delay(claim, "one", 12.0) == 0.0


def test_only_label_changes_of_nodes_count() -> None:
    state = ExplainState()
    assert state.node_changed("n", {"a": "1"})
    assert not state.node_changed("n", {"a": "1"})
    assert state.node_changed("n", {"a": "2"})
    assert state.node_changed("n", None)
    assert not state.node_changed("n", None)
    assert state.nodes_version == 3


def test_parsed_inputs_are_reused_until_their_version_changes() -> None:
    state = ExplainState()
    inputs = Inputs(slices=h200_slices("demo-h200"), classes=shipped_classes(), taint_rules=[],
                    allocated=[], nodes=[node("demo-h200"), node("a")],
                    inventory_version=1, claims_version=1)
    first = state.snapshot(inputs)
    assert [n.name for n in first.nodes] == ["a", "demo-h200"]
    assert state.snapshot(inputs).resources is first.resources
    inputs.inventory_version = 2
    assert state.snapshot(inputs).resources is not first.resources


def test_unchanged_slices_are_not_parsed_again() -> None:
    slices = [{**s, "metadata": {**s["metadata"], "resourceVersion": str(i + 1)}}
              for i, s in enumerate(h200_slices("n1") + h200_slices("n2"))]
    state = ExplainState()
    inputs = Inputs(slices=slices, classes=shipped_classes(), taint_rules=[], allocated=[],
                    nodes=[node("n1"), node("n2")], inventory_version=1, claims_version=1)
    def devices(snapshot: ClusterSnapshot) -> list[Any]:
        """The first device model of each slice, in the snapshot's order."""
        return [entry.devices[0].device for entry in snapshot.resources.slices.all]

    one, two = devices(state.snapshot(inputs))
    assert (one.name, two.name) == ("gpu-0", "gpu-0")
    # equal values of the two slices' devices are one model
    assert one.attributes["productName"] is two.attributes["productName"]
    changed = {**slices[1], "metadata": {**slices[1]["metadata"], "resourceVersion": "9"}}
    inputs.slices, inputs.inventory_version = [slices[0], changed], 2
    again = devices(state.snapshot(inputs))
    assert again[0] is one, "an unchanged slice is not parsed again"
    assert again[1] is not two
    assert again[1] == two


def test_the_first_question_after_prepare_checks_no_attribute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare`` makes each device's attribute check (a claim's node shapes key every device
    by it): the first question makes none, and explains as a fresh snapshot does."""
    state = ExplainState()
    inputs = Inputs(slices=h200_slices("n1") + h200_slices("n2"), classes=shipped_classes(),
                    taint_rules=[], allocated=[], nodes=[node("n1"), node("n2")],
                    inventory_version=1, claims_version=1)
    state.prepare(inputs)
    checked: list[str] = []
    real = pools.attribute_conversion_error
    monkeypatch.setattr(pools, "attribute_conversion_error",
                        lambda driver, *args: checked.append(driver) or real(driver, *args))
    claim = ResourceClaim.from_api(gpu_claim("c"))
    explained = explain_claim(state.snapshot(inputs), claim)
    assert checked == []
    assert explained.to_json() == explain_claim(
        ClusterSnapshot.from_api(inputs.slices, inputs.classes, [], [], inputs.nodes), claim
    ).to_json()
    assert checked == ["gpu.kubedra.io"] * 2  # a fresh one checks the device tried per node


def _versioned(slices: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    return [{**s, "metadata": {**s["metadata"], "resourceVersion": version}} for s in slices]


def _without_gpu(slices: list[dict[str, Any]], gpu: str) -> list[dict[str, Any]]:
    """The slices with device ``gpu`` gone (and a new resourceVersion)."""
    return [{**s, "metadata": {**s["metadata"], "resourceVersion": "9"},
             "spec": {**s["spec"], "devices": [d for d in s["spec"].get("devices") or ()
                                               if d["name"] != gpu]}} for s in slices]


def test_a_changed_slice_replaces_its_entries_and_keeps_the_other_nodes_pools() -> None:
    """After one node's slice changed, the allocator's index keeps every other slice's entries
    and every other node's pools (incremental: no rebuild of the fleet per question), and the
    explanation is the one a snapshot built afresh gives."""
    nodes = ["n1", "n2", "n3"]
    slices = {n: _versioned(h200_slices(n), "1") for n in nodes}
    state = ExplainState()
    inputs = Inputs(slices=[s for n in nodes for s in slices[n]], classes=shipped_classes(),
                    taint_rules=[], allocated=[], nodes=[node(n) for n in nodes],
                    inventory_version=1, claims_version=1)
    claim = ResourceClaim.from_api(gpu_claim("one"))
    first = state.snapshot(inputs)
    explain_claim(first, claim)
    pools = {n.name: first.resources.node_pools(n) for n in first.nodes}
    entries = {e.name: e for e in first.resources.slices.all}

    slices["n2"] = _without_gpu(slices["n2"], "gpu-0")
    inputs.slices, inputs.inventory_version = [s for n in nodes for s in slices[n]], 2
    second = state.snapshot(inputs)
    assert {n.name: second.resources.node_pools(n) is pools[n.name] for n in second.nodes} == {
        "n1": True, "n2": False, "n3": True}
    assert [e is entries.get(e.name) for e in second.resources.slices.all] == [
        e["metadata"]["name"] not in {s["metadata"]["name"] for s in slices["n2"]}
        for e in inputs.slices]
    fresh = ClusterSnapshot.from_api(inputs.slices, inputs.classes, [], [], inputs.nodes)
    assert explain_claim(second, claim).to_json() == explain_claim(fresh, claim).to_json()
    assert [len(second.resources.node_pools(n).devices) for n in second.nodes] == [1, 0, 1]


def test_a_changed_slice_without_a_node_name_drops_every_nodes_pools() -> None:
    """A slice of no single node (here ``allNodes``) may serve any node: after it changed, no
    node's pools are reused."""
    shared = _versioned(h200_slices("n1"), "1")
    shared = [{**s, "spec": {k: v for k, v in s["spec"].items() if k != "nodeName"}
               | {"allNodes": True}} for s in shared]
    state = ExplainState()
    inputs = Inputs(slices=shared + _versioned(h200_slices("n2"), "1"),
                    classes=shipped_classes(), taint_rules=[], allocated=[],
                    nodes=[node("n1"), node("n2")], inventory_version=1, claims_version=1)
    first = state.snapshot(inputs)
    pools = {n.name: first.resources.node_pools(n) for n in first.nodes}
    inputs.slices = _without_gpu(shared, "gpu-0") + inputs.slices[len(shared):]
    inputs.inventory_version = 2
    second = state.snapshot(inputs)
    assert [second.resources.node_pools(n) is pools[n.name] for n in second.nodes] == [
        False, False]
    fresh = ClusterSnapshot.from_api(inputs.slices, inputs.classes, [], [], inputs.nodes)
    claim = ResourceClaim.from_api(gpu_claim("one"))
    assert explain_claim(second, claim).to_json() == explain_claim(fresh, claim).to_json()


def test_every_evaluation_runs_in_the_same_thread() -> None:
    # the cached inventory keeps CEL activations, which cel-expr-python binds to the thread
    # that made them: a second evaluation in another thread failed ("No PyCelArena found")
    state = ExplainState()
    inputs = Inputs(slices=h200_slices("demo-h200"), classes=shipped_classes(), taint_rules=[],
                    allocated=[], nodes=[node("demo-h200")], inventory_version=1,
                    claims_version=1)
    claim = ResourceClaim.from_api(gpu_claim("big", 'device.capacity["gpu.kubedra.io"].memory'
                                                    '.compareTo(quantity("141Gi")) >= 0'))

    def evaluate() -> tuple[str, str]:
        return (threading.current_thread().name,
                explain_claim(state.snapshot(inputs), claim).message)

    first = state.executor.submit(evaluate).result()
    second = state.executor.submit(evaluate).result()
    assert first == second
    assert first[1].startswith("cannot be allocated: demo-h200: request gpu: 0 of 1 devices")


def test_the_operator_explains_as_the_clusters_minor() -> None:
    """The server version detected at start picks the explainer's features (that minor's
    default gates, :func:`kubedra.allocation.features_for`); an unknown or unsupported one
    falls back to 1.37 with a note; a 1.38 pre-release selects 1.38's rules."""
    state = ExplainState()
    assert state.decide_as("v1.35.4") == ""
    assert (state.features, state.features.device_taints) == (
        features_for(KubeVersion(1, 35)), False)
    assert state.decide_as("v1.38.0-beta.0") == ""
    assert (state.features, state.features.fractional_capacity_range) == (
        features_for(KubeVersion(1, 38)), True)
    assert rules_of(state.features.version)["all-unusable-pool-fails-on-node"]
    notes = [state.decide_as(v) for v in ("v1.39.0", "")]
    assert notes == [
        "Kubernetes 1.39 is not one kubedra decides as (1.34 to 1.38); deciding as 1.37's "
        "scheduler",
        "the Kubernetes version is not known; deciding as 1.37's scheduler"]
    assert state.features == DEFAULT_FEATURES
