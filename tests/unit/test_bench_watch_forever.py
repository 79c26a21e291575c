"""bench.scale.watch_forever: a list answered with an error, or failing in a way the bench
did not foresee, is relisted, not the end of the watch (a 1,000-node MIG run's slice watch
ended silently on a list answered ``504 Timeout`` and its phase waited out its hour,
bench/RESULTS.md, scale, round 16)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bench.scale import watch_forever

TIMEOUT = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "Timeout: request did not complete within requested timeout - context "
                      "deadline exceeded", "reason": "Timeout", "code": 504}
"""An answer the API server gives a request it could not finish in time (the Go peer's
creates got it in round 16)."""


class _Stream:
    """A watch answer whose stream ends at once (as a server-side timeout ends one)."""

    async def readline(self) -> bytes:
        return b""


class _Answer:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.content = _Stream()

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_an_error_answer_or_any_failure_is_relisted(capsys: Any) -> None:
    lists: list[int] = []

    async def list_things(*, _preload_content: bool, watch: bool = False,
                          resource_version: str | None = None,
                          timeout_seconds: int | None = None) -> _Answer:
        """Things, listed or watched."""
        if watch:
            return _Answer(b"")
        lists.append(1)
        if len(lists) == 1:
            return _Answer(json.dumps(TIMEOUT).encode())
        if len(lists) == 2:
            raise RuntimeError("a failure the bench did not foresee")
        return _Answer(json.dumps({"metadata": {"resourceVersion": "7"},
                                   "items": [{"metadata": {"name": "slice-a"}}]}).encode())

    seen: list[tuple[str, str]] = []
    listed = asyncio.Event()

    def on_object(kind: str, obj: dict[str, Any]) -> None:
        seen.append((kind, obj["metadata"]["name"]))
        listed.set()

    watching = asyncio.create_task(watch_forever(list_things, on_object=on_object))
    try:
        await asyncio.wait_for(listed.wait(), timeout=10)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
    assert seen[0] == ("ADDED", "slice-a")
    assert len(lists) >= 3
    err = capsys.readouterr().err
    assert "bench.scale: list failed, relisting: 504 Timeout: request did not complete" in err
    assert "RuntimeError: a failure the bench did not foresee" in err
