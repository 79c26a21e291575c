"""The overlay of the operator's own slice writes on the watched slices, and the conditions."""

from __future__ import annotations

from typing import Any

from kubedra.api.resource import Condition
from kubedra.controller.conditions import get_condition, set_condition
from kubedra.controller.state import SliceOverlay


def slice_(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def test_a_write_hides_the_older_watched_copy_until_the_watch_catches_up() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", slice_("s-0", "12"))
    assert overlay.merge("inv", [slice_("s-0", "11")]) == [slice_("s-0", "12")]
    assert overlay.merge("inv", [slice_("s-0", "12")]) == [slice_("s-0", "12")]
    assert overlay.written == {"inv": {}}  # caught up: forgotten
    assert overlay.merge("inv", [slice_("s-0", "13")]) == [slice_("s-0", "13")]


def test_a_created_slice_shows_before_the_watch_sees_it() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-1", slice_("s-1", "5"))
    assert overlay.merge("inv", [slice_("s-0", "4")]) == [slice_("s-0", "4"), slice_("s-1", "5")]


def test_a_deleted_slice_is_hidden_until_the_watch_drops_it() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", None)
    assert overlay.merge("inv", [slice_("s-0", "4")]) == []
    assert overlay.merge("inv", []) == []
    assert overlay.written == {"inv": {}}
    overlay.forget("inv")
    assert overlay.written == {}


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    other = Condition(type="Other", status="True", reason="R", message="",
                      last_transition_time="t0")
    first = set_condition([other], type_="Ready", status=False, reason="A", message="a",
                          now="t1", observed_generation=2)
    same = set_condition(first, type_="Ready", status=False, reason="B", message="b", now="t2")
    flipped = set_condition(same, type_="Ready", status=True, reason="C", message="c", now="t3")
    assert [c.type for c in first] == ["Other", "Ready"]
    ready = [get_condition(c, "Ready") for c in (first, same, flipped)]
    assert [(c.status, c.reason, c.last_transition_time, c.observed_generation)
            for c in ready if c] == [("False", "A", "t1", 2), ("False", "B", "t1", None),
                                     ("True", "C", "t3", None)]
    assert get_condition(flipped, "Other") == other
    assert get_condition(None, "Ready") is None
