"""Validation of CDI spec files against the CDI project's JSON schema (tests/data/cdi-schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "data" / "cdi-schema"


def cdi_validator() -> Draft7Validator:
    """A validator for CDI specs; ``schema.json`` refers to ``defs.json`` by relative name."""
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    defs = json.loads((SCHEMA_DIR / "defs.json").read_text())
    registry: Registry[Any] = Registry().with_resource(
        "defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    return Draft7Validator(schema, registry=registry)


def schema_errors(document: Any) -> list[str]:
    """Every schema violation of ``document`` as ``<path>: <message>``; empty when valid."""
    return [f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in cdi_validator().iter_errors(document)]
