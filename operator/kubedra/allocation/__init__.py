"""kubedra's structured allocator: the same decisions as a v1.37.2 kube-scheduler, or as one of
1.34 to 1.36 (:mod:`kubedra.allocation.versions`: each minor's default features and rules).

Upstream: ``k8s.io/dynamic-resource-allocation/structured`` v0.37.2, the *incubating* variant
that the scheduler runs with default feature gates (see :mod:`kubedra.allocation.features`).
``hack/allocator`` wraps that Go code, and ``tests/unit/allocation`` proves both give the same
results on a corpus of scenarios.

This module is the package's one public face (an import contract in ``pyproject.toml`` keeps
other packages out of its modules, as Go's ``internal/`` does upstream). What it means when
:meth:`Allocator.allocate` raises:

- :class:`AllocationFailed`: the claims do not fit on this node; the scheduler tries other
  nodes. ``failure.diagnose()`` tells, per request, how many devices pass each check
  (:class:`Stage`, in funnel order) — computed only when asked;
- :class:`AllocationError`: the input is broken (CEL error, missing DeviceClass, over 32
  devices); the scheduler aborts the whole scheduling attempt.

kubedra's search finds the same first allocation as upstream's but cuts hopeless branches;
upstream's exhaustive search can run past the scheduler's 10 s filter timeout instead
(kubernetes#131730). :func:`scheduler_search_time` tells when, from the steps upstream's search
takes (:mod:`kubedra.allocation.search_steps`).

Typical use::

    snapshot = ResourceSnapshot(slices, classes, taint_rules)
    allocator = Allocator(snapshot, AllocatedState.from_claims(allocated_claims))
    try:
        results = allocator.allocate(NodeInfo("node-1", labels), [claim])
    except AllocationFailed as failure:   # does not fit on this node
        print(failure.reason, failure.diagnose())

The rest is for explaining decisions (:mod:`kubedra.explain`): the devices and pools of a node
as the search sees them (:class:`NodePools`, :class:`Pool`, :class:`DeviceEntry`), the static
capacity a request consumes, toleration of taints, node selectors, claim labels, a device's
attribute as constraints compare it.
"""

from kubedra.allocation.allocator import Allocator
from kubedra.allocation.capacity import (
    CapacityError,
    allocated_by_name,
    qualified,
    static_consumption,
)
from kubedra.allocation.constraints import MISSING, AttributeKey, lookup_attribute
from kubedra.allocation.errors import AllocationError, AllocationFailed
from kubedra.allocation.features import (
    DEFAULT_FEATURES,
    AllocatorFeatures,
    UnsupportedFeaturesError,
    features_for,
    features_of_server,
)
from kubedra.allocation.funnel import FITS, STAGES, RequestDiagnosis, Stage
from kubedra.allocation.node_selection import (
    CompiledNodeSelector,
    NodeInfo,
    compile_node_selector,
)
from kubedra.allocation.pools import DeviceEntry, NodePools, Pool, SliceEntry, newest_slices
from kubedra.allocation.quantities import Number
from kubedra.allocation.requests import claim_label
from kubedra.allocation.search_steps import (
    FILTER_TIMEOUT_SECONDS,
    FINISHES_WITHIN,
    TIMES_OUT_AFTER,
    DeadEnd,
    SearchSteps,
    SearchTime,
    scheduler_search_time,
    upstream_steps,
)
from kubedra.allocation.snapshot import ResourceSnapshot
from kubedra.allocation.state import AllocatedState, DeviceID
from kubedra.allocation.taints import tolerated
from kubedra.allocation.versions import (
    CAPACITY_AMOUNTS_CHECKED,
    CAPACITY_NAMES_QUALIFIED,
    NEGATIVE_CAPACITY_REQUEST_IS_ERROR,
    SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE,
    TAINT_EFFECT_NONE,
    VERSIONS_COMPARED_BY_PRECEDENCE,
    KubeVersion,
    UnknownKubeVersionError,
    VersionRule,
)

__all__ = [
    "CAPACITY_AMOUNTS_CHECKED",
    "CAPACITY_NAMES_QUALIFIED",
    "DEFAULT_FEATURES",
    "FILTER_TIMEOUT_SECONDS",
    "FINISHES_WITHIN",
    "FITS",
    "MISSING",
    "NEGATIVE_CAPACITY_REQUEST_IS_ERROR",
    "SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE",
    "STAGES",
    "TAINT_EFFECT_NONE",
    "TIMES_OUT_AFTER",
    "VERSIONS_COMPARED_BY_PRECEDENCE",
    "AllocatedState",
    "AllocationError",
    "AllocationFailed",
    "Allocator",
    "AllocatorFeatures",
    "AttributeKey",
    "CapacityError",
    "CompiledNodeSelector",
    "DeadEnd",
    "DeviceEntry",
    "DeviceID",
    "KubeVersion",
    "NodeInfo",
    "NodePools",
    "Number",
    "Pool",
    "RequestDiagnosis",
    "ResourceSnapshot",
    "SearchSteps",
    "SearchTime",
    "SliceEntry",
    "Stage",
    "UnknownKubeVersionError",
    "UnsupportedFeaturesError",
    "VersionRule",
    "allocated_by_name",
    "claim_label",
    "compile_node_selector",
    "features_for",
    "features_of_server",
    "lookup_attribute",
    "newest_slices",
    "qualified",
    "scheduler_search_time",
    "static_consumption",
    "tolerated",
    "upstream_steps",
]
