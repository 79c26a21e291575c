"""Kubernetes timestamps: ``metav1.Time`` (RFC 3339, seconds) and ``metav1.MicroTime``."""

from __future__ import annotations

import datetime
import re


def utcnow() -> datetime.datetime:
    """The current time, timezone-aware UTC."""
    return datetime.datetime.now(datetime.UTC)


def timestamp(moment: datetime.datetime) -> str:
    """``metav1.Time``: RFC 3339 in UTC with seconds, e.g. ``2026-11-30T16:55:01Z``."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_timestamp(moment: datetime.datetime) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds (Lease ``renewTime``)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: str) -> datetime.datetime:
    """A ``metav1.Time`` or ``MicroTime`` string as a timezone-aware datetime.

    Raises:
        ValueError: not an RFC 3339 timestamp.
    """
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


_LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
_DATE = ("([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
         f"|02-(0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
TIME_PATTERN = (f"^{_DATE}T([01]?[0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.,][0-9]+)?"
                "(Z|[+-]([01][0-9]|2[0-4]):([0-5][0-9]|60))$")
r"""What the API server takes as a ``metav1.Time`` (a ResourceSlice taint's ``timeAdded``):
``time.Parse(time.RFC3339, s)`` in ``Time.UnmarshalJSON`` (k8s.io/apimachinery v0.37.2
``pkg/apis/meta/v1/time.go``), Go 1.26 ``time/format.go``. Its fast path takes
``2006-01-02T15:04:05[.999]Z07:00`` with a valid calendar date; the general layout parser it
falls back to also takes a one-digit hour (``T1:00:00Z``), a comma before the fraction, any
number of fraction digits and a zone offset up to ``+24:60``. The days of each month and leap
years (every 4th, not every 100th, every 400th) are in the pattern; a date-only value, a
lower-case ``t`` or ``z``, a space, a missing seconds field, ``+0100`` are not. ``[0-9]``, not
``\d``: Python's ``\d`` matches other scripts' digits."""
_TIME = re.compile(TIME_PATTERN)


def is_time(value: str) -> bool:
    """Whether the API server parses ``value`` as a ``metav1.Time`` (:data:`TIME_PATTERN`)."""
    return bool(_TIME.fullmatch(value))
