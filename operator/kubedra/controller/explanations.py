"""Events that explain, on each claim, why its pod cannot be scheduled.

When kube-scheduler marks a pod unschedulable because of its claims (condition
``PodScheduled=False``, reason ``Unschedulable``, a message about claims such as "cannot
allocate all claims"), or fails on it with an error of the DRA plugin (reason
``SchedulerError``), the operator explains each of the pod's unallocated claims with
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
from kubedra.explain import pods as pod_explanations
from kubedra.explain.claims import FILTER_ERROR
from kubedra.explain.command import one_shot
from kubedra.logging import get_logger

EVENT_REASON = "CannotAllocate"
PENDING_POD_SELECTOR = "status.phase=Pending,spec.nodeName="
"""Field selector of the operator's pod watch: pods not bound to a node."""

log = get_logger(__name__)


def unschedulable_for_claims(pod: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler cannot schedule the pod because of its claims:
    ``PodScheduled=False`` with reason ``Unschedulable`` and a message that mentions claims, or
    reason ``SchedulerError`` from the DRA plugin (its allocator returned an error: a CEL
    error, more than 32 devices, a pool being updated for an ``All`` request, a search that
    timed out), whose message starts with :data:`kubedra.explain.claims.FILTER_ERROR`."""
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") != "PodScheduled" or condition.get("status") != "False":
            continue
        message = condition.get("message") or ""
        if condition.get("reason") == "Unschedulable" and "claim" in message.lower():
            return True
        if condition.get("reason") == "SchedulerError" and FILTER_ERROR in message:
            return True
    return False


def explain_messages(explain: ExplainState, inputs: Inputs,
                     claims: Sequence[dict[str, Any]], pod: PodPlacement) -> list[str]:
    """The message of each claim: its own explanation, or, when it fits on its own but the
    pod's claims fit on no node together, or kube-scheduler's search for them together times
    out, the pod's explanation (:func:`kubedra.explain.pods.explain_pod`)."""
    snapshot = explain.snapshot(inputs)
    parsed = [ResourceClaim.from_api(c) for c in claims]
    found: list[ClaimExplanation] = [explain_claim(snapshot, c, [pod]) for c in parsed]
    messages = [e.message for e in found]
    if len(parsed) > 1 and any(e.verdict == "Fits" for e in found):
        together = pod_explanations.explain_pod(snapshot, pod, parsed)
        prefix = {"Unschedulable": "cannot be allocated with the pod's other claims: ",
                  "Timeout": "with the pod's other claims: "}.get(together.verdict)
        if prefix is not None:
            messages = [prefix + together.message if e.verdict == "Fits" else e.message
                        for e in found]
    return messages


def read_inputs(state: OperatorState) -> Inputs:
    """Copy what an evaluation reads from the operator's caches (in the event loop, so that
    the worker thread never sees a cache change under it)."""
    view, explain = state.view, state.explain
    return Inputs(slices=view.values(view.all_slices), classes=view.values(view.device_classes),
                  taint_rules=view.values(view.taint_rules),
                  allocated=view.values(view.claims), nodes=view.values(view.nodes),
                  inventory_version=explain.inventory_version,
                  claims_version=explain.claims_version, nodes_version=explain.nodes_version)


async def prepare_explainer(state: OperatorState) -> None:
    """Make the explainer's snapshot and every node's pools now (at start, once the caches
    are read), in the explainer's thread, so that the first unschedulable pod is explained
    as fast as any later one; a failure is logged (the first question builds it then)."""
    try:
        await asyncio.get_running_loop().run_in_executor(
            state.explain.executor, one_shot(state.explain.prepare), read_inputs(state))
    except Exception as err:  # the question that needs it makes it again, and reports
        log.warning("preparing the explainer's snapshot failed", error=repr(err))


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
    started = time.monotonic()
    messages = await asyncio.get_running_loop().run_in_executor(
        explain.executor, one_shot(explain_messages), explain, read_inputs(state),
        claims, placement)
    log.debug("pod evaluated", pod=f"{namespace}/{name}",
              seconds=round(time.monotonic() - started, 3))
    settled = True
    for claim, message in zip(claims, messages, strict=True):
        settled &= await _announce(state, key, claim, message)
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
