"""Reading the live cluster through kubectl, for explain, simulate and dump.

The command line reads the cluster through one ``kubectl proxy`` serving on a Unix socket in a
private temporary directory: kubectl does what the kubeconfig asks (contexts, client
certificates, tokens, exec credential plugins, the in-cluster service account) and passes the
API server's own JSON through, which is then read exactly as a dump is. All lists go to that one
process, over a connection per reading thread (two: :class:`kubedra.explain.sources.
ClusterReading`): a ``kubectl get --raw`` per list costs a kubectl start and a
TLS handshake each (six of them about 0.25 s of CPU, five times the proxy's), and importing
the Kubernetes client instead costs about a second of every run (``kubernetes_asyncio.client``
imports every API group and model; see bench/RESULTS.md, "cli"). ``kubectl dra`` runs as a
kubectl plugin, so kubectl is on ``PATH``.
"""

from __future__ import annotations

import http
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kubedra.options import missing_kubeconfig

_READY = b"Starting to serve on "
"""The line ``kubectl proxy`` prints once it serves."""

JSON = "application/json"
"""The ``Accept`` header of a plain JSON request."""

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""The ``Accept`` header that asks a list as ``PartialObjectMetadataList``: each object's
``metadata`` only (``kubectl get --output-watch-events``' metadata-only form, and client-go's
metadata informers). A Node's status, most of its bytes, then never leaves the API server."""

_PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: a signal the child gets when its parent dies (``<sys/prctl.h>``)."""


class KubectlError(RuntimeError):
    """kubectl is missing or a request failed.

    Attributes:
        reason: the API's reason (``NotFound``, ``Forbidden``, …) when the API server refused,
            else ``None`` (no kubectl, no connection, a bad kubeconfig).
        message: what went wrong, as kubectl words it (``Error from server (Forbidden): …``
            for the API server's refusals).
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message, self.reason = message, reason


class KubectlMissing(KubectlError):
    """kubectl is not on ``PATH``."""


@dataclass(frozen=True)
class Kubectl:
    """kubectl with the user's kubeconfig (``None``: kubectl's own default, ``$KUBECONFIG``,
    ``~/.kube/config``, then the in-cluster service account)."""

    kubeconfig: Path | None = None

    def _command(self, *args: str) -> list[str]:
        binary = shutil.which("kubectl")
        if binary is None:
            raise KubectlMissing("kubectl not found on PATH (reading a live cluster needs it; "
                               "explain from a dump with --from does not)")
        config = ["--kubeconfig", str(self.kubeconfig)] if self.kubeconfig else []
        return [binary, *config, *args]

    def proxy(self) -> KubectlProxy:
        """Start ``kubectl proxy`` (it is ready by the first :meth:`KubectlProxy.get`; close it,
        e.g. with ``with``).

        Raises:
            KubectlError: kubectl is missing.
        """
        no_kubeconfig = None  # outside a pod, kubectl then tries localhost:8080, and says that
        if self.kubeconfig is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
            no_kubeconfig = missing_kubeconfig(None)
        return KubectlProxy(self._command, no_kubeconfig)

    def context_namespace(self) -> str:
        """The namespace of the kubeconfig's current context, or ``default`` when it names
        none or there is no usable kubeconfig (as kubectl itself does).

        Raises:
            KubectlError: kubectl is missing.
        """
        done = subprocess.run(
            self._command("config", "view", "--minify", "-o", "jsonpath={..context.namespace}"),
            capture_output=True, text=True, check=False)
        return (done.stdout.strip() if done.returncode == 0 else "") or "default"


class _UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket (keep-alive: every request on one connection)."""

    def __init__(self, socket_path: str) -> None:
        super().__init__("localhost")  # kubectl proxy accepts only local Host headers
        self._socket_path = socket_path

    def connect(self) -> None:
        """Connect to the socket (called by http.client)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self._socket_path)
        self.sock = sock


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Let the proxy end when this process does, even when killed (Linux only)."""
    import ctypes  # only in the child, only on Linux

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class KubectlProxy:
    """A running ``kubectl proxy --unix-socket``: the API server reached as the kubeconfig
    says, over one connection. The socket lies in a directory only this user can open; the
    proxy ends when :meth:`close` is called or (on Linux) when this process dies.

    Raises:
        KubectlError: kubectl is missing.
    """

    def __init__(self, command: Callable[..., list[str]], no_kubeconfig: str | None = None
                 ) -> None:
        self._no_kubeconfig = no_kubeconfig
        """Why there is no kubeconfig ($KUBECONFIG names no file, or ~/.kube/config is
        missing), told instead of "cannot reach the API server" (localhost:8080)."""
        self._directory = tempfile.mkdtemp(prefix="kubectl-dra-")
        self._socket = str(Path(self._directory) / "api.sock")
        try:
            self._process = subprocess.Popen(
                command("proxy", f"--unix-socket={self._socket}"), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        except BaseException:
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        self._lock = threading.Lock()
        self._serving: str | None = None
        """``""`` once the proxy serves, why it does not when it ended first, ``None`` before
        its first line is read."""
        self._connections: dict[int, _UnixConnection] = {}
        """Per thread that reads, its connection (http.client's is not shared)."""

    def __enter__(self) -> KubectlProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _connect(self) -> _UnixConnection:
        """This thread's connection to the proxy, once it serves (each thread that reads has
        its own: :func:`kubedra.explain.sources.read_cluster` lists in two)."""
        with self._lock:
            if self._serving is None:
                assert self._process.stdout is not None
                line = self._process.stdout.readline()
                if line.startswith(_READY):
                    self._serving = ""
                else:  # kubectl ended: a bad kubeconfig, a bad flag
                    _, err = self._process.communicate()
                    lines = (line + err).decode(errors="replace").strip().splitlines()
                    self._serving = lines[-1] if lines else "kubectl proxy failed"
            if self._serving:
                raise KubectlError(self._serving)
            connection = self._connections.get(threading.get_ident())
            if connection is None:
                connection = self._connections[threading.get_ident()] = \
                    _UnixConnection(self._socket)
        return connection

    def get(self, paths: Sequence[str], accept: str = JSON) -> list[Any]:
        """The API server's JSON at each of ``paths`` (e.g. ``/api/v1/nodes``), in order, asked
        for as ``accept`` (:data:`JSON`, or :data:`METADATA_LIST`: a list's objects with only
        their ``metadata``). A path the server does not serve (``NotFound``) gives ``None``.

        Raises:
            KubectlError: kubectl ended before serving, or a request failed otherwise (the
                first failure; one that did not reach the API server while there is no
                kubeconfig says so, ``no kubeconfig found: …``).
        """
        import msgspec  # the fastest decoder of a fleet's lists (bench/decode.py --fleet)

        connection = self._connect()
        results: list[Any] = []
        failures = []
        for path in paths:
            _send(connection, path, accept)
            code, body = _answer(connection)
            if code == 200:
                results.append(msgspec.json.decode(body))
                continue
            failure = _failure(code, body)
            results.append(None)
            if failure.reason != "NotFound":
                failures.append(failure)
        if failures:
            raise self._named(failures[0])
        return results

    def pages(self, path: str, limit: int) -> Iterator[list[Any]]:
        """The items of the list at ``path`` (as JSON), ``limit`` objects a page, one page at
        a time, as ``kubectl get --chunk-size`` reads a list; the next page is asked for
        before this one is handed over, so the API server makes it while the caller reads
        this one. A list the server does not serve (``NotFound``) has no page.

        Raises:
            KubectlError: as :meth:`get`; and when a page's ``continue`` token has expired
                (``Expired``, the list took longer than the API server keeps its revisions),
                as kubectl get fails then.
        """
        import msgspec

        connection = self._connect()
        asked = f"{path}?limit={limit}"
        _send(connection, asked, JSON)
        pending = True
        try:
            while pending:
                code, body = _answer(connection)
                if code != 200:
                    pending = False
                    failure = _failure(code, body)
                    if failure.reason == "NotFound":
                        return
                    raise self._named(failure)
                page = msgspec.json.decode(body)
                token = (page.get("metadata") or {}).get("continue")
                pending = bool(token)
                if token:
                    _send(connection, f"{asked}&continue={urllib.parse.quote(token)}", JSON)
                yield page.get("items") or []
        finally:
            if pending:  # the reader stopped early: the asked page is never read
                connection.close()

    def _named(self, failure: KubectlError) -> KubectlError:
        """``failure``, or that there is no kubeconfig when that is why the request did not
        reach the API server."""
        if failure.reason is None and self._no_kubeconfig:
            return KubectlError(self._no_kubeconfig)
        return failure

    def close(self) -> None:
        """End the proxy and remove its socket."""
        for connection in self._connections.values():
            connection.close()
        if self._process.poll() is None:
            self._process.terminate()
        self._process.communicate()
        shutil.rmtree(self._directory, ignore_errors=True)


def _send(connection: _UnixConnection, path: str, accept: str) -> None:
    try:
        connection.request("GET", path, headers={"Accept": accept})
    except OSError as err:
        raise KubectlError(f"kubectl proxy: {err}") from None


def _answer(connection: _UnixConnection) -> tuple[int, bytes]:
    """The status and body of the answer to the request sent last on ``connection``."""
    try:
        response = connection.getresponse()
        return response.status, response.read()
    except OSError as err:
        raise KubectlError(f"kubectl proxy: {err}") from None


def _failure(code: int, body: bytes) -> KubectlError:
    """The error of a refused request: the API server's ``Status`` worded as kubectl words it
    (``Error from server (Forbidden): …``), a path the server does not serve (a 404 without a
    ``Status``, for an API group it does not have), or the proxy's own text (``dial tcp …:
    connection refused``)."""
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        reason = status.get("reason") or None
        message = status.get("message") or ""
        return KubectlError(f"Error from server ({reason or 'Unknown'}): {message}", reason)
    text = body.decode(errors="replace").strip()
    if code == http.HTTPStatus.NOT_FOUND:
        return KubectlError(f"Error from server (NotFound): {text}", "NotFound")
    return KubectlError(f"cannot reach the API server: {text or 'kubectl proxy failed'}")
