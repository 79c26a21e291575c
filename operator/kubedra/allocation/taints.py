"""Device taints and the tolerations of requests (KEP-5055).

``ToleratesTaint`` in ``k8s.io/dynamic-resource-allocation/resourceclaim/devicetoleration.go``:
a toleration matches a taint when its effect is empty or equal, its key is empty or equal, and
its operator is ``Exists``, or ``Equal`` (also when empty) with an equal value. Only the effects
``NoSchedule`` and ``NoExecute`` prevent allocation; ``None`` and unknown effects do not.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubedra.api.resource import DeviceTaint, DeviceToleration


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """Whether one toleration matches one taint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in (None, "", "Equal"):
        return (toleration.value or "") == (taint.value or "")
    return toleration.operator == "Exists"


def tolerated(taint: DeviceTaint, tolerations: Iterable[DeviceToleration] | None) -> bool:
    """Whether any of the tolerations matches the taint."""
    return any(tolerates(t, taint) for t in tolerations or ())
