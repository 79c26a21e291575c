"""Explain one ResourceClaim: where it could be allocated, and why not elsewhere.

For an unallocated claim, every node the claim's pods may run on and that has any pool is
evaluated with kubedra's allocator (the same decisions as the v1.37.2 kube-scheduler, see
:mod:`kubedra.allocation`): the claim alone is allocated on the node against what is allocated
already; when it does not fit, the allocator's diagnosis gives per request the funnel of checks
(:class:`kubedra.allocation.Stage`) and the first check each device fails. The
request the search could not complete names the deciding check — the first whose count drops
below what the request needs — and the devices that failed it are explained in plain words
(:mod:`kubedra.explain.findings`). When every check leaves enough devices, the claim's
constraints, or its requests competing for the same devices, are what failed.

For an allocated claim, the chosen devices are explained: node, pool, and what each selector
conjunct read from the device.

The short form (:attr:`ClaimExplanation.message`, also the operator's Event) groups nodes that
fail the same request at the same check and explains the first of each group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kubedra.allocation import (
    FITS,
    STAGES,
    VERSIONS_COMPARED_BY_PRECEDENCE,
    AllocationError,
    AllocationFailed,
    Allocator,
    CompiledNodeSelector,
    DeviceEntry,
    NodeInfo,
    NodePools,
    Pool,
    RequestDiagnosis,
    claim_label,
    compile_node_selector,
)
from kubedra.api.resource import AllocationResult, ResourceClaim
from kubedra.explain.constraints import ConstraintConflict, cross_request_conflicts
from kubedra.explain.findings import (
    FindingContext,
    RequestSpec,
    compile_error,
    counter_competition,
    device_finding,
    request_specs,
)
from kubedra.explain.model import (
    FUNNEL_NAMES,
    ChosenDevice,
    ClaimExplanation,
    NodeCounts,
    NodeOutcome,
    RequestOutcome,
    SelectorReason,
)
from kubedra.explain.node_shapes import NodeShapes
from kubedra.explain.search_time import TIMED_OUT, judge_search
from kubedra.explain.selectors import format_value, judge_parts, references
from kubedra.explain.shapes import NODES_NAMED, MaskedTexts, others
from kubedra.explain.snapshot import ClusterSnapshot, PodPlacement

REASONS_IN_MESSAGE = 3
"""Devices explained per node in a short form; the rest are counted."""


_STAGE_PHRASES = {
    "devices": "{devices} in the node's usable pools",
    "in_class": "{k} of {p} devices are in class {cls}",
    "match_request": "{k} of {p} devices of class {cls} match the request's selectors",
    "free": "{k} of {p} matching devices are free",
    "capacity": "{k} of {p} free devices have the capacity left",
    "counters": "{k} of {p} devices have the shared counters left",
    "untainted": "{k} of {p} devices have no taint that the request does not tolerate",
}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _fit(count: int) -> str:
    return f"{count} device fits" if count == 1 else f"{count} devices fit"


def _failed_stage(diagnosis: RequestDiagnosis, all_devices: bool = False) -> str | None:
    """The first check that leaves fewer devices than the request needs (``allocationMode:
    All`` needs every matching device, and at least one)."""
    needed = max(diagnosis.needed, 1) if all_devices else diagnosis.needed
    return next((stage for stage in STAGES if diagnosis.counts.get(stage, 0) < needed), None)


def _needed_text(needed: int, all_devices: bool) -> str:
    if not all_devices:
        return f"{needed} needed"
    return "allocationMode All needs at least one" if needed == 0 else \
        f"all {needed} needed, allocationMode All"


def _competing_counters(ctx: FindingContext, diagnosis: RequestDiagnosis,
                        devices: dict[str, tuple[DeviceEntry, Pool]], all_devices: bool
                        ) -> list[str]:
    """When the devices the request must take together are fixed (``All``, or as many fit as
    are needed): the shared counters they compete for."""
    fitting = [devices[key] for key, verdict in diagnosis.verdicts.items()
               if verdict == FITS and key in devices]
    if not all_devices and len(fitting) != diagnosis.needed:
        return []
    return counter_competition(ctx, fitting)


def _request_outcome(ctx: FindingContext, spec: RequestSpec | None,
                     diagnosis: RequestDiagnosis, devices: dict[str, tuple[DeviceEntry, Pool]],
                     deciding: bool, reason: str | None,
                     conflicts: Sequence[ConstraintConflict] = (),
                     alone: bool | None = None) -> RequestOutcome:
    counts = diagnosis.counts
    all_devices = spec is not None and spec.all_devices
    stage = _failed_stage(diagnosis, all_devices)
    needed = _needed_text(diagnosis.needed, all_devices)
    class_name = spec.device_class if spec is not None else ""
    outcome = RequestOutcome(
        request=diagnosis.request, device_class=class_name, needed=diagnosis.needed,
        funnel={FUNNEL_NAMES[s]: counts.get(s, 0) for s in STAGES}, failed_at=None, message="",
        all_devices=all_devices,
        fitting_devices=[key for key, verdict in diagnosis.verdicts.items() if verdict == FITS],
        constraints=sorted(diagnosis.constraints.items()),
        unusable_pools=sorted(diagnosis.unusable_pools.items()), errors=list(diagnosis.errors),
        outdated=list(diagnosis.outdated))
    if stage is not None:
        previous = counts.get(STAGES[STAGES.index(stage) - 1], 0) if stage != "devices" else 0
        phrase = _STAGE_PHRASES[stage].format(k=counts.get(stage, 0), p=previous,
                                              cls=class_name,
                                              devices=_plural(counts.get(stage, 0), "device"))
        outcome.failed_at = FUNNEL_NAMES[stage]
        outcome.message = f"request {diagnosis.request}: {phrase} ({needed})"
        if spec is not None:
            findings = [device_finding(ctx, spec, *devices[key], stage)
                        for key, verdict in diagnosis.verdicts.items()
                        if verdict == stage and key in devices]
            uncompiled = compile_error(spec, stage)
            outcome.devices = [f for f in findings if uncompiled is None or f.selector is None
                               or f.selector["expression"] != uncompiled[0]]
            if uncompiled is not None and len(outcome.devices) < len(findings):
                outcome.compile_errors.append(uncompiled[1])
    elif deciding:
        broken = [(name, together) for name, together in sorted(diagnosis.constraints.items())
                  if together < diagnosis.needed]
        if broken:
            outcome.failed_at = "constraints"
            outcome.message = (f"request {diagnosis.request}: {_fit(diagnosis.fitting)}, "
                               + "; ".join(f"at most {together} of them "
                                           f"{'satisfies' if together == 1 else 'satisfy'} "
                                           f"{name} together"
                                           for name, together in broken)
                               + f" ({diagnosis.needed} needed)")
        elif mine := [c for c in conflicts if diagnosis.request in c.requests]:
            outcome.failed_at = "constraints"
            outcome.message = (f"request {diagnosis.request}: {_fit(diagnosis.fitting)} on "
                               "its own, but " + "; ".join(
                                   f"constraint {c.constraint} over requests "
                                   f"{', '.join(c.requests)} cannot be met: {c.reason}"
                                   for c in mine))
        elif competing := _competing_counters(ctx, diagnosis, devices, all_devices):
            outcome.failed_at = "counters"
            outcome.message = (f"request {diagnosis.request}: {_fit(diagnosis.fitting)} on "
                               "their own, but together they need more shared counters than "
                               "are left: " + "; ".join(competing))
        else:
            outcome.failed_at = "together"
            others = "with the claim's other requests" if alone is False else "with each other"
            outcome.message = (f"request {diagnosis.request}: {_fit(diagnosis.fitting)} "
                               f"on their own, but not together {others}: {reason}")
    else:
        outcome.message = (f"request {diagnosis.request}: {_fit(diagnosis.fitting)} "
                           f"({diagnosis.needed} needed)")
    return outcome


def request_notes(request: RequestOutcome) -> list[str]:
    """For a request that fails: a selector that does not compile (once, not per device), and
    the pools of the node the search left out, and why."""
    if request.failed_at is None:
        return []
    return [*request.compile_errors, *(f"pool {pool} is {why}: its devices were not considered"
                                       for pool, why in request.unusable_pools),
            *(f"{', '.join(devices)} would have matched, but only slice {name} of pool {pool} "
              f"has {'it' if len(devices) == 1 else 'them'}, at generation {generation}, and the "
              f"pool is at generation {newest}: kube-scheduler ignores an outdated slice"
              for pool, name, generation, newest, devices in request.outdated)]


def _request_message(request: RequestOutcome) -> str:
    reasons = [d.reason for d in request.devices]
    shown = reasons[:REASONS_IN_MESSAGE]
    if len(reasons) > len(shown):
        shown.append(f"and {_plural(len(reasons) - len(shown), 'more device')}")
    shown += request_notes(request)
    return request.message + (f": {'; '.join(shown)}" if shown else "")


def _node_message(node: str, requests: list[RequestOutcome]) -> str:
    return f"{node}: " + "; ".join(_request_message(r) for r in requests)


def result_devices(allocation: AllocationResult) -> list[dict[str, str]]:
    """The devices of an allocation result: ``request``, ``driver``, ``pool``, ``device``."""
    return [{"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            for r in (allocation.devices.results or () if allocation.devices else ())]


def _mark_alternatives(requests: list[RequestOutcome], picked: set[str]) -> None:
    """On a node where the claim fits: mark which ``firstAvailable`` alternative was chosen.
    The allocator tries them in order, so an alternative before the chosen one could not be
    met, also when each of its checks leaves enough devices (then it failed together with the
    claim's other requests or its constraints)."""
    chosen_parents = {name.partition("/")[0] for name in picked if "/" in name}
    passed: set[str] = set()
    for request in requests:
        parent, sub, _ = request.request.partition("/")
        if not sub:
            continue
        request.chosen = request.request in picked
        if request.chosen:
            passed.add(parent)
        elif parent in chosen_parents and parent not in passed and request.failed_at is None:
            request.failed_at = "together"
            request.message = (f"request {request.request}: cannot be met together with the "
                               "claim's other requests and constraints; a later alternative "
                               "was chosen")


def evaluate_node(snapshot: ClusterSnapshot, allocator: Allocator, claim: ResourceClaim,
                  node: NodeInfo, pools: NodePools) -> NodeOutcome:
    """The claim alone on one node: the allocation it would get, or why it does not fit."""
    specs = request_specs(claim, snapshot)
    ctx = FindingContext(snapshot, allocator, node.name)
    devices = {repr(d): (d, p) for d, p in zip(pools.devices, pools.device_pools, strict=True)}
    failed: AllocationFailed | None = None
    try:
        [allocation] = allocator.allocate(node, [claim])
        diagnoses = allocator.diagnose(node, claim)
    except AllocationFailed as failure:
        failed, allocation = failure, AllocationResult()
        diagnoses = failure.diagnose()
    except AllocationError as err:
        return NodeOutcome(node.name, False, f"{node.name}: error: {err}", error=str(err))
    failed_request = None
    if failed is not None:
        failed_request = failed.request or next(
            (d.request for d in diagnoses if _failed_stage(
                d, (spec := specs.get(d.request)) is not None and spec.all_devices) is not None),
            None)
    conflicts = [] if failed is None else cross_request_conflicts(
        claim.spec.devices.constraints or [] if claim.spec.devices else [], diagnoses,
        {key: device for key, (device, _pool) in devices.items()},
        versions_parsed=snapshot.resources.features.version.follows(
            VERSIONS_COMPARED_BY_PRECEDENCE))
    alone = len(claim.spec.devices.requests or ()) == 1 if claim.spec.devices else True
    requests = [_request_outcome(ctx, specs.get(d.request), d, devices,
                                 d.request == failed_request,
                                 failed.reason if failed is not None else None, conflicts, alone)
                for d in diagnoses]
    if failed is None:
        chosen = result_devices(allocation)
        _mark_alternatives(requests, {c["request"] for c in chosen})
        names = ", ".join(f"{c['device']} (request {c['request']})" for c in chosen) or \
            "no devices (the claim has no requests: nothing is allocated for it)"
        outcome = NodeOutcome(node.name, True, f"{node.name}: fits with {names}",
                              devices=chosen, requests=requests)
    else:
        outcome = NodeOutcome(node.name, False, "", requests=requests,
                              failed_request=failed_request)
        deciding = outcome.deciding()
        outcome.message = _node_message(node.name, deciding) if deciding \
            else f"{node.name}: {failed.reason}"
    outcome.search = judge_search(allocator, node, [claim], outcome.fits, outcome)
    return outcome


def _evaluate(shapes: NodeShapes, node: NodeInfo, pools: NodePools, claim: ResourceClaim,
              by_shape: bool) -> NodeOutcome:
    """:func:`evaluate_node`, once per node shape (:mod:`kubedra.explain.node_shapes`) unless
    not ``by_shape``."""
    shape = shapes.shape(node, pools) if by_shape else None
    if shape is not None and (outcome := shapes.reused(shape)) is not None:
        assert isinstance(outcome, NodeOutcome)
        return outcome
    outcome = evaluate_node(shapes.snapshot, shapes.allocator, claim, node, pools)
    if shape is not None:
        shapes.keep(shape, outcome, pools)
    return outcome


def _grouped(outcomes: Iterable[NodeOutcome], messages: MaskedTexts
             ) -> list[list[NodeOutcome]]:
    """Failed nodes grouped by shape (:mod:`kubedra.explain.shapes`: the request and check
    that failed, every request's counts, and the message but for the names of the node, its
    devices and their holders), largest group first."""
    groups: dict[tuple[object, ...], list[NodeOutcome]] = {}
    for outcome in outcomes:
        key = (outcome.error and "error", outcome.failed_request,
               *((r.request, r.failed_at, *r.funnel.values()) for r in outcome.requests),
               messages.of(outcome))
        groups.setdefault(key, []).append(outcome)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0].node))


MESSAGE_GROUPS = 3
"""Groups of failed nodes the Message words; the rest are counted."""


def _unschedulable_message(candidates: list[NodeOutcome]) -> str:
    parts = []
    messages = MaskedTexts(lambda outcome: (outcome.message,))
    groups = _grouped(candidates, messages)
    for group in groups[:MESSAGE_GROUPS]:
        text = group[0].message
        if len(group) > 1:
            first = messages.of(group[0], node_only=True)
            same = all(messages.of(o, node_only=True) == first for o in group[1:])
            text += " " + others(group, same)
        parts.append(text)
    rest = [node for group in groups[MESSAGE_GROUPS:] for node in group]
    if rest:
        parts.append(f"other reasons on {_plural(len(rest), 'more node')} (see Why not)")
    return "cannot be allocated: " + "; ".join(parts)


FILTER_ERROR = 'running "DynamicResources" filter plugin: '
"""How kube-scheduler words a plugin's error in the pod's ``PodScheduled`` condition
(``pkg/scheduler/framework/runtime/framework.go``, ``RunFilterPlugins``)."""


def _error_message(erred: list[NodeOutcome]) -> str:
    """The scheduler's error for the pod: an allocator error on any node aborts the whole
    scheduling attempt (reason ``SchedulerError``, retried with back-off), even when other
    nodes fit (``dynamicresources.go``: "Return an error to abort scheduling of it")."""
    first = erred[0]
    same = [o.node for o in erred[1:] if o.error == first.error]
    others = [o.node for o in erred[1:] if o.error != first.error]
    text = (f"kube-scheduler reports an error, not unschedulable, on node {first.node}"
            + (f" (the same on {_plural(len(same), 'more node')}: {_named(same)})" if same
               else "")
            + (f" (other errors on {_plural(len(others), 'more node')}: {_named(others)})"
               if others else ""))
    return f"{text}: {FILTER_ERROR}{first.error}"


def devices_by_request(devices: Sequence[dict[str, str]]) -> str:
    """``r1: gpu24; r2: gpu00, gpu01, …, (24 devices)``: an allocation's devices per request
    (``claim request`` when the devices name their claim), naming at most :data:`NODES_NAMED`
    per request."""
    by_request: dict[str, list[str]] = {}
    for device in devices:
        key = f"{device['claim']} {device['request']}" if "claim" in device else \
            device["request"]
        by_request.setdefault(key, []).append(device["device"])
    return "; ".join(f"{request}: {_named(names)}" + (
        f" ({len(names)} devices)" if len(names) > NODES_NAMED else "")
        for request, names in by_request.items())


def _timeout_message(timed_out: list[NodeOutcome]) -> str:
    """kube-scheduler's error when its search runs out of time on a node, why, and (when an
    allocation exists) the first suggested rewrite."""
    first = timed_out[0]
    assert first.search is not None  # it timed out
    others = [o.node for o in timed_out[1:]]
    steps = (f"{first.search.steps:,} steps" if first.search.exact
             else f"more than {first.search.steps:,} steps")
    text = (f"kube-scheduler times out on node {first.node}"
            + (f" (the same on {_plural(len(others), 'more node')}: {_named(others)})"
               if others else "")
            + f" and reports an error, not unschedulable: {FILTER_ERROR}node {first.node}: "
            f"{TIMED_OUT}; it retries with back-off and does not schedule the pod")
    if not first.fits:
        return text + (f"; its search takes {steps} to find that the claim does not fit there: "
                       f"{first.message.partition(': ')[2]}")
    text += (f"; an allocation exists ({devices_by_request(first.devices)}), but its search "
             f"takes {steps} to reach it")
    return text + (f"; {first.search.suggestions[0]}" if first.search.suggestions else "")


def _may_time_out_note(candidates: Sequence[NodeOutcome]) -> str:
    """A warning for the nodes where kube-scheduler's search may run out of time."""
    nodes = [c.node for c in candidates if c.may_time_out()]
    if not nodes:
        return ""
    return (f"; kube-scheduler's search may time out on {_plural(len(nodes), 'node')} "
            f"({_named(nodes)}): see Scheduler search")


def _named(nodes: list[str]) -> str:
    return ", ".join(nodes[:NODES_NAMED]) + (", …" if len(nodes) > NODES_NAMED else "")


def _no_candidates_message(counts: NodeCounts, pods: Sequence[PodPlacement]) -> str:
    if counts.total == 0:
        return "cannot be allocated: the cluster has no nodes"
    parts = []
    if counts.without_devices:
        parts.append(f"{_plural(counts.without_devices, 'node')} without ResourceSlices")
    if counts.excluded_by_pods:
        parts.append(f"{counts.excluded_by_pods} excluded by the node selection of pod "
                     + ", ".join(str(p) for p in pods))
    return "cannot be allocated: no node has devices for it (" + "; ".join(parts) + ")"


def _holding_claims(snapshot: ClusterSnapshot, claim: ResourceClaim,
                    pods: Sequence[PodPlacement]) -> dict[str, CompiledNodeSelector]:
    """The pods' other claims that are allocated with a ``nodeSelector``, by label: the
    scheduler runs a pod only where all its allocated claims' devices are reachable
    (``dynamicresources.go``, Filter: an allocated claim's node selector must match the node),
    so the claim is judged only there."""
    wanted = {(p.namespace, name) for p in pods for name in p.claims} - {
        (claim.metadata.namespace or "", claim.metadata.name or "")}
    found: dict[str, CompiledNodeSelector] = {}
    for other in snapshot.claims:
        allocation = other.status.allocation
        if ((other.metadata.namespace or "", other.metadata.name or "") in wanted
                and allocation is not None and allocation.node_selector is not None):
            try:
                found[claim_label(other)] = compile_node_selector(allocation.node_selector)
            except AllocationError:
                continue
    return dict(sorted(found.items()))


def missing_class(snapshot: ClusterSnapshot, claims: Iterable[ResourceClaim]
                  ) -> tuple[ResourceClaim, str] | None:
    """The first request of ``claims`` (in order; a ``firstAvailable`` subrequest as
    ``request/subrequest``) whose DeviceClass does not exist: its claim, and the message as
    kube-scheduler's PreFilter says it ("request gpu: device class x does not exist"); or None.

    The scheduler checks every request's class before it evaluates any node, and a missing
    one makes the pod unschedulable, waiting for a DeviceClass event, not an error retried
    with back-off as the allocator's own "could not retrieve device class" would be
    (``validateDeviceClass`` in pkg/scheduler/framework/plugins/dynamicresources/
    dynamicresources.go; its test case "missing-class")."""
    classes = snapshot.resources.classes
    for claim in claims:
        for request in claim.spec.devices.requests or () if claim.spec.devices else ():
            parts = [(request.name, request.exactly.device_class_name)] if request.exactly \
                else [(f"{request.name}/{sub.name}", sub.device_class_name)
                      for sub in request.first_available or ()]
            for name, device_class in parts:
                if device_class and device_class not in classes:
                    return claim, f"request {name}: device class {device_class} does not exist"
    return None


MISSING_CLASS_NOTE = ("kube-scheduler checks it before any node; the pod waits until the "
                      "DeviceClass is created")
"""What :func:`missing_class`'s message is followed by in a verdict."""


def _pending(snapshot: ClusterSnapshot, claim: ResourceClaim, pods: Sequence[PodPlacement],
             nodes: Sequence[str] | None, explanation: ClaimExplanation, by_shape: bool,
             shapes: NodeShapes | None) -> None:
    if (missing := missing_class(snapshot, [claim])) is not None:
        explanation.verdict = "Unschedulable"
        explanation.message = f"cannot be allocated: {missing[1]} ({MISSING_CLASS_NOTE})"
        explanation.nodes.total = sum(nodes is None or n.name in nodes for n in snapshot.nodes)
        return
    shapes = shapes or NodeShapes(snapshot, snapshot.allocator(), claim)
    counts = explanation.nodes
    holding = _holding_claims(snapshot, claim, pods)
    counts.holding_claims = list(holding)
    for node in snapshot.nodes:
        if nodes is not None and node.name not in nodes:
            continue
        counts.total += 1
        if not all(pod.allows(node) for pod in pods):
            counts.excluded_by_pods += 1
            continue
        if not all(selector.matches(node) for selector in holding.values()):
            counts.excluded_by_claims += 1
            continue
        try:
            pools = snapshot.resources.node_pools(node)
        except AllocationError as err:
            explanation.candidates.append(NodeOutcome(node.name, False,
                                                      f"{node.name}: error: {err}",
                                                      error=str(err)))
            counts.evaluated += 1
            continue
        if not pools.pools and not pools.obsolete:
            counts.without_devices += 1
            continue
        counts.evaluated += 1
        explanation.candidates.append(_evaluate(shapes, node, pools, claim, by_shape))
    fitting = [c for c in explanation.candidates if c.fits]
    erred = [c for c in explanation.candidates if c.error is not None]
    timed_out = [c for c in explanation.candidates if c.times_out()]
    if erred:
        explanation.verdict = "Error"
        explanation.message = _error_message(erred)
    elif timed_out:
        explanation.verdict = "Timeout"
        explanation.message = _timeout_message(timed_out)
    elif fitting:
        explanation.verdict = "Fits"
        names = ", ".join(c.node for c in fitting[:NODES_NAMED]) + (
            ", …" if len(fitting) > NODES_NAMED else "")
        explanation.message = (f"fits on {_plural(len(fitting), 'node')} ({names}); first: "
                               f"{fitting[0].message}")
        if pods:
            explanation.message += ("; on its own the claim fits, so the pod waits for "
                                    "something else (its other claims, or a scheduler retry)")
        explanation.message += _may_time_out_note(explanation.candidates)
    elif explanation.candidates:
        explanation.verdict = "Unschedulable"
        explanation.message = _unschedulable_message(explanation.candidates) + \
            _may_time_out_note(explanation.candidates)
    else:
        explanation.verdict = "Unschedulable"
        explanation.message = _no_candidates_message(counts, pods)


def _allocation_node(claim: ResourceClaim, pods: Sequence[PodPlacement]) -> str | None:
    allocation = claim.status.allocation
    selector = allocation.node_selector if allocation else None
    for term in selector.node_selector_terms if selector else ():
        for field in term.match_fields or ():
            if field.key == "metadata.name" and field.operator == "In" and \
                    len(field.values or ()) == 1:
                return (field.values or [""])[0]
    return next((p.node_name for p in pods if p.node_name), None)


def _find_device(snapshot: ClusterSnapshot, driver: str, pool: str,
                 name: str) -> DeviceEntry | None:
    found: DeviceEntry | None = None
    generation = -1
    for entry in snapshot.resources.slices.all:
        if entry.driver == driver and entry.pool_name == pool and entry.generation > generation:
            device = next((d for d in entry.devices if d.name == name), None)
            if device is not None:
                found, generation = device, entry.generation
    return found


def _allocated(snapshot: ClusterSnapshot, claim: ResourceClaim, pods: Sequence[PodPlacement],
               explanation: ClaimExplanation) -> None:
    specs = request_specs(claim, snapshot)
    node = _allocation_node(claim, pods)
    explanation.verdict = "Allocated"
    explanation.allocation_node = node
    chosen: list[ChosenDevice] = []
    allocation = claim.status.allocation
    for result in (allocation.devices.results or ()) if allocation and allocation.devices \
            else ():
        spec = specs.get(result.request)
        entry = _find_device(snapshot, result.driver, result.pool, result.device)
        item = ChosenDevice(result.request, result.driver, result.pool, result.device,
                            spec.device_class if spec else "")
        chosen.append(item)
        if entry is None:
            item.reasons.append(SelectorReason("", "", f"device {result.device} of pool "
                                                       f"{result.pool} is no longer published"))
            continue
        label = f"{entry.name} on {node}" if node else entry.name
        sources = [(f"class {spec.device_class}", spec.class_selectors),
                   (f"request {spec.name}", spec.request_selectors)] if spec else []
        for source, expressions in sources:
            for expression in expressions:
                for finding in judge_parts(expression, entry):
                    item.reasons.append(SelectorReason(source, finding.conjunct,
                                                       f"{label} {finding.sentence()}"))
                    for ref in references(finding.conjunct):
                        value = ref.lookup(entry)
                        item.values[ref.name] = format_value(value) if value is not None \
                            else "unset"
    explanation.allocation = chosen
    where = f" on node {node}" if node else ""
    explanation.message = "allocated" + where + ": " + ", ".join(
        f"{c.device} of pool {c.pool} ({c.driver}) for request {c.request}" for c in chosen)


def explain_claim(snapshot: ClusterSnapshot, claim: ResourceClaim,
                  pods: Sequence[PodPlacement] = (), *,
                  nodes: Sequence[str] | None = None, by_shape: bool = True,
                  shapes: NodeShapes | None = None) -> ClaimExplanation:
    """Explain ``claim`` against ``snapshot``.

    Args:
        pods: the pods using the claim; only nodes every one of them may run on are evaluated.
        nodes: evaluate only these nodes (``None``: all).
        by_shape: evaluate each node shape once (:mod:`kubedra.explain.node_shapes`; the same
            outcome as node by node, which ``False`` does, for comparison).
        shapes: the shapes to use and fill (default: new ones), to share them with later
            searches for the same claim on the same snapshot.
    """
    explanation = ClaimExplanation(
        namespace=claim.metadata.namespace or "", name=claim.metadata.name or "",
        uid=claim.metadata.uid or "", pods=[str(p) for p in pods], verdict="", message="",
        kube_version=str(snapshot.resources.features.version))
    if claim.status.allocation is not None:
        _allocated(snapshot, claim, pods, explanation)
    else:
        _pending(snapshot, claim, pods, nodes, explanation, by_shape, shapes)
    return explanation

