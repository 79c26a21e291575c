"""The URL, IP and CIDR libraries of the DRA CEL environment, declared for cel-expr-python.

Upstream: ``k8s.io/apiserver/pkg/cel/library/urls.go`` (``url``, ``isURL``, ``getScheme``,
``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``, ``getQuery``), ``ip.go`` (``ip``,
``isIP``, ``ip.isCanonical``, ``family``, ``isUnspecified``, ``isLoopback``,
``isLinkLocalMulticast``, ``isLinkLocalUnicast``, ``isGlobalUnicast``, ``string``) and
``cidr.go`` (``cidr``, ``isCIDR``, ``containsIP``, ``containsCIDR``, ``ip``, ``prefixLength``,
``masked``, ``string``), all in the base environment of a v1.37.2 scheduler. Values travel as
the messages ``kubernetes.URL``, ``net.IP`` and ``net.CIDR`` (:mod:`kubedra.cel.protos`);
parsing is Go's (:mod:`kubedra.cel.urls`, :mod:`kubedra.cel.netaddr`), so results and error
messages are upstream's.

As in :mod:`kubedra.cel.library`, the C++ runtime dispatches on argument kinds and all
messages are one kind: ``string()`` of an IP and of a CIDR share one implementation that looks
at the message it gets (see :func:`_string_declaration`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cel_expr_python import cel

from .gostrings import go_quote
from .library import accepts
from .netaddr import Addr, AddrParseError, Prefix, PrefixParseError, parse_addr, parse_prefix
from .protos import CIDR_TYPE, IP_TYPE, URL_TYPE, CIDRMessage, IPMessage, URLMessage
from .urls import URL, URLParseError, parse, parse_request_uri

URL_T = cel.Type(URL_TYPE)
IP_T = cel.Type(IP_TYPE)
CIDR_T = cel.Type(CIDR_TYPE)
_B, _I, _S = cel.Type.BOOL, cel.Type.INT, cel.Type.STRING


# --- url (library/urls.go) ----------------------------------------------------------------

def _to_url(text: str) -> Any:
    try:
        parse_request_uri(text)
        url = parse(text)
    except URLParseError as err:
        raise ValueError(f"URL parse error during conversion from string: {err}") from None
    fields = {k: v for k, v in url.__dict__.items() if k != "user"}
    return URLMessage(**fields, user=url.user or "", has_user=url.user is not None)


def _url(message: Any) -> URL:
    fields = {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields}
    has_user = fields.pop("has_user")
    return URL(**{**fields, "user": fields["user"] if has_user else None})




# --- ip (library/ip.go) -------------------------------------------------------------------

def _parse_ip(text: str) -> Addr:
    """``parseIPAddr``: no zone, no IPv4-mapped IPv6 address."""
    try:
        addr = parse_addr(text)
    except AddrParseError as err:
        raise ValueError(f"IP Address {go_quote(text)} parse error during conversion from string: "
                         f"{err}") from None
    if addr.zone:
        raise ValueError(f"IP address {go_quote(text)} with zone value is not allowed")
    if addr.is4in6:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return addr


def _ip(message: Any) -> Addr:
    return Addr(bytes(message.octets))


def _to_ip(text: str) -> Any:
    return IPMessage(octets=_parse_ip(text).octets)


def _is_canonical(text: str) -> bool:
    return str(_parse_ip(text)) == text


# --- cidr (library/cidr.go) ---------------------------------------------------------------

def _parse_cidr(text: str) -> Prefix:
    try:
        prefix = parse_prefix(text)
    except PrefixParseError as err:
        raise ValueError(f"network address parse error during conversion from string: {err}") \
            from None
    if prefix.addr.is4in6:
        raise ValueError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return prefix


def _cidr(message: Any) -> Prefix:
    return Prefix(Addr(bytes(message.octets)), message.bits)


def _cidr_message(prefix: Prefix) -> Any:
    return CIDRMessage(octets=prefix.addr.octets, bits=prefix.bits)


def _to_cidr(text: str) -> Any:
    try:
        return _cidr_message(_parse_cidr(text))
    except ValueError as err:  # stringToCIDR wraps parseCIDR's message once more
        raise ValueError(f"network address parse error during conversion from string: {err}") \
            from None


_is_url = accepts(parse_request_uri, URLParseError)
_is_ip = accepts(_parse_ip, ValueError)
_is_cidr = accepts(_parse_cidr, ValueError)


def _contains_ip(message: Any, other: Any) -> bool:
    if isinstance(other, IPMessage):
        return _cidr(message).contains(_ip(other))
    if not _is_ip(other):  # cidrContainsIP reports its receiver, not the parse error
        raise ValueError("no such overload")
    return _cidr(message).contains(_parse_ip(other))


def _contains_cidr(message: Any, other: Any) -> bool:
    prefix = _cidr(message)
    inner = _cidr(other) if isinstance(other, CIDRMessage) else _cidr(_to_cidr(other))
    return prefix.overlaps(inner) and prefix.bits <= inner.bits


def _to_string(message: Any) -> str:
    """``string(ip)`` and ``string(cidr)``."""
    return str(_cidr(message)) if isinstance(message, CIDRMessage) else str(_ip(message))


def _overload(oid: str, result: cel.Type, params: list[cel.Type], member: bool = False,
              impl: Callable[..., Any] | None = None) -> cel.Overload:
    if impl is None:
        return cel.Overload(oid, result, params, is_member=member)
    return cel.Overload(oid, result, params, is_member=member, impl=impl)


def _ip_predicate(name: str, oid: str, test: Callable[[Addr], bool]) -> cel.FunctionDecl:
    return cel.FunctionDecl(name, [_overload(oid, _B, [IP_T], True, lambda m: test(_ip(m)))])


_STANDARD_STRING = {"bool": _B, "int64": _I, "uint64": cel.Type.UINT, "double": cel.Type.DOUBLE,
                    "bytes": cel.Type.BYTES, "string": _S, "timestamp": cel.Type.TIMESTAMP,
                    "duration": cel.Type.DURATION}


def _string_declaration() -> cel.FunctionDecl:
    """``string()``: the standard conversions (checker only) plus ``string(ip)``/``string(cidr)``.

    An IP and a CIDR are both messages to the runtime, which keeps one implementation per kind,
    and an extension's overloads all reach the runtime: so the standard declaration is
    excluded in :data:`kubedra.cel.library.ENV_CONFIG_YAML` and declared again here with the
    C++ runtime's overload ids, as the comparison operators are.
    """
    standard = [_overload(f"{name}_to_string", _S, [t]) for name, t in _STANDARD_STRING.items()]
    return cel.FunctionDecl("string", [*standard,
                                       _overload("ip_to_string", _S, [IP_T], impl=_to_string),
                                       _overload("cidr_to_string", _S, [CIDR_T])])


def network_declarations() -> list[cel.FunctionDecl]:
    """The functions of the URL, IP and CIDR libraries, ``string()`` included."""
    u = URL_T
    return [
        _string_declaration(),
        cel.FunctionDecl("url", [_overload("string_to_url", u, [_S], impl=_to_url)]),
        cel.FunctionDecl("isURL", [_overload("is_url_string", _B, [_S], impl=_is_url)]),
        cel.FunctionDecl("getScheme", [_overload("url_get_scheme", _S, [u], True,
                                                 lambda m: m.scheme)]),
        cel.FunctionDecl("getHost", [_overload("url_get_host", _S, [u], True, lambda m: m.host)]),
        cel.FunctionDecl("getHostname", [_overload("url_get_hostname", _S, [u], True,
                                                   lambda m: _url(m).hostname())]),
        cel.FunctionDecl("getPort", [_overload("url_get_port", _S, [u], True,
                                               lambda m: _url(m).port())]),
        cel.FunctionDecl("getEscapedPath", [_overload("url_get_escaped_path", _S, [u], True,
                                                      lambda m: _url(m).escaped_path())]),
        cel.FunctionDecl("getQuery", [_overload(
            "url_get_query", cel.Type.Map(_S, cel.Type.List(_S)), [u], True,
            lambda m: _url(m).query())]),
        cel.FunctionDecl("ip", [
            _overload("string_to_ip", IP_T, [_S], impl=_to_ip),
            _overload("cidr_ip", IP_T, [CIDR_T], True,
                      lambda m: IPMessage(octets=_cidr(m).addr.octets))]),
        cel.FunctionDecl("isIP", [_overload("is_ip", _B, [_S], impl=_is_ip)]),
        cel.FunctionDecl("ip.isCanonical", [_overload("ip_is_canonical", _B, [_S],
                                                      impl=_is_canonical)]),
        cel.FunctionDecl("family", [_overload("ip_family", _I, [IP_T], True,
                                              lambda m: 4 if _ip(m).is4 else 6)]),
        _ip_predicate("isUnspecified", "ip_is_unspecified", Addr.is_unspecified),
        _ip_predicate("isLoopback", "ip_is_loopback", Addr.is_loopback),
        _ip_predicate("isLinkLocalMulticast", "ip_is_link_local_multicast",
                      Addr.is_link_local_multicast),
        _ip_predicate("isLinkLocalUnicast", "ip_is_link_local_unicast",
                      Addr.is_link_local_unicast),
        _ip_predicate("isGlobalUnicast", "ip_is_global_unicast", Addr.is_global_unicast),
        cel.FunctionDecl("cidr", [_overload("string_to_cidr", CIDR_T, [_S], impl=_to_cidr)]),
        cel.FunctionDecl("isCIDR", [_overload("is_cidr", _B, [_S], impl=_is_cidr)]),
        cel.FunctionDecl("containsIP", [
            _overload("cidr_contains_ip_string", _B, [CIDR_T, _S], True, _contains_ip),
            _overload("cidr_contains_ip_ip", _B, [CIDR_T, IP_T], True, _contains_ip)]),
        cel.FunctionDecl("containsCIDR", [
            _overload("cidr_contains_cidr_string", _B, [CIDR_T, _S], True, _contains_cidr),
            _overload("cidr_contains_cidr", _B, [CIDR_T, CIDR_T], True, _contains_cidr)]),
        cel.FunctionDecl("prefixLength", [_overload("cidr_prefix_length", _I, [CIDR_T], True,
                                                    lambda m: m.bits)]),
        cel.FunctionDecl("masked", [_overload("cidr_masked", CIDR_T, [CIDR_T], True,
                                              lambda m: _cidr_message(_cidr(m).masked()))]),
    ]
