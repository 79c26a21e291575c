"""Who may read ``/metrics``: the scraper authenticated and authorized by the API server, over
HTTPS, as controller-runtime's secure metrics serving does (``pkg/metrics/filters``
``WithAuthenticationAndAuthorization``, ``pkg/metrics/server``).

- **Authentication**: the request's bearer token goes to a TokenReview
  (``authentication.k8s.io/v1``); a request without a token, or with one the API server does
  not authenticate, is answered 401.
- **Authorization**: the user the review names goes to a SubjectAccessReview
  (``authorization.k8s.io/v1``) of the non-resource URL (``nonResourceAttributes``: the path,
  verb ``get``); denied: 403. A scraper is granted it by a ClusterRole such as
  ``kubedra-metrics-reader`` (``nonResourceURLs: [/metrics]``, ``verbs: [get]``); the process
  itself needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``.
- The answers are cached, as upstream's delegating authenticator and authorizer cache them,
  with controller-runtime's TTLs (:data:`TOKEN_TTL_S`, :data:`ALLOW_TTL_S`,
  :data:`DENY_TTL_S`): a scraper every 15 s costs the API server about one TokenReview a
  minute and one SubjectAccessReview each five. The API server's failures (no answer, 5xx,
  the process may not create reviews) are answered 500 and not cached.
- **TLS**: the certificate and key of ``--metrics-cert-dir`` (``tls.crt``, ``tls.key``: a
  ``kubernetes.io/tls`` Secret mounted there), read again when they change (cert-manager
  renews them), else a self-signed certificate made at start.

``/healthz`` stays open: the kubelet's probes carry no token.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import ipaddress
import os
import secrets
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Middleware
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes_asyncio.client import ApiClient, ApiException

from kubedra import kube
from kubedra.logging import get_logger
from kubedra.settings import Settings

log = get_logger(__name__)

TOKEN_TTL_S = 60.0
"""Seconds a TokenReview's answer, authenticated or not, is reused for the same token:
controller-runtime's ``CacheTTL`` (``pkg/metrics/filters/filters.go``), which upstream's
delegating authenticator applies to both outcomes
(``k8s.io/apiserver/pkg/authentication/authenticatorfactory/delegating.go``). A revoked token
is thus refused within a minute."""
ALLOW_TTL_S = 300.0
"""Seconds an allowing SubjectAccessReview is reused for the same user and request:
controller-runtime's ``AllowCacheTTL``; the kubelet's webhook authorizer also keeps allowed
answers 5 minutes (``--authorization-webhook-cache-authorized-ttl``)."""
DENY_TTL_S = 30.0
"""Seconds a denying SubjectAccessReview is reused: controller-runtime's ``DenyCacheTTL``;
short, so that a scraper just granted the role is served soon ("deny, try again" flows,
``authorizerfactory.DelegatingAuthorizerConfig``)."""
REVIEW_TIMEOUT_S = 10.0
"""Seconds one review may take: controller-runtime's ``TokenAccessReviewTimeout``."""
CACHE_ENTRIES = 8192
"""Entries each cache keeps at most, the least recently used dropped first: upstream's
webhook authorizer's ``NewLRUExpireCache(8192)`` (``plugin/pkg/authorizer/webhook/webhook.go``)."""
OPEN_PATHS = frozenset({"/healthz"})
"""Paths served without authentication (probes)."""
AUTHENTICATED = "system:authenticated"
"""The group every authenticated user belongs to (``group.NewAuthenticatedGroupAdder``)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """A bounded cache whose entries expire: ``put`` with a TTL in seconds, ``get`` returns
    the value until then (None after). ``clock`` gives monotonic seconds."""

    def __init__(self, size: int = CACHE_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value stored under ``key`` while it has not expired, else None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V, ttl_s: float) -> None:
        """Store ``value`` under ``key`` for ``ttl_s`` seconds; the least recently used
        entry goes when the cache is full."""
        self._entries[key] = (self.clock() + ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class User:
    """An authenticated user as a TokenReview names it (``status.user``)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_review(cls, user: dict[str, Any]) -> User:
        """From a TokenReview's ``status.user``, with :data:`AUTHENTICATED` added to its
        groups when missing (as upstream's delegating authenticator adds it)."""
        groups = tuple(user.get("groups") or ())
        return cls(name=user.get("username", ""), uid=user.get("uid", ""),
                   groups=groups if AUTHENTICATED in groups else (*groups, AUTHENTICATED),
                   extra=tuple(sorted((k, tuple(v)) for k, v in
                                      (user.get("extra") or {}).items())))


@dataclass(frozen=True)
class Decision:
    """What a request gets: ``status`` 200 (go on), 401, 403 or 500, and the ``message`` of
    a refusal (the body of the answer; never the token)."""

    status: int
    message: str = ""


class DelegatedAuth:
    """Authenticate bearer tokens and authorize their users through the API server that
    ``api`` reaches (as the process's own ServiceAccount), caching both answers.

    ``review_token`` and ``review_access`` make the two reviews (defaults:
    :func:`kubedra.kube.review_token`, :func:`kubedra.kube.review_access`); ``clock`` gives
    monotonic seconds to the caches.
    """

    def __init__(self, api: ApiClient | None, *, clock: Callable[[], float] = time.monotonic,
                 review_token: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
                 review_access: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
                 | None = None) -> None:
        self._review_token = review_token or (lambda token: kube.review_token(api, token))
        self._review_access = review_access or (lambda spec: kube.review_access(api, spec))
        self.tokens: TtlCache[bytes, tuple[User | None]] = TtlCache(clock=clock)
        self.access: TtlCache[tuple[Any, ...], bool] = TtlCache(clock=clock)
        self._key = secrets.token_bytes(32)  # tokens are cached under a keyed hash, never kept

    async def authenticate(self, token: str) -> User | None:
        """The user ``token`` belongs to, None when the API server does not authenticate it.

        Raises:
            ReviewFailed: the TokenReview could not be made.
        """
        key = hmac.new(self._key, token.encode(), hashlib.sha256).digest()
        cached = self.tokens.get(key)
        if cached is not None:
            return cached[0]
        status = await _reviewed(self._review_token(token), "TokenReview")
        user = User.from_review(status.get("user") or {}) if status.get("authenticated") \
            else None
        self.tokens.put(key, (user,), TOKEN_TTL_S)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``.

        Raises:
            ReviewFailed: the SubjectAccessReview could not be made.
        """
        key = (user, verb, path)
        cached = self.access.get(key)
        if cached is not None:
            return cached
        spec = {"user": user.name, "groups": list(user.groups),
                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        status = await _reviewed(self._review_access(spec), "SubjectAccessReview")
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self.access.put(key, allowed, ALLOW_TTL_S if allowed else DENY_TTL_S)
        return allowed

    async def decide(self, authorization: str | None, method: str, path: str) -> Decision:
        """The :class:`Decision` for a request with the ``Authorization`` header
        ``authorization`` (None: none), HTTP ``method`` and ``path``."""
        token = bearer_token(authorization)
        try:
            user = await self.authenticate(token) if token else None
            if user is None:
                return Decision(401, "Unauthorized")
            if not await self.authorize(user, method.lower(), path):
                return Decision(403, f"Authorization denied for user {user.name}")
        except ReviewFailed as err:
            log.error("metrics request not reviewed", path=path, error=str(err))
            return Decision(500, "Authentication or authorization failed")
        return Decision(200)


class ReviewFailed(Exception):
    """A TokenReview or SubjectAccessReview got no answer (the message says why)."""


async def _reviewed(call: Awaitable[dict[str, Any]], kind: str) -> dict[str, Any]:
    try:
        async with asyncio.timeout(REVIEW_TIMEOUT_S):
            return await call
    except ApiException as err:
        raise ReviewFailed(f"{kind}: {kube.api_error_message(err)}") from None
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        raise ReviewFailed(f"{kind}: {type(err).__name__}: {err}") from None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any case, as
    upstream's ``bearertoken`` authenticator reads it), else None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None


def auth_middleware(auth: DelegatedAuth) -> Middleware:
    """An aiohttp middleware that lets a request through only when ``auth`` decides 200;
    the paths of :data:`OPEN_PATHS` pass without a token."""

    @web.middleware
    async def middleware(request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        decision = await auth.decide(request.headers.get("Authorization"), request.method,
                                     request.path)
        if decision.status != 200:
            return web.Response(status=decision.status, text=decision.message + "\n")
        return await handler(request)
    return middleware


# --- TLS ------------------------------------------------------------------------------------------

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
SELF_SIGNED_DAYS = 365
"""Days the self-signed certificate is valid (a restart makes a new one)."""


def self_signed_pem() -> bytes:
    """A new EC P-256 key and a self-signed serving certificate for ``localhost`` and
    ``127.0.0.1``, both PEM, key first (what controller-runtime's metrics server makes when
    it is given no certificate: ``certutil.GenerateSelfSignedCertKeyWithFixtures("localhost"
    ...)``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + cert.public_bytes(serialization.Encoding.PEM))


def _context(certfile: str, keyfile: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile, keyfile)
    return context


class CertificateError(Exception):
    """The certificate directory cannot be used (the message names it and says why)."""


def server_tls(cert_dir: Path | None) -> ssl.SSLContext:
    """The TLS context of the metrics port: ``cert_dir``'s ``tls.crt`` and ``tls.key``,
    loaded again on the first connection after either file changed (a renewed Secret), or
    without ``cert_dir`` a self-signed certificate (:func:`self_signed_pem`), held in
    memory only (the root filesystem may be read-only).

    Raises:
        CertificateError: the files cannot be read or do not form a key pair.
    """
    if cert_dir is None:
        fd = os.memfd_create("kubedra-metrics-tls")
        try:
            os.write(fd, self_signed_pem())
            return _context(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    cert, key = str(cert_dir / CERT_FILE), str(cert_dir / KEY_FILE)

    def stamp() -> tuple[int, ...]:
        return tuple(v for path in (cert, key) for s in [os.stat(path)]
                     for v in (s.st_ino, s.st_mtime_ns, s.st_size))
    try:
        loaded_stamp, loaded = stamp(), _context(cert, key)
    except OSError as err:  # ssl.SSLError too
        raise CertificateError(f"metrics certificate directory {cert_dir} ({CERT_FILE}, "
                               f"{KEY_FILE}) cannot be used: {err}") from None

    def reload(connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None,
               _outer: ssl.SSLContext) -> None:
        nonlocal loaded_stamp, loaded
        try:
            now = stamp()
            if now != loaded_stamp:
                loaded_stamp, loaded = now, _context(cert, key)
                log.info("metrics certificate reloaded", cert=cert)
        except (OSError, ssl.SSLError) as err:  # half-written: the old one serves meanwhile
            log.warning("metrics certificate not reloaded", cert=cert, error=str(err))
        connection.context = loaded
    outer = loaded
    outer.sni_callback = reload
    return outer


@dataclass(frozen=True)
class SecureServing:
    """How a metrics port is served securely: the scrapers' ``auth`` and the port's ``tls``."""

    auth: DelegatedAuth
    tls: ssl.SSLContext


def secure_serving(api: ApiClient | None, settings: Settings) -> SecureServing | None:
    """:class:`SecureServing` of ``settings`` (``metrics_secure``, ``metrics_cert_dir``) with
    reviews made through ``api``; None, with a warning logged, when ``metrics_secure`` is off
    (plain HTTP, no authentication: local development only).

    Raises:
        CertificateError: the certificate directory cannot be used.
    """
    if not settings.metrics_secure:
        log.warning("metrics served over plain HTTP to anyone (metrics_secure is false): "
                    "for local development only")
        return None
    return SecureServing(DelegatedAuth(api), server_tls(settings.metrics_cert_dir))
