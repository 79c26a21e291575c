"""Events that explain, on each claim, why its pod cannot be scheduled.

When kube-scheduler marks a pod unschedulable because of its claims (condition
``PodScheduled=False``, reason ``Unschedulable``, a message about claims such as "cannot
allocate all claims"), the operator explains each of the pod's unallocated claims with
:func:`kubedra.explain.explain_claim` (the same code as ``kubectl dra explain``) and posts the
short form as a Warning Event with reason ``CannotAllocate`` on the claim.

Cost and rate limits:

- only pods the scheduler gave up on are looked at (the operator watches pods with the field
  selector ``status.phase=Pending,spec.nodeName=`` and indexes only the unschedulable ones);
- a pod is evaluated again only when something an explanation depends on changed (slices,
  classes, taint rules, allocated claims, node labels, the pod or its claims), and at most
  once every ``EVALUATION_INTERVAL`` (5) seconds;
- a claim gets an Event only when the message differs from the last one posted on it, and at
  most one every 60 seconds (setting ``explain_event_interval``, env
  ``KUBEDRA_EXPLAIN_EVENT_INTERVAL``); a change within that time is posted when
  it ends, so the last Event always tells the current reason;
- the allocator runs in a worker thread of its own, so the publishing workers are never
  blocked.

The parsed inventory and allocated claims are cached between evaluations until a watch event
changes them. The limits are in :mod:`kubedra.controller.explain_state`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubedra import kube
from kubedra.api.inventory import OPERATOR_COMPONENT
from kubedra.api.resource import ResourceClaim
from kubedra.controller.explain_state import ExplainState, Inputs
from kubedra.controller.state import OperatorState
from kubedra.explain import ClaimExplanation, PodPlacement, explain_claim
from kubedra.logging import get_logger

EVENT_REASON = "CannotAllocate"
PENDING_POD_SELECTOR = "status.phase=Pending,spec.nodeName="
"""Field selector of the operator's pod watch: pods not bound to a node."""

log = get_logger(__name__)


def unschedulable_for_claims(pod: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler reports the pod unschedulable because of its claims
    (``PodScheduled=False``, reason ``Unschedulable``, a message that mentions claims)."""
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable" \
                and "claim" in (condition.get("message") or "").lower():
            return True
    return False


def _explain_all(explain: ExplainState, inputs: Inputs, claims: Sequence[dict[str, Any]],
                 pod: PodPlacement) -> list[ClaimExplanation]:
    snapshot = explain.snapshot(inputs)
    return [explain_claim(snapshot, ResourceClaim.from_api(c), [pod]) for c in claims]


def read_inputs(state: OperatorState) -> Inputs:
    """Copy what an evaluation reads from the operator's caches (in the event loop, so that
    the worker thread never sees a cache change under it)."""
    view, explain = state.view, state.explain
    return Inputs(slices=view.values(view.all_slices), classes=view.values(view.device_classes),
                  taint_rules=view.values(view.taint_rules),
                  allocated=view.values(view.claims), nodes=view.values(view.nodes),
                  inventory_version=explain.inventory_version,
                  claims_version=explain.claims_version)


async def explain_pod(state: OperatorState, namespace: str, name: str) -> None:
    """Explain the unallocated claims of an unschedulable pod; post changed explanations.

    Raises:
        ApiException: posting an Event failed (the caller retries with back-off).
    """
    explain, key = state.explain, (namespace, name)
    pod = state.view.unschedulable_pod(namespace, name)
    if pod is None:
        explain.forget_pod(key)
        return
    placement = PodPlacement.from_api(pod)
    claims = [c for c in (state.view.pending_claim(namespace, n) for n in placement.claims)
              if c is not None]
    versions = (explain.inventory_version, explain.claims_version, explain.nodes_version,
                pod["metadata"].get("resourceVersion"),
                tuple(c["metadata"].get("resourceVersion") for c in claims))
    if not claims or explain.evaluated.get(key) == versions:
        return
    delay = explain.evaluation_delay(key, time.monotonic())
    if delay:
        state.explain_queue.add_after(key, delay)
        return
    explanations = await asyncio.get_running_loop().run_in_executor(
        explain.executor, _explain_all, explain, read_inputs(state), claims, placement)
    settled = True
    for claim, explanation in zip(claims, explanations, strict=True):
        settled &= await _announce(state, key, claim, explanation.message)
    if settled:
        explain.evaluated[key] = versions


async def _announce(state: OperatorState, pod: tuple[str, str], claim: dict[str, Any],
                    message: str) -> bool:
    """Post ``message`` on the claim unless it is what was posted last; returns False when
    the rate limit deferred it (the pod is evaluated again when the limit allows)."""
    explain = state.explain
    key = (claim["metadata"].get("namespace") or "", claim["metadata"]["name"])
    now = time.monotonic()
    delay = explain.event_delay(key, message, now)
    if delay is None:
        return True
    if delay:
        state.explain_queue.add_after(pod, delay)
        return False
    await kube.post_event(state.api, claim, event_type="Warning", reason=EVENT_REASON,
                          message=message, component=OPERATOR_COMPONENT)
    explain.event_posted(key, message, now)
    log.info("claim explained", claim=f"{key[0]}/{key[1]}", pod=f"{pod[0]}/{pod[1]}",
             message=message)
    return True
