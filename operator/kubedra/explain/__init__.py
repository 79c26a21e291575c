"""``kubedra explain`` and ``kubedra simulate``: why a claim is pending, and what would fit.

Built on kubedra's allocator (:mod:`kubedra.allocation`, the same decisions as the v1.37.2
kube-scheduler) and its diagnosis. The command line (also the kubectl plugin ``kubectl dra``)
and the operator's Events on claims of unschedulable pods share one implementation:
:func:`explain_claim` over a :class:`ClusterSnapshot`.
"""

from kubedra.explain.claims import explain_claim
from kubedra.explain.model import ClaimExplanation
from kubedra.explain.simulate import Simulation, simulate_claim
from kubedra.explain.snapshot import ClusterSnapshot, PodPlacement

__all__ = ["ClaimExplanation", "ClusterSnapshot", "PodPlacement", "Simulation",
           "explain_claim", "simulate_claim"]
