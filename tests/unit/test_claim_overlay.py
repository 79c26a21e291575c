"""The operator remembers its own claim status writes until the watch shows them
(``ClaimOverlay``): a reconcile in between must see what was written, not the stale cache, or
it writes the same ``Ready`` condition again (bench/scale.py measured 1.5 writes per claim)."""

from typing import Any

from kubedra.controller.state import ClaimOverlay

KEY = ("ns", "claim")


def claim(rv: int, uid: str = "u1", ready: bool = False) -> dict[str, Any]:
    devices = [{"driver": "gpu.kubedra.io", "pool": "n", "device": "gpu-0",
                "conditions": [{"type": "Ready", "status": "True"}]}] if ready else []
    return {"metadata": {"name": "claim", "namespace": "ns", "uid": uid,
                         "resourceVersion": str(rv)}, "status": {"devices": devices}}


def test_nothing_written_gives_the_watched_claim() -> None:
    watched = claim(5)
    assert ClaimOverlay().merge(KEY, watched) is watched
    assert ClaimOverlay().merge(KEY, None) is None


def test_a_write_the_watch_has_not_shown_wins() -> None:
    overlay = ClaimOverlay()
    written = claim(7, ready=True)
    overlay.record(KEY, written)
    assert overlay.merge(KEY, claim(6)) is written
    assert overlay.merge(KEY, claim(6)) is written  # until the watch catches up


def test_the_watch_catching_up_drops_the_write() -> None:
    overlay = ClaimOverlay()
    overlay.record(KEY, claim(7, ready=True))
    caught_up = claim(7, ready=True)
    assert overlay.merge(KEY, caught_up) is caught_up
    assert overlay.written == {}
    newer = claim(9)
    assert overlay.merge(KEY, newer) is newer


def test_a_recreated_or_deleted_claim_drops_the_write() -> None:
    overlay = ClaimOverlay()
    overlay.record(KEY, claim(7, ready=True))
    other = claim(3, uid="u2")
    assert overlay.merge(KEY, other) is other
    overlay.record(KEY, claim(7, ready=True))
    assert overlay.merge(KEY, None) is None
    assert overlay.written == {}
