"""kubedra's structured allocator: the same decisions as a v1.37.2 kube-scheduler.

Upstream: ``k8s.io/dynamic-resource-allocation/structured`` v0.37.2, the *incubating* variant
that the scheduler runs with default feature gates (see :mod:`kubedra.allocation.features`).
``hack/allocator`` wraps that Go code, and ``tests/unit/allocation`` proves both give the same
results on a corpus of scenarios.

Typical use::

    inventory = Inventory(slices, classes, taint_rules)
    allocator = Allocator(inventory, AllocatedState.from_claims(allocated_claims))
    try:
        results = allocator.allocate(NodeInfo("node-1", labels), [claim])
    except AllocationFailed as failure:   # does not fit on this node
        print(failure.reason, failure.diagnose())
"""

from kubedra.allocation.allocator import Allocator
from kubedra.allocation.diagnosis import RequestDiagnosis
from kubedra.allocation.errors import AllocationError, AllocationFailed
from kubedra.allocation.features import (
    DEFAULT_FEATURES,
    AllocatorFeatures,
    UnsupportedFeaturesError,
)
from kubedra.allocation.inventory import Inventory
from kubedra.allocation.node_selection import NodeInfo
from kubedra.allocation.state import AllocatedState

__all__ = [
    "DEFAULT_FEATURES",
    "AllocatedState",
    "AllocationError",
    "AllocationFailed",
    "Allocator",
    "AllocatorFeatures",
    "Inventory",
    "NodeInfo",
    "RequestDiagnosis",
    "UnsupportedFeaturesError",
]
