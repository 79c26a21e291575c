"""``metav1.Condition`` lists: set a condition, keeping its transition time when its status
does not change (the convention of ``meta.SetStatusCondition`` in apimachinery)."""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.api.resource import Condition


def set_condition(existing: Sequence[Condition] | None, *, type_: str, status: bool,
                  reason: str, message: str, now: str,
                  observed_generation: int | None = None) -> list[Condition]:
    """A copy of ``existing`` with condition ``type_`` set (last; the others keep their order).

    ``lastTransitionTime`` becomes ``now`` (a ``metav1.Time`` string) only if the condition is
    new or its status flips.
    """
    value = "True" if status else "False"
    previous = get_condition(existing, type_)
    transition = (previous.last_transition_time
                  if previous and previous.status == value and previous.last_transition_time
                  else now)
    condition = Condition(type=type_, status=value, reason=reason, message=message,
                          last_transition_time=transition,
                          observed_generation=observed_generation)
    return [*(c for c in existing or () if c.type != type_), condition]


def get_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    """The condition of ``type_`` or None."""
    return next((c for c in conditions or () if c.type == type_), None)
