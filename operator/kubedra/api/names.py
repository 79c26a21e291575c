"""Name formats of the DRA API as annotated string types.

Each type validates in Python and carries its JSON schema (pattern, maxLength) into the CRD.
Sources: ``k8s.io/apimachinery/pkg/util/validation`` (DNS label and subdomain) and
``k8s.io/api/resource/v1/types.go`` (``QualifiedName``: an optional DNS-subdomain domain of at
most 63 characters, a slash, and a C identifier of at most 32 characters).
"""

from __future__ import annotations

import functools
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints
from pydantic.config import JsonDict

from kubedra.api.limits import DEVICE_MAX_DOMAIN_LENGTH, DEVICE_MAX_ID_LENGTH

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
POOL_NAME_PATTERN = rf"^{_SUBDOMAIN}(/{_SUBDOMAIN})*$"
QUALIFIED_NAME_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                          r"[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED = re.compile(QUALIFIED_NAME_PATTERN)

DNSLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL_PATTERN, max_length=63)]
"""A DNS label (RFC 1123): lower-case alphanumerics and '-', at most 63 characters."""

DNSSubdomain = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]
"""A DNS subdomain (RFC 1123): dot-separated DNS labels, at most 253 characters."""

PoolName = Annotated[str, StringConstraints(pattern=POOL_NAME_PATTERN, max_length=253)]
"""A pool name: DNS subdomains separated by '/', at most 253 characters (``PoolNameMaxLength``)."""

LABEL_NAME_PATTERN = rf"^({_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?$"
LABEL_PREFIX_MAX_LENGTH = 253
"""Characters of a label key's prefix, the DNS subdomain before '/' (``IsLabelKey``)."""
LABEL_NAME_MAX_LENGTH = 63
"""Characters of a label key's name, the part after the optional prefix and '/'."""
LABEL_KEY_MAX_LENGTH = LABEL_PREFIX_MAX_LENGTH + 1 + LABEL_NAME_MAX_LENGTH
LABEL_KEY_SCHEMA: JsonDict = {
    "pattern": LABEL_NAME_PATTERN, "maxLength": LABEL_KEY_MAX_LENGTH,
    # the pattern cannot bound the prefix (RE2 has no lookahead) and says nothing a user can
    # read about a name that is too long: these rules do, with upstream's words. No regex in
    # CEL: matches() on 65,536 taint keys (4096 overrides x 16) would exceed the cost limit
    "x-kubernetes-validations": [
        {"rule": f"self.indexOf('/') <= {LABEL_PREFIX_MAX_LENGTH}",
         "message": (f"prefix part (before '/') must be no more than {LABEL_PREFIX_MAX_LENGTH} "
                     "characters")},
        {"rule": f"size(self) - self.indexOf('/') - 1 <= {LABEL_NAME_MAX_LENGTH}",
         "message": f"name part must be no more than {LABEL_NAME_MAX_LENGTH} characters"},
    ],
}
"""The CRD schema of a label key (``ValidateLabelName``: ``IsLabelKey`` in
k8s.io/apimachinery/pkg/api/validate/content/kube.go, v0.37.2): ``name`` or ``prefix/name``,
the prefix a DNS subdomain of at most 253 characters, the name at most 63 alphanumerics,
'-', '_' and '.', alphanumeric at both ends. ``indexOf`` counts characters, not bytes: the
pattern admits ASCII only, where the two are equal."""
LabelName = Annotated[str, StringConstraints(pattern=LABEL_NAME_PATTERN,
                                             max_length=LABEL_KEY_MAX_LENGTH),
                      Field(json_schema_extra=LABEL_KEY_SCHEMA)]
"""A label (or condition type) name: ``name`` or ``prefix/name``, name at most 63 characters;
what the API allows for binding conditions (``ValidateLabelName``). Python checks the pattern
and the whole length only; the CRD (:data:`LABEL_KEY_SCHEMA`) also bounds the prefix."""
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
"""A label value: empty, or at most 63 alphanumerics, '-', '_' and '.', alphanumeric at both
ends (``IsValidLabelValue`` in k8s.io/apimachinery/pkg/util/validation)."""
LABEL_VALUE_MAX_LENGTH = 63
_LABEL_KEY = re.compile(LABEL_NAME_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)


def is_label_key(key: str) -> bool:
    """Whether ``key`` is a label key as ``IsLabelKey`` (k8s.io/apimachinery v0.37.2,
    pkg/api/validate/content/kube.go) accepts it: ``name`` or ``prefix/name``, the prefix a
    non-empty DNS subdomain of at most 253 characters, the name 1 to 63 alphanumerics, '-',
    '_' and '.', alphanumeric at both ends (so ``/name`` and ``a/b/c`` are not)."""
    prefix, slash, _ = key.partition("/")
    return bool(_LABEL_KEY.fullmatch(key)) and (not slash or len(prefix) <= LABEL_PREFIX_MAX_LENGTH)


def is_label_value(value: str) -> bool:
    """Whether ``value`` is a label value (``IsLabelValue``): empty, or at most 63
    alphanumerics, '-', '_' and '.', alphanumeric at both ends."""
    return bool(_LABEL_VALUE.fullmatch(value))


DriverName = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN_PATTERN, max_length=63)]
"""A driver name: a DNS subdomain of at most 63 characters (``DriverNameMaxLength``)."""

NODE_ALLOCATABLE_RESOURCE_PATTERN = r"^(cpu|memory|hugepages-.+)$"
NodeAllocatableResourceName = Annotated[str, StringConstraints(
    pattern=NODE_ALLOCATABLE_RESOURCE_PATTERN)]
"""A key of ``nodeAllocatableResources``: ``cpu``, ``memory`` or a hugepages size
(``IsNodeAllocatableResourceName`` in pkg/apis/core/helper/helpers.go; extended resources are
refused by ``validateNodeAllocatableResources`` in pkg/apis/resource/validation)."""


@functools.lru_cache(maxsize=4096)
def qualified_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid attribute or capacity name, or ``None`` if it is.

    Remembered per name: every device of a fleet repeats the same few names, and matching them
    was the largest cost of decoding an inventory (bench/scale.py).

    A name with more than one '/' gets its own message: Kubernetes 1.38 refuses such names in
    every resource.k8s.io object (kubernetes#141644, ``validateQualifiedName`` in
    pkg/apis/resource/validation/validation.go), and a driver must not publish one."""
    if (slashes := name.count("/")) > 1:
        return (f"has {slashes} '/'; at most one '/' may separate the domain from the name "
                "(Kubernetes 1.38 refuses more)")
    if not _QUALIFIED.match(name):
        return ("must be a C identifier, optionally prefixed with a DNS subdomain and '/' "
                "(e.g. memory or gpu.kubedra.io/memory)")
    domain, _, ident = name.rpartition("/")
    if len(domain) > DEVICE_MAX_DOMAIN_LENGTH:
        return f"domain must be at most {DEVICE_MAX_DOMAIN_LENGTH} characters"
    if len(ident) > DEVICE_MAX_ID_LENGTH:
        return f"name must be at most {DEVICE_MAX_ID_LENGTH} characters"
    return None


def _check_qualified_name(name: str) -> str:
    error = qualified_name_error(name)
    if error:
        raise ValueError(f"{name!r}: {error}")
    return name


QualifiedName = Annotated[
    str, AfterValidator(_check_qualified_name),
    Field(json_schema_extra={"pattern": QUALIFIED_NAME_PATTERN,
                             "maxLength": DEVICE_MAX_DOMAIN_LENGTH + 1 + DEVICE_MAX_ID_LENGTH,
                             "x-kubedra-qualified-name": True}),
]
"""An attribute or capacity name: ``id`` or ``domain/id`` (``QualifiedName`` in the API)."""
