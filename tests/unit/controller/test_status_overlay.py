"""The operator remembers its own status writes until the watch shows them
(``StatusOverlay``): a reconcile in between must see what was written, not the stale cache, or
it writes the same status again with a new transition time (bench/scale.py measured 1.5 writes
per claim, and two status writes per inventory when a slice event came before the watch showed
the first)."""

import tracemalloc
from typing import Any

import msgspec

from bench.cache_memory import _objects
from kubedra.controller.kept import LEFT_OUT_METADATA
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
    assert overlay.merge(KEY, claim(6)) == written
    assert overlay.merge(KEY, claim(6)) == written  # until the watch catches up


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
    assert overlay.merge("n-gpu", reported) == written
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
    assert overlay.written["n-gpu"].resource_version == "11"  # merge unchanged


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


def test_the_watch_event_of_a_write_drops_it_before_the_next_reconcile() -> None:
    """While a fleet is published every inventory's answer waited for its next reconcile,
    thousands queued behind each other; its watch event is enough (the index holds it)."""
    overlay: StatusOverlay[str] = StatusOverlay()
    overlay.record("n-gpu", inventory(11, allocations=1))
    overlay.observe("n-gpu", inventory(10))  # older: the write still stands
    assert overlay.merge("n-gpu", inventory(10)) == {
        **inventory(11, allocations=1), "metadata": {
            k: v for k, v in inventory(11)["metadata"].items() if k != "managedFields"}}
    overlay.observe("n-gpu", inventory(11, allocations=1))
    assert overlay.written == {}
    overlay.record("n-gpu", inventory(12))
    overlay.observe("n-gpu", {"metadata": {"uid": "i2", "resourceVersion": "3"}})  # recreated
    assert overlay.written == {}


def test_a_written_inventory_is_kept_as_a_record_not_as_the_answer() -> None:
    """The answer to an 8-H200 inventory's status write (managedFields included, the report in
    the full form of an earlier agent) is 44 KiB of dicts; kept whole until the watch showed
    it, 5,000 of them were held at a fleet's publish peak."""
    answer = _objects(2, False, "explicit")[0]
    overlay: StatusOverlay[str] = StatusOverlay()
    overlay.record("other", msgspec.json.decode(answer[1]))  # the dictionary: the kind's first
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    decoded = msgspec.json.decode(answer[0])
    answer_size = tracemalloc.get_traced_memory()[0] - before
    overlay.record("n-gpu", decoded)
    del decoded
    held = tracemalloc.get_traced_memory()[0] - before  # the record, msgspec's key cache
    tracemalloc.stop()
    assert (answer_size > 40 * 1024, held < answer_size / 4) == (True, True), (answer_size, held)
    written = msgspec.json.decode(answer[0])
    older = {**written, "metadata": {**written["metadata"], "resourceVersion": "1"}}
    assert overlay.merge("n-gpu", older) == {**written, "metadata": {
        k: v for k, v in written["metadata"].items() if k not in LEFT_OUT_METADATA}}
