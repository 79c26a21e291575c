"""The one place where kubedra's operator and node agent talk to the Kubernetes API
(kubernetes-asyncio); the command line's explain, simulate and dump read the cluster through
kubectl instead (:mod:`kubedra.explain.kubectl`).

Every call kubedra makes goes through a function here, so that handlers and domain logic stay
free of API plumbing and tests can count writes. Functions take an ``ApiClient`` and plain
values, return pydantic models or dicts, and raise ``kubernetes_asyncio.client.ApiException``
unchanged unless they say otherwise.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient, ApiException

from kubedra.api import inventory, resource
from kubedra.api.time import micro_timestamp, timestamp, utcnow
from kubedra.lease_api import ApiEndpoint
from kubedra.logging import get_logger
from kubedra.options import missing_kubeconfig

log = get_logger(__name__)

APPLY_PATCH = "application/apply-patch+yaml"
"""Content type of server-side apply; patch bodies are JSON, which is valid YAML."""
_APPLY_PATCH_BYTES = f"{APPLY_PATCH}; charset=utf-8"
"""The same, for a body kubedra serialized itself (:func:`apply_patch_body`): the client sends
bytes of this content type as they are, and kube-apiserver drops the parameter
(``handlers/patch.go`` in k8s.io/apiserver)."""
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff\ud800-\udfff]")
"""Characters YAML refuses unescaped (YAML 1.2, 5.1 "Character Set") or reads as line breaks
(NEL, LS, PS: 5.4), and lone surrogates."""


def apply_patch_body(obj: Any) -> bytes:
    """``obj`` as the body of a server-side apply: JSON that kube-apiserver's YAML parser reads
    back as ``obj``, whatever the strings hold.

    The client's own serialization (``json.dumps``, ASCII only) writes a character beyond
    U+FFFF as a UTF-16 surrogate pair (``\\ud83d\\ude00``), an escape YAML refuses: the whole
    apply failed with 400, so one device's emoji cost a node's whole report. Here such
    characters are written as UTF-8, and only the characters YAML does not take unescaped
    are escaped (a lone surrogate, which UTF-8 cannot hold, becomes U+FFFD, as Go's JSON
    decoder makes it).
    """
    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return "\\ufffd" if 0xD800 <= code <= 0xDFFF else f"\\u{code:04x}"
    return _NOT_YAML_PRINTABLE.sub(escape, json.dumps(obj, ensure_ascii=False)).encode()


class KubeconfigError(Exception):
    """No usable client configuration; the message names where it was looked for and why it
    cannot be used (``no kubeconfig found: /x does not exist …``)."""


def _kubeconfig_found(kubeconfig: Path | None) -> str:
    """Where the kubeconfig is looked for (``kubeconfig``, else ``$KUBECONFIG``, a list, else
    ``~/.kube/config``).

    Raises:
        KubeconfigError: no file is there.
    """
    if (missing := missing_kubeconfig(kubeconfig)) is not None:
        raise KubeconfigError(missing)
    return str(kubeconfig) if kubeconfig is not None else \
        os.environ.get("KUBECONFIG") or "~/.kube/config"


def _tls_client(configuration: client.Configuration, where: str) -> ApiClient:
    """An ``ApiClient`` of ``configuration`` (its TLS files are read here, by
    kubernetes-asyncio's ``RESTClientObject``); ``where``: what the configuration came from
    (``kubeconfig /x``), for the error.

    Raises:
        KubeconfigError: a certificate authority, client certificate or key cannot be loaded
            (an empty or non-PEM file, a key that does not match), naming the files and
            OpenSSL's reason rather than a traceback from ``ssl.create_default_context``.
    """
    try:
        return _without_proxy_environment(ApiClient(configuration))
    except OSError as err:  # ssl.SSLError is one
        files = ", ".join(f"{what} {path}" for what, path in (
            ("certificate authority", configuration.ssl_ca_cert),
            ("client certificate", configuration.cert_file),
            ("client key", configuration.key_file)) if path)
        reason = f"{err.library}: {err.reason}" if isinstance(err, ssl.SSLError) and err.reason \
            else err.strerror or str(err)
        raise KubeconfigError(f"{where} cannot be used: its TLS files ({files}) cannot be "
                              f"loaded: {reason}") from None


READ_BUFSIZE = 2**21
"""Bytes aiohttp buffers per read, kubernetes-asyncio's (a watch event may be as large as
etcd's 1.5 MiB request limit)."""


def _without_proxy_environment(api: ApiClient) -> ApiClient:
    """``api`` with its aiohttp session replaced by one that does not read ``$HTTPS_PROXY``,
    ``$NO_PROXY`` and ``~/.netrc`` (``trust_env=False``), on the same connection pool.

    kubernetes-asyncio opens its session with ``trust_env=True``, so aiohttp looked up the
    proxy variables and read ``~/.netrc`` in a thread for every request: 4.4 % of the
    operator's CPU while publishing 1,000 nodes (``bench/RESULTS.md``, scale, round 13). kopf's
    own session (``settings.networking.trust_env``) and the elector's do not read them either,
    so every request of a process goes the same way; a kubeconfig's ``proxy-url`` still
    applies (kubernetes-asyncio passes it per request).
    """
    rest = api.rest_client
    connector = rest.pool_manager.connector
    rest.pool_manager.detach()  # the old session is closed, the connector kept
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              read_bufsize=READ_BUFSIZE)
    return api


async def make_api_client(kubeconfig: Path | None = None) -> ApiClient:
    """An ``ApiClient`` from ``kubeconfig``, else the in-cluster service account, else
    ``$KUBECONFIG`` / ``~/.kube/config``.

    Raises:
        KubeconfigError: no usable configuration was found (a missing file is named as such,
            not as kubernetes-asyncio's ``Expected key current-context``), or its TLS files
            cannot be loaded (:func:`_tls_client`).
    """
    configuration, where = await _configuration(kubeconfig)
    return _tls_client(configuration, where)


async def api_endpoint(kubeconfig: Path | None = None) -> ApiEndpoint:
    """Where the API server is and how to authenticate, as :func:`make_api_client` finds
    them, for a client without kubernetes-asyncio (the elector's
    :class:`kubedra.lease_api.LeaseApi`); in a cluster the service account token is named by
    its file, which the kubelet rotates. A kubeconfig's exec or auth-provider token is the one
    it gives now.

    Raises:
        KubeconfigError: as :func:`make_api_client`.
    """
    configuration, where = await _configuration(kubeconfig)
    await _tls_client(configuration, where).close()  # its TLS files load, or the error says
    in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    return ApiEndpoint(
        server=configuration.host, ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file, key_file=configuration.key_file,
        authorization=None if in_cluster else configuration.api_key.get("BearerToken"),
        token_file=config.incluster_config.SERVICE_TOKEN_FILENAME if in_cluster else None,
        verify=bool(configuration.verify_ssl),
        tls_server_name=configuration.tls_server_name or None)


async def _configuration(kubeconfig: Path | None) -> tuple[client.Configuration, str]:
    """kubernetes-asyncio's configuration as :func:`make_api_client` finds it, and where it
    came from (for errors)."""
    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as err:
            raise KubeconfigError(f"in-cluster configuration cannot be used: {err}") from None
        return configuration, "in-cluster configuration"
    where = _kubeconfig_found(kubeconfig)
    try:
        await config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None,
                                      client_configuration=configuration)
    except config.ConfigException as err:
        raise KubeconfigError(f"kubeconfig {where} cannot be used: {err}") from None
    return configuration, f"kubeconfig {where}"


class WriteFenced(Exception):
    """A write was refused before it was sent: this replica does not hold the leader Lease,
    or its last renewal is older than the renew deadline (:func:`fence_writes`)."""


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""HTTP methods that change nothing (allowed by :func:`fence_writes`)."""


def fence_writes(api: ApiClient, may_write: Callable[[], bool]) -> None:
    """Check ``may_write()`` before every request of ``api`` that is not a read (POST, PUT,
    PATCH, DELETE) and refuse it with :class:`WriteFenced` when it is false: the fencing rule
    of the operator's writers, so that a leader whose Lease may have passed to another
    replica sends nothing more, however late it runs (:mod:`kubedra.controller.leadership`).
    Reads and watches are never refused."""
    request = api.request

    def fenced(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method not in READ_METHODS and not may_write():
            raise WriteFenced(f"{method} {url}: not the leader, or the leader Lease was not "
                              "renewed within the renew deadline")
        return request(method, url, *args, **kwargs)
    api.request = fenced


def api_error_message(err: ApiException) -> str:
    """``<status> <reason>: <message>`` of an API error, with the message of the Status body
    (which names the invalid field) when there is one."""
    try:
        message = json.loads(err.body or "")["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    return f"{err.status} {err.reason}" + (f": {message}" if message else "")


def is_not_found(err: BaseException) -> bool:
    """True for an ``ApiException`` with HTTP status 404."""
    return isinstance(err, ApiException) and err.status == 404


async def _raw(call: Awaitable[Any]) -> dict[str, Any]:
    """Await a kubernetes-asyncio call made with ``_preload_content=False`` and decode the JSON
    body (kubedra reads API objects as plain dicts and parses them with its own models).

    Raises:
        ApiException: the server answered with an HTTP error; ``body`` holds its Status.
    """
    response = await call
    try:
        payload = await response.read()
    finally:
        response.release()
    if response.status >= 400:  # with _preload_content=False the client does not raise
        err = ApiException(status=response.status, reason=response.reason)
        err.body = payload.decode(errors="replace")
        raise err
    data: dict[str, Any] = _JSON.decode(payload)
    return data


_JSON = msgspec.json.Decoder()
"""The decoder of answers: msgspec, as for the explainer's sources (``bench/decode.py``); the
answer to each inventory status write was 8.6 % of the operator's samples with ``json.loads``
at 13.5 claims/s (``bench/RESULTS.md``, round 10)."""


# --- Streaming lists (operator) ---------------------------------------------------------------

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streaming list's initial events (KEP-3157)."""
_PROBE_SELECTOR = "kubedra.io/streaming-list-probe=none"
"""A label selector no object matches: the probe streams no object, only the bookmark."""


async def serves_streaming_list(api: ApiClient, path: str, timeout_s: int = 10) -> bool:
    """Whether the API server serves the streaming list (KEP-3157, ``WatchList``: beta and on
    by default in v1.34 to v1.37, off in v1.33) for the collection at ``path`` (e.g.
    ``/apis/kubedra.io/v1alpha1/deviceinventories``): a watch with ``sendInitialEvents=true``
    and ``resourceVersionMatch=NotOlderThan`` that ends its initial events with a bookmark
    annotated ``k8s.io/initial-events-end: "true"`` within ``timeout_s`` seconds.

    A server without it refuses the parameters (``sendInitialEvents is forbidden for watch
    unless the WatchList feature is enabled``, k8s.io/apiserver
    pkg/apis/meta/internalversion/validation) or drops them, and then sends no such bookmark;
    either answers False. The probe selects no object, so it costs the server one watch.

    Raises:
        OSError, TimeoutError: the API server could not be reached.
    """
    try:
        async for event in watch_events(api, path, {"labelSelector": _PROBE_SELECTOR},
                                        timeout_s=timeout_s, initial_events=True):
            if ends_initial_events(event):
                return True
    except ApiException:
        return False
    return False


def ends_initial_events(event: dict[str, Any]) -> bool:
    """Whether a watch event is the bookmark that ends a streaming list's initial events."""
    if event.get("type") != "BOOKMARK":
        return False
    meta = (event.get("object") or {}).get("metadata") or {}
    return (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true"


async def list_page(api: ApiClient, path: str, query: dict[str, str]) -> bytes:
    """GET one page of the collection at ``path`` (``query``: ``limit``, ``continue``,
    selectors), as the JSON bytes of a List with ``items`` and
    ``metadata.continue``/``resourceVersion`` (the caller's decoder turns them into what it
    keeps).

    Raises:
        ApiException: the server answered with an HTTP error (410 for an expired
            ``continue`` token).
    """
    response = await api.call_api(path, "GET", query_params=list(query.items()),
                                  auth_settings=["BearerToken"], _preload_content=False)
    try:
        payload: bytes = await response.read()
    finally:
        response.release()
    if response.status >= 400:
        err = ApiException(status=response.status, reason=response.reason)
        err.body = payload.decode(errors="replace")
        raise err
    return payload


async def watch_events(api: ApiClient, path: str, query: dict[str, str], *,
                       timeout_s: int, resource_version: str | None = None,
                       initial_events: bool = False) -> AsyncIterator[dict[str, Any]]:
    """Watch the collection at ``path``: each event decoded alone (``{"type": ..., "object":
    ...}``), as :func:`watch_lines` delivers them (same arguments and errors).
    """
    async for line in watch_lines(api, path, query, timeout_s=timeout_s,
                                  resource_version=resource_version,
                                  initial_events=initial_events):
        event: dict[str, Any] = json.loads(line)
        yield event


async def watch_lines(api: ApiClient, path: str, query: dict[str, str], *,
                      timeout_s: int, resource_version: str | None = None,
                      initial_events: bool = False) -> AsyncIterator[bytes]:
    """Watch the collection at ``path``: the JSON bytes of each event alone (one line; one
    object is at most the API server's request limit), with bookmarks, ending after
    ``timeout_s`` seconds (the server closes the stream). ``initial_events``: a streaming
    list (KEP-3157) first, ``sendInitialEvents=true`` with
    ``resourceVersionMatch=NotOlderThan``, from ``resource_version`` or, without one, a
    consistent read; otherwise the changes after ``resource_version``.

    An ``ERROR`` event (410 Gone: the resourceVersion is too old) is yielded as it is.

    Raises:
        ApiException: the server refused the watch (its status and Status body).
    """
    params = {**query, "watch": "true", "allowWatchBookmarks": "true",
              "timeoutSeconds": str(timeout_s)}
    if resource_version:
        params["resourceVersion"] = resource_version
    if initial_events:
        params.update(sendInitialEvents="true", resourceVersionMatch="NotOlderThan")
    response = await api.call_api(path, "GET", query_params=list(params.items()),
                                  auth_settings=["BearerToken"], _preload_content=False,
                                  _request_timeout=timeout_s + 30)
    try:
        if response.status >= 400:
            err = ApiException(status=response.status, reason=response.reason)
            err.body = (await response.read()).decode(errors="replace")
            raise err
        buffer = b""
        async for chunk in response.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line
    finally:
        response.release()


# --- ResourceSlices (operator) ------------------------------------------------------------------

_SLICES = f"/apis/{resource.API_VERSION}/resourceslices"


async def _send_json(api: ApiClient, method: str, path: str, payload: bytes) -> dict[str, Any]:
    """``method`` ``path`` with ``payload``, JSON bytes kubedra wrote itself, as the body; the
    stored object as a dict.

    kubernetes-asyncio sends a body of ``application/json`` only as a Python object it walks
    (``sanitize_for_serialization``) and ``json.dumps`` again, so this makes the request on
    the client's own session, as its REST client would: the same headers, credentials
    (``update_params_for_auth``, which refreshes a token), proxy, TLS server name and no
    timeout.

    Raises:
        ApiException: the server answered with an HTTP error; ``body`` holds its Status.
    """
    headers = {**api.default_headers, "Accept": "application/json",
               "Content-Type": "application/json"}
    await api.update_params_for_auth(headers, [], ["BearerToken"])
    rest = api.rest_client
    extra: dict[str, Any] = {}
    if rest.proxy:
        extra["proxy"] = rest.proxy
    if rest.proxy_headers:
        extra["proxy_headers"] = rest.proxy_headers
    if rest.server_hostname:
        extra["server_hostname"] = rest.server_hostname
    return await _raw(rest.pool_manager.request(
        method, api.configuration.host + path, headers=headers, data=payload,
        timeout=aiohttp.ClientTimeout(), **extra))


async def create_resource_slice(api: ApiClient, body: dict[str, Any] | bytes) -> dict[str, Any]:
    """POST a ResourceSlice (a dict, or its JSON bytes: :func:`_send_json`); returns the stored
    object. Raises ``ApiException`` (409 if a slice of that name exists)."""
    if isinstance(body, bytes):
        return await _send_json(api, "POST", _SLICES, body)
    return await _raw(client.ResourceV1Api(api).create_resource_slice(
        body, _preload_content=False))


async def dry_run_resource_slice(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """POST a ResourceSlice with ``dryRun=All``: nothing is stored; returns the object as the
    server would store it (fields of disabled features dropped)."""
    return await _raw(client.ResourceV1Api(api).create_resource_slice(
        body, dry_run="All", _preload_content=False))


async def get_discovery(api: ApiClient, path: str) -> dict[str, Any]:
    """GET an API discovery document (``/apis/resource.k8s.io``, ``/apis/resource.k8s.io/v1``)
    as a dict. Raises ``ApiException`` (404: the group or version is not served)."""
    return await _raw(api.call_api(path, "GET", _preload_content=False,
                                   auth_settings=["BearerToken"]))


async def server_version(api: ApiClient) -> str:
    """The API server's ``gitVersion`` (``v1.37.2``)."""
    info = await client.VersionApi(api).get_code()
    return str(info.git_version or "")


async def replace_resource_slice(api: ApiClient, name: str, body: dict[str, Any] | bytes
                                 ) -> dict[str, Any]:
    """PUT a ResourceSlice (a dict, or its JSON bytes: :func:`_send_json`);
    ``body.metadata.resourceVersion`` guards against lost updates (409)."""
    if isinstance(body, bytes):
        return await _send_json(api, "PUT", f"{_SLICES}/{quote(name, safe='')}", body)
    return await _raw(client.ResourceV1Api(api).replace_resource_slice(
        name, body, _preload_content=False))


async def delete_resource_slice(api: ApiClient, name: str, resource_version: str | None) -> None:
    """DELETE a ResourceSlice if it still has ``resource_version``; a missing slice is fine."""
    options = {"preconditions": {"resourceVersion": resource_version}} if resource_version else {}
    try:
        await _raw(client.ResourceV1Api(api).delete_resource_slice(
            name, body=options, _preload_content=False))
    except ApiException as err:
        if err.status != 404:
            raise


# --- DeviceInventories ---------------------------------------------------------------------------

async def get_inventory(api: ApiClient, name: str) -> dict[str, Any] | None:
    """The DeviceInventory ``name``, or ``None`` if it does not exist."""
    try:
        return await _raw(client.CustomObjectsApi(api).get_cluster_custom_object(
            inventory.GROUP, inventory.VERSION, inventory.PLURAL, name, _preload_content=False))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


async def create_inventory(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create a DeviceInventory; raises ``ApiException`` 409 if it exists, 422 if invalid."""
    return await _raw(client.CustomObjectsApi(api).create_cluster_custom_object(
        inventory.GROUP, inventory.VERSION, inventory.PLURAL, body, _preload_content=False))


async def apply_inventory_status(api: ApiClient, name: str, status: dict[str, Any],
                                 field_manager: str) -> dict[str, Any]:
    """Server-side apply ``status`` (only the fields this manager owns) to ``/status``."""
    body = {"apiVersion": inventory.API_VERSION, "kind": inventory.KIND,
            "metadata": {"name": name}, "status": status}
    return await _raw(client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        inventory.GROUP, inventory.VERSION, inventory.PLURAL, name, apply_patch_body(body),
        field_manager=field_manager, force=True, _content_type=_APPLY_PATCH_BYTES,
        _preload_content=False))


# --- ResourceClaims -----------------------------------------------------------------------------

async def get_resource_claim(api: ApiClient, namespace: str, name: str) -> resource.ResourceClaim:
    """GET one ResourceClaim (needs ``get`` on ``resourceclaims``).

    Raises:
        ApiException: e.g. 404 when the claim does not exist.
    """
    return resource.ResourceClaim.from_api(await _raw(
        client.ResourceV1Api(api).read_namespaced_resource_claim(
            name, namespace, _preload_content=False)))


async def apply_claim_device_status(api: ApiClient, namespace: str, name: str,
                                    devices: list[dict[str, Any]], field_manager: str
                                    ) -> dict[str, Any]:
    """Server-side apply ``status.devices`` entries (keyed by driver, pool, device, shareID)
    as ``field_manager``; entries and conditions owned by other managers stay.

    ``devices`` is everything this manager wants to own there: entries it owned before and
    left out are removed, unless another manager still owns fields in them (each entry's
    conditions are a map keyed by type, so the agent's ``Prepared`` and the operator's ``Ready``
    coexist); an empty list withdraws all of this manager's entries.

    Permissions (``DRAResourceClaimGranularStatusAuthorization``, on by default since 1.36;
    k8s.io/kubernetes v1.37.2 pkg/registry/resource/utils.go ``AuthorizedForDeviceStatus``):
    ``patch`` on ``resourceclaims/status``, and for each driver whose entries change, verb
    ``associated-node:patch`` (a ServiceAccount whose token names the node of the claim's
    allocation, e.g. a DaemonSet pod's projected token) or ``arbitrary-node:patch`` on
    ``resourceclaims/driver`` with the driver name as resource name. A missing permission is a
    422 whose message names it.
    """
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"devices": devices}}
    return await _raw(client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
        name, namespace, apply_patch_body(body), field_manager=field_manager, force=True,
        _content_type=_APPLY_PATCH_BYTES, _preload_content=False))


def refuses_claim_status_writes(err: BaseException) -> bool:
    """Whether the API server rejected a status write because ``status.allocation`` "changed"
    although the write did not touch it.

    This happens when an opaque config's ``parameters`` in the claim or its class were stored
    as non-canonical JSON (whitespace, unsorted keys; e.g. created by a Python client): the
    server decodes a JSON write, re-encodes the parameters canonically, and its immutability
    check compares ``RawExtension`` bytes (k8s.io/kubernetes v1.37.2
    pkg/apis/resource/validation/validation.go, ``ValidateImmutableField`` of
    ``status.allocation``), so every JSON write of the claim's status fails the same way.
    Clients using protobuf (kube-scheduler) are not affected. Retrying cannot help. The
    message is :data:`IMMUTABLE_MESSAGES`' of the server's release.
    """
    if not isinstance(err, ApiException) or err.status != 422:
        return False
    try:
        causes = json.loads(err.body or "")["details"]["causes"]
    except (ValueError, KeyError, TypeError):
        return False
    return any(c.get("field") == "status.allocation"
               and any(m in c.get("message", "") for m in IMMUTABLE_MESSAGES)
               for c in causes)


IMMUTABLE_MESSAGES = ("field cannot be modified once set", "field is immutable")
"""How the API server words an immutable field's change: v1.37.2's declarative validation,
and apimachinery's ``FieldImmutableErrorMsg`` of v1.34.4 (both measured, e2e/test_main_job.py)."""


# --- Events ---------------------------------------------------------------------------------------

async def post_event(api: ApiClient, regarding: dict[str, Any], *, event_type: str, reason: str,
                     message: str, component: str) -> None:
    """Create a core/v1 Event about ``regarding`` (an object with apiVersion, kind, metadata),
    as ``kubectl describe`` shows them. Events of cluster-scoped objects go to ``default``.

    ``event_type`` is ``Normal`` or ``Warning``; the message is cut to 1024 characters.
    """
    meta = regarding["metadata"]
    namespace = meta.get("namespace") or "default"
    now = timestamp(utcnow())
    event = {
        "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
        "involvedObject": {"apiVersion": regarding["apiVersion"], "kind": regarding["kind"],
                           "name": meta["name"], "namespace": meta.get("namespace"),
                           "uid": meta.get("uid")},
        "type": event_type, "reason": reason, "message": message[:1024],
        "source": {"component": component}, "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
    # the answer is read as JSON, not built into a V1Event (0.56 ms each, the client's
    # model deserializer; an Event per pool published at a fleet's start)
    await _raw(client.CoreV1Api(api).create_namespaced_event(namespace, event,
                                                             _preload_content=False))
    logger = log.warning if event_type == "Warning" else log.info
    logger("event", kind=regarding["kind"], object=f"{meta.get('namespace') or ''}/{meta['name']}"
           .lstrip("/"), reason=reason, message=message)


# --- Leases (node agent) --------------------------------------------------------------------------

async def node_owner_reference(api: ApiClient, name: str) -> dict[str, Any] | None:
    """An owner reference to Node ``name`` (its objects are garbage-collected with it), or
    None if the Node does not exist.

    Raises:
        ApiException: reading the Node failed otherwise.
    """
    try:
        node = await _raw(client.CoreV1Api(api).read_node(name, _preload_content=False))
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}


async def slice_owner(api: ApiClient) -> resource.OwnerReference:
    """The owner reference of every slice the operator publishes: the DeviceInventory CRD
    (``deviceinventories.kubedra.io``; needs ``get`` on it). A slice outlives its inventory
    (its held devices stay published, see
    :func:`kubedra.controller.inventories.decide_deleted`) but not kubedra: deleting the CRD
    lets the garbage collector delete every slice.

    Raises:
        ApiException: reading the CRD failed (404: kubedra's CRD is not installed).
    """
    name = f"{inventory.PLURAL}.{inventory.GROUP}"
    crd = await _raw(client.ApiextensionsV1Api(api).read_custom_resource_definition(
        name, _preload_content=False))
    return resource.OwnerReference(api_version="apiextensions.k8s.io/v1",
                                   kind="CustomResourceDefinition", name=name,
                                   uid=crd["metadata"]["uid"])


async def read_lease(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """GET Lease ``namespace/name``; None if it does not exist.

    Raises:
        ApiException: any other error.
    """
    try:
        return await _raw(client.CoordinationV1Api(api).read_namespaced_lease(
            name, namespace, _preload_content=False))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


async def renew_lease(api: ApiClient, namespace: str, name: str, holder: str,
                      duration_s: int, owner: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
    """Create Lease ``namespace/name`` or set its ``renewTime`` to now, held by ``holder`` for
    ``duration_s`` seconds; ``owner`` (an owner reference) is set when it is created. Returns
    the Lease as stored.

    Raises:
        ApiException: the Lease could not be read or written (409 when two writers race).
    """
    coordination = client.CoordinationV1Api(api)
    now = micro_timestamp(utcnow())
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration_s, "renewTime": now}
    try:
        current = await _raw(coordination.read_namespaced_lease(
            name, namespace, _preload_content=False))
    except ApiException as err:
        if err.status != 404:
            raise
        spec["acquireTime"] = now
        return await _raw(coordination.create_namespaced_lease(
            namespace, {"metadata": {"name": name, "namespace": namespace,
                                     **({"ownerReferences": [owner]} if owner else {})},
                        "spec": spec},
            _preload_content=False))
    current["spec"] = {**(current.get("spec") or {}), **spec}
    return await _raw(coordination.replace_namespaced_lease(
        name, namespace, current, _preload_content=False))


async def release_lease(api: ApiClient, lease: dict[str, Any]) -> None:
    """Give up ``lease`` (as :func:`renew_lease` last returned it): remove its holder and
    ``renewTime``, so that whoever watches it sees it expired at once (a Lease without
    ``renewTime`` is expired). The write is guarded by the Lease's ``resourceVersion``: a
    holder that renewed it since (a new agent of a rolling update) keeps it.

    Raises:
        ApiException: 409 when someone renewed the Lease since; others as the API answers.
    """
    spec = {k: v for k, v in (lease.get("spec") or {}).items()
            if k not in ("holderIdentity", "renewTime")}
    meta = lease["metadata"]
    await _raw(client.CoordinationV1Api(api).replace_namespaced_lease(
        meta["name"], meta["namespace"], {**lease, "spec": spec}, _preload_content=False))


async def apply_discovered(api: ApiClient, name: str, discovered: dict[str, Any]) -> None:
    """Server-side apply ``status.discovered`` of inventory ``name`` as the node agent."""
    await apply_inventory_status(api, name, {"discovered": discovered},
                                 inventory.AGENT_FIELD_MANAGER)


# --- Delegated authentication and authorization (metrics endpoint) ------------------------------

async def review_token(api: ApiClient, token: str) -> dict[str, Any]:
    """Create a TokenReview (``authentication.k8s.io/v1``) of bearer ``token`` with the API
    server's own audiences; returns its ``status`` (``authenticated``, ``user``, ``error``).

    Raises:
        ApiException: the server refused the review (403: the caller may not create
            tokenreviews).
    """
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}
    review = await _raw(client.AuthenticationV1Api(api).create_token_review(
        body, _preload_content=False))
    status: dict[str, Any] = review.get("status") or {}
    return status


async def review_access(api: ApiClient, spec: dict[str, Any]) -> dict[str, Any]:
    """Create a SubjectAccessReview (``authorization.k8s.io/v1``) of ``spec`` (user, groups,
    uid, extra and the resource or non-resource attributes); returns its ``status``
    (``allowed``, ``denied``, ``reason``).

    Raises:
        ApiException: the server refused the review.
    """
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}
    review = await _raw(client.AuthorizationV1Api(api).create_subject_access_review(
        body, _preload_content=False))
    status: dict[str, Any] = review.get("status") or {}
    return status
