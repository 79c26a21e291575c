"""Hypothesis strategies for allocation scenarios (see :mod:`kubedra.allocation.scenario`).

Scenarios are small (one node under test, a dozen or two devices) but mix every feature the
allocator handles: node-local, selector-based, all-nodes and per-device pools; old generations,
incomplete and invalid pools; attributes for selectors and constraints; capacity with request
policies and shared devices; shared counters; taints, tolerations and DeviceTaintRules; binding
conditions; admin access; ``All`` and ``firstAvailable`` requests; constraints; configuration;
devices already allocated; and feature gates switched off.

``PYTHONPATH=operator python -m tests.support.scenario_strategies`` regenerates the stored corpus
``tests/allocation_corpus/generated.jsonl`` (fixed seed, so the same hypothesis version yields
the same file; it needs the reference allocator, see :func:`generate_corpus`) and the upstream
time-outs ``tests/allocation_corpus/timeouts.jsonl``. Which scenarios upstream finishes within
its 1 s and 10 s cuts depends on the machine's speed and load, so a regeneration on another
machine can shift both files.
"""

from __future__ import annotations

import json
import pathlib
import random
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from kubedra.allocation import FILTER_TIMEOUT_SECONDS
from tests.support.reference_allocator import run_reference

NODE = {"name": "node-a", "labels": {"topology.example.com/zone": "z1",
                                     "example.com/rack": "r1", "example.com/tier": "5"}}
GPU, NIC = "gpu.example.com", "nic.example.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"

NODE_SELECTORS = [
    {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.example.com/zone", "operator": "In", "values": ["z1", "z2"]}]}]},
    {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.example.com/zone", "operator": "NotIn", "values": ["z1"]}]}]},
    {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/tier", "operator": "Gt", "values": ["3"]},
        {"key": "example.com/rack", "operator": "Exists"}]}]},
    {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]},
    {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/gpu", "operator": "DoesNotExist"}]}]},
]

CLASSES = {
    "gpu": [f'device.driver == "{GPU}"'],
    "nic": [f'device.driver == "{NIC}"'],
    "any": [],
    "big-gpu": [f'device.driver == "{GPU}"', f'device.attributes["{GPU}"].model == "big"'],
}

# Request selectors by class; each is safe for the devices its class lets through, except the
# last of each list, which fails at runtime on some devices (a CEL error must abort both).
REQUEST_SELECTORS = {
    "gpu": [f'device.attributes["{GPU}"].model == "big"',
            f'device.attributes["{GPU}"].index >= 1',
            f'has(device.attributes["{GPU}"].numa) && device.attributes["{GPU}"].numa == 1',
            f'"healthy" in device.attributes["{GPU}"] && device.attributes["{GPU}"].healthy',
            f'has(device.capacity["{GPU}"].memory) && '
            f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
            f'device.attributes["{GPU}"].?numa.orValue(0) == 1',
            f'has(device.attributes["{GPU}"].driverVersion) && '
            f'device.attributes["{GPU}"].driverVersion.isGreaterThan(semver("1.5.0"))',
            "device.allowMultipleAllocations",
            f'device.attributes["{GPU}"].numa == 0'],
    "nic": [f'device.attributes["{NIC}"].speed == "100G"',
            f'device.attributes["{NIC}"].speed != "100G"'],
    "any": [f'device.driver == "{GPU}" || device.driver == "{NIC}"',
            f'device.driver == "{NIC}"',
            f'device.attributes["{GPU}"].index == 0'],
    "big-gpu": [f'device.attributes["{GPU}"].index < 3'],
}

CONSTRAINT_ATTRIBUTES = [PCIE_ROOT, f"{GPU}/model", f"{GPU}/numa", f"{GPU}/index",
                         f"{NIC}/speed"]

FEATURE_OVERRIDES = [
    {"DeviceTaints": False}, {"DeviceTaintRules": False}, {"PartitionableDevices": False},
    {"AdminAccess": False}, {"PrioritizedList": False},
    {"ConsumableCapacity": False}, {"DeviceBindingAndStatus": False},
    {"FractionalCapacityRange": True},
]

T = TypeVar("T")

MEMORY = ["10Gi", "40Gi", "80Gi", "141Gi"]


def _one_in(rnd: random.Random, n: int) -> bool:
    """True with probability 1/n."""
    return rnd.random() * n < 1


def _uniform(rnd: random.Random, low: int, high: int) -> int:
    return rnd.randint(low, high)


def _choice(rnd: random.Random, options: Sequence[T]) -> T:
    return rnd.choice(options)


def _policy(rnd: random.Random, value: str) -> dict[str, Any] | None:
    kind = _choice(rnd, ["none", "range", "values"])
    if kind == "range":
        return {"default": "1Gi", "validRange": {"min": "1Gi", "step": _choice(rnd,
            ["1Gi", "4Gi", "512Mi"]), "max": value}}
    if kind == "values":
        return {"default": "10Gi", "validValues": ["5Gi", "10Gi", "20Gi"]}
    return None


def _taints(rnd: random.Random) -> list[dict[str, Any]]:
    taints = []
    for i in range(_uniform(rnd, 0, 2)):
        taint = {"key": f"example.com/{_choice(rnd, ['hot', 'broken'])}",
                 "effect": _choice(rnd, ["NoSchedule", "NoExecute", "None"])}
        if _one_in(rnd, 2):
            taint["value"] = _choice(rnd, ["yes", "no"])
        taint["timeAdded"] = f"2026-01-01T00:00:0{i}Z"
        taints.append(taint)
    return taints


def _device(rnd: random.Random, driver: str, name: str, index: int,
            counter_sets: list[str], per_device: bool) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name}
    attributes: dict[str, Any] = {}
    if driver == GPU:
        attributes["model"] = {"string": _choice(rnd, ["small", "big"])}
        attributes["index"] = {"int": index % 4}
        if _one_in(rnd, 2):
            attributes["numa"] = {"int": _uniform(rnd, 0, 1)}
        if _one_in(rnd, 4):
            attributes["healthy"] = {"bool": _one_in(rnd, 2)}
        if _one_in(rnd, 4):
            attributes[f"{GPU}/driverVersion"] = {"version": _choice(rnd,
                ["1.0.0", "2.1.0"])}
    else:
        attributes["speed"] = {"string": _choice(rnd, ["100G", "400G"])}
    if not _one_in(rnd, 5):
        attributes[PCIE_ROOT] = {"string": _choice(rnd, ["pci-0", "pci-1"])}
    device["attributes"] = attributes
    shared = _one_in(rnd, 6)
    if shared:
        device["allowMultipleAllocations"] = True
    if _one_in(rnd, 3) or shared:
        value = _choice(rnd, MEMORY)
        capacity: dict[str, Any] = {"value": value}
        policy = _policy(rnd, value) if shared else None
        if policy:
            capacity["requestPolicy"] = policy
        device["capacity"] = {"memory": capacity}
    if counter_sets and not _one_in(rnd, 4):
        counter_set = _choice(rnd, counter_sets)
        device["consumesCounters"] = [{"counterSet": counter_set, "counters": {
            "memory": {"value": _choice(rnd, ["10Gi", "20Gi", "40Gi"])},
            "slices": {"value": str(_uniform(rnd, 1, 4))}}}]
    if _one_in(rnd, 8):
        device["taints"] = _taints(rnd)
    if _one_in(rnd, 13):
        device["bindingConditions"] = ["example.com/ready"]
        device["bindingFailureConditions"] = ["example.com/failed"]
    if _one_in(rnd, 13):
        device["bindsToNode"] = True
    if per_device:
        where = _choice(rnd, ["node-a", "node-b", "all", "selector", "none"])
        if where.startswith("node-"):
            device["nodeName"] = where
        elif where == "all":
            device["allNodes"] = True
        elif where == "selector":
            device["nodeSelector"] = _choice(rnd, NODE_SELECTORS)
    return device


def _pool(rnd: random.Random, driver: str, pool: str, placement: str,
          size: int = 3) -> list[dict[str, Any]]:
    """The slices of one pool (possibly several generations, incomplete or invalid)."""
    generation = _uniform(rnd, 1, 2)
    num_slices = _uniform(rnd, 1, 2)
    counter_slice = placement != "per-device" and _one_in(rnd, 4)
    counter_sets = [f"{pool}-counters-{i}" for i in range(_choice(rnd, [1, 1, 2]))] \
        if counter_slice else []
    slice_count = num_slices + (1 if counter_slice else 0)
    if _one_in(rnd, 20):
        slice_count += 1  # incomplete: a slice is missing
    slices = []
    next_device = 0

    def placement_fields() -> dict[str, Any]:
        if placement == "node-a" or placement == "node-b":
            return {"nodeName": placement}
        if placement == "all":
            return {"allNodes": True}
        if placement == "selector":
            return {"nodeSelector": _choice(rnd, NODE_SELECTORS)}
        return {"perDeviceNodeSelection": True}

    for i in range(num_slices):
        devices = []
        for _ in range(_uniform(rnd, 1, size)):
            devices.append(_device(rnd, driver, f"dev-{next_device}", next_device, counter_sets,
                                        placement == "per-device"))
            next_device += 1
        if _one_in(rnd, 30) and devices:
            devices.append(dict(devices[0]))  # duplicate device name: invalid pool
        spec = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                           "resourceSliceCount": slice_count},
                **placement_fields(), "devices": devices}
        slices.append({"metadata": {"name": f"{pool}-g{generation}-{i}"}, "spec": spec})
    if counter_slice:
        fields = placement_fields()
        shared_counters = [{"name": name, "counters": {
            "memory": {"value": _choice(rnd, ["40Gi", "80Gi"])},
            "slices": {"value": str(_uniform(rnd, 2, 7))}}} for name in counter_sets]
        if _one_in(rnd, 20):
            shared_counters = shared_counters[:1] if len(shared_counters) > 1 else []
        if shared_counters:
            slices.append({"metadata": {"name": f"{pool}-g{generation}-counters"}, "spec": {
                "driver": driver, "pool": {"name": pool, "generation": generation,
                                           "resourceSliceCount": slice_count},
                **fields, "sharedCounters": shared_counters}})
    if generation == 2 and _one_in(rnd, 2):
        old = json.loads(json.dumps(slices[0]))
        old["metadata"]["name"] = f"{pool}-g1-0"
        old["spec"]["pool"]["generation"] = 1
        slices.insert(0, old)
    return slices


def _toleration(rnd: random.Random) -> dict[str, Any]:
    toleration: dict[str, Any] = {}
    if _one_in(rnd, 2):
        toleration["key"] = f"example.com/{_choice(rnd, ['hot', 'broken'])}"
    operator = _choice(rnd, ["Exists", "Equal", None])
    if operator:
        toleration["operator"] = operator
    if operator != "Exists" and _one_in(rnd, 2):
        toleration["value"] = _choice(rnd, ["yes", "no"])
    if _one_in(rnd, 2):
        toleration["effect"] = _choice(rnd, ["NoSchedule", "NoExecute"])
    return toleration


def _exact(rnd: random.Random, allow_admin: bool, consumable: bool,
           dense: bool) -> dict[str, Any]:
    device_class = _choice(rnd, ["gpu"] * 6 + ["any", "any", "big-gpu", "nic"])
    request: dict[str, Any] = {"deviceClassName": device_class}
    if _one_in(rnd, 4):
        selectors = REQUEST_SELECTORS[device_class]
        if not consumable:
            # kubedra.cel always declares device.allowMultipleAllocations; upstream only with
            # DRAConsumableCapacity (then this selector would not compile there).
            selectors = [e for e in selectors if "allowMultipleAllocations" not in e]
        index = _uniform(rnd, 0, len(selectors) - 1)
        if index == len(selectors) - 1 and not _one_in(rnd, 4):
            index = 0  # the failing selector, only now and then
        request["selectors"] = [{"cel": {"expression": selectors[index]}}]
    mode = _uniform(rnd, 0, 19)
    if mode == 0:
        request["allocationMode"] = "All"
    elif mode < 6:
        request["count"] = _uniform(rnd, 1, 4 if dense else 3)
    elif mode < 10:
        request["count"] = 1
    if allow_admin and _one_in(rnd, 15):
        request["adminAccess"] = True
    if _one_in(rnd, 4):
        request["tolerations"] = [_toleration(rnd) for _ in range(_uniform(rnd, 1, 2))]
    if _one_in(rnd, 6):
        request["capacity"] = {"requests": {"memory": _choice(rnd,
            ["1Gi", "5Gi", "6Gi", "15Gi", "40Gi", "100Gi"])}}
    return request


def _claim(rnd: random.Random, name: str, consumable: bool, dense: bool) -> dict[str, Any]:
    requests = []
    names = []
    for i in range(_choice(rnd, [1, 1, 1, 2, 2, 3])):
        request_name = f"req-{i}"
        if _one_in(rnd, 4):
            subs = []
            for j in range(_uniform(rnd, 2, 3)):
                sub = _exact(rnd, False, consumable, dense)
                subs.append({"name": f"sub-{j}", **sub})
                names.append(f"{request_name}/sub-{j}")
            requests.append({"name": request_name, "firstAvailable": subs})
        else:
            requests.append({"name": request_name, "exactly": _exact(rnd, True, consumable, dense)})
        names.append(request_name)
    devices: dict[str, Any] = {"requests": requests}
    constraints = []
    for _ in range(_choice(rnd, [0, 1, 1, 2] if dense else [0, 0, 0, 0, 0, 1, 1, 2])):
        scope = rnd.sample(names, _uniform(rnd, 0, min(2, len(names))))
        kind = _choice(rnd, ["matchAttribute", "matchAttribute", "distinctAttribute"])
        constraint: dict[str, Any] = {kind: _choice(rnd, CONSTRAINT_ATTRIBUTES)}
        if scope:
            constraint["requests"] = scope
        constraints.append(constraint)
    if constraints:
        devices["constraints"] = constraints
    if _one_in(rnd, 4):
        scope = rnd.sample(names, _uniform(rnd, 0, min(2, len(names))))
        config: dict[str, Any] = {"opaque": {"driver": GPU, "parameters": {"claim": name}}}
        if scope:
            config["requests"] = scope
        devices["config"] = [config]
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": devices}}


def _device_refs(slices: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(s["spec"]["driver"], s["spec"]["pool"]["name"], d)
            for s in slices for d in s["spec"].get("devices") or ()]


def _allocated_claims(rnd: random.Random, slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    refs = _device_refs(slices)
    if not refs:
        return []
    results = []
    picked = [_choice(rnd, refs) for _ in range(_uniform(rnd, 0, 5))]
    for k, (driver, pool, device) in enumerate(picked):
        result: dict[str, Any] = {"request": "r", "driver": driver, "pool": pool,
                                  "device": device["name"]}
        if _one_in(rnd, 6):
            result["adminAccess"] = True
        if device.get("allowMultipleAllocations") and _one_in(rnd, 2):
            result["shareID"] = f"00000000-0000-0000-0000-00000000000{k}"
            if _one_in(rnd, 2):
                result["consumedCapacity"] = {"memory": _choice(rnd, ["1Gi", "10Gi"])}
        results.append(result)
    return [{"metadata": {"name": "allocated", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                 "deviceClassName": "any", "allocationMode": "All"}}]}},
             "status": {"allocation": {"devices": {"results": results}}}}]


def scenario(rnd: random.Random) -> dict[str, Any]:
    """One allocation scenario on node ``node-a``, drawn from ``rnd``."""
    features = _choice(rnd, FEATURE_OVERRIDES) if _one_in(rnd, 7) else None
    consumable = (features or {}).get("ConsumableCapacity", True)
    # a quarter are dense: more devices, more devices per request, more constraints, more
    # claims, so that the search backtracks a lot
    dense = _one_in(rnd, 4)
    slices = _pool(rnd, GPU, "node-a", "node-a", size=10 if dense else 6)
    placements = [_choice(rnd, ["node-a", "node-b", "all", "selector", "per-device"])
                  for _ in range(_uniform(rnd, 0, 2))]
    for i, placement in enumerate(placements):
        driver = _choice(rnd, [GPU, NIC])
        slices.extend(_pool(rnd, driver, f"pool-{i}", placement))
    classes = []
    for name, expressions in CLASSES.items():
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
        if name == "gpu" and _one_in(rnd, 2):
            spec["config"] = [{"opaque": {"driver": GPU, "parameters": {"class": name}}}]
        classes.append({"metadata": {"name": name}, "spec": spec})
    claims = [_claim(rnd, f"claim-{i}", consumable, dense)
              for i in range(_choice(rnd, [1, 2, 3] if dense else [1, 1, 2]))]
    scenario: dict[str, Any] = {"node": NODE, "slices": slices, "classes": classes,
                                "claims": claims,
                                "allocatedClaims": _allocated_claims(rnd, slices)}
    if _one_in(rnd, 5):
        rules = []
        for i in range(_uniform(rnd, 1, 2)):
            selector: dict[str, Any] = {}
            refs = _device_refs(slices)
            if refs and _one_in(rnd, 2):
                driver, pool, device = _choice(rnd, refs)
                selector = {"driver": driver, "pool": pool}
                if _one_in(rnd, 2):
                    selector["device"] = device["name"]
            rules.append({"metadata": {"name": f"rule-{i}"}, "spec": {
                "deviceSelector": selector,
                "taint": {"key": "example.com/rule", "effect": _choice(rnd,
                    ["NoSchedule", "NoExecute", "None"])}}})
        scenario["taintRules"] = rules
    if features:
        scenario["features"] = features
    return scenario


def scenarios() -> st.SearchStrategy[dict[str, Any]]:
    """Allocation scenarios on node ``node-a``.

    Hypothesis only supplies the seed: its own integers and samples lean to their bounds (good
    for finding edge cases, bad for a corpus that should exercise every feature evenly), and
    drawing everything from one seeded :class:`random.Random` keeps scenarios diverse.
    """
    return st.randoms(use_true_random=True).map(scenario)


CORPUS = pathlib.Path(__file__).parents[1] / "allocation_corpus" / "generated.jsonl"
TIMEOUTS = pathlib.Path(__file__).parents[1] / "allocation_corpus" / "timeouts.jsonl"
UPSTREAM_TABLE = pathlib.Path(__file__).parents[1] / "allocation_corpus" / "upstream-table.jsonl"
CORPUS_SEED = 20260729
CORPUS_SIZE = 600


def upstream_table() -> list[dict[str, Any]]:
    """Upstream's own allocator test table, one scenario per case with upstream's outcome under
    ``upstream`` (recorded by ``hack/allocator-table/record.sh``)."""
    return [json.loads(line) for line in UPSTREAM_TABLE.read_text().splitlines()]


def generate_corpus(size: int = CORPUS_SIZE) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``size`` distinct scenarios drawn with a fixed seed, named ``generated-<n>``, and the
    time-outs: drawn scenarios on which upstream's search runs past the scheduler's filter
    timeout, named ``timeout-<n>``, each with ``upstream``: ``{"outcome": "timeout",
    "timeoutSeconds", "steps"}`` (upstream's steps when it was cut; the reference allocator
    ignores the key).

    Scenarios on which upstream's search runs for more than a second (it is exhaustive, and
    some failing searches take minutes: kubernetes#131730) are kept out of the corpus so that CI
    stays fast; those that also run past 10 s are the time-outs. This needs the reference
    allocator (``make binaries``).
    """
    found: dict[str, dict[str, Any]] = {}

    @seed(CORPUS_SEED)
    @settings(max_examples=size * 4, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def collect(scenario: dict[str, Any]) -> None:
        if len(found) < size * 2:
            found.setdefault(json.dumps(scenario, sort_keys=True), scenario)

    collect()
    candidates = list(found.values())
    outcomes = run_reference([{**s, "timeoutSeconds": 1} for s in candidates])
    kept = [s for s, o in zip(candidates, outcomes, strict=True) if o["outcome"] != "timeout"]
    assert len(kept) >= size, f"only {len(kept)} usable scenarios"
    slow = [s for s, o in zip(candidates, outcomes, strict=True) if o["outcome"] == "timeout"]
    limit = {"timeoutSeconds": FILTER_TIMEOUT_SECONDS}
    timeouts = [{"name": f"timeout-{i}", **s, "upstream": {**limit, "outcome": o["outcome"],
                                                          "steps": o["steps"]}}
                for i, (s, o) in enumerate(zip(slow, run_reference([{**s, **limit}
                                                                      for s in slow]),
                                               strict=True)) if o["outcome"] == "timeout"]
    return [{"name": f"generated-{i}", **s} for i, s in enumerate(kept[:size])], timeouts


def _write(path: pathlib.Path, scenarios: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(s, sort_keys=True, separators=(",", ":")) + "\n"
                            for s in scenarios))
    print(f"wrote {len(scenarios)} scenarios to {path}")


if __name__ == "__main__":
    corpus, timeouts = generate_corpus(int(sys.argv[1]) if len(sys.argv) > 1 else CORPUS_SIZE)
    _write(CORPUS, corpus)
    _write(TIMEOUTS, timeouts)
