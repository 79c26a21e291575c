"""``kubedra explain`` and ``kubedra simulate``: why a claim is pending, and what would fit.

Built on kubedra's allocator (:mod:`kubedra.allocation`, the same decisions as the v1.37.2
kube-scheduler) and its diagnosis. The command line (also the kubectl plugin ``kubectl dra``)
and the operator's Events on claims of unschedulable pods share one implementation:
:func:`explain_claim` over a :class:`ClusterSnapshot`.

The names below are imported on first use (PEP 562), so that the command line can start
reading the cluster (:mod:`kubedra.explain.kubectl`) before the allocator, the models and CEL
are imported: the two then overlap (bench/cli.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubedra.explain.claims import explain_claim
    from kubedra.explain.model import ClaimExplanation
    from kubedra.explain.simulate import Simulation, simulate_claim
    from kubedra.explain.snapshot import ClusterSnapshot, PodPlacement

__all__ = ["ClaimExplanation", "ClusterSnapshot", "PodPlacement", "Simulation",
           "explain_claim", "simulate_claim"]

_MODULES = {"explain_claim": "claims", "ClaimExplanation": "model", "Simulation": "simulate",
            "simulate_claim": "simulate", "ClusterSnapshot": "snapshot",
            "PodPlacement": "snapshot"}


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported now (others: ``AttributeError``, so that ``from
    kubedra.explain import pods`` imports the submodule)."""
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
