"""Kubernetes timestamps: ``metav1.Time`` (RFC 3339, seconds) and ``metav1.MicroTime``."""

from __future__ import annotations

import datetime


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
