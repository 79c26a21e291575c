"""The attach step of devices with binding conditions (KEP-5007, beta and on by default in
1.37), and the conditions it sets.

A device of a network-attached pool (an inventory with ``nodeSelector`` or ``allNodes``) may
declare ``bindingConditions`` and ``bindingFailureConditions``. kube-scheduler copies them into
the allocation result and, in PreBind, waits until every binding condition is ``True`` in the
claim's ``status.devices[]`` entry of that device; a ``True`` failure condition, or
``bindingTimeout`` (600 s by default), sends the pod back to scheduling and the claim is
deallocated (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``,
``bindClaim``). The operator runs an :class:`Attacher` for every such result and turns its
:class:`AttachResult` into conditions with :func:`binding_conditions` (all ``True``; the
operator writes them next to its ``Ready`` condition).

Attachers: :class:`ImmediateAttacher` (the default) attaches at once; any class with the
:class:`Attacher` shape can be named by import path in the operator's ``attacher`` setting
(``KUBEDRA_ATTACHER=package.module:Class``), e.g. one that calls a fabric manager.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

AttachState = Literal["Attached", "Failed", "Pending"]
ATTACHED_REASON = "Attached"
FAILED_REASON = "AttachFailed"
DEFAULT_ATTACHER = "immediate"


@dataclass(frozen=True)
class AttachRequest:
    """One allocated device that has binding conditions: the claim and the result."""

    namespace: str
    claim: str
    claim_uid: str
    request: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class AttachResult:
    """``Attached`` (binding conditions True), ``Failed`` (failure conditions True) or
    ``Pending`` (nothing set yet: kube-scheduler keeps waiting); ``message`` says why."""

    state: AttachState
    message: str


class Attacher(Protocol):
    """Attaches a device to the node of the claim's pod. Called again for the same request
    until it answers ``Attached`` or ``Failed``; must be idempotent."""

    async def attach(self, request: AttachRequest) -> AttachResult:
        """Attach (or check on) the device."""
        ...


class ImmediateAttacher:
    """The default: every device is attached as soon as it is allocated."""

    async def attach(self, request: AttachRequest) -> AttachResult:
        """Always ``Attached``."""
        return AttachResult("Attached", f"device {request.device} of pool {request.pool} "
                            f"attached for claim {request.namespace}/{request.claim}")


def load_attacher(spec: str) -> Attacher:
    """The attacher the ``attacher`` setting names: ``immediate`` or ``module:Class``.

    Raises:
        ValueError: the spec is neither; ImportError, AttributeError: no such class.
    """
    if spec == DEFAULT_ATTACHER:
        return ImmediateAttacher()
    module, sep, name = spec.partition(":")
    if not sep:
        raise ValueError(f"attacher {spec!r}: use {DEFAULT_ATTACHER} or <module>:<class>")
    attacher: Attacher = getattr(importlib.import_module(module), name)()
    return attacher


def binding_types(result: Mapping[str, Any]) -> list[str]:
    """The binding and failure condition types of one allocation result."""
    return [*(result.get("bindingConditions") or []),
            *(result.get("bindingFailureConditions") or [])]


def attach_decided(result: Mapping[str, Any], conditions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the attach step already answered for ``result``: one of its binding or
    failure conditions is ``True`` in the device's ``conditions`` (raw)."""
    types = set(binding_types(result))
    return any(c.get("type") in types and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True)
class BindingCondition:
    """A condition to set ``True`` on the device's ``status.devices`` entry."""

    type: str
    reason: str
    message: str


def binding_conditions(result: Mapping[str, Any], outcome: AttachResult
                       ) -> list[BindingCondition]:
    """The conditions one allocation ``result`` gets after ``outcome``: each of its
    ``bindingConditions`` when attached; each ``bindingFailureConditions`` when failed; none
    while pending (kube-scheduler keeps waiting)."""
    if outcome.state == "Pending":
        return []
    attached = outcome.state == "Attached"
    names = result.get("bindingConditions" if attached else "bindingFailureConditions") or []
    reason = ATTACHED_REASON if attached else FAILED_REASON
    return [BindingCondition(name, reason, outcome.message) for name in names]
