"""Unit tests of the allocator's building blocks, with exact values.

The differential tests prove whole decisions equal to upstream's; these pin down the rules
one by one (sources in each module's docstring).
"""

from __future__ import annotations

import pytest

from kubedra.allocation import AllocatedState, AllocatorFeatures, UnsupportedFeaturesError
from kubedra.allocation.capacity import (
    CapacityError,
    consumed_amount,
    fits,
    static_consumption,
    violates_policy,
)
from kubedra.allocation.constraints import (
    MISSING,
    MatchAttribute,
    attribute_key,
    distinct_attribute,
)
from kubedra.allocation.errors import AllocationError
from kubedra.allocation.features import features_for
from kubedra.allocation.node_selection import NodeInfo, NodeSelection, compile_node_selector
from kubedra.allocation.quantities import go_value
from kubedra.allocation.scenario import load_snapshot, node_info, run_scenario
from kubedra.allocation.taints import tolerated, tolerates
from kubedra.allocation.versions import DEFAULT_VERSION, KubeVersion, UnknownKubeVersionError
from kubedra.api.quantity import Quantity
from kubedra.api.resource import (
    CapacityRequestPolicy,
    DeviceAttribute,
    DeviceCapacity,
    DeviceTaint,
    DeviceToleration,
    NodeSelector,
    ResourceClaim,
)
from tests.support.edge_cases import CASES

NODE = NodeInfo("node-a", {"zone": "z1", "tier": "5"})


def edge_case(name: str) -> dict[str, object]:
    """The scenario of a hand-written edge case (``tests/support/edge_cases.py``)."""
    return next(c.scenario for c in CASES if c.scenario["name"] == name)


def selector(*requirements: dict[str, object], fields: bool = False) -> NodeSelector:
    key = "matchFields" if fields else "matchExpressions"
    return NodeSelector.from_api({"nodeSelectorTerms": [{key: list(requirements)}]})


# --- node selection -----------------------------------------------------------------------

@pytest.mark.parametrize(("requirement", "expected"), [
    ({"key": "zone", "operator": "In", "values": ["z1", "z2"]}, True),
    ({"key": "zone", "operator": "In", "values": ["z2"]}, False),
    ({"key": "zone", "operator": "NotIn", "values": ["z2"]}, True),
    ({"key": "rack", "operator": "NotIn", "values": ["r1"]}, True),
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "rack", "operator": "DoesNotExist"}, True),
    ({"key": "tier", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "tier", "operator": "Lt", "values": ["5"]}, False),
    ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # label is not an integer
    ({"key": "rack", "operator": "Lt", "values": ["9"]}, False),
])
def test_label_requirements(requirement: dict[str, object], expected: bool) -> None:
    assert compile_node_selector(selector(requirement)).matches(NODE) is expected


@pytest.mark.parametrize(("requirement", "expected"), [
    ({"key": "metadata.name", "operator": "In", "values": ["node-a"]}, True),
    ({"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}, False),
    ({"key": "metadata.uid", "operator": "NotIn", "values": ["x"]}, True),
])
def test_field_requirements(requirement: dict[str, object], expected: bool) -> None:
    assert compile_node_selector(selector(requirement, fields=True)).matches(NODE) is expected


@pytest.mark.parametrize("requirement", [
    {"key": "zone", "operator": "Near", "values": ["z1"]},
    {"key": "zone", "operator": "In", "values": []},
    {"key": "zone", "operator": "Exists", "values": ["z1"]},
    {"key": "tier", "operator": "Gt", "values": ["five"]},
    {"key": "bad key!", "operator": "Exists"},
    {"key": "zone", "operator": "In", "values": ["not a label value"]},
])
def test_invalid_label_requirements_are_errors(requirement: dict[str, object]) -> None:
    with pytest.raises(AllocationError, match="failed to parse node selector"):
        compile_node_selector(selector(requirement))


def test_invalid_field_requirements_are_errors() -> None:
    with pytest.raises(AllocationError, match="must have one element"):
        compile_node_selector(selector({"key": "metadata.name", "operator": "In",
                                        "values": ["a", "b"]}, fields=True))


def test_empty_terms_select_nothing() -> None:
    assert not compile_node_selector(NodeSelector.from_api(
        {"nodeSelectorTerms": [{}]})).matches(NODE)


def test_node_selection_precedence() -> None:
    never = selector({"key": "zone", "operator": "In", "values": ["z9"]})
    assert NodeSelection("node-a", True, never).matches(NODE)
    assert not NodeSelection("node-b", True, None).matches(NODE)
    assert NodeSelection(None, True, never).matches(NODE)
    assert not NodeSelection(None, None, never).matches(NODE)
    assert not NodeSelection("", None, None).matches(NODE)


def test_broken_selector_fails_only_when_evaluated() -> None:
    selection = NodeSelection("node-a", None, selector({"key": "zone", "operator": "Near"}))
    assert selection.matches(NODE)
    with pytest.raises(AllocationError):
        NodeSelection(None, None, selection.node_selector).matches(NODE)


# --- consumable capacity ----------------------------------------------------------------

def capacity(value: str, **policy: object) -> DeviceCapacity:
    return DeviceCapacity.from_api({"value": value, **({"requestPolicy": policy} if policy
                                                        else {})})


RANGE = capacity("40Gi", default="4Gi", validRange={"min": "1Gi", "max": "40Gi", "step": "4Gi"})
VALUES = capacity("40Gi", default="10Gi", validValues=["5Gi", "10Gi", "20Gi"])
MILLI = capacity("4", default="500m", validRange={"min": "500m", "max": "4", "step": "250m"})


@pytest.mark.parametrize(("requested", "cap", "fractional", "expected"), [
    (None, capacity("80Gi"), False, "80Gi"),          # nothing asked: the whole capacity
    (None, RANGE, False, "4Gi"),                      # nothing asked: the default
    ("7Gi", capacity("80Gi"), False, "7Gi"),          # no policy: as asked
    ("512Mi", RANGE, False, "1Gi"),                   # below min: min
    ("6Gi", RANGE, False, "9Gi"),                     # min + 2 steps of 4Gi
    ("5Gi", RANGE, False, "5Gi"),                     # on the grid
    ("6Gi", VALUES, False, "10Gi"),                   # next listed value
    ("21Gi", VALUES, False, "21Gi"),                  # above all: unchanged (then violates)
    ("600m", MILLI, True, "750m"),                    # fractional: 500m + 1 step of 250m
    ("600m", MILLI, False, "1"),                      # integer path: ceil(0.6) -> 1, step 1
])
def test_consumed_amount(requested: str | None, cap: DeviceCapacity, fractional: bool,
                         expected: str) -> None:
    amount = consumed_amount(Quantity(requested) if requested else None, cap, fractional)
    assert amount == Quantity(expected)


@pytest.mark.parametrize(("requested", "fractional"), [("10E", False), ("1000001u", True)])
def test_unrepresentable_requests_are_errors(requested: str, fractional: bool) -> None:
    cap = RANGE if not fractional else MILLI
    with pytest.raises(CapacityError):
        consumed_amount(Quantity(requested), cap, fractional)


def test_policy_violations() -> None:
    assert RANGE.request_policy is not None
    assert VALUES.request_policy is not None
    assert violates_policy(Quantity("41Gi"), RANGE.request_policy, False)
    assert violates_policy(Quantity("6Gi"), RANGE.request_policy, False)
    assert not violates_policy(Quantity("9Gi"), RANGE.request_policy, False)
    assert violates_policy(Quantity("21Gi"), VALUES.request_policy, False)
    assert not violates_policy(Quantity("20Gi"), VALUES.request_policy, False)
    assert not violates_policy(Quantity("7"), CapacityRequestPolicy(default=Quantity("7")), False)


def test_static_consumption_and_fits() -> None:
    device = {"memory": RANGE, "cores": capacity("8")}
    consumption = static_consumption({"memory": Quantity("6Gi")}, device, False)
    assert consumption is not None
    assert [(name, str(q)) for name, q, _, _ in consumption] == [("memory", "9Gi"),
                                                                 ("cores", "8")]
    assert static_consumption({"bandwidth": Quantity("1")}, device, False) is None
    assert static_consumption({"memory": Quantity("41Gi")}, device, False) is None
    assert fits(consumption, {"memory": 31 * 2**30}, None)
    assert not fits(consumption, {"memory": 31 * 2**30}, {"memory": 1})
    assert not fits(consumption, {"cores": 1}, None)


def test_negative_capacity_is_an_error() -> None:
    with pytest.raises(CapacityError, match="negative"):
        static_consumption(None, {"memory": capacity("-1")}, False)


# --- constraints, taints ------------------------------------------------------------------

def key(**value: object) -> object:
    return attribute_key(DeviceAttribute.from_api(value))


def test_attribute_keys_compare_type_and_value() -> None:
    assert key(string="1") != key(int=1)
    assert key(version="1.0.0") == ("version", "1.0.0")
    assert key(strings=["a"]) is None


def test_match_attribute() -> None:
    match = MatchAttribute("d/a", None)
    assert match.add(key(int=1), "r", "d0")
    assert not match.add(key(int=2), "r", "d1")
    assert not match.add(key(string="1"), "r", "d1")
    assert match.add(key(int=1), "r", "d1")
    match.remove("r")
    match.remove("r")
    assert match.add(key(int=2), "r", "d2")  # empty again: any value starts a new set


def test_distinct_attribute_compares_with_all_devices() -> None:
    distinct = distinct_attribute(KubeVersion(1, 37), "d/a", ["r"])
    assert distinct.add(key(int=0), "r", "d0")
    assert distinct.add(key(int=1), "r", "d1")
    assert not distinct.add(key(int=0), "r", "d2")  # one value per request accepted it
    distinct.remove("r")  # takes back the latest successful add: int=1
    assert not distinct.add(key(int=0), "r", "d2")
    assert distinct.add(key(int=1), "r", "d2")
    assert distinct.applies_to("r", None)
    assert distinct.applies_to("r", "sub")
    assert not distinct.applies_to("q", None)


def test_distinct_attribute_of_1_35_and_1_36_keeps_one_value_per_request() -> None:
    """Up to 1.36 the latest device of a request overwrites its value, and taking it back
    forgets the request's value (DISTINCT_ATTRIBUTE_EVERY_DEVICE)."""
    for minor in (35, 36):
        distinct = distinct_attribute(KubeVersion(1, minor), "d/a", None)
        assert distinct.add(key(int=0), "r", "d0")
        assert not distinct.add(key(int=0), "q", "d1")  # q differs from r's value
        assert distinct.add(key(int=1), "r", "d1")  # r's value is now 1
        assert distinct.add(key(int=0), "q", "d2")  # 0 was forgotten
        distinct.remove("q")
        distinct.remove("r")  # r's value forgotten, d0 still in
        assert distinct.add(key(int=0), "q", "d3")
        assert distinct.add(key(strings=["x"]), "r", "d4") is False  # no value: a duplicate


def test_distinct_attribute_of_1_34_compares_pointers() -> None:
    """1.34 compares Go pointers: only the same device repeats a value
    (DISTINCT_ATTRIBUTE_VALUES_COMPARED)."""
    distinct = distinct_attribute(KubeVersion(1, 34), "d/a", None)
    assert distinct.add(key(int=0), "r", "d0")
    assert distinct.add(key(int=0), "q", "d1")
    assert not distinct.add(key(int=0), "p", "d0")
    assert not distinct.add(MISSING, "p", "d2")


@pytest.mark.parametrize(("toleration", "expected"), [
    ({"key": "k", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "k", "value": "v"}, True),
    ({"key": "k", "operator": "Equal", "value": "w"}, False),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "k", "operator": "Unknown"}, False),
])
def test_tolerations(toleration: dict[str, str], expected: bool) -> None:
    taint = DeviceTaint(key="k", value="v", effect="NoSchedule")
    assert tolerates(DeviceToleration.from_api(toleration), taint) is expected
    assert tolerated(taint, [DeviceToleration.from_api(toleration)]) is expected
    assert not tolerated(taint, None)


# --- features and allocated state ---------------------------------------------------------

def test_features_by_upstream_names() -> None:
    features = AllocatorFeatures.from_gate_names({"DeviceTaints": False,
                                                  "ListTypeAttributes": False})
    assert not features.device_taints
    assert features.consumable_capacity
    with pytest.raises(UnsupportedFeaturesError):
        AllocatorFeatures.from_gate_names({"ListTypeAttributes": True})
    stable = AllocatorFeatures.from_gate_names({"ConsumableCapacity": False,
                                                "DeviceBindingAndStatus": False})
    assert stable.runs_stable
    assert not features.runs_stable


def test_features_of_each_minor() -> None:
    """Each minor's default gates (as its reference allocator's ``features`` prints them);
    1.34 and 1.35 run the stable variant with them, 1.34 (before the split) counted out;
    1.38 (v1.38.0-beta.0) has FractionalCapacityRange on."""
    minors = ("1.34", "1.35", "1.36", "1.38")
    new = {**OLD_DEFAULTS, "ConsumableCapacity": True, "DeviceBindingAndStatus": True,
           "DeviceTaints": True, "PartitionableDevices": True}
    assert {str(v): (f.gate_names(), f.runs_stable) for v, f in
            ((v, features_for(v)) for v in map(KubeVersion.parse, minors))} == {
        "1.34": (OLD_DEFAULTS, False), "1.35": (OLD_DEFAULTS, True), "1.36": (new, False),
        "1.38": ({**new, "DeviceTaintRules": True, "FractionalCapacityRange": True}, False)}
    with pytest.raises(UnknownKubeVersionError, match=r"1\.34 to 1\.38"):
        KubeVersion.parse("v1.33.5")
    with pytest.raises(UnknownKubeVersionError, match=r"1\.39"):
        KubeVersion.parse("v1.39.0-alpha.1")
    assert (KubeVersion.parse("v1.36.3"), KubeVersion.parse("1.37"),
            KubeVersion.parse("v1.38.0-beta.0")) == \
        (KubeVersion(1, 36), DEFAULT_VERSION, KubeVersion(1, 38))


def _gpu_scenario(**extra: object) -> dict[str, object]:
    """One node with one GPU in one slice, a claim for it; ``extra`` on top."""
    return {"name": "s", "node": {"name": "n"},
            "slices": [{"metadata": {"name": "n"}, "spec": {
                "driver": "gpu.example.com", "nodeName": "n", "devices": [{"name": "gpu-0"}],
                "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1}}}],
            "classes": [{"metadata": {"name": "gpu"}, "spec": {}}],
            "claims": [{"metadata": {"name": "c", "namespace": "default", "uid": "u"},
                        "spec": {"devices": {"requests": [
                            {"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}],
            **extra}


def test_all_over_an_unusable_pool_fails_on_the_node_from_1_38() -> None:
    """ALL_UNUSABLE_POOL_FAILS_ON_NODE (kubernetes#141898): an All request over an incomplete
    pool is an error up to 1.37 and does not fit on the node from 1.38, in the same words."""
    scenario = _gpu_scenario()
    scenario["slices"][0]["spec"]["pool"]["resourceSliceCount"] = 2  # type: ignore[index]
    scenario["claims"][0]["spec"]["devices"]["requests"][0]["exactly"][  # type: ignore[index]
        "allocationMode"] = "All"
    message = ("claim default/c, request r: asks for all devices, but resource pool "
               "gpu.example.com/n is currently being updated")
    assert [run_scenario({**scenario, "kubeVersion": v}) for v in ("1.37", "1.38")] == [
        {"name": "s", "outcome": "error", "message": message},
        {"name": "s", "outcome": "unschedulable", "message": message}]


def test_a_shared_device_is_not_taken_exclusively_from_1_38() -> None:
    """SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY (kubernetes#140798): the GPU's slice no longer
    allows multiple allocations, a share of it is allocated; 1.37 takes it again, 1.38 does
    not; with consumable capacity off the share is an exclusive allocation on both."""
    share = {"request": "r", "driver": "gpu.example.com", "pool": "n", "device": "gpu-0",
             "shareID": "0b6a5c3e-5d1e-4c8a-9f1e-2a4b6c8d0e1f"}
    scenario = _gpu_scenario(allocatedClaims=[{
        "metadata": {"name": "a", "namespace": "default", "uid": "a"},
        "status": {"allocation": {"devices": {"results": [share]}}}}])
    outcomes = {(v, str(on)): run_scenario({**scenario, "kubeVersion": v,
                                            "features": {"ConsumableCapacity": on}})["outcome"]
                for v in ("1.37", "1.38") for on in (True, False)}
    assert outcomes == {("1.37", "True"): "allocated", ("1.37", "False"): "unschedulable",
                        ("1.38", "True"): "unschedulable", ("1.38", "False"): "unschedulable"}


OLD_DEFAULTS = {"AdminAccess": True, "ConsumableCapacity": False, "DeviceBindingAndStatus": False,
                "DeviceTaintRules": False, "DeviceTaints": False, "PartitionableDevices": False,
                "PrioritizedList": True}


def test_features_of_a_named_variant() -> None:
    """Upstream's own table runs the incubating variant with features that would make
    ``NewAllocator`` pick stable; a scenario naming the variant is accepted, another is not."""
    all_off = {"ConsumableCapacity": False, "DeviceBindingAndStatus": False}
    features = AllocatorFeatures.from_gate_names(all_off, allocator="incubating")
    assert (features.consumable_capacity, features.device_binding_and_status,
            features.fractional_capacity_range) == (False, False, False)
    with pytest.raises(UnsupportedFeaturesError, match="'experimental' allocator"):
        AllocatorFeatures.from_gate_names({}, allocator="experimental")


def test_derived_attributes_are_an_error_with_upstreams_words() -> None:
    """``validateDeviceRequest`` (incubating): a request with derivedAttributes is an error,
    worded as upstream's, naming the claim and the (sub)request."""
    scenario = edge_case("derived-attributes-subrequest")
    assert run_scenario(scenario) == {
        "name": "derived-attributes-subrequest", "outcome": "error",
        "message": "claim default/c, request small: cannot handle request with derived "
                   "attributes, the feature is disabled"}


def test_a_slice_with_compatibility_groups_leaves_its_pool_incomplete() -> None:
    """``GatherPools`` (incubating) ignores the slice; the pool is incomplete, its other slice
    alone counted, none of its devices is a candidate, and the diagnosis says why."""
    scenario = edge_case("compatibility-groups-off-pool-incomplete")
    snapshot, _ = load_snapshot(scenario)
    pools = snapshot.node_pools(node_info(scenario["node"]))
    assert [(str(p), p.incomplete, p.published_slices, p.slice_count, p.ignored_slices)
            for p in pools.pools] == [("gpu.example.com/mig", True, 2, 2, ["parts"])]
    assert pools.devices == []
    assert pools.pools[0].incomplete_detail == (
        "2 of 2 slices published, 1 of them ignored because a device declares compatibility "
        "groups (the DRADeviceCompatibilityGroups feature is off): parts")


def allocated_claim(*results: dict[str, object]) -> ResourceClaim:
    return ResourceClaim.from_api({"metadata": {"name": "a"}, "status": {"allocation": {
        "devices": {"results": list(results)}}}})


def test_allocated_state_from_claims() -> None:
    claim = allocated_claim(
        {"request": "r", "driver": "d", "pool": "p", "device": "x"},
        {"request": "r", "driver": "d", "pool": "p", "device": "admin", "adminAccess": True},
        {"request": "r", "driver": "d", "pool": "p", "device": "s", "shareID": "1",
         "consumedCapacity": {"memory": "1Gi"}},
        {"request": "r", "driver": "d", "pool": "p", "device": "s", "shareID": "2",
         "consumedCapacity": {"memory": "2Gi"}})
    state = AllocatedState.from_claims([claim, ResourceClaim()])
    assert state.devices == {("d", "p", "x")}
    assert state.shared_devices == {("d", "p", "s")}
    assert state.consumed_capacity == {("d", "p", "s"): {"memory": 3 * 2**30}}
    assert state.in_pool(("d", "p")) == {"x", "s"}
    legacy = AllocatedState.from_claims([claim], consumable_capacity=False)
    assert legacy.devices == {("d", "p", "x"), ("d", "p", "s")}
    assert legacy.consumed_capacity == {}


@pytest.mark.parametrize(("text", "expected"), [
    ("5Gi", 5 * 2**30), ("1500m", 2), ("-1500m", -2),
    ("10E", 0),  # int64Amount: AsScaledInt64 overflows to 0
    ("10Ei", 10 * 2**60 - 2**64),  # inf.Dec: the low 64 bits
    ("9223372036854775808", -(2**63)),  # 19 digits: inf.Dec
])
def test_go_value(text: str, expected: int) -> None:
    """Go's Quantity.Value(), overflow included (the arithmetic of 1.36 and older)."""
    assert go_value(Quantity(text)) == expected


@pytest.mark.parametrize("constraint", ["matchAttribute", "distinctAttribute"])
def test_a_list_attribute_under_a_constraint_is_an_error_from_1_38(constraint: str) -> None:
    """VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR: two GPUs with a list attribute, a claim for
    one or two under a constraint on it. 1.37 takes one (and cannot take two); 1.38 stops at
    the first device with upstream's error, the search's shortcut for two devices too."""
    scenario = _gpu_scenario()
    spec = scenario["slices"][0]["spec"]  # type: ignore[index]
    spec["devices"] = [{"name": f"gpu-{i}", "attributes": {"models": {"strings": ["a"]}}}
                       for i in range(2)]
    devices = scenario["claims"][0]["spec"]["devices"]  # type: ignore[index]
    devices["constraints"] = [{constraint: "gpu.example.com/models"}]
    outcomes = {}
    for count in (1, 2):
        devices["requests"][0]["exactly"]["count"] = count
        outcomes[count] = [run_scenario({**scenario, "kubeVersion": v}) for v in ("1.37", "1.38")]
    message = ("claim default/c, request r: device gpu.example.com/n/gpu-0: unsupported "
               "attribute value for gpu.example.com/models")
    assert [[o["outcome"] for o in pair] for pair in outcomes.values()] == [
        ["allocated", "error"], ["unschedulable", "error"]]
    assert {pair[1]["message"] for pair in outcomes.values()} == {message}
