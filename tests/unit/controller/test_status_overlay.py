"""The operator remembers its own status writes until the watch shows them
(``StatusOverlay``): a reconcile in between must see what was written, not the stale cache, or
it writes the same status again with a new transition time (bench/scale.py measured 1.5 writes
per claim, and two status writes per inventory when a slice event came before the watch showed
the first)."""

from typing import Any

from kubedra.controller.state import StatusOverlay

KEY = ("ns", "claim")


def claim(rv: int, uid: str = "u1", ready: bool = False) -> dict[str, Any]:
    devices = [{"driver": "gpu.kubedra.io", "pool": "n", "device": "gpu-0",
                "conditions": [{"type": "Ready", "status": "True"}]}] if ready else []
    return {"metadata": {"name": "claim", "namespace": "ns", "uid": uid,
                         "resourceVersion": str(rv)}, "status": {"devices": devices}}


def test_nothing_written_gives_the_watched_claim() -> None:
    watched = claim(5)
    assert StatusOverlay().merge(KEY, watched) is watched
    assert StatusOverlay().merge(KEY, None) is None


def test_a_write_the_watch_has_not_shown_wins() -> None:
    overlay = StatusOverlay()
    written = claim(7, ready=True)
    overlay.record(KEY, written)
    assert overlay.merge(KEY, claim(6)) is written
    assert overlay.merge(KEY, claim(6)) is written  # until the watch catches up


def test_the_watch_catching_up_drops_the_write() -> None:
    overlay = StatusOverlay()
    overlay.record(KEY, claim(7, ready=True))
    caught_up = claim(7, ready=True)
    assert overlay.merge(KEY, caught_up) is caught_up
    assert overlay.written == {}
    newer = claim(9)
    assert overlay.merge(KEY, newer) is newer


def test_a_recreated_or_deleted_claim_drops_the_write() -> None:
    overlay = StatusOverlay()
    overlay.record(KEY, claim(7, ready=True))
    other = claim(3, uid="u2")
    assert overlay.merge(KEY, other) is other
    overlay.record(KEY, claim(7, ready=True))
    assert overlay.merge(KEY, None) is None
    assert overlay.written == {}


def test_an_inventory_reads_its_own_status_write_until_the_watch_shows_it() -> None:
    overlay: StatusOverlay[str] = StatusOverlay()
    reported = {"metadata": {"name": "n-gpu", "uid": "i1", "resourceVersion": "10"},
                "status": {"discovered": {"devices": []}}}
    written = {**reported, "metadata": {**reported["metadata"], "resourceVersion": "11"},
               "status": {**reported["status"], "conditions": [
                   {"type": "Published", "status": "True", "reason": "SlicesPublished"}]}}
    overlay.record("n-gpu", written)
    assert overlay.merge("n-gpu", reported) is written
    assert overlay.merge("other", reported) is reported
    assert overlay.merge("n-gpu", None) is None  # deleted: nothing kept
    assert overlay.written == {}


def inventory(rv: int, allocations: int = 0, discovered: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "n-gpu", "uid": "i1", "resourceVersion": str(rv),
                         "managedFields": [{"manager": "kubedra-operator"}] if rv > 10 else []},
            "spec": {"nodeName": "n"},
            "status": {"discovered": {"devices": [{"name": f"gpu-{i}"}
                                                  for i in range(discovered)]},
                       "allocations": [{"device": f"gpu-{i}"} for i in range(allocations)]}}


def test_the_watch_event_of_a_quiet_write_is_its_echo_once() -> None:
    overlay: StatusOverlay[str] = StatusOverlay()
    overlay.record("n-gpu", inventory(11, allocations=1), quiet=True)
    assert not overlay.is_quiet_echo("n-gpu", inventory(10))  # an older event: reconcile
    assert overlay.is_quiet_echo("n-gpu", inventory(11, allocations=1))
    assert not overlay.is_quiet_echo("n-gpu", inventory(11, allocations=1))  # once only
    assert overlay.written["n-gpu"]["metadata"]["resourceVersion"] == "11"  # merge unchanged


def test_a_newer_version_or_a_loud_write_is_no_echo() -> None:
    overlay: StatusOverlay[str] = StatusOverlay()
    overlay.record("n-gpu", inventory(11, allocations=1), quiet=True)
    assert not overlay.is_quiet_echo("n-gpu", inventory(12, allocations=1))  # someone wrote
    assert not overlay.is_quiet_echo("n-gpu", inventory(11, allocations=1))  # entry gone
    overlay.record("n-gpu", inventory(13, allocations=1), quiet=True)
    overlay.record("n-gpu", inventory(14, allocations=2))  # a full reconcile's write
    assert not overlay.is_quiet_echo("n-gpu", inventory(14, allocations=2))


def test_a_write_without_a_resource_version_is_no_quiet_write() -> None:
    overlay: StatusOverlay[str] = StatusOverlay()
    unversioned = inventory(11, allocations=1)
    del unversioned["metadata"]["resourceVersion"]
    overlay.record("n-gpu", unversioned, quiet=True)
    assert overlay.quiet == {}
    assert not overlay.is_quiet_echo("n-gpu", unversioned)
