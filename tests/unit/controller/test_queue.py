"""The work queue: de-duplication, one worker per key, retry back-off."""

from __future__ import annotations

import asyncio

from kubedra.controller.queue import WorkQueue


async def test_a_queued_key_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_a_key_added_while_processed_comes_back_once_it_is_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed to a second worker while the first has it
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"


async def test_failures_retry_after_a_doubling_delay_and_success_resets_them() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.02, max_delay=0.05)
    loop = asyncio.get_running_loop()
    queue.add("a")
    key = await queue.get()
    for failures, delay in enumerate([0.02, 0.04, 0.05], 1):  # capped at max_delay
        queue.done(key, failed=True)
        assert queue.failures("a") == failures
        assert len(queue) == 0  # not before its back-off
        started = loop.time()
        key = await asyncio.wait_for(queue.get(), timeout=5)
        assert loop.time() - started >= delay * 0.9
    queue.done(key)
    assert queue.failures("a") == 0


async def test_keys_added_within_a_delay_come_once_and_no_later_than_the_first_deadline() -> None:
    """Real deadlines, with half a second of slack each way: at 0.1 s margins a loaded machine
    (load 23) overran the first sleep past "a"'s deadline and "a" came first."""
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_within("a", 1.0)
    assert (len(queue), queue.busy()) == (0, 1)  # due soon: the operator is not idle
    await asyncio.sleep(0.5)
    queue.add_within("a", 1.0)  # the burst goes on: the first deadline holds
    queue.add_within("b", 0.25)
    assert await asyncio.wait_for(queue.get(), timeout=5) == "b"
    assert await asyncio.wait_for(queue.get(), timeout=5) == "a"
    assert 0.95 <= loop.time() - started < 1.45  # the second deadline would be 1.5 s
    assert len(queue) == 0
    await asyncio.sleep(0.6)
    assert len(queue) == 0  # the second call came within the first delay: nothing more


async def test_adding_a_key_now_covers_its_pending_delayed_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_within("a", 0.05)
    queue.add("a")
    assert await queue.get() == "a"
    queue.done("a")
    await asyncio.sleep(0.1)
    assert (len(queue), queue.busy()) == (0, 0)
    queue.add_within("a", 0)  # no delay: at once
    assert len(queue) == 1


async def test_busy_counts_each_key_queued_active_or_due_soon_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    assert await queue.get() == "a"
    queue.add_within("a", 60)  # active and due soon: one key
    queue.add_within("b", 60)  # queued: no timer
    queue.add_within("d", 60)  # due soon only
    queue.add("a")  # active: dirty, not queued again
    assert (len(queue), queue.busy()) == (2, 4)  # a, b, c, d
    queue.done("a")  # dirty: queued again, its timer dropped
    assert (len(queue), queue.busy()) == (3, 4)
    for key in ("b", "c", "a"):
        assert await queue.get() == key
        queue.done(key)
    assert queue.busy() == 1  # d, due soon
