"""A validating admission webhook served by the test process, to act at the exact moment the
API server admits a request (e.g. pause a component right after it sent a write, before it
sees the answer or the watch event): the API server calls ``on_request`` with each matching
``AdmissionRequest`` and admits the request when it returns.

Usage::

    async with AdmissionHook(plane, workdir, rule, on_request) as hook:
        ...   # matching requests call on_request(request) first

The server listens on 127.0.0.1 with a certificate of its own throw-away CA, whose
certificate goes into the ``ValidatingWebhookConfiguration`` as ``caBundle``; the
configuration is deleted on exit. ``failurePolicy: Ignore``: if the test process cannot answer,
requests pass.
"""

from __future__ import annotations

import base64
import ssl
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from e2e.harness.certs import CertificateAuthority
from e2e.harness.controlplane import ControlPlane


class AdmissionHook:
    """A ``ValidatingWebhookConfiguration`` with one webhook for ``rule`` (an admission
    ``rules`` entry: ``apiGroups``, ``apiVersions``, ``operations``, ``resources``), limited
    to objects matching ``object_selector`` (labels), served here by ``on_request``."""

    def __init__(self, plane: ControlPlane, workdir: Path, rule: dict[str, Any],
                 on_request: Callable[[dict[str, Any]], None],
                 object_selector: dict[str, str] | None = None) -> None:
        self.plane = plane
        self.workdir = workdir
        self.rule = rule
        self.on_request = on_request
        self.object_selector = object_selector or {}
        self.name = f"test-hook-{uuid.uuid4().hex[:8]}"
        self._runner: web.AppRunner | None = None

    async def _review(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.on_request(review["request"])
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": review["request"]["uid"],
                                               "allowed": True}})

    async def __aenter__(self) -> AdmissionHook:
        ca = CertificateAuthority(self.workdir / self.name)
        serving = ca.issue("serving", "test-hook", server_hosts=("127.0.0.1",))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        app = web.Application()
        app.router.add_post("/", self._review)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = self._runner.addresses[0][1]
        self.plane.request("POST", "/apis/admissionregistration.k8s.io/v1/"
                           "validatingwebhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [{
                "name": f"{self.name}.test.kubedra.io",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/",
                                 "caBundle": base64.b64encode(ca.pair.cert.read_bytes())
                                 .decode()},
                "rules": [self.rule],
                "objectSelector": {"matchLabels": self.object_selector},
                "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"]}]})
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self.plane.request("DELETE", "/apis/admissionregistration.k8s.io/v1/"
                           f"validatingwebhookconfigurations/{self.name}")
        if self._runner is not None:
            await self._runner.cleanup()
