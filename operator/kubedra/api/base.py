"""Base class for Kubernetes-shaped pydantic models.

Fields are snake_case in Python and camelCase on the wire. Unknown fields from a newer API server
are ignored on input, and unset (``None``) fields are left out on output, so that what we write
is exactly what we mean.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    """A pydantic model that reads and writes Kubernetes JSON (camelCase, omitempty)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_api(self) -> dict[str, Any]:
        """The JSON-ready dict the API server expects: camelCase keys, no ``None`` values."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    def to_json(self) -> bytes:
        """What :meth:`to_api` gives, as UTF-8 JSON bytes (written by pydantic in one pass;
        characters beyond ASCII as they are, not escaped)."""
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    @classmethod
    def from_api(cls, data: Any) -> Self:
        """Parse a dict as read from the API server (or from kubernetes-asyncio's ``to_dict``)."""
        return cls.model_validate(data)


def validation_field(err: ValidationError) -> str:
    """The JSON path of the first error pydantic reports, with its message, e.g.
    ``spec.devices[0].name: Input should be a valid string``."""
    return validation_errors(err)[0]


def validation_errors(err: ValidationError, prefix: str = "") -> list[str]:
    """Each error pydantic reports as one ``path: message`` (``spec.devices[0].name: Input
    should be a valid string``; ``prefix`` before each path), as the API server names a
    field it refuses: no input values, no links."""
    found = []
    for error in err.errors():
        path = prefix.removesuffix(".")
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        found.append(f"{path}: {error['msg']}")
    return found
