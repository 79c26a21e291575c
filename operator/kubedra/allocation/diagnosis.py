"""Why a claim does not fit on a node: per request, how many devices pass each check.

Computed only on demand (after a failure, or for ``kubedra explain``), with the checks the search
makes (:mod:`kubedra.allocation.checks`), in funnel order (:mod:`kubedra.allocation.funnel`).
When enough devices pass all checks, the claim's constraints (or other requests competing for
the same devices) are what failed; ``constraints`` then says, per constraint, how many of those
devices can go together.
"""

from __future__ import annotations

from kubedra.allocation.checks import SearchState, first_failed_stage
from kubedra.allocation.constraints import MISSING, DistinctAttribute, lookup_attribute
from kubedra.allocation.funnel import FITS, STAGES, RequestDiagnosis
from kubedra.allocation.requests import RequestData


def diagnose_request(search: SearchState, ci: int, data: RequestData) -> RequestDiagnosis:
    """The funnel of one request of claim ``ci`` (the search must have been prepared)."""
    snapshot = search.snapshot
    class_only = snapshot.selector_set(data.selectors.expressions[:data.selectors.class_count],
                                        ())
    request_only = snapshot.selector_set(
        (), data.selectors.expressions[data.selectors.class_count:])
    result = RequestDiagnosis(claim=data.claim_label, request=data.full_name,
                              node=search.node.name, needed=data.count)
    for pool in search.pools.pools:
        if pool.incomplete:
            result.unusable_pools[str(pool)] = f"incomplete ({pool.incomplete_detail})"
        elif pool.invalid:
            result.unusable_pools[str(pool)] = f"invalid: {pool.invalid_reason}"
    for name, generation in search.pools.obsolete.items():
        result.unusable_pools[name] = (f"being updated (its slices for the node are of "
                                       f"generation {generation}, a newer one is published)")
    current = {(d.driver, d.slice.pool_name, d.name) for d in search.pools.devices}
    for entry, pool_generation in search.pools.outdated:
        matching = [d.name for d in entry.devices if (d.driver, entry.pool_name, d.name)
                    not in current and class_only.outcome(d) is True
                    and request_only.outcome(d) is True]
        if matching:
            result.outdated.append((f"{entry.driver}/{entry.pool_name}", entry.name,
                                    entry.generation, pool_generation, matching))
    counts: dict[str, int] = dict.fromkeys(STAGES, 0)
    fitting = []
    for device, pool in zip(search.pools.devices, search.pools.device_pools, strict=True):
        verdict = first_failed_stage(search, data, ci, device, pool, class_only, request_only,
                                     result.errors)
        result.verdicts[repr(device)] = verdict
        for stage in STAGES:
            if stage == verdict:
                break
            counts[stage] += 1
        if verdict == FITS:
            fitting.append(device)
    result.counts = counts
    subrequest = data.name if data.parent is not None else None
    for constraint in search.constraints[ci]:
        if not constraint.applies_to(data.base_name, subrequest):
            continue
        keys = [lookup_attribute(d, constraint.attribute) for d in fitting]
        keys = [k for k in keys if k is not MISSING]
        kind = "distinctAttribute" if isinstance(constraint, DistinctAttribute) \
            else "matchAttribute"
        if isinstance(constraint, DistinctAttribute):
            together = len({k for k in keys if k is not None}) + (None in keys)
        else:
            sizes: dict[object, int] = {}
            for key in keys:
                sizes[key] = sizes.get(key, 0) + 1
            together = max((1 if key is None else n for key, n in sizes.items()), default=0)
        result.constraints[f"{kind} {constraint.attribute}"] = together
    return result


def diagnose_search(search: SearchState) -> list[RequestDiagnosis]:
    """The funnel of every request and subrequest of every claim of a prepared search."""
    return [diagnose_request(search, ci, data)
            for ci, claim_requests in enumerate(search.requests)
            for alternatives in claim_requests for data in alternatives]

