"""URLs as Go's ``net/url`` parses them, for the CEL URL library.

Upstream's ``url()``, ``isURL()`` and the ``get…`` accessors (``k8s.io/apiserver/pkg/cel/
library/urls.go``) are thin wrappers of ``url.ParseRequestURI``, ``url.Parse``,
``URL.Hostname``, ``URL.Port``, ``URL.EscapedPath`` and ``URL.Query``; their results and error
messages reach the user, so this is a port of those functions (Go 1.26 ``src/net/url/url.go``
with the Go 1.26 defaults of ``GODEBUG``, which a v1.37.2 scheduler is built with: strict
colons in http(s) hosts, at most 10,000 query parameters).

Go works on bytes, this module on Python strings: the two differ only for text that is not
ASCII, where Go's byte-wise checks treat every non-ASCII byte alike (escaped in paths, allowed
in hosts, refused in user info) and so does this module per character.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gostrings import go_quote
from .netaddr import AddrParseError, parse_addr

_PATH, _PATH_SEGMENT, _HOST, _ZONE, _USER_PASSWORD, _QUERY_COMPONENT, _FRAGMENT = range(7)
_UNRESERVED = "-_.~"
_RESERVED = "$&+,/:;=?@"
_HOST_EXTRA = "!$&'()*+,;=:[]<>\""
_HEX = "0123456789abcdefABCDEF"
_USERINFO_EXTRA = "-._:~!$&'()*+,;=%@"
_MAX_QUERY_PARAMS = 10_000


class URLParseError(ValueError):
    """Parsing failed; the message is Go's ``*url.Error`` text (``parse "x": …``)."""


class _Error(ValueError):
    """An error inside the parser, wrapped by the caller as Go's ``url.Error``."""


def _alnum(char: str) -> bool:
    return "a" <= char <= "z" or "A" <= char <= "Z" or "0" <= char <= "9"


def _should_escape(char: str, mode: int) -> bool:
    if _alnum(char):
        return False
    if mode in (_HOST, _ZONE) and char in _HOST_EXTRA:
        return False
    if char in _UNRESERVED:
        return False
    if char in _RESERVED:
        if mode == _PATH:
            return char == "?"
        if mode == _PATH_SEGMENT:
            return char in "/;,?"
        if mode == _USER_PASSWORD:
            return char in "@/?:"
        if mode == _QUERY_COMPONENT:
            return True
        if mode == _FRAGMENT:
            return False
    return not (mode == _FRAGMENT and char in "!()*")


def _unhex(char: str) -> int:
    return int(char, 16)


def _unescape(text: str, mode: int) -> str:
    """``url.unescape``: decode ``%XX`` (and ``+`` in query components)."""
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%":
            if i + 2 >= len(text) or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
                raise _Error("invalid URL escape " + go_quote(text[i:i + 3]))
            value = _unhex(text[i + 1]) << 4 | _unhex(text[i + 2])
            if mode == _HOST and _unhex(text[i + 1]) < 8 and text[i:i + 3] != "%25":
                raise _Error("invalid URL escape " + go_quote(text[i:i + 3]))
            if mode == _ZONE and text[i:i + 3] != "%25" and value != 0x20 and \
                    _should_escape(chr(value), _HOST):
                raise _Error("invalid URL escape " + go_quote(text[i:i + 3]))
            i += 3
            continue
        if mode in (_HOST, _ZONE) and ord(char) < 0x80 and _should_escape(char, mode) \
                and char != "+":
            raise _Error("invalid character " + go_quote(char) + " in host name")
        i += 1
    if "%" not in text and not (mode == _QUERY_COMPONENT and "+" in text):
        return text
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%":
            out.append(_unhex(text[i + 1]) << 4 | _unhex(text[i + 2]))
            i += 3
            continue
        out += (b" " if char == "+" and mode == _QUERY_COMPONENT else char.encode())
        i += 1
    return out.decode(errors="replace")


def _escape(text: str, mode: int) -> str:
    """``url.escape``: percent-encode what ``mode`` does not allow (bytes of UTF-8)."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char == " " and mode == _QUERY_COMPONENT:
            out.append("+")
        elif byte >= 0x80 or _should_escape(char, mode):
            out.append(f"%{byte:02X}")
        else:
            out.append(char)
    return "".join(out)


def _valid_encoded(text: str, mode: int) -> bool:
    return all(c in "!$&'()*+,;=:@[]%" or (ord(c) < 0x80 and not _should_escape(c, mode))
               for c in text)


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= c <= "9" for c in port[1:]))


@dataclass(frozen=True)
class URL:
    """The fields of Go's ``url.URL`` that the CEL library reads or compares."""

    scheme: str = ""
    opaque: str = ""
    user: str | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""
    force_query: bool = False
    fragment: str = ""
    raw_fragment: str = ""
    omit_host: bool = False

    def hostname(self) -> str:
        """``URL.Hostname``: the host without port and IPv6 brackets."""
        return _split_host_port(self.host)[0]

    def port(self) -> str:
        """``URL.Port``: the port digits, or ``""``."""
        return _split_host_port(self.host)[1]

    def escaped_path(self) -> str:
        """``URL.EscapedPath``: the raw path when it is a valid encoding of the path."""
        if self.raw_path and _valid_encoded(self.raw_path, _PATH):
            try:
                if _unescape(self.raw_path, _PATH) == self.path:
                    return self.raw_path
            except _Error:
                pass
        if self.path == "*":
            return "*"
        return _escape(self.path, _PATH)

    def query(self) -> dict[str, list[str]]:
        """``URL.Query``: the query parameters; malformed pairs are skipped as in Go."""
        result: dict[str, list[str]] = {}
        if self.raw_query.count("&") + 1 > _MAX_QUERY_PARAMS:
            return result
        for pair in self.raw_query.split("&") if self.raw_query else []:
            if ";" in pair or not pair:
                continue
            key, _, value = pair.partition("=")
            try:
                key, value = _unescape(key, _QUERY_COMPONENT), _unescape(value, _QUERY_COMPONENT)
            except _Error:
                continue
            result.setdefault(key, []).append(value)
        return result


def _split_host_port(host_port: str) -> tuple[str, str]:
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon != -1 and _valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _get_scheme(raw: str) -> tuple[str, str]:
    for i, char in enumerate(raw):
        if "a" <= char <= "z" or "A" <= char <= "Z":
            continue
        if "0" <= char <= "9" or char in "+-.":
            if i == 0:
                return "", raw
            continue
        if char == ":":
            if i == 0:
                raise _Error("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _parse_host(scheme: str, host: str) -> str:
    open_bracket = host.rfind("[")
    if open_bracket > 0:
        raise _Error("invalid IP-literal")
    if open_bracket == 0:
        close_bracket = host.rfind("]")
        if close_bracket < 0:
            raise _Error("missing ']' in host")
        colon_port = host[close_bracket + 1:]
        if not _valid_optional_port(colon_port):
            raise _Error(f"invalid port {go_quote(colon_port)} after host")
        colon_port = _unescape(colon_port, _HOST)
        hostname = host[1:close_bracket]
        zone = hostname.find("%25")
        if zone >= 0:
            unescaped = _unescape(hostname[:zone], _HOST) + _unescape(hostname[zone:], _ZONE)
        else:
            unescaped = _unescape(hostname, _HOST)
        try:
            addr = parse_addr(unescaped)
        except AddrParseError as err:
            raise _Error(f"invalid host: {err}") from None
        if addr.is4:
            raise _Error("invalid IP-literal")
        return "[" + unescaped + "]" + colon_port
    first = host.find(":")
    if first != -1:
        last = host.rfind(":")
        colon = first if scheme in ("http", "https") else last
        colon_port = host[colon:]
        if not _valid_optional_port(colon_port):
            raise _Error(f"invalid port {go_quote(colon_port)} after host")
    return _unescape(host, _HOST)


def _valid_userinfo(text: str) -> bool:
    return all(_alnum(c) or c in _USERINFO_EXTRA for c in text)


def _parse_authority(scheme: str, authority: str) -> tuple[str | None, str]:
    at = authority.rfind("@")
    host = _parse_host(scheme, authority[at + 1:] if at >= 0 else authority)
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not _valid_userinfo(userinfo):
        raise _Error("net/url: invalid userinfo")
    for part in userinfo.split(":", 1):
        _unescape(part, _USER_PASSWORD)
    return userinfo, host


def _path_fields(raw: str) -> dict[str, str]:
    path = _unescape(raw, _PATH)
    return {"path": path, "raw_path": "" if _escape(path, _PATH) == raw else raw}


def _parse(raw: str, via_request: bool) -> URL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise _Error("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise _Error("empty url")
    if raw == "*":
        return URL(path="*")
    scheme, rest = _get_scheme(raw)
    scheme = scheme.lower()
    force_query, raw_query = False, ""
    if rest.endswith("?") and rest.count("?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return URL(scheme=scheme, opaque=rest, raw_query=raw_query, force_query=force_query)
        if via_request:
            raise _Error("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise _Error("first path segment in URL cannot contain colon")
    user, host, omit_host = None, "", False
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
        user, host = _parse_authority(scheme, authority)
    elif scheme and rest.startswith("/"):
        omit_host = True
    return URL(scheme=scheme, user=user, host=host, raw_query=raw_query,
               force_query=force_query, omit_host=omit_host, **_path_fields(rest))


def parse_request_uri(raw: str) -> URL:
    """``url.ParseRequestURI``: an absolute URI or absolute path, no fragment.

    Raises:
        URLParseError: ``parse "<raw>": <reason>``.
    """
    try:
        return _parse(raw, via_request=True)
    except _Error as err:
        raise URLParseError(f"parse {go_quote(raw)}: {err}") from None


def parse(raw: str) -> URL:
    """``url.Parse``: any URL reference, with an optional ``#fragment``.

    Raises:
        URLParseError: ``parse "<raw>": <reason>``.
    """
    before, hash_sign, fragment = raw.partition("#")
    try:
        url = _parse(before, via_request=False)
    except _Error as err:
        raise URLParseError(f"parse {go_quote(before)}: {err}") from None
    if not hash_sign or not fragment:
        return url
    try:
        unescaped = _unescape(fragment, _FRAGMENT)
    except _Error as err:
        raise URLParseError(f"parse {go_quote(raw)}: {err}") from None
    raw_fragment = "" if _escape(unescaped, _FRAGMENT) == fragment else fragment
    return URL(**{**url.__dict__, "fragment": unescaped, "raw_fragment": raw_fragment})
