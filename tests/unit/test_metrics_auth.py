"""Who may read /metrics (kubedra.metrics_auth): the decisions and their caches, with the two
reviews replaced by recorders (the API server's own answers are proven in
e2e/test_metrics_scrapers.py), and the HTTPS port with its certificate."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter

from kubedra.metrics import start_metrics_server
from kubedra.metrics_auth import (
    ALLOW_TTL_S,
    DENY_TTL_S,
    TOKEN_TTL_S,
    CertificateError,
    Decision,
    DelegatedAuth,
    SecureServing,
    TtlCache,
    bearer_token,
    self_signed_pem,
    server_tls,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Reviews:
    """Records the reviews asked; ``users`` maps a token to its TokenReview user, ``allowed``
    names the users the SubjectAccessReview allows; ``fail`` makes both raise."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {
            "good": {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u1",
                     "groups": ["system:serviceaccounts"], "extra": {"k": ["v"]}},
            "other": {"username": "system:serviceaccount:default:other",
                      "groups": ["system:serviceaccounts", "system:authenticated"]}}
        self.allowed = {"system:serviceaccount:monitoring:prometheus"}
        self.tokens: list[str] = []
        self.specs: list[dict[str, Any]] = []
        self.fail: BaseException | None = None

    async def token(self, token: str) -> dict[str, Any]:
        self.tokens.append(token)
        if self.fail:
            raise self.fail
        user = self.users.get(token)
        return {"authenticated": True, "user": user} if user else {"authenticated": False}

    async def access(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.specs.append(spec)
        if self.fail:
            raise self.fail
        return {"allowed": spec["user"] in self.allowed}


def auth(reviews: Reviews, clock: Clock) -> DelegatedAuth:
    return DelegatedAuth(None, clock=clock, review_token=reviews.token,
                         review_access=reviews.access)


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"),
    (None, None), ("", None), ("Bearer", None), ("Bearer ", None), ("Basic abc", None),
    ("Bearer a b", None)])
def test_the_bearer_token_is_read_as_upstream_reads_it(header: str | None,
                                                       token: str | None) -> None:
    assert bearer_token(header) == token


async def test_no_token_is_401_without_a_review() -> None:
    reviews, clock = Reviews(), Clock()
    assert await auth(reviews, clock).decide(None, "GET", "/metrics") == Decision(
        401, "Unauthorized")
    assert (reviews.tokens, reviews.specs) == ([], [])


async def test_an_authorized_user_passes_and_both_answers_are_cached() -> None:
    reviews, clock = Reviews(), Clock()
    checker = auth(reviews, clock)
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(200)
    assert reviews.specs == [{
        "user": "system:serviceaccount:monitoring:prometheus", "uid": "u1",
        "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"k": ["v"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}]
    clock.now += TOKEN_TTL_S - 1
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(200)
    assert (len(reviews.tokens), len(reviews.specs)) == (1, 1)
    clock.now += 2  # the token's answer expired, the allowing access review has not
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(200)
    assert (len(reviews.tokens), len(reviews.specs)) == (2, 1)
    clock.now += ALLOW_TTL_S
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(200)
    assert (len(reviews.tokens), len(reviews.specs)) == (3, 2)


async def test_a_rejected_token_is_401_and_remembered_for_the_token_ttl() -> None:
    reviews, clock = Reviews(), Clock()
    checker = auth(reviews, clock)
    for _ in range(2):
        assert await checker.decide("Bearer forged", "GET", "/metrics") == Decision(
            401, "Unauthorized")
    assert (reviews.tokens, reviews.specs) == (["forged"], [])
    clock.now += TOKEN_TTL_S
    await checker.decide("Bearer forged", "GET", "/metrics")
    assert reviews.tokens == ["forged", "forged"]


async def test_a_user_without_the_permission_is_403_for_the_deny_ttl_only() -> None:
    reviews, clock = Reviews(), Clock()
    checker = auth(reviews, clock)
    denied = Decision(403, "Authorization denied for user system:serviceaccount:default:other")
    assert await checker.decide("Bearer other", "GET", "/metrics") == denied
    assert reviews.specs[0]["groups"] == ["system:serviceaccounts", "system:authenticated"]
    reviews.allowed.add("system:serviceaccount:default:other")  # the role is bound now
    clock.now += DENY_TTL_S - 1
    assert await checker.decide("Bearer other", "GET", "/metrics") == denied
    clock.now += 1
    assert await checker.decide("Bearer other", "GET", "/metrics") == Decision(200)
    assert len(reviews.specs) == 2


async def test_a_failed_review_is_500_and_not_cached() -> None:
    reviews, clock = Reviews(), Clock()
    checker = auth(reviews, clock)
    reviews.fail = aiohttp.ClientConnectionError("connection refused")
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(
        500, "Authentication or authorization failed")
    reviews.fail = None
    assert await checker.decide("Bearer good", "GET", "/metrics") == Decision(200)
    assert reviews.tokens == ["good", "good"]


def test_the_cache_drops_the_least_recently_used_entry_when_full() -> None:
    clock = Clock()
    cache: TtlCache[str, int] = TtlCache(size=2, clock=clock)
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    assert cache.get("a") == 1  # b is now the least recently used
    cache.put("c", 3, 10)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (1, None, 3, 2)
    clock.now += 10
    assert (cache.get("a"), len(cache)) == (None, 1)


def _client_tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test reads the certificate itself
    return context


async def test_the_secure_port_speaks_https_and_only_healthz_is_open() -> None:
    registry = CollectorRegistry()
    Counter("kubedra_test_things", "Things.", registry=registry).inc()
    reviews, clock = Reviews(), Clock()
    runner = await start_metrics_server(
        0, lambda: {"ok": True}, hosts=["127.0.0.1"], registry=registry,
        secure=SecureServing(auth(reviews, clock), server_tls(None)))
    try:
        port = runner.addresses[0][1]
        base = f"https://127.0.0.1:{port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_client_tls())) \
                as http:
            async with http.get(f"{base}/healthz") as response:
                assert (response.status, await response.json()) == (200, {"ok": True})
            async with http.get(f"{base}/metrics") as response:
                assert (response.status, await response.text()) == (401, "Unauthorized\n")
            async with http.get(f"{base}/metrics",
                                headers={"Authorization": "Bearer other"}) as response:
                assert response.status == 403
            async with http.get(f"{base}/metrics",
                                headers={"Authorization": "Bearer good"}) as response:
                assert response.status == 200
                assert "kubedra_test_things_total 1.0" in (await response.text()).splitlines()
            async with http.get(f"{base}/nothing") as response:
                assert response.status == 401  # refused before it is looked up
            with pytest.raises(aiohttp.ServerDisconnectedError):  # no plain HTTP
                async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                    await response.read()
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
        cert = x509.load_pem_x509_certificate(pem.encode())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(n.value) for n in names] == ["localhost", "127.0.0.1"]
        assert cert.issuer == cert.subject  # self-signed
        assert (cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)).days >= 364
    finally:
        await runner.cleanup()


def _write_pair(directory: Path) -> x509.Certificate:
    pem = self_signed_pem()
    key, _, cert = pem.partition(b"-----BEGIN CERTIFICATE-----")
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(b"-----BEGIN CERTIFICATE-----" + cert)
    return x509.load_pem_x509_certificate(b"-----BEGIN CERTIFICATE-----" + cert)


async def test_a_certificate_directory_is_served_and_reloaded_when_it_changes(
        tmp_path: Path) -> None:
    first = _write_pair(tmp_path)
    runner = await start_metrics_server(
        0, lambda: {"ok": True}, hosts=["127.0.0.1"], registry=CollectorRegistry(),
        secure=SecureServing(auth(Reviews(), Clock()), server_tls(tmp_path)))

    async def served() -> int:
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
        return x509.load_pem_x509_certificate(pem.encode()).serial_number
    try:
        port = runner.addresses[0][1]
        assert await served() == first.serial_number
        second = _write_pair(tmp_path)  # renewed
        assert await served() == second.serial_number
        assert await served() == second.serial_number
        (tmp_path / "tls.key").write_bytes(b"half written")
        assert await served() == second.serial_number  # the last good pair serves meanwhile
    finally:
        await runner.cleanup()


def test_an_unusable_certificate_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CertificateError) as missing:
        server_tls(tmp_path)
    assert str(missing.value) == (
        f"metrics certificate directory {tmp_path} (tls.crt, tls.key) cannot be used: "
        f"[Errno 2] No such file or directory: '{tmp_path}/tls.crt'")
    _write_pair(tmp_path)
    (tmp_path / "tls.key").write_bytes(self_signed_pem().partition(b"-----BEGIN CERT")[0])
    with pytest.raises(CertificateError, match=r"cannot be used: \[X509: KEY_VALUES_MISMATCH\]"):
        server_tls(tmp_path)  # another certificate's key
