"""Polling with a deadline, for tests and the demo (never fixed sleeps)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], *, timeout: float = 30.0,
                     interval: float = 0.2, what: str = "condition") -> T:
    """Await ``probe()`` every ``interval`` seconds until it returns a truthy value, and return
    that value.

    Exceptions raised by ``probe`` count as "not yet" (the last one is reported).

    Raises:
        AssertionError: ``timeout`` seconds passed; the message names ``what`` and the last
            value or exception seen.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = await probe()
            if value:
                return value
            last = value
        except Exception as err:
            last = err
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; "
                                 f"last result: {last!r}")
        await asyncio.sleep(interval)
