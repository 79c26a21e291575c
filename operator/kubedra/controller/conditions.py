"""``metav1.Condition`` lists: set a condition, keeping its transition time when its status
does not change (the convention of ``meta.SetStatusCondition`` in apimachinery)."""

from __future__ import annotations

from typing import Any


def set_condition(existing: list[dict[str, Any]] | None, *, type_: str, status: bool,
                  reason: str, message: str, now: str,
                  observed_generation: int | None = None) -> list[dict[str, Any]]:
    """A copy of ``existing`` with condition ``type_`` set.

    ``lastTransitionTime`` becomes ``now`` only if the condition is new or its status flips.
    """
    value = "True" if status else "False"
    previous = next((c for c in existing or [] if c.get("type") == type_), None)
    transition = (previous["lastTransitionTime"]
                  if previous and previous.get("status") == value and
                  previous.get("lastTransitionTime") else now)
    condition: dict[str, Any] = {"type": type_, "status": value, "reason": reason,
                                 "message": message, "lastTransitionTime": transition}
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    others = [c for c in existing or [] if c.get("type") != type_]
    return [*others, condition]


def get_condition(conditions: list[dict[str, Any]] | None, type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` or None."""
    return next((c for c in conditions or [] if c.get("type") == type_), None)
