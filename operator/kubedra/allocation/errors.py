"""How an allocation attempt ends when it does not produce results.

Upstream's ``Allocator.Allocate`` (``k8s.io/dynamic-resource-allocation/structured/allocator.go``)
distinguishes two cases, and so does kubedra:

- the claims do not fit on this node (``nil`` results, or an error wrapping
  ``ErrFailedAllocationOnNode``): the scheduler marks the node unschedulable and tries others.
  kubedra raises :class:`AllocationFailed`, which says which request could not be satisfied;
- the input is broken (a CEL compile or runtime error, a missing DeviceClass, more than 32
  devices for one claim, an ``All`` request over a pool that is being updated, ...): the
  scheduler aborts the whole scheduling attempt. kubedra raises :class:`AllocationError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubedra.allocation.funnel import RequestDiagnosis


class AllocationError(Exception):
    """A fatal error: upstream would abort the scheduling attempt instead of trying other nodes."""


class AllocationFailed(Exception):
    """The claims cannot be allocated on this node.

    Attributes:
        reason: a one-line explanation (``claim default/c, request gpu: ...``).
        claim: ``namespace/name`` of the claim the search could not complete, or ``None`` when
            the failure is not tied to one claim (invalid pools).
        request: the request (``req`` or ``req/subrequest``) the search could not complete.
        invalid_pools: upstream reports this failure as "invalid resource pools were
            encountered" (a pool of the node was invalid and nothing fit).
    """

    def __init__(self, reason: str, *, claim: str | None = None, request: str | None = None,
                 invalid_pools: bool = False,
                 diagnose: Callable[[], list[RequestDiagnosis]] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.claim = claim
        self.request = request
        self.invalid_pools = invalid_pools
        self._diagnose = diagnose

    def diagnose(self) -> list[RequestDiagnosis]:
        """Per request of the failed claims, how many devices passed each check (computed only
        when asked, so that failing fast stays fast)."""
        return self._diagnose() if self._diagnose is not None else []
