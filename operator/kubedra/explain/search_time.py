"""Whether kube-scheduler's own device search ends on a node, and how to rewrite a claim whose
search does not.

kubedra's allocator finds the same first allocation as upstream's but cuts hopeless branches;
upstream's search is exhaustive and kube-scheduler gives it 10 s per node
(``DRASchedulerFilterTimeout``). When it runs out, the scheduler reports ``node <name>: timed
out trying to allocate devices`` as an error for the pod (``dynamicresources.go``, ``Filter``:
"Timeouts are potentially transient. Return Error so the pod retries via backoff"), which
aborts the scheduling attempt like any other error, and retries with back-off: the pod is
never scheduled although an allocation exists. :func:`judge_search` counts upstream's steps
(:func:`kubedra.allocation.scheduler_search_time`), says why the search explodes, and suggests
rewrites of the claim, each checked by counting the rewritten claim's steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.allocation import (
    FILTER_TIMEOUT_SECONDS,
    FINISHES_WITHIN,
    TIMES_OUT_AFTER,
    AllocationError,
    AllocationFailed,
    Allocator,
    DeadEnd,
    NodeInfo,
    SearchSteps,
    SearchTime,
    scheduler_search_time,
)
from kubedra.api.resource import DeviceSelector, ResourceClaim
from kubedra.explain.model import NodeOutcome, SchedulerSearch

TIMED_OUT = "timed out trying to allocate devices"
"""The end of kube-scheduler's error when its search runs out of time."""


def steps_text(steps: SearchSteps) -> str:
    """``201,326,645 steps`` or ``more than 200,000 steps`` when counting stopped."""
    return f"{steps.steps:,} steps" if steps.finished else f"more than {steps.steps:,} steps"


def _dead_end_text(dead_end: DeadEnd | None) -> str:
    if dead_end is None:
        return ("upstream's search tries every combination of devices for the requests before "
                "it gives up on a branch (kubernetes#131730)")
    subsets = f"all 2^{dead_end.usable} = {2 ** dead_end.usable:,} subsets of them"
    need = f"{dead_end.needed} more device{'s' if dead_end.needed != 1 else ''}"
    if not dead_end.taken:
        return (f"request {dead_end.request} needs {need} and only {dead_end.usable} can serve "
                f"it; upstream's search tries {subsets} before it gives up (kubernetes#131730)")
    taken = ", ".join(f"{device} (request {request})" if claim == dead_end.claim
                      else f"{device} (claim {claim}, request {request})"
                      for claim, request, device in dead_end.taken)
    return (f"with {taken} taken first, request {dead_end.request} needs {need} and only "
            f"{dead_end.usable} are left for it, so upstream's search tries {subsets} before it "
            "changes an earlier choice, and again for every earlier choice (kubernetes#131730)")


def _reason(node: str, time: SearchTime, steps: SearchSteps) -> str:
    timeout = f"{FILTER_TIMEOUT_SECONDS}-second filter timeout"
    if time is SearchTime.TIMES_OUT:
        return (f"kube-scheduler's search takes {steps_text(steps)} on node {node}, more than "
                f"{TIMES_OUT_AFTER:,} (past its {timeout} even on a fast scheduler), so it "
                f"gives up: {_dead_end_text(steps.dead_end)}")
    return (f"kube-scheduler's search takes {steps_text(steps)} on node {node}, more than "
            f"{FINISHES_WITHIN:,} (within its {timeout} only on a fast, idle scheduler), so it "
            f"may give up: {_dead_end_text(steps.dead_end)}")


def _finishes(allocator: Allocator, node: NodeInfo, claim: ResourceClaim) -> SearchSteps | None:
    """The steps of a rewritten claim, when it still fits and upstream's search finishes."""
    try:
        allocator.allocate(node, [claim])
    except (AllocationFailed, AllocationError):
        return None
    time, steps = scheduler_search_time(allocator, node, [claim])
    return steps if time is SearchTime.FINISHES else None


def _slack(outcome: NodeOutcome, request: str) -> int:
    """How many more devices pass every check for the request than it needs (for
    ``firstAvailable``, the least of its subrequests)."""
    return min((len(r.fitting_devices) - r.needed for r in outcome.requests
                if r.request == request or r.request.startswith(f"{request}/")), default=0)


def _reordered(allocator: Allocator, node: NodeInfo, claim: ResourceClaim,
               outcome: NodeOutcome) -> str | None:
    """Most constrained request first (fewest devices to spare), when that makes the search
    finish."""
    requests = list(claim.spec.devices.requests or ()) if claim.spec.devices else []
    ordered = sorted(requests, key=lambda r: _slack(outcome, r.name))
    if [r.name for r in ordered] == [r.name for r in requests]:
        return None
    rewritten = claim.model_copy(deep=True)
    assert rewritten.spec.devices is not None  # it has requests
    rewritten.spec.devices.requests = [r.model_copy(deep=True) for r in ordered]
    steps = _finishes(allocator, node, rewritten)
    if steps is None:
        return None
    return (f"list the requests most constrained first ({', '.join(r.name for r in ordered)}): "
            f"kube-scheduler's search then takes {steps_text(steps)}")


def _excluding(allocator: Allocator, node: NodeInfo, claim: ResourceClaim,
               dead_end: DeadEnd | None) -> str | None:
    """A selector for a request that took devices first, excluding what the short request
    selects, when that makes the search finish."""
    if dead_end is None or "/" in dead_end.request or claim.spec.devices is None:
        return None
    requests = {r.name: r for r in claim.spec.devices.requests or ()}
    short = requests.get(dead_end.request)
    if short is None or short.exactly is None or not short.exactly.selectors:
        return None
    expressions = [s.cel.expression for s in short.exactly.selectors if s.cel is not None]
    negation = "!(" + " && ".join(f"({e})" if len(expressions) > 1 else e
                                  for e in expressions) + ")"
    for name in dict.fromkeys(request for claim, request, _ in dead_end.taken
                              if claim == dead_end.claim):
        if "/" in name or requests[name].exactly is None:
            continue
        rewritten = claim.model_copy(deep=True)
        assert rewritten.spec.devices is not None
        target = next(r for r in rewritten.spec.devices.requests or () if r.name == name)
        assert target.exactly is not None
        target.exactly.selectors = [*(target.exactly.selectors or ()),
                                    DeviceSelector.from_api({"cel": {"expression": negation}})]
        steps = _finishes(allocator, node, rewritten)
        if steps is not None:
            return (f"give request {name} the selector {negation}, so that it leaves request "
                    f"{dead_end.request}'s devices alone: kube-scheduler's search then takes "
                    f"{steps_text(steps)}")
    return None


GENERIC_SUGGESTION = ("rewrite the claim so that its requests do not compete for the same "
                      "devices: list the most constrained request first, or give each request "
                      "a selector that excludes the devices the others need")


def judge_search(allocator: Allocator, node: NodeInfo, claims: Sequence[ResourceClaim],
                 fits: bool, outcome: NodeOutcome | None = None) -> SchedulerSearch:
    """kube-scheduler's search for ``claims`` together on ``node``, where kubedra's allocator
    found an allocation (``fits``) or not: its steps, and for one that may or does time out,
    why and, when an allocation exists, how to rewrite the claim — checked rewrites for one
    claim whose per-request outcome is ``outcome``, else the general advice."""
    time, steps = scheduler_search_time(allocator, node, claims)
    search = SchedulerSearch(time.value, steps.steps, steps.finished, FINISHES_WITHIN,
                             TIMES_OUT_AFTER, FILTER_TIMEOUT_SECONDS)
    if time is SearchTime.FINISHES:
        return search
    search.reason = _reason(node.name, time, steps)
    if fits:
        found = [] if outcome is None or len(claims) != 1 else [
            s for s in (_reordered(allocator, node, claims[0], outcome),
                        _excluding(allocator, node, claims[0], steps.dead_end)) if s]
        search.suggestions = found or [GENERIC_SUGGESTION]
    return search
