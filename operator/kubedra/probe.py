"""``kubedra probe``: ask a kubedra process for its ``/healthz`` over a Unix socket, for an
exec probe where the process cannot have a port of its own (operator replicas on the host
network of one node would all bind the same port).

The process serves the socket with ``--health-socket``
(:func:`kubedra.metrics.start_metrics_server`); this command uses only the standard library,
so the probe starts in the time of Python and click.
"""

from __future__ import annotations

import http.client
import math
import socket
import sys

import click


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over the Unix socket at ``path``."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


def get_health(path: str, *, timeout: float = 5.0) -> tuple[int, str]:
    """GET ``/healthz`` over the Unix socket ``path``; the HTTP status and the body (JSON).

    Raises:
        OSError: the socket cannot be reached (missing, refused, timed out).
    """
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _probe_timeout(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """``--timeout``: above 0 and at most an hour (the socket refuses 0, negative, infinite,
    NaN and huge timeouts with a traceback; a probe never needs to wait longer).

    Raises:
        click.BadParameter: the value is out of that range.
    """
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise click.BadParameter(f"{value} is not in the range 0<x<=3600 (seconds)")
    return value


@click.command("probe", short_help="Ask a kubedra process for /healthz over its Unix socket.")
@click.option("--socket", "path", required=True, type=click.Path(dir_okay=False),
              help="The Unix socket the process serves (its --health-socket)")
@click.option("--timeout", type=float, default=5.0, show_default=True,
              callback=_probe_timeout, help="Seconds")
def probe_command(path: str, timeout: float) -> None:
    """Print the process's /healthz; exit 0 when it answers 200 (healthy), else 1."""
    try:
        status, body = get_health(path, timeout=timeout)
    except OSError as err:
        click.echo(f"{path}: {err}", err=True)
        sys.exit(1)
    click.echo(body)
    sys.exit(0 if status == 200 else 1)
