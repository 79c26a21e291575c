"""When kube-scheduler's own search would run past its 10 s filter timeout (kubernetes#131730),
explain says so (verdict ``Timeout``, ``schedulerSearch`` per node), shows the allocation that
does exist and the rewrites that make the scheduler find it; simulate and explain pod warn."""

from __future__ import annotations

from typing import Any

from kubedra.api.resource import ResourceClaim
from kubedra.controller.explain_state import ExplainState, Inputs
from kubedra.controller.explanations import explain_messages
from kubedra.explain import ClusterSnapshot, explain_claim
from kubedra.explain.pods import explain_pod
from kubedra.explain.render import render_explanation, render_pod_explanation
from kubedra.explain.simulate import simulate_claim
from kubedra.explain.snapshot import PodPlacement
from tests.support.explain_builders import node
from tests.support.scenario_builders import CLASSES, search_explosion

POD = PodPlacement("default", "p", claims=("c",))
FILTER = 'running "DynamicResources" filter plugin: '
BOUNDS = {"finishesWithin": 200_000, "timesOutAfter": 30_000_000, "timeoutSeconds": 10}
WHY_25 = ("kube-scheduler's search takes 201,326,645 steps on node node-a, more than 30,000,000 "
          "(past its 10-second filter timeout even on a fast scheduler), so it gives up: with "
          "gpu00 (request r1) taken first, request r2 needs 24 more devices and only 23 are left "
          "for it, so upstream's search tries all 2^23 = 8,388,608 subsets of them before it "
          "changes an earlier choice, and again for every earlier choice (kubernetes#131730)")
REORDER = ("list the requests most constrained first (r2, r1): kube-scheduler's search then "
           "takes 29 steps")
EXCLUDE = ('give request r1 the selector !(device.attributes["gpu.example.com"].idx < 24), so '
           "that it leaves request r2's devices alone: kube-scheduler's search then takes 29 steps")


def cluster(devices: int, short_by: int = 1) -> tuple[ClusterSnapshot, ResourceClaim]:
    """The issue's node and claim with ``devices`` GPUs; ``r2`` asks for ``devices - short_by``
    of those with ``idx`` below that (``short_by=0``: for all of them, which cannot fit)."""
    scenario = search_explosion(devices)
    if short_by == 0:
        request = scenario["claims"][0]["spec"]["devices"]["requests"][1]["exactly"]
        request["count"] = devices
        request["selectors"] = [{"cel": {"expression":
                                         f'device.attributes["gpu.example.com"].idx < {devices}'}}]
    snapshot = ClusterSnapshot.from_api(scenario["slices"], CLASSES, [], scenario["claims"],
                                        [node("node-a")])
    return snapshot, ResourceClaim.from_api(scenario["claims"][0])


def gpus(*names: str, request: str = "r2") -> list[dict[str, Any]]:
    return [{"request": request, "driver": "gpu.example.com", "pool": "node-a", "device": name}
            for name in names]


def test_the_issue_case_times_out_with_the_allocation_and_the_rewrites() -> None:
    snapshot, claim = cluster(25)
    explanation = explain_claim(snapshot, claim, [POD])
    data = explanation.to_json()
    message = (f"kube-scheduler times out on node node-a and reports an error, not unschedulable: "
               f"{FILTER}node node-a: timed out trying to allocate devices; it retries with "
               "back-off and does not schedule the pod; an allocation exists (r1: gpu24; r2: "
               "gpu00, gpu01, gpu02, gpu03, gpu04, … (24 devices)), but its search takes "
               f"201,326,645 steps to reach it; {REORDER}")
    assert (data["verdict"], data["message"]) == ("Timeout", message)
    [candidate] = data["candidates"]
    assert (candidate["fits"], candidate["error"], candidate["devices"]) == (
        True, None, gpus("gpu24", request="r1") + gpus(*(f"gpu{i:02d}" for i in range(24))))
    assert candidate["schedulerSearch"] == {
        "outcome": "TimesOut", "steps": 201_326_645, "stepsExact": True, **BOUNDS,
        "reason": WHY_25, "suggestions": [REORDER, EXCLUDE]}
    listed = ", ".join(f"gpu{i:02d}" for i in range(24))
    assert render_explanation(explanation) == f"""\
ResourceClaim:  default/c
Pods:           default/p
Verdict:        Timeout
Message:        kube-scheduler times out on node node-a and reports an error, not unschedulable:
                running "DynamicResources" filter plugin: node node-a: timed out trying to allocate
                devices; it retries with back-off and does not schedule the pod; an allocation
                exists (r1: gpu24; r2: gpu00, gpu01, gpu02, gpu03, gpu04, … (24 devices)), but its
                search takes 201,326,645 steps to reach it; list the requests most constrained first
                (r2, r1): kube-scheduler's search then takes 29 steps
Nodes:          1 evaluated, 0 without ResourceSlices, 0 excluded by the pods' node selection (1 in
                total)

NODE    REQUEST  NEEDED  DEVICES  IN-CLASS  SELECTED  FREE  CAPACITY  COUNTERS  UNTAINTED  RESULT
node-a  r1       1       25       25        25        25    25        25        25         times out; fits: gpu24
node-a  r2       24      25       25        24        24    24        24        24         times out; fits: {listed}

Scheduler search:
node-a:
  kube-scheduler's search takes 201,326,645 steps on node node-a, more than 30,000,000 (past its
    10-second filter timeout even on a fast scheduler), so it gives up: with gpu00 (request r1)
    taken first, request r2 needs 24 more devices and only 23 are left for it, so upstream's search
    tries all 2^23 = 8,388,608 subsets of them before it changes an earlier choice, and again for
    every earlier choice (kubernetes#131730)
  To have kube-scheduler find the allocation:
    - list the requests most constrained first (r2, r1): kube-scheduler's search then takes 29 steps
    - give request r1 the selector !(device.attributes["gpu.example.com"].idx < 24), so that it
      leaves request r2's devices alone: kube-scheduler's search then takes 29 steps
"""  # noqa: E501


def test_simulate_warns_that_the_copy_it_counts_times_out_in_the_scheduler() -> None:
    snapshot, claim = cluster(25)
    simulation = simulate_claim(snapshot, claim)
    assert simulation.message() == (
        "1 copy fits in the cluster now (node-a: 1), but kube-scheduler's search times out on "
        "node node-a: it does not place the claim there (see Scheduler search)")
    copies = simulation.to_json()["copies"]
    assert (copies["count"], copies["schedulerTimesOut"], copies["schedulerMayTimeOut"]) == (
        1, ["node-a"], [])


def test_explain_pod_times_out_for_the_claims_together() -> None:
    snapshot, claim = cluster(25)
    explanation = explain_pod(snapshot, POD, [claim])
    node_message = (f"{WHY_25}; an allocation exists (default/c r1: gpu24; default/c r2: gpu00, "
                    "gpu01, gpu02, gpu03, gpu04, … (24 devices))")
    data = explanation.to_json()
    assert (data["verdict"], data["message"]) == (
        "Timeout", f"kube-scheduler times out on node node-a and reports an error: {FILTER}node "
        f"node-a: timed out trying to allocate devices; {node_message}")
    [outcome] = data["nodes"]
    assert (outcome["fits"], outcome["message"], outcome["schedulerSearch"]["outcome"],
            outcome["schedulerSearch"]["steps"], outcome["schedulerSearch"]["suggestions"]) == (
        True, node_message, "TimesOut", 201_326_645,
        ["rewrite the claim so that its requests do not compete for the same devices: list the "
         "most constrained request first, or give each request a selector that excludes the "
         "devices the others need"])
    assert render_pod_explanation(explanation).splitlines()[-2:] == [
        "NODE    FIT-ALONE  RESULT", "node-a  -          times out; fits"]


def test_a_claim_that_does_not_fit_times_out_instead_of_being_unschedulable() -> None:
    snapshot, claim = cluster(25, short_by=0)
    data = explain_claim(snapshot, claim).to_json()
    assert (data["verdict"], data["message"]) == (
        "Timeout", "kube-scheduler times out on node node-a and reports an error, not "
        f"unschedulable: {FILTER}node node-a: timed out trying to allocate devices; it retries "
        "with back-off and does not schedule the pod; its search takes 419,430,426 steps to find "
        "that the claim does not fit there: request r2: 25 devices fit on their own, but not "
        "together with the claim's other requests: claim default/c, request r2: cannot find 25 "
        "devices that fit together")
    [candidate] = data["candidates"]
    assert (candidate["fits"], candidate["schedulerSearch"]["outcome"],
            candidate["schedulerSearch"]["steps"], candidate["schedulerSearch"]["suggestions"]) == (
        False, "TimesOut", 419_430_426, [])
    assert simulate_claim(snapshot, claim).message() == "0 copies fit in the cluster now"


def test_between_the_bounds_the_claim_fits_with_a_warning() -> None:
    snapshot, claim = cluster(18)
    explanation = explain_claim(snapshot, claim, [POD])
    data = explanation.to_json()
    assert data["verdict"] == "Fits"
    assert data["message"].endswith(
        "; on its own the claim fits, so the pod waits for something else (its other claims, or "
        "a scheduler retry); kube-scheduler's search may time out on 1 node (node-a): see "
        "Scheduler search")
    assert data["candidates"][0]["schedulerSearch"] == {
        "outcome": "MayTimeOut", "steps": 1_114_151, "stepsExact": True, **BOUNDS,
        "reason": "kube-scheduler's search takes 1,114,151 steps on node node-a, more than "
                  "200,000 (within its 10-second filter timeout only on a fast, idle scheduler), "
                  "so it may give up: with gpu00 (request r1) taken first, request r2 needs 17 "
                  "more devices and only 16 are left for it, so upstream's search tries all 2^16 "
                  "= 65,536 subsets of them before it changes an earlier choice, and again for "
                  "every earlier choice (kubernetes#131730)",
        "suggestions": [
            "list the requests most constrained first (r2, r1): kube-scheduler's search then "
            "takes 22 steps",
            'give request r1 the selector !(device.attributes["gpu.example.com"].idx < 17), so '
            "that it leaves request r2's devices alone: kube-scheduler's search then takes 22 "
            "steps"]}
    assert simulate_claim(snapshot, claim).message() == (
        "1 copy fits in the cluster now (node-a: 1), but kube-scheduler's search may time out on "
        "node node-a (see Scheduler search)")


def test_a_small_search_finishes_without_a_warning() -> None:
    snapshot, claim = cluster(12)
    data = explain_claim(snapshot, claim, [POD]).to_json()
    assert data["verdict"] == "Fits"
    assert "time out" not in data["message"]
    assert data["candidates"][0]["schedulerSearch"] == {
        "outcome": "Finishes", "steps": 11_291, "stepsExact": True, **BOUNDS, "reason": "",
        "suggestions": []}


def test_claims_that_fit_alone_but_time_out_together_get_the_pods_explanation() -> None:
    """The issue's two requests as two claims of one pod: each fits alone in a few steps, but
    the scheduler searches them together, and the operator's Event on each says so."""
    scenario = search_explosion(25, two_claims=True)
    claims = scenario["claims"]
    pod = PodPlacement("default", "p", claims=("one", "many"))
    inputs = Inputs(slices=scenario["slices"], classes=CLASSES, taint_rules=[], allocated=[],
                    nodes=[node("node-a")], inventory_version=1, claims_version=1)
    snapshot = ClusterSnapshot.from_api(scenario["slices"], CLASSES, [], claims,
                                        [node("node-a")])
    alone = [explain_claim(snapshot, ResourceClaim.from_api(c), [pod]) for c in claims]
    assert [(e.verdict, e.candidates[0].search and e.candidates[0].search.steps)
            for e in alone] == [("Fits", 4), ("Fits", 27)]
    together = explain_pod(snapshot, pod, [ResourceClaim.from_api(c) for c in claims])
    why = ("kube-scheduler's search takes 201,326,670 steps on node node-a, more than "
           "30,000,000 (past its 10-second filter timeout even on a fast scheduler), so it gives "
           "up: with gpu00 (claim default/one, request r1) taken first, request r2 needs 24 "
           "more devices and only 23 are left for it, so upstream's search tries all 2^23 = "
           "8,388,608 subsets of them before it changes an earlier choice, and again for every "
           "earlier choice (kubernetes#131730)")
    assert (together.verdict, together.message) == (
        "Timeout", f"kube-scheduler times out on node node-a and reports an error: {FILTER}node "
        f"node-a: timed out trying to allocate devices; {why}; an allocation exists "
        "(default/one r1: gpu24; default/many r2: gpu00, gpu01, gpu02, gpu03, gpu04, … (24 "
        "devices))")
    assert explain_messages(ExplainState(), inputs, claims, pod) == [
        f"with the pod's other claims: {together.message}"] * 2
