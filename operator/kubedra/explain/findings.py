"""Per device, in plain words, why it cannot serve a request: the check the allocator's
diagnosis says it fails first (:mod:`kubedra.allocation.diagnosis`), with the values behind it.

- ``in_class`` / ``match_request``: the selector (class or request) and its first false
  conjunct, with the device's and the asked value (:mod:`kubedra.explain.selectors`); or the
  device's own node selection;
- ``free``: the claims holding the device;
- ``capacity``: the requested amount against what the device has left (KEP-5075);
- ``counters``: each counter of a shared counter set the device needs more of than is left
  (by set and counter name, as the API server stores maps sorted), and the allocated devices
  (and their claims) that use it (KEP-4815);
- ``untainted``: the taints the request does not tolerate, and the DeviceTaintRule that put
  one there (KEP-5055).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedra.allocation import (
    CAPACITY_AMOUNTS_CHECKED,
    CAPACITY_NAMES_QUALIFIED,
    NEGATIVE_CAPACITY_REQUEST_IS_ERROR,
    SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE,
    Allocator,
    CapacityError,
    DeviceEntry,
    Number,
    Pool,
    allocated_by_name,
    qualified,
    static_consumption,
    tolerated,
)
from kubedra.api.quantity import DECIMAL_SI, Quantity
from kubedra.api.resource import (
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
)
from kubedra.cel import CELCompileError, compile_selector
from kubedra.explain.model import (
    FUNNEL_NAMES,
    CapacityShortage,
    CounterShortage,
    DeviceFinding,
)
from kubedra.explain.selectors import SelectorFinding, format_value, judge
from kubedra.explain.snapshot import ClusterSnapshot


@dataclass(frozen=True)
class RequestSpec:
    """What a request (or subrequest) asks for, as the explanation needs it.

    Attributes:
        name: ``req`` or ``req/sub``.
        class_selectors: the DeviceClass's CEL expressions (empty when the class is missing).
        request_selectors: the request's own CEL expressions.
    """

    name: str
    device_class: str
    class_selectors: tuple[str, ...]
    request_selectors: tuple[str, ...]
    tolerations: tuple[DeviceToleration, ...]
    capacity: dict[str, Quantity] | None
    all_devices: bool = False
    """``allocationMode: All``: every matching device, at least one."""


def request_specs(claim: ResourceClaim, snapshot: ClusterSnapshot) -> dict[str, RequestSpec]:
    """Every request and subrequest of the claim, by full name."""
    found: dict[str, RequestSpec] = {}
    for request in claim.spec.devices.requests or ():
        parts: list[tuple[str, ExactDeviceRequest | DeviceSubRequest]] = []
        if request.exactly is not None:
            parts.append((request.name, request.exactly))
        parts += [(f"{request.name}/{sub.name}", sub) for sub in request.first_available or ()]
        for name, part in parts:
            device_class = snapshot.resources.classes.get(part.device_class_name)
            class_exprs = tuple(s.cel.expression for s in (
                device_class.spec.selectors or () if device_class else ()) if s.cel)
            found[name] = RequestSpec(
                name, part.device_class_name, class_exprs,
                tuple(s.cel.expression for s in part.selectors or () if s.cel),
                tuple(part.tolerations or ()),
                part.capacity.requests if part.capacity is not None else None,
                part.allocation_mode == "All")
    return found


def _number(value: Number) -> str:
    return str(value) if isinstance(value, int) else Quantity.from_value(value).canonical()


def _in_units(value: Number, fmt: str) -> str:
    """``value`` written as a quantity of format ``fmt`` (``BinarySI``: ``20Gi``)."""
    return Quantity.from_value(value, fmt).canonical()


def _beside(exact: str, in_units: str) -> str:
    """``21474836480 (20Gi)``: an exact number and, beside it, the same in the units the
    claim used, when that reads differently."""
    return exact if in_units == exact else f"{exact} ({in_units})"


def _amount(value: Number, fmt: str) -> str:
    return _beside(_number(value), _in_units(value, fmt))


@dataclass
class FindingContext:
    """What findings on one node look at."""

    snapshot: ClusterSnapshot
    allocator: Allocator
    node: str

    def label(self, device: DeviceEntry) -> str:
        """``gpu-0 on demo-h200``."""
        return f"{device.name} on {self.node}"

    def holders(self, driver: str, pool: str, device: str) -> list[str]:
        """The claims holding a device, as text."""
        return [str(h) for h in self.snapshot.holders.get((driver, pool, device), ())]


def _selector_finding(ctx: FindingContext, device: DeviceEntry, check: str, source: str,
                      found: SelectorFinding) -> DeviceFinding:
    comparison = None
    if found.comparison is not None:
        c = found.comparison
        comparison = {"name": c.reference.name, "relation": c.relation,
                      "device": format_value(c.device_value), "asked": format_value(c.asked)}
        if (quantities := c.quantities()) is not None:
            comparison["deviceQuantity"], comparison["askedQuantity"] = quantities
    return DeviceFinding(
        device.name, device.driver, device.id[1], FUNNEL_NAMES[check],
        f"{ctx.label(device)} {found.sentence()}",
        selector={"source": source, "expression": found.expression, "conjunct": found.conjunct},
        comparison=comparison)


def _selectors(spec: RequestSpec, check: str) -> tuple[str, tuple[str, ...]]:
    """Whose selectors ``check`` (``in_class`` or ``match_request``) applies, and them."""
    if check == "in_class":
        return f"class {spec.device_class}", spec.class_selectors
    return f"request {spec.name}", spec.request_selectors


def compile_error(spec: RequestSpec, check: str) -> tuple[str, str] | None:
    """The first of the selectors ``check`` applies that does not compile, and the error in
    words: ``selector #1 of request gpu does not compile: compilation failed: …``; or None.

    A compile error is the selector's, not a device's: upstream reports it once per claim
    (``claim ns/c: selector #1: CEL compile error: …``, ``selectorsMatch`` in
    ``structured/internal/stable/allocator_stable.go``), so explain does not repeat it for
    every device that reaches the selector."""
    if check not in ("in_class", "match_request"):
        return None
    source, expressions = _selectors(spec, check)
    for index, expression in enumerate(expressions):
        try:
            compile_selector(expression)
        except CELCompileError as err:
            return expression, f"selector #{index} of {source} does not compile: {err}"
    return None


def _first_failing(expressions: tuple[str, ...], device: DeviceEntry) -> SelectorFinding | None:
    for expression in expressions:
        found = judge(expression, device)
        if not found.passed:
            return found
    return None


def _capacity_reason(ctx: FindingContext, spec: RequestSpec, device: DeviceEntry
                     ) -> tuple[str, list[CapacityShortage]]:
    """Why the device has not the capacity the request asks, and each capacity it lacks: the
    amounts in bytes (or units) and in the units of the request (of the device for a capacity
    the request does not name)."""
    features = ctx.snapshot.resources.features
    capacity = device.capacity or {}
    # from 1.38 (CAPACITY_NAMES_QUALIFIED) names compare fully qualified
    driver = device.driver if features.version.follows(CAPACITY_NAMES_QUALIFIED) else None
    known = {qualified(name, driver) for name in capacity} if driver else set(capacity)
    missing = [name for name in spec.capacity or {}
               if (qualified(name, driver) if driver else name) not in known]
    if missing:
        return f"{ctx.label(device)} has no capacity {', '.join(missing)}", []
    try:
        consumption = static_consumption(
            spec.capacity, capacity, features.fractional_capacity_range,
            checked=features.version.follows(CAPACITY_AMOUNTS_CHECKED), driver=driver,
            negative_refused=features.version.follows(NEGATIVE_CAPACITY_REQUEST_IS_ERROR))
    except CapacityError as err:
        return f"{ctx.label(device)}: {err}", []
    if consumption is None:
        asked = ", ".join(f"{n} {q.canonical()}" for n, q in (spec.capacity or {}).items())
        return (f"{ctx.label(device)} does not allow the amounts asked ({asked}) by its "
                "request policy"), []
    in_use = allocated_by_name(
        consumption, ctx.snapshot.allocated.consumed_capacity.get(device.id), driver) or {}
    shortages = []
    for name, _, value, total in consumption:
        left = total - in_use.get(name, 0)
        if value <= left:
            continue
        fmt = (spec.capacity or {}).get(name, capacity[name].value).format
        shortages.append(CapacityShortage(
            name, _number(value), _number(left), _number(total), _in_units(value, fmt),
            _in_units(left, fmt), _in_units(total, fmt)))
    short = [f"{c.capacity} {_beside(c.needed, c.needed_quantity)}, "
             f"{_beside(c.left, c.left_quantity)} of {_beside(c.total, c.total_quantity)} left"
             for c in shortages]
    holders = ctx.holders(*device.id)
    held = f" (shared with {', '.join(holders)})" if holders else ""
    return f"{ctx.label(device)} needs {'; '.join(short)}{held}", shortages


def _counter_format(device: DeviceEntry, set_name: str, counter: str) -> str:
    """The quantity format the device's ``consumesCounters`` writes a counter in."""
    for consumption in device.device.consumes_counters or ():
        if consumption.counter_set == set_name and counter in consumption.counters:
            return consumption.counters[counter].value.format
    return DECIMAL_SI


def _counter_shortages(ctx: FindingContext, device: DeviceEntry, pool: Pool
                       ) -> list[CounterShortage]:
    available, _overdrawn = ctx.allocator.available_counters(pool)
    consumers = pool.consumers()
    taken = ctx.snapshot.allocated.in_pool(pool.key)
    shortages = []
    for set_name, counters in device.consumes:
        left = available.get(set_name, {})
        for counter, amount in counters:
            if counter not in left or amount <= left[counter]:
                continue
            held = [f"{other.name} of {holder}"
                    for name in sorted(taken) for other in consumers.get(name, ())
                    if any(s == set_name and any(c == counter for c, _ in used)
                           for s, used in other.consumes)
                    for holder in ctx.holders(other.driver, pool.name, name)]
            fmt = _counter_format(device, set_name, counter)
            shortages.append(CounterShortage(
                set_name, counter, _number(amount), _number(left[counter]), tuple(held),
                _in_units(amount, fmt), _in_units(left[counter], fmt)))
    return sorted(shortages, key=lambda s: (s.counter_set, s.counter))


def _counter_reason(ctx: FindingContext, device: DeviceEntry, pool: Pool,
                    shortages: list[CounterShortage]) -> str:
    if not shortages:
        return (f"{ctx.label(device)} consumes counters of pool {pool}, which allocated "
                "devices have overdrawn")
    sets = dict.fromkeys(s.counter_set for s in shortages)
    counters = ", ".join(f"{s.counter} (needs {_beside(s.needed, s.needed_quantity)}, "
                         f"{_beside(s.left, s.left_quantity)} left)" for s in shortages)
    holders = list(dict.fromkeys(h for s in shortages for h in s.held_by))
    used = f"; in use by {', '.join(holders)}" if holders else ""
    return (f"{ctx.label(device)} needs more of counter set {', '.join(sets)} than is left: "
            f"{counters}{used}")


def counter_competition(ctx: FindingContext, devices: list[tuple[DeviceEntry, Pool]]
                        ) -> list[str]:
    """The shared counters that ``devices`` together need more of than their pool has left,
    each with the devices that consume it (``counter set cs: mem (needs 4, 2 left) for whole
    (2), half-0 (1), half-1 (1)``); empty when they fit together."""
    totals: dict[tuple[str, str, str], list[tuple[DeviceEntry, Number]]] = {}
    pools: dict[str, Pool] = {}
    for device, pool in devices:
        pools[str(pool)] = pool
        for set_name, counters in device.consumes:
            for counter, amount in counters:
                totals.setdefault((str(pool), set_name, counter), []).append((device, amount))
    found = []
    for (pool_name, set_name, counter), users in sorted(totals.items()):
        available, _overdrawn = ctx.allocator.available_counters(pools[pool_name])
        left = available.get(set_name, {}).get(counter, 0)
        needed = sum(amount for _, amount in users)
        if needed > left:
            fmt = _counter_format(users[0][0], set_name, counter)
            who = ", ".join(f"{device.name} ({_amount(amount, fmt)})" for device, amount in users)
            found.append(f"counter set {set_name}: {counter} (needs {_amount(needed, fmt)}, "
                         f"{_amount(left, fmt)} left) for {who}")
    return found


def _taint_text(taint: DeviceTaint) -> str:
    return f"{taint.key}={taint.value or ''}:{taint.effect}"


def _taint_source(ctx: FindingContext, device: DeviceEntry, taint: DeviceTaint) -> str:
    if any(t is taint for t in device.device.taints or ()):
        return ""
    rules = [r.metadata.name for r in ctx.snapshot.taint_rules if r.spec.taint == taint]
    return f" (DeviceTaintRule {', '.join(n or '' for n in rules)})" if rules else ""


def device_finding(ctx: FindingContext, spec: RequestSpec, device: DeviceEntry, pool: Pool,
                   check: str) -> DeviceFinding:
    """Why ``device`` fails ``check`` (a diagnosis stage) for the request ``spec``."""
    base = (device.name, device.driver, device.id[1], FUNNEL_NAMES.get(check, check))
    if check in ("in_class", "match_request"):
        source, exprs = _selectors(spec, check)
        found = _first_failing(exprs, device)
        if found is not None:
            return _selector_finding(ctx, device, check, source, found)
        if check == "in_class":
            return DeviceFinding(*base, f"{ctx.label(device)} is not in class "
                                        f"{spec.device_class}")
        if device.binding_conditions:
            return DeviceFinding(*base, f"{ctx.label(device)} has binding conditions, which the "
                                        "scheduler's features do not allow")
        features = ctx.snapshot.resources.features
        if device.slice.skips_node_operations and features.variant == "incubating" and \
                features.version.follows(SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE):
            return DeviceFinding(*base, f"{ctx.label(device)} is in a slice with "
                                        "skipNodeOperations, which the scheduler does not allocate "
                                        "with DRAOptionalNodeOperations off")
        return DeviceFinding(*base, f"{ctx.label(device)} is not available on node {ctx.node} "
                                    "(its own node selection)")
    if check == "free":
        holders = ctx.holders(*device.id)
        return DeviceFinding(*base, f"{ctx.label(device)} is allocated to "
                                    f"{', '.join(holders) or 'another claim'}",
                             held_by=holders)
    if check == "capacity":
        reason, lacking = _capacity_reason(ctx, spec, device)
        return DeviceFinding(*base, reason, held_by=ctx.holders(*device.id), capacity=lacking)
    if check == "counters":
        shortages = _counter_shortages(ctx, device, pool)
        return DeviceFinding(*base, _counter_reason(ctx, device, pool, shortages),
                             counters=shortages)
    if check == "untainted":
        taints = [t for t in device.blocking_taints()
                  if not tolerated(t, spec.tolerations)]
        texts = [_taint_text(t) + _taint_source(ctx, device, t) for t in taints]
        return DeviceFinding(*base, f"{ctx.label(device)} has taint {', '.join(texts)}, which "
                                    "the request does not tolerate",
                             taints=[_taint_text(t) for t in taints])
    return DeviceFinding(*base, f"{ctx.label(device)} fits")
