"""IP addresses and prefixes as Go's ``net/netip`` parses and prints them.

The IP and CIDR libraries of upstream's CEL environment (``k8s.io/apiserver/pkg/cel/library/
ip.go``, ``cidr.go``) wrap ``netip.ParseAddr`` and ``netip.ParsePrefix``; their answers and
error messages reach the user, so this is a port of those functions (Go 1.26
``src/net/netip/netip.go``), not Python's :mod:`ipaddress`, which accepts and prints a few
things differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gostrings import go_quote


class AddrParseError(ValueError):
    """``netip.ParseAddr`` failed; the message is Go's ``parseAddrError.Error()``."""


class PrefixParseError(ValueError):
    """``netip.ParsePrefix`` failed; the message is Go's ``parsePrefixError.Error()``."""


def _addr_error(text: str, msg: str, at: str = "") -> AddrParseError:
    suffix = f" (at {go_quote(at)})" if at else ""
    return AddrParseError(f"ParseAddr({go_quote(text)}): {msg}{suffix}")


@dataclass(frozen=True)
class Addr:
    """An IPv4 (4 bytes) or IPv6 (16 bytes) address with an optional IPv6 zone."""

    octets: bytes
    zone: str = ""

    @property
    def is4(self) -> bool:
        """An IPv4 address (not an IPv4-mapped IPv6 one)."""
        return len(self.octets) == 4

    @property
    def is4in6(self) -> bool:
        """An IPv6 address of the form ``::ffff:a.b.c.d``."""
        return len(self.octets) == 16 and self.octets[:12] == bytes(10) + b"\xff\xff"

    def _unmapped(self) -> Addr:
        return Addr(self.octets[12:]) if self.is4in6 else self

    def _group(self, i: int) -> int:
        return int.from_bytes(self.octets[2 * i:2 * i + 2], "big")

    def __str__(self) -> str:
        if self.is4:
            return ".".join(str(b) for b in self.octets)
        text = "::ffff:" + str(self._unmapped()) if self.is4in6 else self._string6()
        return f"{text}%{self.zone}" if self.zone else text

    def _string6(self) -> str:
        groups = [self._group(i) for i in range(8)]
        zero_start, zero_end = 255, 255
        for i in range(8):
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i >= 2 and j - i > zero_end - zero_start:
                zero_start, zero_end = i, j
        out = ""
        i = 0
        while i < 8:
            if i == zero_start:
                out += "::"
                i = zero_end
                if i >= 8:
                    break
            elif i > 0:
                out += ":"
            out += f"{groups[i]:x}"
            i += 1
        return out

    def is_unspecified(self) -> bool:
        """``0.0.0.0`` or ``::``."""
        return not self.zone and not any(self.octets)

    def is_loopback(self) -> bool:
        """``127.0.0.0/8`` or ``::1``."""
        ip = self._unmapped()
        return ip.octets[0] == 127 if ip.is4 else ip.octets == bytes(15) + b"\x01"

    def is_multicast(self) -> bool:
        """``224.0.0.0/4`` or ``ff00::/8``."""
        ip = self._unmapped()
        return ip.octets[0] & 0xF0 == 0xE0 if ip.is4 else ip.octets[0] == 0xFF

    def is_link_local_multicast(self) -> bool:
        """``224.0.0.0/24`` or ``ff02::/16`` (any flags)."""
        ip = self._unmapped()
        if ip.is4:
            return ip.octets[:3] == b"\xe0\x00\x00"
        return ip._group(0) & 0xFF0F == 0xFF02

    def is_link_local_unicast(self) -> bool:
        """``169.254.0.0/16`` or ``fe80::/10``."""
        ip = self._unmapped()
        if ip.is4:
            return ip.octets[:2] == b"\xa9\xfe"
        return ip._group(0) & 0xFFC0 == 0xFE80

    def is_global_unicast(self) -> bool:
        """Not unspecified, limited broadcast, loopback, multicast or link-local unicast."""
        ip = self._unmapped()
        if ip.is4 and ip.octets in (bytes(4), b"\xff\xff\xff\xff"):
            return False
        unspecified6 = len(ip.octets) == 16 and not any(ip.octets) and not ip.zone
        return not (unspecified6 or ip.is_loopback() or ip.is_multicast()
                    or ip.is_link_local_unicast())

    @property
    def bit_length(self) -> int:
        """32 or 128."""
        return len(self.octets) * 8


def _ipv4_fields(text: str, part: str) -> bytes:
    fields: list[int] = []
    value, digits = 0, 0
    for i, char in enumerate(part):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise _addr_error(text, "IPv4 field has octet with leading zero")
            value = value * 10 + int(char)
            digits += 1
            if value > 255:
                raise _addr_error(text, "IPv4 field has value >255")
        elif char == ".":
            if i == 0 or i == len(part) - 1 or part[i - 1] == ".":
                raise _addr_error(text, "IPv4 field must have at least one digit", part[i:])
            if len(fields) == 3:
                raise _addr_error(text, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _addr_error(text, "unexpected character", part[i:])
    if len(fields) < 3:
        raise _addr_error(text, "IPv4 address too short")
    return bytes([*fields, value])


_HEX = "0123456789abcdefABCDEF"


def _parse_ipv6(text: str) -> Addr:
    s, zone = text, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise _addr_error(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return Addr(bytes(16), zone)
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(s) and s[off] in _HEX:
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise _addr_error(text, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _addr_error(text, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _addr_error(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _addr_error(text, "embedded IPv4 address must replace the final 2 fields "
                                  "of the address", s)
            if i + 4 > 16:
                raise _addr_error(text, "too many hex fields to fit an embedded IPv4 at the end "
                                  "of the address", s)
            ip[i:i + 4] = _ipv4_fields(text, s)
            s = ""
            i += 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _addr_error(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _addr_error(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _addr_error(text, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _addr_error(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _addr_error(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n:16] = ip[ellipsis:i]
        ip[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _addr_error(text, "the :: must expand to at least one field of zeros")
    return Addr(bytes(ip), zone)


def parse_addr(text: str) -> Addr:
    """``netip.ParseAddr``: dotted decimal, IPv6 (with embedded IPv4), optional ``%zone``.

    Raises:
        AddrParseError: with Go's message (``ParseAddr("1.2.3"): IPv4 address too short``).
    """
    for char in text:
        if char == ".":
            return Addr(_ipv4_fields(text, text))
        if char == ":":
            return _parse_ipv6(text)
        if char == "%":
            raise _addr_error(text, "missing IPv6 address")
    raise _addr_error(text, "unable to parse IP")


@dataclass(frozen=True)
class Prefix:
    """An address and a prefix length in bits (the address is not masked)."""

    addr: Addr
    bits: int

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"

    def masked(self) -> Prefix:
        """The prefix with the address bits beyond ``bits`` cleared."""
        value = int.from_bytes(self.addr.octets, "big")
        width = self.addr.bit_length
        mask = ((1 << width) - 1) ^ ((1 << (width - self.bits)) - 1)
        return Prefix(Addr((value & mask).to_bytes(width // 8, "big")), self.bits)

    def contains(self, ip: Addr) -> bool:
        """Whether ``ip`` (same family, no zone) is inside the prefix."""
        if ip.zone or ip.bit_length != self.addr.bit_length:
            return False
        return Prefix(ip, self.bits).masked().addr == self.masked().addr

    def overlaps(self, other: Prefix) -> bool:
        """Whether the two prefixes share any address."""
        if self == other:
            return True
        if self.addr.is4 != other.addr.is4:
            return False
        bits = min(self.bits, other.bits)
        return Prefix(self.addr, bits).masked() == Prefix(other.addr, bits).masked()


def parse_prefix(text: str) -> Prefix:
    """``netip.ParsePrefix``: ``<address>/<bits>``, no zone.

    Raises:
        PrefixParseError: with Go's message (``netip.ParsePrefix("10.0.0.0"): no '/'``).
    """
    def error(msg: str) -> PrefixParseError:
        return PrefixParseError(f"netip.ParsePrefix({go_quote(text)}): {msg}")

    slash = text.rfind("/")
    if slash < 0:
        raise error("no '/'")
    try:
        addr = parse_addr(text[:slash])
    except AddrParseError as err:
        raise error(str(err)) from None
    if addr.zone:
        raise error("IPv6 zones cannot be present in a prefix")
    bits_text = text[slash + 1:]
    bad_bits = error("bad bits after slash: " + go_quote(bits_text))
    if len(bits_text) > 1 and not "1" <= bits_text[0] <= "9":
        raise bad_bits
    if not bits_text or any(not "0" <= c <= "9" for c in bits_text) or \
            int(bits_text) >= 2**63:  # strconv.Atoi's range
        raise bad_bits
    bits = int(bits_text)
    if bits > addr.bit_length:
        raise error("prefix length out of range")
    return Prefix(addr, bits)
