"""Semantic versions as the Kubernetes CEL semver library sees them.

Parsing follows ``github.com/blang/semver/v4`` ``Parse`` (what ``semver()`` and version
attributes use, see ``k8s.io/apiserver/pkg/cel/library/semverlib.go`` and
``dynamic-resource-allocation/cel/compile.go``) and the library's ``normalizeAndParse`` for
``semver(s, true)``. Ordering is ``Version.Compare`` (build metadata ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .gostrings import go_quote
from .protos import SemverMessage

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_UINT64_MAX = 2**64 - 1


class SemverParseError(ValueError):
    """blang/semver rejected the string; the message is its error text."""


@dataclass(frozen=True, slots=True)
class PreRelease:
    """One dot-separated pre-release identifier (``PRVersion``)."""

    is_num: bool
    num: int = 0
    text: str = ""

    def compare(self, other: PreRelease) -> int:
        """``PRVersion.Compare``: numeric identifiers sort before alphanumeric ones."""
        if self.is_num != other.is_num:
            return -1 if self.is_num else 1
        a: int | str = self.num if self.is_num else self.text
        b: int | str = other.num if other.is_num else other.text
        return (a > b) - (a < b)  # type: ignore[operator]


@dataclass(frozen=True, slots=True)
class Semver:
    """A parsed version; build metadata is dropped because no CEL function observes it."""

    major: int
    minor: int
    patch: int
    pre: tuple[PreRelease, ...] = ()

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 (``Version.Compare``)."""
        for a, b in ((self.major, other.major), (self.minor, other.minor),
                     (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for a_pre, b_pre in zip(self.pre, other.pre, strict=False):
            result = a_pre.compare(b_pre)
            if result:
                return result
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __str__(self) -> str:
        """The version as blang's ``Version.String`` writes it, without build metadata."""
        pre = ".".join(str(p.num) if p.is_num else p.text for p in self.pre)
        return f"{self.major}.{self.minor}.{self.patch}" + (f"-{pre}" if pre else "")

    def to_message(self) -> Any:
        """The ``kubernetes.Semver`` message that carries this value through CEL."""
        return SemverMessage(major=self.major, minor=self.minor, patch=self.patch, pre=[
            SemverMessage.PreRelease(is_num=p.is_num, num=p.num, str=p.text) for p in self.pre])

    @classmethod
    def from_message(cls, message: Any) -> Semver:
        """Inverse of :meth:`to_message`."""
        return cls(message.major, message.minor, message.patch,
                   tuple(PreRelease(p.is_num, p.num, p.str) for p in message.pre))


def _parse_number(part: str, what: str) -> int:
    if not set(part) <= _NUMBERS:
        raise SemverParseError(f"Invalid character(s) found in {what} number {go_quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise SemverParseError(f"{what.capitalize()} number must not contain leading zeroes "
                               f"{go_quote(part)}")
    if not part:
        raise SemverParseError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(part)
    if value > _UINT64_MAX:
        raise SemverParseError(f"strconv.ParseUint: parsing {go_quote(part)}: value out of range")
    return value


def parse_semver(text: str) -> Semver:
    """``semver.Parse`` (blang/semver v4).

    Raises:
        SemverParseError: with blang's message.
    """
    if not text:
        raise SemverParseError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverParseError("No Major.Minor.Patch elements found")
    major = _parse_number(parts[0], "major")
    minor = _parse_number(parts[1], "minor")
    patch_text, build = parts[2], None
    if "+" in patch_text:
        patch_text, build_text = patch_text.split("+", 1)
        build = build_text.split(".")
    prerelease = None
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
        prerelease = pre_text.split(".")
    patch = _parse_number(patch_text, "patch")
    pre = tuple(_parse_prerelease(p) for p in prerelease or ())
    for ident in build or ():
        if not ident:
            raise SemverParseError("Build meta data is empty")
        if not set(ident) <= _ALPHANUM:
            raise SemverParseError(f"Invalid character(s) found in build meta data "
                                   f"{go_quote(ident)}")
    return Semver(major, minor, patch, pre)


def _parse_prerelease(ident: str) -> PreRelease:
    if not ident:
        raise SemverParseError("Prerelease is empty")
    if set(ident) <= _NUMBERS:
        if len(ident) > 1 and ident[0] == "0":
            raise SemverParseError(f"Numeric PreRelease version must not contain leading zeroes "
                                   f"{go_quote(ident)}")
        value = int(ident)
        if value > _UINT64_MAX:
            raise SemverParseError(f"strconv.ParseUint: parsing {go_quote(ident)}: "
                                   "value out of range")
        return PreRelease(True, value)
    if set(ident) <= _ALPHANUM:
        return PreRelease(False, text=ident)
    raise SemverParseError(f"Invalid character(s) found in prerelease {go_quote(ident)}")


def parse_semver_normalized(text: str) -> Semver:
    """``normalizeAndParse`` (semverlib.go): drop a ``v`` prefix and leading zeros, pad to 3 parts.

    Raises:
        SemverParseError: the normalized string is still not a version.
    """
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverParseError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))
