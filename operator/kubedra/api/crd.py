"""Generate the DeviceInventory CustomResourceDefinition from the pydantic models.

The models in :mod:`kubedra.api.inventory` are the single definition; this module turns their
JSON schema into a structural OpenAPI v3 schema as the API server requires it
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
references inlined, optional fields unwrapped, quantities as ``x-kubernetes-int-or-string``,
free-form values as ``x-kubernetes-preserve-unknown-fields``, and map-key formats (which a
structural schema cannot state) as ``x-kubernetes-validations`` CEL rules.
``kubedra crd`` prints the result; ``crds/`` holds a copy that a test keeps equal.
"""

from __future__ import annotations

import re
from typing import Any

import click
import yaml

from kubedra.api import inventory
from kubedra.api.limits import DEVICE_MAX_DOMAIN_LENGTH, DEVICE_MAX_ID_LENGTH
from kubedra.api.names import QUALIFIED_NAME_PATTERN
from kubedra.api.quantity import QUANTITY_PATTERN

CRD_NAME = f"{inventory.PLURAL}.{inventory.GROUP}"

_KEEP = {"type", "properties", "required", "items", "additionalProperties", "enum", "pattern",
         "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties",
         "minimum", "maximum", "format", "description", "default"}


class SchemaError(ValueError):
    """A model uses a type the generator cannot express structurally."""


def _qualified_key_rule() -> dict[str, str]:
    key_ok = (f"k.matches(r'{QUALIFIED_NAME_PATTERN}') && (k.contains('/') ? "
              f"k.indexOf('/') <= {DEVICE_MAX_DOMAIN_LENGTH} && "
              f"size(k) - k.indexOf('/') - 1 <= {DEVICE_MAX_ID_LENGTH} : "
              f"size(k) <= {DEVICE_MAX_ID_LENGTH})")
    return {"rule": f"self.all(k, {key_ok})",
            # a messageExpression naming the bad keys would exceed the CRD's CEL cost budget
            "message": (f"every key must be a qualified name: a C identifier (letters, digits, "
                        f"_) of at most {DEVICE_MAX_ID_LENGTH} characters, optionally prefixed "
                        f"with a DNS subdomain of at most {DEVICE_MAX_DOMAIN_LENGTH} characters "
                        "and '/', e.g. memory or gpu.kubedra.io/memory")}


def _clean_description(text: str) -> str:
    return re.sub(r"``([^`]*)``", r"\1", " ".join(text.split()))


def _convert(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One JSON-schema node (pydantic's dialect) → one structural OpenAPI node."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _convert(merged, defs)
    extras = {k: v for k, v in schema.items() if k.startswith("x-kubernetes-")}
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        outer = {k: v for k, v in schema.items() if k not in {"anyOf", "default", "title"}}
        types = sorted(b.get("type", "") for b in branches)
        if types == ["integer", "string"]:
            # a quantity: the API server refuses a string that is none (as controller-gen's
            # schema of resource.Quantity does), rather than every reader of the object
            out: dict[str, Any] = {"x-kubernetes-int-or-string": True,
                                   "anyOf": [{"type": "integer"}, {"type": "string"}],
                                   "pattern": QUANTITY_PATTERN}
            if "description" in outer:
                out["description"] = _clean_description(outer["description"])
            return out
        if len(branches) != 1:
            raise SchemaError(f"cannot express a union structurally: {schema['anyOf']}")
        return _convert({**branches[0], **outer}, defs)
    if not schema or schema.get("x-kubedra-free-form"):
        out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if "description" in schema:
            out["description"] = _clean_description(schema["description"])
        return out
    out = {k: v for k, v in schema.items() if k in _KEEP}
    if "const" in schema:
        out["enum"] = [schema["const"]]
    if out.get("default", "") is None:
        del out["default"]
    if "description" in out:
        out["description"] = _clean_description(out["description"])
    if "properties" in schema:
        out["properties"] = {name: _convert(prop, defs)
                             for name, prop in schema["properties"].items()}
    if "items" in schema:
        out["items"] = _convert(schema["items"], defs)
    value_schema = schema.get("additionalProperties")
    keys = dict(schema.get("propertyNames", {}))
    if "patternProperties" in schema:  # pydantic's form of dict[ConstrainedKey, Value]
        ((keys["pattern"], value_schema),) = schema["patternProperties"].items()
    if isinstance(value_schema, dict):
        out["additionalProperties"] = _convert(value_schema, defs)
    if keys.get("x-kubedra-qualified-name"):
        extras.setdefault("x-kubernetes-validations", []).append(_qualified_key_rule())
    elif "pattern" in keys:
        limit = f" && size(k) <= {keys['maxLength']}" if "maxLength" in keys else ""
        extras.setdefault("x-kubernetes-validations", []).append({
            "rule": f"self.all(k, k.matches(r'{keys['pattern']}'){limit})",
            "message": f"keys must match {keys['pattern']}"})
    out.update(extras)
    return out


def inventory_schema() -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a DeviceInventory object."""
    json_schema = inventory.DeviceInventory.model_json_schema(by_alias=True, mode="validation")
    defs = json_schema.get("$defs", {})
    spec = _convert(json_schema["properties"]["spec"], defs)
    status = _convert(defs["DeviceInventoryStatus"], defs)
    return {
        "type": "object",
        "description": _clean_description(inventory.DeviceInventory.__doc__ or ""),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def inventory_crd() -> dict[str, Any]:
    """The ``deviceinventories.kubedra.io`` CustomResourceDefinition as a dict."""
    ready = '.status.conditions[?(@.type=="Ready")].status'
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": inventory.GROUP,
            "scope": "Cluster",
            "names": {"plural": inventory.PLURAL, "singular": inventory.SINGULAR,
                      "kind": inventory.KIND, "listKind": f"{inventory.KIND}List",
                      "shortNames": inventory.SHORT_NAMES, "categories": ["kubedra"]},
            "versions": [{
                "name": inventory.VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Driver", "type": "string", "jsonPath": ".spec.driver"},
                    {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName"},
                    {"name": "Devices", "type": "integer", "jsonPath": ".status.deviceCount"},
                    {"name": "Allocated", "type": "integer",
                     "jsonPath": ".status.allocatedCount"},
                    {"name": "Ready", "type": "string", "jsonPath": ready},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": inventory_schema()},
            }],
        },
    }


def inventory_crd_yaml() -> str:
    """The CRD as the YAML document ``kubedra crd`` prints and ``crds/`` stores."""
    header = "# Generated by `kubedra crd` from kubedra/api/inventory.py. Do not edit.\n"
    return header + yaml.dump(inventory_crd(), Dumper=_NoAliasDumper, sort_keys=False, width=100)


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated sub-schemas in full instead of YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


@click.command("crd", short_help="Print the DeviceInventory CustomResourceDefinition (YAML).")
def crd_command() -> None:
    """Print the DeviceInventory CustomResourceDefinition (YAML)."""
    click.echo(inventory_crd_yaml(), nl=False)
