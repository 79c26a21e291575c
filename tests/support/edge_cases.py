"""Hand-written allocation scenarios, one or more per rule of upstream's allocator.

Each case states what upstream decides: per claim the devices picked, in result order
(``pool/device``), or ``unschedulable``, ``invalid-pools`` (unschedulable because a pool is
invalid) or ``error`` (upstream aborts). ``test_allocation_edge_cases.py`` checks kubedra
against these expectations and ``test_allocation_differential.py`` checks upstream as well.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kubedra.allocation.scenario import INVALID_POOLS_MESSAGE
from tests.support.scenario_builders import (
    CLASSES,
    GPU,
    NIC,
    allocated,
    attrs,
    claim,
    device,
    device_class,
    exact,
    first_available,
    gpus,
    opaque,
    resource_slice,
    result,
    scenario,
    sub,
)

Expected = list[list[str]] | str


class EdgeCase(NamedTuple):
    """A scenario and upstream's decision on it."""

    scenario: dict[str, Any]
    expected: Expected


CASES: list[EdgeCase] = []


def picks(outcome: dict[str, Any]) -> Expected:
    """The decision in an outcome, in the form of :attr:`EdgeCase.expected`."""
    if outcome["outcome"] == "allocated":
        return [[f"{r['pool']}/{r['device']}" for r in a["devices"].get("results", [])]
                for a in outcome["allocations"]]
    if outcome.get("message") == INVALID_POOLS_MESSAGE:
        return "invalid-pools"
    return str(outcome["outcome"])


def case(expected: Expected, *args: Any, **kwargs: Any) -> None:
    CASES.append(EdgeCase(scenario(*args, **kwargs), expected))


def one(*requests: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    return [claim("c", *requests, **kwargs)]


GPU4 = [resource_slice("s", gpus(4))]
SHARED_MEMORY = {"value": "40Gi", "requestPolicy": {
    "default": "4Gi", "validRange": {"min": "1Gi", "max": "40Gi", "step": "4Gi"}}}

# --- pools: generations, completeness, validity, order ------------------------------------
case([["node-a/gpu-5"]], "pool-highest-generation",
     [resource_slice("old", [device("gpu-0")], generation=1),
      resource_slice("new", [device("gpu-5")], generation=2)], one(exact("r")))
case([["b/gpu-0"]], "pool-incomplete-skipped-for-exact-count",
     [resource_slice("a-0", gpus(1), pool="a", count=2), resource_slice("b-0", gpus(1), pool="b")],
     one(exact("r")))
case("error", "pool-incomplete-fails-all",
     [resource_slice("a-0", gpus(1), pool="a", count=2), resource_slice("b-0", gpus(1), pool="b")],
     one(exact("r", allocationMode="All")))
case("invalid-pools", "pool-invalid-duplicate-device",
     [resource_slice("a-0", gpus(1), pool="a", count=2),
      resource_slice("a-1", gpus(1), pool="a", count=2)], one(exact("r")))
case([["b/gpu-0"]], "pool-invalid-other-pool-used",
     [resource_slice("a-0", gpus(1), pool="a", count=2),
      resource_slice("a-1", gpus(1), pool="a", count=2), resource_slice("b-0", gpus(1), pool="b")],
     one(exact("r")))
case("unschedulable", "pool-obsolete-when-newer-generation-elsewhere",
     [resource_slice("p-0", gpus(1), pool="p", count=2),
      resource_slice("p-1", [device("x")], pool="p", generation=2, count=2, node="node-b")],
     one(exact("r")))
case([["p/gpu-0"]], "pool-complete-with-slices-for-other-nodes",
     [resource_slice("p-0", gpus(1, nodeName="node-a"), pool="p", count=2, node=None,
                     perDeviceNodeSelection=True),
      resource_slice("p-1", [device("x", nodeName="node-b")], pool="p", count=2, node=None,
                     perDeviceNodeSelection=True)],
     one(exact("r")))
case([["node-a/dev-a"]], "slices-in-name-order",
     [resource_slice("s-b", [device("dev-b")], count=2), resource_slice("s-a", [device("dev-a")],
                                                                        count=2)],
     one(exact("r")))
case([["a-pool/gpu-0", "b-pool/gpu-0"]], "pools-in-driver-and-name-order",
     [resource_slice("s2", gpus(1), pool="b-pool"), resource_slice("s1", gpus(1), pool="a-pool")],
     one(exact("r", count=2)))
case([["z/gpu-0"]], "pool-with-binding-conditions-last",
     [resource_slice("s1", [device("gpu-0", bindingConditions=["ready"])], pool="a"),
      resource_slice("s2", gpus(1), pool="z")], one(exact("r")))
case("unschedulable", "binding-conditions-need-feature",
     [resource_slice("s1", [device("gpu-0", bindingConditions=["ready"])])], one(exact("r")),
     features={"DeviceBindingAndStatus": False})

# --- node selection -----------------------------------------------------------------------
ZONE_Z1 = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "topology.example.com/zone", "operator": "In", "values": ["z1"]}]}]}
ZONE_NOT_Z1 = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "topology.example.com/zone", "operator": "NotIn", "values": ["z1"]}]}]}
case([["net/gpu-0"]], "node-selector-matches",
     [resource_slice("n", gpus(1), pool="net", node=None, nodeSelector=ZONE_Z1)], one(exact("r")))
case("unschedulable", "node-selector-does-not-match",
     [resource_slice("n", gpus(1), pool="net", node=None, nodeSelector=ZONE_NOT_Z1)],
     one(exact("r")))
case([["all/gpu-0"]], "all-nodes",
     [resource_slice("n", gpus(1), pool="all", node=None, allNodes=True)], one(exact("r")))
case("unschedulable", "other-node-slice-ignored",
     [resource_slice("n", gpus(1), pool="node-b", node="node-b")], one(exact("r")))
case("unschedulable", "slice-without-node-selection-ignored",
     [resource_slice("n", gpus(1), pool="x", node=None)], one(exact("r")))
case([["pd/c", "pd/d"]], "per-device-node-selection",
     [resource_slice("pd", [device("a", nodeName="node-b"), device("b"),
                            device("c", allNodes=True), device("d", nodeSelector=ZONE_Z1),
                            device("e", nodeSelector=ZONE_NOT_Z1)],
                     pool="pd", node=None, perDeviceNodeSelection=True)],
     one(exact("r", count=2)))
case("error", "node-selector-unparsable",
     [resource_slice("n", gpus(1), pool="net", node=None, nodeSelector={"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["z1"]}]}]})],
     one(exact("r")))

# --- counts, All, 32 results ------------------------------------------------------------------
case([["node-a/gpu-0", "node-a/gpu-1", "node-a/gpu-2"]], "exact-count", GPU4,
     one(exact("r", count=3)))
case("unschedulable", "exact-count-too-many", GPU4, one(exact("r", count=5)))
case([["node-a/gpu-0", "node-a/gpu-1", "node-a/gpu-2", "node-a/gpu-3"]], "all-devices", GPU4,
     one(exact("r", allocationMode="All")))
case("unschedulable", "all-devices-one-in-use", GPU4, one(exact("r", allocationMode="All")),
     allocated_claims=[allocated("a", result("gpu-2"))])
case("unschedulable", "all-devices-none-match", GPU4,
     one(exact("r", "nic", allocationMode="All")))
case([["node-a/gpu-0", "node-a/gpu-1", "node-a/gpu-2", "node-a/gpu-3"]],
     "all-devices-admin-access-ignores-use", GPU4,
     one(exact("r", allocationMode="All", adminAccess=True)),
     allocated_claims=[allocated("a", result("gpu-2"))])
case("error", "more-than-32-devices", [resource_slice("s", gpus(40))],
     one(exact("r", count=33)))
case("error", "more-than-32-devices-over-requests", [resource_slice("s", gpus(40))],
     one(exact("r1", count=20), exact("r2", count=13)))
case([[f"node-a/gpu-{i}" for i in range(21)]],
     "32-limit-falls-back-to-smaller-subrequest", [resource_slice("s", gpus(40))],
     one(first_available("r1", sub("big", count=20), sub("small", count=1)),
         exact("r2", count=20)))
case([["node-a/gpu-1"]], "allocated-device-skipped", [resource_slice("s", gpus(2))],
     one(exact("r")), allocated_claims=[allocated("a", result("gpu-0"))])
case([["node-a/gpu-0"]], "admin-access-result-not-in-use", [resource_slice("s", gpus(2))],
     one(exact("r")), allocated_claims=[allocated("a", result("gpu-0", adminAccess=True))])
case([["node-a/gpu-0"], ["node-a/gpu-1"]], "claims-do-not-share-devices",
     [resource_slice("s", gpus(2))], [claim("c1", exact("r")), claim("c2", exact("r"))])
case([["node-a/gpu-0", "node-a/gpu-1"]], "admin-access-not-twice-in-one-claim",
     [resource_slice("s", gpus(2))],
     one(exact("a", adminAccess=True), exact("b", adminAccess=True)))
case([["node-a/gpu-0"], ["node-a/gpu-0"]], "admin-access-shares-across-claims",
     [resource_slice("s", gpus(1))],
     [claim("c1", exact("a", adminAccess=True)), claim("c2", exact("a", adminAccess=True))])
case("error", "admin-access-needs-feature", GPU4, one(exact("r", adminAccess=True)),
     features={"AdminAccess": False})

# --- firstAvailable ----------------------------------------------------------------------
BIG_SMALL = [resource_slice("s", [device("big", attributes=attrs(model="big")),
                                  device("small", attributes=attrs(model="small"))])]
MODEL_BIG = f'device.attributes["{GPU}"].model == "big"'
MODEL_SMALL = f'device.attributes["{GPU}"].model == "small"'
case([["node-a/gpu-0"]], "first-available-second-choice", [resource_slice("s", gpus(1))],
     one(first_available("r", sub("two", count=2), sub("one"))))
case([["node-a/small"], ["node-a/big"]], "first-available-backtracks-across-claims", BIG_SMALL,
     [claim("c1", first_available("r", sub("big", "gpu", MODEL_BIG),
                                  sub("small", "gpu", MODEL_SMALL))),
      claim("c2", exact("r", "gpu", MODEL_BIG))])
case("error", "first-available-needs-feature", GPU4,
     one(first_available("r", sub("a"), sub("b"))), features={"PrioritizedList": False})

# --- constraints ------------------------------------------------------------------------
ROOTS = [resource_slice("s", [
    device("d0", attributes=attrs(pcieRoot="r0", index=0)),
    device("d1", attributes=attrs(pcieRoot="r0", index=0)),
    device("d2", attributes=attrs(pcieRoot="r1", index=1)),
    device("d3", attributes=attrs(pcieRoot="r1", index=2)),
    device("d4", attributes=attrs(pcieRoot="r1", index=2)),
    device("d5", attributes=attrs(index=3))])]
MATCH_ROOT = {"matchAttribute": "resource.kubernetes.io/pcieRoot"}
case([["node-a/d2", "node-a/d3", "node-a/d4"]], "match-attribute", ROOTS,
     one(exact("r", count=3), constraints=[MATCH_ROOT]))
case([["node-a/d0", "node-a/d1"]], "match-attribute-across-requests", ROOTS,
     one(exact("a"), exact("b"), constraints=[MATCH_ROOT]))
case([["node-a/d2", "node-a/d3"]], "match-attribute-only-listed-requests", ROOTS,
     one(exact("a", "gpu", f'device.attributes["{GPU}"].index >= 1'), exact("b"),
         constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot",
                       "requests": ["a", "b"]}]))
case("unschedulable", "match-attribute-missing-attribute", ROOTS,
     one(exact("r", "gpu", f'device.attributes["{GPU}"].index == 3'),
         constraints=[MATCH_ROOT]))
case([["node-a/d0", "node-a/d1"]], "match-attribute-short-name-in-driver-domain", ROOTS,
     one(exact("r", count=2), constraints=[{"matchAttribute": f"{GPU}/index"}]))
case([["node-a/d0", "node-a/d2", "node-a/d3", "node-a/d5"]],
     "distinct-attribute-four-devices-upstream-bug-fixed", ROOTS,
     one(exact("r", count=4), constraints=[{"distinctAttribute": f"{GPU}/index"}]))
# Upstream code that kept one distinct value per request name (shared/reference/dra-api.md 3.3
# describes it) compared the third device here (index 0 again) only with the second (index 1)
# and allocated all three. v0.37.2 compares with every value: nothing fits. kubedra follows it.
case("unschedulable", "distinct-attribute-third-device-repeats-first", [resource_slice("s", [
    device("a", attributes=attrs(index=0)), device("b", attributes=attrs(index=1)),
    device("c", attributes=attrs(index=0))])],
     one(exact("r", count=3), constraints=[{"distinctAttribute": f"{GPU}/index"}]))
case([["node-a/d0"], ["node-a/d1"]], "constraints-are-per-claim", ROOTS,
     [claim("c1", exact("r"), constraints=[{"distinctAttribute": f"{GPU}/index"}]),
      claim("c2", exact("r"), constraints=[{"distinctAttribute": f"{GPU}/index"}])])
case([["node-a/d0", "node-a/d2"]], "distinct-attribute-with-subrequest-name", ROOTS,
     one(exact("a"), first_available("b", sub("x", count=1)),
         constraints=[{"distinctAttribute": f"{GPU}/index", "requests": ["a", "b/x"]}]))
case("error", "all-devices-break-constraint", ROOTS,
     one(exact("r", allocationMode="All"), constraints=[MATCH_ROOT]))
case([["node-a/gpu-1", "node-a/gpu-2"]], "match-attribute-version", [resource_slice("s", [
    device("gpu-0", attributes=attrs(index=0, driverVersion="1.0.0")),
    device("gpu-1", attributes=attrs(index=1, driverVersion="2.0.0")),
    device("gpu-2", attributes=attrs(index=2, driverVersion="2.0.0"))])],
     one(exact("a", "gpu", f'device.attributes["{GPU}"].index >= 1'), exact("b"),
         constraints=[{"matchAttribute": f"{GPU}/driverVersion"}]))

# --- taints -----------------------------------------------------------------------------
def tainted(effect: str, key: str = "example.com/hot", value: str | None = None) -> list[Any]:
    taint = {"key": key, "effect": effect, "timeAdded": "2026-01-01T00:00:00Z"}
    if value is not None:
        taint["value"] = value
    return [taint]


TAINTED = [resource_slice("s", [device("gpu-0", taints=tainted("NoSchedule")),
                                device("gpu-1", taints=tainted("NoExecute", value="v")),
                                device("gpu-2", taints=tainted("None"))])]
case([["node-a/gpu-2"]], "taints-block", TAINTED, one(exact("r")))
case([["node-a/gpu-0"]], "toleration-exists", TAINTED,
     one(exact("r", tolerations=[{"key": "example.com/hot", "operator": "Exists"}])))
case([["node-a/gpu-1"]], "toleration-equal-value-and-effect", TAINTED,
     one(exact("r", tolerations=[{"key": "example.com/hot", "value": "v",
                                  "effect": "NoExecute"}])))
case([["node-a/gpu-2"]], "toleration-wrong-value", TAINTED,
     one(exact("r", tolerations=[{"key": "example.com/hot", "operator": "Equal",
                                  "value": "w"}])))
case([["node-a/gpu-0"]], "taints-ignored-without-feature", TAINTED, one(exact("r")),
     features={"DeviceTaints": False})
RULE = {"metadata": {"name": "rule"}, "spec": {"deviceSelector": {"driver": GPU, "pool": "node-a",
                                                                   "device": "gpu-0"},
                                               "taint": {"key": "example.com/rule",
                                                         "effect": "NoSchedule"}}}
case([["node-a/gpu-1"]], "device-taint-rule", [resource_slice("s", gpus(2))], one(exact("r")),
     taint_rules=[RULE])
case([["node-a/gpu-0"]], "device-taint-rule-without-selector", [resource_slice("s", gpus(2))],
     one(exact("r")), taint_rules=[{"metadata": {"name": "rule"},
                                    "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}])
case([["node-a/gpu-0"]], "device-taint-rules-off", [resource_slice("s", gpus(2))],
     one(exact("r")), taint_rules=[RULE], features={"DeviceTaintRules": False})

# --- partitionable devices: shared counters --------------------------------------------------
def partition(name: str, memory: str, counter_set: str = "gpu-0") -> dict[str, Any]:
    return device(name, consumesCounters=[{"counterSet": counter_set,
                                           "counters": {"memory": {"value": memory}}}])


COUNTERS = resource_slice("counters", pool="mig", count=2, sharedCounters=[
    {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}])
MIG = [COUNTERS, resource_slice("parts", [partition("whole", "80Gi"), partition("p0", "40Gi"),
                                          partition("p1", "40Gi"), partition("p2", "40Gi")],
                                pool="mig", count=2)]
case([["mig/p0", "mig/p1"]], "counters-two-halves", MIG, one(exact("r", count=2)))
case([["mig/p1"]], "counters-used-by-allocated-device", MIG, one(exact("r")),
     allocated_claims=[allocated("a", result("p0", pool="mig"))])
case("unschedulable", "counters-overdrawn-by-allocated-devices", MIG, one(exact("r")),
     allocated_claims=[allocated("a", result("p0", pool="mig"), result("whole", pool="mig"))])
case([["mig/p0"]], "counters-of-devices-for-other-nodes", [
    resource_slice("counters", pool="mig", count=2, node=None, allNodes=True, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
    resource_slice("parts", [{**partition("far", "40Gi"), "nodeName": "node-b"},
                             {**partition("p0", "40Gi"), "nodeName": "node-a"},
                             {**partition("p1", "60Gi"), "nodeName": "node-a"}],
                   pool="mig", count=2, node=None, perDeviceNodeSelection=True)],
     one(exact("r", count=1)), allocated_claims=[allocated("a", result("far", pool="mig"))])
case("unschedulable", "counters-of-devices-for-other-nodes-exhausted", [
    resource_slice("counters", pool="mig", count=2, node=None, allNodes=True, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
    resource_slice("parts", [{**partition("far", "60Gi"), "nodeName": "node-b"},
                             {**partition("p0", "40Gi"), "nodeName": "node-a"}],
                   pool="mig", count=2, node=None, perDeviceNodeSelection=True)],
     one(exact("r", count=1)), allocated_claims=[allocated("a", result("far", pool="mig"))])
case("invalid-pools", "counters-unknown-counter-set", [
    COUNTERS, resource_slice("parts", [partition("p0", "40Gi", counter_set="gpu-9")], pool="mig",
                             count=2)], one(exact("r")))
case("invalid-pools", "counters-duplicate-counter-set", [
    resource_slice("counters-1", pool="mig", count=3, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
    resource_slice("counters-2", pool="mig", count=3, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
    resource_slice("parts", [partition("p0", "40Gi")], pool="mig", count=3)], one(exact("r")))
case("unschedulable", "counters-need-partitionable-devices", MIG, one(exact("r")),
     features={"PartitionableDevices": False})

# --- alpha fields whose gate is off: compatibility groups, derived attributes ------------------
# A slice in which one device declares compatibilityGroups is ignored (gate
# DRADeviceCompatibilityGroups off, sliceUsesCompatibilityGroups): its pool is incomplete, so
# the pool's other slices give nothing either, and allocationMode All fails.
def grouped(name: str, memory: str, *groups: str) -> dict[str, Any]:
    found = partition(name, memory)
    found["consumesCounters"][0]["compatibilityGroups"] = list(groups)
    return found


GROUPED_POOL = [COUNTERS, resource_slice("parts", [partition("p0", "40Gi"),
                                                   grouped("p1", "40Gi", "mig")],
                                         pool="mig", count=2)]
case("unschedulable", "compatibility-groups-off-pool-incomplete", GROUPED_POOL, one(exact("r")))
case("error", "compatibility-groups-off-all-mode", GROUPED_POOL,
     one(exact("r", allocationMode="All")))
case([["mig/p0"]], "compatibility-groups-empty-list-is-none", [
    COUNTERS, resource_slice("parts", [grouped("p0", "40Gi")], pool="mig", count=2)],
     one(exact("r")))
case([["node-a/gpu-0"]], "compatibility-groups-off-other-pool-allocatable", [
    *GROUPED_POOL, resource_slice("s", gpus(1))], one(exact("r", "any")))
case("unschedulable", "compatibility-groups-off-slice-for-other-node", [
    resource_slice("counters", pool="mig", count=3, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]),
    resource_slice("parts-a", [partition("p0", "40Gi")], pool="mig", count=3),
    resource_slice("parts-b", [grouped("p1", "40Gi", "mig")], pool="mig", count=3,
                   node="node-b")], one(exact("r")))
# A request (or subrequest) with derivedAttributes is an error (gate DRADerivedAttributes off;
# the incubating allocator cannot handle them: validateDeviceRequest, before the search, for
# every subrequest).
DERIVED = [{"name": "derived/numa", "expression": f'device.attributes["{GPU}"].index'}]
case("error", "derived-attributes-exactly", GPU4, one(exact("r", derivedAttributes=DERIVED)))
case("error", "derived-attributes-subrequest", GPU4,
     one(first_available("r", sub("big", count=8), sub("small", derivedAttributes=DERIVED))))
case("error", "derived-attributes-later-subrequest", GPU4,  # every subrequest is checked
     one(first_available("r", sub("one"), sub("other", derivedAttributes=DERIVED))))
case([["node-a/gpu-0"]], "derived-attributes-empty-list", GPU4,
     one(exact("r", derivedAttributes=[])))

# --- consumable capacity ----------------------------------------------------------------------
SHARED = [resource_slice("s", [
    device("shared-0", allowMultipleAllocations=True, capacity={"memory": SHARED_MEMORY}),
    device("shared-1", allowMultipleAllocations=True, capacity={"memory": SHARED_MEMORY})])]


def memory(amount: str) -> dict[str, Any]:
    return {"requests": {"memory": amount}}


case([["node-a/shared-0"], ["node-a/shared-0"]], "shared-device-two-claims", SHARED,
     [claim("c1", exact("r", capacity=memory("10Gi"))),
      claim("c2", exact("r", capacity=memory("20Gi")))])
case([["node-a/shared-0"], ["node-a/shared-1"]], "shared-device-capacity-exhausted", SHARED,
     [claim("c1", exact("r", capacity=memory("30Gi"))),
      claim("c2", exact("r", capacity=memory("20Gi")))])
case([["node-a/shared-1"]], "shared-device-allocated-capacity", SHARED,
     one(exact("r", capacity=memory("20Gi"))),
     allocated_claims=[allocated("a", result("shared-0", shareID="11111111-1111-1111-1111-"
                                                                 "111111111111",
                                             consumedCapacity={"memory": "24Gi"}))])
case("unschedulable", "shared-device-request-over-max", SHARED,
     one(exact("r", capacity=memory("41Gi"))))
case("unschedulable", "capacity-not-on-device", SHARED,
     one(exact("r", capacity={"requests": {"bandwidth": "1G"}})))
case("unschedulable", "capacity-of-exclusive-device", [resource_slice("s", [
    device("gpu-0", memory="143771Mi")])], one(exact("r", capacity=memory("141Gi"))))
case([["node-a/gpu-0"]], "capacity-of-exclusive-device-fits", [resource_slice("s", [
    device("gpu-0", memory="143771Mi")])], one(exact("r", capacity=memory("140Gi"))))
case("error", "capacity-needs-feature", SHARED, one(exact("r", capacity=memory("1Gi"))),
     features={"ConsumableCapacity": False})
case([["node-a/shared-0", "node-a/shared-1"]], "shared-device-once-per-request", SHARED,
     one(exact("r", count=2, capacity=memory("1Gi"))))
case([["node-a/v"]], "valid-values-round-up", [resource_slice("s", [
    device("v", allowMultipleAllocations=True, capacity={"memory": {
        "value": "40Gi", "requestPolicy": {"default": "10Gi",
                                           "validValues": ["5Gi", "10Gi", "20Gi"]}}})])],
     one(exact("r", capacity=memory("6Gi"))))
case("unschedulable", "valid-values-above-largest", [resource_slice("s", [
    device("v", allowMultipleAllocations=True, capacity={"memory": {
        "value": "40Gi", "requestPolicy": {"default": "10Gi",
                                           "validValues": ["5Gi", "10Gi", "20Gi"]}}})])],
     one(exact("r", capacity=memory("21Gi"))))
FRACTIONAL = [resource_slice("s", [device("f", allowMultipleAllocations=True, capacity={"cores": {
    "value": "4", "requestPolicy": {"default": "500m", "validRange": {
        "min": "500m", "max": "4", "step": "250m"}}}})])]
case([["node-a/f"], ["node-a/f"]], "fractional-range", FRACTIONAL,
     [claim("c1", exact("r", capacity={"requests": {"cores": "600m"}})),
      claim("c2", exact("r", capacity={"requests": {"cores": "3250m"}}))],
     features={"FractionalCapacityRange": True})
case([["node-a/f"]], "fractional-range-off-rounds-to-integers", FRACTIONAL,
     [claim("c1", exact("r", capacity={"requests": {"cores": "600m"}}))])
case("error", "fractional-range-request-not-milli", FRACTIONAL,
     [claim("c1", exact("r", capacity={"requests": {"cores": "1000001u"}}))],
     features={"FractionalCapacityRange": True})
case("error", "capacity-request-beyond-int64", SHARED,
     one(exact("r", capacity=memory("10E"))))
case([["node-a/shared-1"]], "shared-device-counters-charged-once", [
    resource_slice("counters", pool="node-a", count=2, sharedCounters=[
        {"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]),
    resource_slice("s", [
        device("shared-0", allowMultipleAllocations=True, capacity={"memory": SHARED_MEMORY},
               consumesCounters=[{"counterSet": "gpu-0", "counters": {
                   "memory": {"value": "30Gi"}}}]),
        device("shared-1", allowMultipleAllocations=True, capacity={"memory": SHARED_MEMORY},
               consumesCounters=[{"counterSet": "gpu-0", "counters": {
                   "memory": {"value": "30Gi"}}}])], count=2)],
     [claim("c1", exact("r", capacity=memory("1Gi")))],
     allocated_claims=[allocated("a", result("shared-1", shareID="11111111-1111-1111-1111-"
                                                                 "111111111111"))])

# --- results: config, node selector, CEL errors, classes ----------------------------------
CONFIGURED = [device_class("gpu", f'device.driver == "{GPU}"', config=[opaque(GPU, mode="a")]),
              device_class("gpu2", f'device.driver == "{GPU}"', config=[opaque(GPU, mode="b")]),
              *CLASSES[1:]]
case([["node-a/gpu-0", "node-a/gpu-1", "node-a/gpu-2"]], "config-from-classes-and-claim", GPU4,
     one(exact("a"), exact("b"), exact("c", "gpu2"),
         config=[opaque(GPU, claim=1), {**opaque(GPU, claim=2), "requests": ["a"]},
                 {**opaque(GPU, claim=3), "requests": ["x"]}]), classes=CONFIGURED)
case([["node-a/gpu-0"]], "config-for-chosen-subrequest", [resource_slice("s", gpus(1))],
     one(first_available("r", sub("two", count=2), sub("one", "gpu2")),
         config=[{**opaque(GPU, claim=1), "requests": ["r/two"]},
                 {**opaque(GPU, claim=2), "requests": ["r/one"]}]), classes=CONFIGURED)
case([["net/gpu-0", "net2/gpu-0"]], "node-selector-merged", [
    resource_slice("n", gpus(1), pool="net", node=None, nodeSelector=ZONE_Z1),
    resource_slice("n2", gpus(1), pool="net2", node=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [ZONE_Z1["nodeSelectorTerms"][0]["matchExpressions"][0],
                              {"key": "example.com/rack", "operator": "DoesNotExist"}]}]})],
     one(exact("r", count=2)))
case([["net/gpu-0"]], "binds-to-node", [resource_slice("n", [device("gpu-0", bindsToNode=True)],
                                                       pool="net", node=None, allNodes=True)],
     one(exact("r")))
case("error", "cel-runtime-error", [resource_slice("s", gpus(1))],
     one(exact("r", "gpu", f'device.attributes["{GPU}"].model == "big"')))
case("error", "cel-compile-error", [resource_slice("s", gpus(1))],
     one(exact("r", "gpu", "device.attributes[")))
case("unschedulable", "cel-broken-selector-never-reached", [resource_slice("s", gpus(1))],
     one(exact("r", "nic", "device.attributes[")))
case("error", "class-missing", GPU4, one(exact("r", "nope")))
case([["node-a/gpu-0"]], "class-without-selectors", GPU4, one(exact("r", "any")))
case([["nic-pool/nic-0"]], "class-selectors-and-request-selectors", [
    resource_slice("g", gpus(1)),
    resource_slice("n", [device("nic-0", attributes=attrs(speed="100G"))], pool="nic-pool",
                   driver=NIC)],
     one(exact("r", "any", f'device.driver == "{NIC}"')))

# --- search size --------------------------------------------------------------------------
# Claims c1 and c2 fit in 220 * 84 ways, c3 in none (no two devices share a model): upstream
# tries c3 after every one of them; kubedra sees that c3 does not fit even alone.
case("unschedulable", "later-claim-impossible-alone", [resource_slice("s", [
    device(f"gpu-{i}", attributes=attrs(model=f"m{i}")) for i in range(12)])],
     [claim("c1", exact("r", count=3)), claim("c2", exact("r", count=3)),
      claim("c3", exact("r", count=2), constraints=[{"matchAttribute": f"{GPU}/model"}])])
