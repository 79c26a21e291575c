"""What the cluster does not keep of a slice is left out with the reason, never published
stripped (issue 26, item 2): decisions with the served features of a 1.34-like cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubedra.controller.fingerprint import inputs_digest
from kubedra.controller.inventories import InventoryDecision, decide_inventory
from kubedra.publishing.features import (
    EFFECT_NONE_REFUSED,
    ServedFeatures,
    pool_off,
    probe_counter_slice,
    probe_effect_none_slice,
    probe_slice,
    served_from_probe,
)
from tests.unit.controller.test_inventory_decisions import inputs, raw_inventory

NO_TAINTS = ServedFeatures(device_taints=False, device_taint_rules=False)
NO_COUNTERS = ServedFeatures(partitionable_devices=False)


def test_an_unhealthy_device_is_left_out_where_taints_are_not_kept() -> None:
    decision = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",)), served=NO_TAINTS))
    assert decision.reason == "DevicesLeftOut"
    assert decision.message == (
        "1 device in 1 ResourceSlice (pool node-1, generation 1); left out, as the API server "
        "would refuse them: gpu-1 (devices[gpu-1].taints: this cluster does not keep device "
        "taints (feature gate DRADeviceTaints is off), so the device would be published "
        "without its taint and be allocated)")
    assert decision.pool is not None
    assert [d.name for d in decision.pool.devices] == ["gpu-0"]


def test_the_same_unhealthy_device_is_published_tainted_where_taints_are_kept() -> None:
    decision = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",))))
    assert decision.pool is not None
    assert [(d.name, [t.key for t in d.taints or []]) for d in decision.pool.devices] == [
        ("gpu-0", []), ("gpu-1", ["kubedra.io/unhealthy"])]


def _mig_inventory() -> dict[str, object]:
    raw = raw_inventory(devices=1)
    raw["status"]["discovered"]["counterSets"] = [
        {"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}]
    raw["status"]["discovered"]["devices"].append({"name": "gpu-0-mig-1g", "consumesCounters": [
        {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "10Gi"}}}]})
    return raw


def test_partitions_and_counters_are_left_out_where_counters_are_not_kept() -> None:
    decision = decide_inventory(inputs(_mig_inventory(), served=NO_COUNTERS))
    why = ("this cluster does not keep shared counters (feature gate DRAPartitionableDevices "
           "is off), so partitions sharing a device could be allocated together")
    assert decision.pool is not None
    assert [d.name for d in decision.pool.devices] == ["gpu-0"]
    assert decision.pool.counter_sets == []
    assert [(r.name, r.field, r.message) for r in decision.pool.left_out] == [
        ("gpu-0-mig-1g", "devices[gpu-0-mig-1g].consumesCounters", why),
        ("gpu-0-counters", "counterSets[gpu-0-counters]", why)]
    served = decide_inventory(inputs(_mig_inventory()))
    assert served.pool is not None
    assert [d.name for d in served.pool.devices] == ["gpu-0", "gpu-0-mig-1g"]


def _whole_gpu_consumes(raw: dict[str, object], memory: str) -> dict[str, object]:
    """``raw`` (of :func:`_mig_inventory`) with gpu-0 consuming ``memory`` of its counter set
    (the full 80Gi: a whole GPU with MIG partitions on, as the agent reports it)."""
    [gpu, *_] = raw["status"]["discovered"]["devices"]  # type: ignore[index]
    gpu["consumesCounters"] = [{"counterSet": "gpu-0-counters",
                                "counters": {"memory": {"value": memory}}}]
    return raw


def test_a_whole_gpu_is_published_without_counters_where_counters_are_not_kept() -> None:
    decision = decide_inventory(inputs(_whole_gpu_consumes(_mig_inventory(), "80Gi"),
                                       served=NO_COUNTERS))
    assert decision.pool is not None
    [gpu] = decision.pool.devices
    assert (gpu.name, gpu.consumes_counters) == ("gpu-0", None)
    assert [r.name for r in decision.pool.left_out] == ["gpu-0-mig-1g", "gpu-0-counters"]
    # where counters are kept it consumes them, as reported
    served = decide_inventory(inputs(_whole_gpu_consumes(_mig_inventory(), "80Gi")))
    assert served.pool is not None
    assert [c.counter_set for c in served.pool.devices[0].consumes_counters or []] == [
        "gpu-0-counters"]


def test_only_one_full_consumer_of_a_counter_set_and_none_that_takes_part_of_it() -> None:
    part = decide_inventory(inputs(_whole_gpu_consumes(_mig_inventory(), "40Gi"),
                                   served=NO_COUNTERS))
    assert part.pool is not None
    assert part.pool.devices == []
    raw = _whole_gpu_consumes(_mig_inventory(), "80Gi")
    raw["status"]["discovered"]["devices"][1]["consumesCounters"][0]["counters"] = {  # type: ignore[index]
        "memory": {"value": "80Gi"}}  # a partition as large as the GPU: the first name wins
    both = decide_inventory(inputs(raw, served=NO_COUNTERS))
    assert both.pool is not None
    assert [d.name for d in both.pool.devices] == ["gpu-0"]
    assert [r.name for r in both.pool.left_out] == ["gpu-0-mig-1g", "gpu-0-counters"]


def test_the_probe_read_back_decides_each_feature() -> None:
    taints, counters = probe_slice("gpu.kubedra.io"), probe_counter_slice("gpu.kubedra.io")
    kept = served_from_probe(taints, counters, resource_versions=("v1", "v1beta2"),
                             device_taint_rules=True, server_version="v1.37.2")
    assert kept == ServedFeatures(resource_versions=("v1", "v1beta2"), server_version="v1.37.2",
                                  skip_node_operations=True, node_allocatable_resources=True)
    assert kept.off == ()
    taints["spec"]["devices"][0].pop("taints")
    taints["spec"]["devices"][0].pop("nodeAllocatableResources")
    taints["spec"].pop("skipNodeOperations")
    counters["spec"].pop("sharedCounters")
    dropped = served_from_probe(taints, counters, resource_versions=("v1",),
                                device_taint_rules=False)
    off = ("DRADeviceTaints", "DRAPartitionableDevices", "DRADeviceTaintRules",
           "DRAOptionalNodeOperations", "DRANodeAllocatableResources")
    assert dropped.off == off
    assert dropped.to_json() == {"serverVersion": "", "resourceVersions": ["v1"],
                                 "deviceTaints": False, "partitionableDevices": False,
                                 "deviceTaintRules": False, "skipNodeOperations": False,
                                 "nodeAllocatableResources": False, "taintEffectNone": True,
                                 "off": list(off)}


NO_EFFECT_NONE = ServedFeatures(taint_effect_none=False, server_version="v1.34.4")
"""A 1.34 cluster with DRADeviceTaints turned on: it keeps taints, and refuses the effect
None (``validDeviceTaintEffects``, v1.34.4)."""


INFORMING_OVERRIDE = [{"device": "gpu-1", "taints": [
    {"key": "example.com/firmware", "value": "old", "effect": "None"}]}]
"""An override giving gpu-1 a taint that only informs."""


def test_a_taint_of_effect_none_leaves_its_device_out_where_the_server_refuses_it() -> None:
    """Before, the device was published with the taint and the API server of 1.34 refused the
    pool's whole slice; now only that device is left out, saying why."""
    decision = decide_inventory(inputs(raw_inventory(overrides=INFORMING_OVERRIDE),
                                       served=NO_EFFECT_NONE))
    assert decision.pool is not None
    assert [d.name for d in decision.pool.devices] == ["gpu-0"]
    assert [(r.name, r.field, r.message) for r in decision.pool.left_out] == [
        ("gpu-1", "devices[gpu-1].taints",
         "this cluster's API server refuses the device taint effect None (Kubernetes 1.34 "
         "knows only NoSchedule and NoExecute), and with it the whole ResourceSlice: give the "
         "taint NoSchedule or NoExecute, or upgrade to 1.35")]
    assert decision.reason == "DevicesLeftOut"
    kept = decide_inventory(inputs(raw_inventory(overrides=INFORMING_OVERRIDE)))
    assert kept.pool is not None
    assert [(d.name, [(t.key, t.effect) for t in d.taints or []]) for d in kept.pool.devices] == [
        ("gpu-0", []), ("gpu-1", [("example.com/firmware", "None")])]


def test_the_operators_own_taints_are_published_where_the_effect_none_is_refused() -> None:
    decision = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",)),
                                       served=NO_EFFECT_NONE))
    assert decision.pool is not None
    assert decision.pool.left_out == []
    assert [(d.name, [(t.key, t.effect) for t in d.taints or []])
            for d in decision.pool.devices] == [
        ("gpu-0", []), ("gpu-1", [("kubedra.io/unhealthy", "NoSchedule")])]


def test_the_effect_none_probe_is_one_informing_taint_and_counts_in_the_fingerprint() -> None:
    probe = probe_effect_none_slice("gpu.kubedra.io")
    assert probe["spec"]["devices"] == [
        {"name": "probe", "taints": [{"key": "kubedra.io/probe", "effect": "None"}]}]
    assert probe["spec"]["nodeSelector"] == probe_slice("gpu.kubedra.io")["spec"]["nodeSelector"]
    assert pool_off(NO_EFFECT_NONE, None) == (*ServedFeatures().off, "taint effect None refused")
    assert pool_off(replace(NO_TAINTS, taint_effect_none=False), None) == NO_TAINTS.off
    assert NO_EFFECT_NONE.to_json()["taintEffectNone"] is False


def test_a_cluster_that_changes_its_features_changes_the_fingerprint() -> None:
    raw = raw_inventory()
    assert inputs_digest(raw, "uid", 0.0) == inputs_digest(raw, "uid", 0.0, ())
    assert inputs_digest(raw, "uid", 0.0) != inputs_digest(raw, "uid", 0.0, NO_TAINTS.off)


def _network_slices(served: ServedFeatures) -> list[dict[str, object]]:
    """The slice bodies the decision writes for network pool ``pool-a`` on ``served``."""
    decision = decide_inventory(inputs(raw_inventory(node=None, devices=1), served=served))
    assert decision.plan is not None
    return [w.body for w in decision.plan.writes if w.body is not None]


NETWORK_SLICE_SPEC = {
    "driver": "gpu.kubedra.io", "allNodes": True,
    "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}]}


def test_a_network_pool_skips_node_operations_where_the_cluster_keeps_the_field() -> None:
    served = ServedFeatures(skip_node_operations=True)
    [body] = _network_slices(served)
    assert body["spec"] == {**NETWORK_SLICE_SPEC, "skipNodeOperations": [
        "NodePrepareResources", "NodeUnprepareResources"]}
    decision = decide_inventory(inputs(raw_inventory(node=None, devices=1), served=served))
    assert (decision.reason, decision.message) == (
        "SlicesPublished", "1 device in 1 ResourceSlice (pool pool-a, generation 1); the "
        "kubelet skips node operations for its devices (skipNodeOperations: "
        "NodePrepareResources, NodeUnprepareResources)")


def test_a_network_pool_is_published_without_the_field_where_it_is_not_kept() -> None:
    served = ServedFeatures()  # the default: DRAOptionalNodeOperations is alpha and off
    [body] = _network_slices(served)
    assert body["spec"] == NETWORK_SLICE_SPEC
    decision = decide_inventory(inputs(raw_inventory(node=None, devices=1), served=served))
    assert decision.message == "1 device in 1 ResourceSlice (pool pool-a, generation 1)"
    assert served.off == ("DRAOptionalNodeOperations", "DRANodeAllocatableResources")
    assert served.to_json()["skipNodeOperations"] is False


def test_a_node_pool_never_skips_node_operations() -> None:
    decision = decide_inventory(inputs(raw_inventory(devices=1),
                                       served=ServedFeatures(skip_node_operations=True)))
    assert decision.plan is not None
    [write] = decision.plan.writes
    assert write.body is not None
    assert "skipNodeOperations" not in write.body["spec"]
    assert write.body["spec"]["nodeName"] == "node-1"


GPU_OVERHEAD = {"memory": {"perPod": "256Mi", "perContainer": "64Mi"}, "cpu": {"perPod": "500m"}}
"""An inventory's ``spec.nodeAllocatableOverhead``: a CUDA context's pinned host memory and a
helper thread's CPU (the shape of NVIDIA's dra-driver node-allocatable-overhead guide)."""


DECLARES = frozenset({"DRANodeAllocatableResources"})
"""What node-1 declares when its kubelet has the gate on."""


def _overhead_decision(served: ServedFeatures, node_features: frozenset[str] = DECLARES
                       ) -> tuple[InventoryDecision, list[dict[str, Any]]]:
    """The decision for node-1's two GPUs with :data:`GPU_OVERHEAD`, and its slice bodies."""
    decision = decide_inventory(inputs(raw_inventory(
        extra_spec={"nodeAllocatableOverhead": GPU_OVERHEAD}), served=served,
        node_features=node_features))
    assert decision.plan is not None
    return decision, [w.body for w in decision.plan.writes if w.body is not None]


def test_every_device_carries_the_overhead_where_the_cluster_keeps_the_field() -> None:
    decision, [body] = _overhead_decision(ServedFeatures(node_allocatable_resources=True))
    overhead = {"cpu": {"overhead": {"perPod": "500m"}},
                "memory": {"overhead": {"perPod": "256Mi", "perContainer": "64Mi"}}}
    assert body["spec"]["devices"] == [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}},
         "nodeAllocatableResources": overhead} for i in range(2)]
    assert (decision.reason, decision.message) == (
        "SlicesPublished", "2 devices in 1 ResourceSlice (pool node-1, generation 1); each pod "
        "using its devices is charged besides them (nodeAllocatableResources): cpu 500m per "
        "pod, memory 256Mi per pod and 64Mi per container")


def test_the_overhead_is_withheld_and_said_so_where_the_cluster_drops_the_field() -> None:
    decision, [body] = _overhead_decision(ServedFeatures())
    assert body["spec"]["devices"] == [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(2)]
    assert (decision.reason, decision.ok, decision.message) == (
        "FeatureOff", True, "2 devices in 1 ResourceSlice (pool node-1, generation 1); "
        "published without spec.nodeAllocatableOverhead: this cluster does not keep "
        "nodeAllocatableResources (feature gate DRANodeAllocatableResources is off), so pods "
        "are not charged for it")


def test_no_overhead_for_a_node_whose_kubelet_does_not_declare_the_feature() -> None:
    decision, [body] = _overhead_decision(ServedFeatures(node_allocatable_resources=True),
                                          frozenset({"SomethingElse"}))
    assert body["spec"]["devices"] == [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(2)]
    assert (decision.reason, decision.message) == (
        "FeatureOff", "2 devices in 1 ResourceSlice (pool node-1, generation 1); published "
        "without spec.nodeAllocatableOverhead: node node-1 does not declare the feature "
        "DRANodeAllocatableResources (its kubelet has the feature gate off), and the API "
        "server refuses a slice with the overhead for such a node")


def test_the_fingerprint_follows_what_the_node_declares() -> None:
    raw = raw_inventory(extra_spec={"nodeAllocatableOverhead": GPU_OVERHEAD})
    served = ServedFeatures(node_allocatable_resources=True)
    declared = inputs(raw, served=served, node_features=DECLARES)
    undeclared = inputs(raw, served=served)
    assert declared.off == served.off
    assert undeclared.off == (*served.off, "DRANodeAllocatableResources undeclared")
    assert inputs_digest(raw, "uid", 0.0, declared.off) != inputs_digest(
        raw, "uid", 0.0, undeclared.off)


def test_an_inventory_without_overhead_publishes_none_on_any_cluster() -> None:
    for served in (ServedFeatures(), ServedFeatures(node_allocatable_resources=True)):
        decision = decide_inventory(inputs(raw_inventory(), served=served))
        assert (decision.reason, decision.message) == (
            "SlicesPublished", "2 devices in 1 ResourceSlice (pool node-1, generation 1)")
        assert decision.pool is not None
        assert all(d.node_allocatable_resources is None for d in decision.pool.devices)


def test_one_informing_taint_among_several_leaves_the_device_out_and_others_do_not() -> None:
    """newcomer14: an override with several taints. One of effect None among NoSchedule ones
    is enough for the 1.34 API server to refuse the slice, so the device is left out (once);
    a device whose taints are all NoSchedule or NoExecute is published with every one."""
    overrides = [
        {"device": "gpu-0", "taints": [
            {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"},
            {"key": "example.com/firmware", "value": "old", "effect": "None"}]},
        {"device": "gpu-1", "taints": [
            {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"},
            {"key": "example.com/evict", "value": "now", "effect": "NoExecute"}]}]
    decision = decide_inventory(inputs(raw_inventory(overrides=overrides),
                                       served=NO_EFFECT_NONE))
    assert decision.pool is not None
    assert [(r.name, r.field) for r in decision.pool.left_out] == [
        ("gpu-0", "devices[gpu-0].taints")]
    assert [(d.name, [(t.key, t.effect) for t in d.taints or []])
            for d in decision.pool.devices] == [
        ("gpu-1", [("example.com/maintenance", "NoSchedule"), ("example.com/evict", "NoExecute")])]


def test_an_unhealthy_device_with_an_informing_taint_is_left_out_once_for_the_effect() -> None:
    """newcomer14: unhealthy (the operator's NoSchedule taint) and an override's taint of
    effect None. Published, its slice would be refused; it is left out with one reason, the
    effect's, and the healthy device is still published."""
    decision = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",),
                                                     overrides=INFORMING_OVERRIDE),
                                       served=NO_EFFECT_NONE))
    assert decision.pool is not None
    assert [d.name for d in decision.pool.devices] == ["gpu-0"]
    assert [(r.name, r.message) for r in decision.pool.left_out] == [
        ("gpu-1", EFFECT_NONE_REFUSED)]
    where_kept = decide_inventory(inputs(raw_inventory(unhealthy=("gpu-1",),
                                                       overrides=INFORMING_OVERRIDE)))
    assert where_kept.pool is not None
    assert [(d.name, sorted((t.key, t.effect) for t in d.taints or []))
            for d in where_kept.pool.devices] == [
        ("gpu-0", []),
        ("gpu-1", [("example.com/firmware", "None"), ("kubedra.io/unhealthy", "NoSchedule")])]


def test_the_digest_changes_when_the_effect_none_flips_and_only_where_taints_are_kept() -> None:
    """newcomer14: the executor's fingerprint (``inputs_digest`` of ``pool_off``) must differ
    when a restarted API server starts or stops refusing the effect None, or the pool with
    the informing taint would never be written again; where taints are not kept the effect
    is not probed, so the flag must not change the digest."""
    raw = raw_inventory(overrides=INFORMING_OVERRIDE)
    everything = ServedFeatures(skip_node_operations=True, node_allocatable_resources=True)
    assert inputs_digest(raw, "uid", 0.0, pool_off(everything, None)) == inputs_digest(
        raw, "uid", 0.0)
    taking = inputs_digest(raw, "uid", 0.0, pool_off(ServedFeatures(), None))
    refusing = inputs_digest(raw, "uid", 0.0, pool_off(NO_EFFECT_NONE, None))
    assert refusing != taking
    assert (inputs_digest(raw, "uid", 0.0, pool_off(NO_TAINTS, None))
            == inputs_digest(raw, "uid", 0.0,
                             pool_off(replace(NO_TAINTS, taint_effect_none=False), None)))
    node = frozenset({"DRANodeAllocatableResources"})
    assert pool_off(NO_EFFECT_NONE, node) == pool_off(NO_EFFECT_NONE, None)
    assert pool_off(replace(NO_EFFECT_NONE, node_allocatable_resources=True), frozenset()) == (
        "DRAOptionalNodeOperations", "taint effect None refused",
        "DRANodeAllocatableResources undeclared")


def test_healthz_json_names_the_effect_but_off_lists_only_gates() -> None:
    """newcomer14: ``taintEffectNone`` is no feature gate (1.34 has none for it), so it must not
    appear in ``off`` (the gates by upstream name, read by operators and docs)."""
    assert NO_EFFECT_NONE.to_json() == {
        "serverVersion": "v1.34.4", "resourceVersions": ["v1"], "deviceTaints": True,
        "partitionableDevices": True, "deviceTaintRules": True, "skipNodeOperations": False,
        "nodeAllocatableResources": False, "taintEffectNone": False,
        "off": ["DRAOptionalNodeOperations", "DRANodeAllocatableResources"]}
