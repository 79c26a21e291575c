"""Prometheus registry shared by kubedra's components, and the ``/metrics`` + ``/healthz`` server.

Components register their metrics in :data:`REGISTRY` (e.g.
:class:`kubedra.node.metrics.PluginMetrics`); a process serves it with
:func:`start_metrics_server` on its metrics port (setting ``metrics_port``):

- ``GET /metrics``: the registry in Prometheus text format; with ``secure`` (the default of
  both processes, :func:`kubedra.metrics_auth.secure_serving`) only to a scraper the API
  server authenticates and authorizes, and the TCP ports speak HTTPS;
- ``GET /healthz``: the JSON object the process's ``health`` callable returns, with HTTP 200
  when its ``ok`` is true, else 503; open to anyone (probes).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubedra.metrics_auth import SecureServing, auth_middleware

REGISTRY = CollectorRegistry()
"""The process-wide registry that ``/metrics`` serves."""


async def start_metrics_server(port: int | None, health: Callable[[], Mapping[str, Any]], *,
                               hosts: Sequence[str] = ("0.0.0.0",),
                               registry: CollectorRegistry = REGISTRY,
                               socket_path: str | None = None,
                               secure: SecureServing | None = None) -> web.AppRunner:
    """Serve ``/metrics`` and ``/healthz`` on ``port`` of each address in ``hosts`` (port 0 =
    any free port; None = no TCP port; the default, every interface, suits a pod with a
    network of its own: the operator) and, with ``socket_path``, on that Unix socket too (an
    exec probe asks it: ``kubedra probe``, :mod:`kubedra.probe`); returns the runner, to be
    stopped with ``await runner.cleanup()``, which also removes the socket file. With
    ``secure``, ``/metrics`` needs an authorized bearer token (401, 403 otherwise) on every
    address, the socket's too, and the TCP ports serve HTTPS with ``secure.tls``.

    Raises:
        OSError: the port or the socket cannot be bound.
    """

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        state = dict(health())
        return web.Response(text=json.dumps(state), content_type="application/json",
                            status=200 if state.get("ok") else 503)

    app = web.Application(middlewares=[auth_middleware(secure.auth)] if secure else [])
    app.add_routes([web.get("/metrics", metrics), web.get("/healthz", healthz)])
    bound: list[int] = []  # the inode of the socket file this server bound

    async def remove_socket(_: web.Application) -> None:
        # aiohttp leaves the file behind; remove it unless a successor has bound the path since
        with contextlib.suppress(FileNotFoundError):
            if socket_path is not None and os.stat(socket_path).st_ino in bound:
                os.unlink(socket_path)
    app.on_cleanup.append(remove_socket)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if port is not None:
        for host in hosts:
            await web.TCPSite(runner, host, port,
                              ssl_context=secure.tls if secure else None).start()
    if socket_path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)  # left by a predecessor in the same pod
        await web.UnixSite(runner, socket_path).start()
        bound.append(os.stat(socket_path).st_ino)
    return runner
