"""An attach step for tests (``KUBEDRA_ATTACHER=tests.support.scripted_attacher:
ScriptedAttacher``), scripted by device name: a device named ``*-flaky`` fails its first
attach for each claim and attaches on the next; ``*-stuck`` never answers (kube-scheduler
waits until its binding timeout); every other device attaches at once."""

from __future__ import annotations

from kubedra.binding.attach import AttachRequest, AttachResult, ImmediateAttacher


class ScriptedAttacher:
    """See the module docstring; remembers the failed first attempts in memory."""

    def __init__(self) -> None:
        self._failed: set[tuple[str, str]] = set()

    async def attach(self, request: AttachRequest) -> AttachResult:
        """Fail, wait or attach as the device's name says."""
        if request.device.endswith("-stuck"):
            return AttachResult("Pending", f"device {request.device} never attaches (test)")
        attempt = (request.claim_uid, request.device)
        if request.device.endswith("-flaky") and attempt not in self._failed:
            self._failed.add(attempt)
            return AttachResult("Failed", f"the fabric port of {request.device} did not come "
                                          "up (test: the first attach fails)")
        return await ImmediateAttacher().attach(request)
