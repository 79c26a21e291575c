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


def test_a_write_the_watch_went_past_is_dropped_even_if_the_slice_is_gone() -> None:
    """Issue 16, item 1: the operator updates s-0 (rv 12) and the slice is deleted (rv 13)
    before the watch showed the update; kopf hands on only the DELETED event. The overlay used
    to keep the update for good (the slice was never recreated); the DELETED event, newer than
    the write, now drops it, and the watched state (no s-0) is the truth."""
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", slice_("s-0", "12"))
    overlay.observe("inv", "s-0", "11", deleted=False)  # an older event: still ours
    assert overlay.merge("inv", []) == [slice_("s-0", "12")]
    overlay.observe("inv", "s-0", "13", deleted=True)
    assert overlay.merge("inv", []) == []
    assert overlay.written == {"inv": {}}


def test_an_answer_that_comes_after_the_watch_went_past_it_is_not_kept() -> None:
    """Issue 16, item 1, the other order: the watch delivers the update (rv 12) and the delete
    (rv 13) before the operator reads the answer to its update, which it then records. The
    overlay kept that answer for good, standing for a slice that is gone (the slice was never
    recreated: a flaky e2e failure); the watch has gone past rv 12, so the watched state is
    the truth."""
    overlay = SliceOverlay()
    overlay.observe("inv", "s-0", "12", deleted=False)
    overlay.observe("inv", "s-0", "13", deleted=True)
    overlay.record("inv", "s-0", slice_("s-0", "12"))
    assert overlay.merge("inv", []) == []
    assert overlay.written == {"inv": {}}
    overlay.observe("other", "s-7", "20", deleted=False)  # any slice's event moves the watch on
    overlay.record("inv", "s-1", slice_("s-1", "19"))
    assert overlay.merge("inv", []) == []
    overlay.record("inv", "s-1", slice_("s-1", "21"))  # newer than the watch: kept
    assert overlay.merge("inv", []) == [slice_("s-1", "21")]
    overlay.record("inv", "s-2", slice_("s-2", "opaque"))  # not a number: kept, as before
    assert overlay.merge("inv", []) == [slice_("s-1", "21"), slice_("s-2", "opaque")]


def test_the_own_update_event_drops_the_write() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", slice_("s-0", "12"))
    overlay.observe("other", "s-0", "12", deleted=False)  # another inventory's slice
    overlay.observe("inv", "s-0", "12", deleted=False)
    assert overlay.written == {"inv": {}}


def test_a_delete_is_dropped_by_the_deleted_event_only() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", None)
    overlay.observe("inv", "s-0", "20", deleted=False)
    assert overlay.merge("inv", [slice_("s-0", "4")]) == []
    overlay.observe("inv", "s-0", "21", deleted=True)
    assert overlay.written == {"inv": {}}


def test_a_write_the_api_server_contradicts_is_discarded() -> None:
    overlay = SliceOverlay()
    overlay.record("inv", "s-0", slice_("s-0", "12"))
    overlay.discard("inv", "s-0")
    overlay.discard("inv", "s-9")
    assert overlay.merge("inv", []) == []


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
