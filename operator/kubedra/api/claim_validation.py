"""The rules the API server applies to a ResourceClaim's ``spec.devices``, for claims that never
went through it: ``kubedra simulate -f`` reads a file, and must not say that a claim fits which
``kubectl apply`` would refuse (issue 13, item 4, found by fuzzing).

Source: ``validateDeviceClaim``, ``validateDeviceRequest``, ``validateExactDeviceRequest``,
``validateDeviceSubRequest``, ``validateDeviceAllocationMode``, ``validateDeviceConstraint``,
``validateRequestNameRef``, ``validateDeviceToleration`` and ``validateCELExpression`` in
``k8s.io/kubernetes/pkg/apis/resource/validation/validation.go`` (v1.37), after the v1
defaults (``allocationMode`` ``ExactCount``, then ``count`` 1 when unset). Compiling a CEL
selector is the caller's ``cel_error`` (this layer does not import :mod:`kubedra.cel`); a
quantity that does not parse fails the model already.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kubedra.api.limits import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    DEVICE_CONFIG_MAX_SIZE,
    DEVICE_CONSTRAINTS_MAX_SIZE,
    DEVICE_REQUESTS_MAX_SIZE,
    DEVICE_SELECTORS_MAX_SIZE,
    DEVICE_TOLERATIONS_MAX_LENGTH,
    FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE,
)
from kubedra.api.names import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    is_label_key,
    is_label_value,
    qualified_name_error,
)
from kubedra.api.resource import (
    DEVICE_TAINT_EFFECTS,
    DeviceClaim,
    DeviceConstraint,
    DeviceSelector,
    DeviceToleration,
    ExactDeviceRequest,
)
from kubedra.api.resource import DeviceSubRequest as SubRequest
from kubedra.api.validation import FieldError

_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
ALLOCATION_MODES = ("ExactCount", "All")
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = DEVICE_TAINT_EFFECTS
"""A toleration's effect, when set, is one a taint may have (``validateDeviceToleration``
checks it against ``validDeviceTaintEffects``): None, NoSchedule, NoExecute from Kubernetes
1.35, NoSchedule and NoExecute in 1.34 (``effect_none=False``; ``TAINT_EFFECT_NONE`` in
:mod:`kubedra.allocation.versions`)."""
_REF_MESSAGE = ("must be the name of a request in the claim or the name of a request and a "
                "subrequest separated by '/'")


CELError = Callable[[str], str | None]
"""Why a CEL selector expression does not compile, or None when it does."""


def device_claim_errors(claim: DeviceClaim, path: str = "spec.devices",
                        cel_error: CELError | None = None, *,
                        effect_none: bool = True) -> list[FieldError]:
    """Every rule of the module docstring that ``claim`` breaks, with paths below ``path``
    (e.g. ``spec.devices.requests[0].exactly.count``); with ``cel_error``, also each selector
    expression that does not compile (``…selectors[1].cel.expression``), once per selector.
    ``effect_none=False`` refuses a toleration with effect None, as Kubernetes 1.34 does
    (:data:`TOLERATION_EFFECTS`)."""
    effects = tuple(e for e in TOLERATION_EFFECTS if effect_none or e != "None")
    requests = claim.requests or []
    errors = _too_many(f"{path}.requests", len(requests), DEVICE_REQUESTS_MAX_SIZE)
    errors += _duplicates(f"{path}.requests", [r.name for r in requests])
    names: dict[str, set[str] | None] = {}
    for i, request in enumerate(requests):
        where = f"{path}.requests[{i}]"
        errors += _name_errors(f"{where}.name", request.name)
        alternatives = request.first_available or []
        names[request.name] = {s.name for s in alternatives} if alternatives else None
        if bool(alternatives) == (request.exactly is not None):
            errors.append(FieldError(where, "exactly one of `exactly` or `firstAvailable` is "
                                            "required"))
        elif request.exactly is not None:
            errors += _exact_errors(f"{where}.exactly", request.exactly, cel_error, effects)
        else:
            errors += _too_many(f"{where}.firstAvailable", len(alternatives),
                                FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE)
            errors += _duplicates(f"{where}.firstAvailable", [s.name for s in alternatives])
            for j, sub in enumerate(alternatives):
                errors += _name_errors(f"{where}.firstAvailable[{j}].name", sub.name)
                errors += _exact_errors(f"{where}.firstAvailable[{j}]", sub, cel_error,
                                        effects)
    constraints = claim.constraints or []
    errors += _too_many(f"{path}.constraints", len(constraints), DEVICE_CONSTRAINTS_MAX_SIZE)
    for i, constraint in enumerate(constraints):
        errors += _constraint_errors(f"{path}.constraints[{i}]", constraint, names)
    configs = claim.config or []
    errors += _too_many(f"{path}.config", len(configs), DEVICE_CONFIG_MAX_SIZE)
    for i, config in enumerate(configs):
        errors += _references(f"{path}.config[{i}].requests", config.requests or [], names)
    return errors


def _too_many(path: str, count: int, limit: int) -> list[FieldError]:
    return [FieldError(path, f"{count} items; at most {limit} are allowed")] \
        if count > limit else []


def _duplicates(path: str, names: Sequence[str]) -> list[FieldError]:
    seen: set[str] = set()
    errors = []
    for i, name in enumerate(names):
        if name in seen:
            errors.append(FieldError(f"{path}[{i}].name", f"duplicate name {name!r}"))
        seen.add(name)
    return errors


def _name_errors(path: str, name: str) -> list[FieldError]:
    if len(name) > 63 or not _DNS_LABEL.match(name):
        return [FieldError(path, f"{name!r} is not a DNS label (at most 63 lower-case letters, "
                                 "digits and '-', starting and ending with a letter or digit)")]
    return []


def _exact_errors(path: str, request: ExactDeviceRequest | SubRequest,
                  cel_error: CELError | None, effects: Sequence[str]) -> list[FieldError]:
    errors = []
    cls = request.device_class_name
    if not cls:
        errors.append(FieldError(f"{path}.deviceClassName", "required"))
    elif len(cls) > 253 or not _DNS_SUBDOMAIN.match(cls):
        errors.append(FieldError(f"{path}.deviceClassName", f"{cls!r} is not a DNS subdomain"))
    errors += _selector_errors(f"{path}.selectors", request.selectors or [], cel_error)
    mode = request.allocation_mode or "ExactCount"
    if mode == "All" and request.count:
        errors.append(FieldError(f"{path}.count", "must not be specified when allocationMode "
                                                  "is 'All'"))
    elif mode == "ExactCount" and request.count is not None and request.count < 0:
        errors.append(FieldError(f"{path}.count", "must be greater than zero"))
    elif mode not in ALLOCATION_MODES:
        errors.append(FieldError(f"{path}.allocationMode", f"{mode!r} is not one of "
                                                           f"{', '.join(ALLOCATION_MODES)}"))
    tolerations = request.tolerations or []
    errors += _too_many(f"{path}.tolerations", len(tolerations), DEVICE_TOLERATIONS_MAX_LENGTH)
    for i, toleration in enumerate(tolerations):
        errors += _toleration_errors(f"{path}.tolerations[{i}]", toleration, effects)
    return errors


def _selector_errors(path: str, selectors: Sequence[DeviceSelector],
                     cel_error: CELError | None) -> list[FieldError]:
    errors = _too_many(path, len(selectors), DEVICE_SELECTORS_MAX_SIZE)
    for i, selector in enumerate(selectors):
        if selector.cel is None:
            errors.append(FieldError(f"{path}[{i}].cel", "required"))
        elif not selector.cel.expression:
            errors.append(FieldError(f"{path}[{i}].cel.expression", "required"))
        elif len(selector.cel.expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            errors.append(FieldError(f"{path}[{i}].cel.expression", "at most "
                                     f"{CEL_SELECTOR_EXPRESSION_MAX_LENGTH} characters"))
        elif cel_error is not None and (why := cel_error(selector.cel.expression)):
            errors.append(FieldError(f"{path}[{i}].cel.expression", why))
    return errors


def _toleration_errors(path: str, toleration: DeviceToleration,
                       effects: Sequence[str]) -> list[FieldError]:
    errors = []
    key = toleration.key or ""
    if key and not is_label_key(key):
        errors.append(FieldError(f"{path}.key", f"{key!r} is not a label key"))
    operator = toleration.operator or "Equal"
    value = toleration.value or ""
    if operator not in TOLERATION_OPERATORS:
        errors.append(FieldError(f"{path}.operator", f"{operator!r} is not one of "
                                                     f"{', '.join(TOLERATION_OPERATORS)}"))
    elif operator == "Exists" and value:
        errors.append(FieldError(f"{path}.value", "must be empty when operator is 'Exists'"))
    elif not is_label_value(value):
        errors.append(FieldError(f"{path}.value", f"{value!r} is not a label value"))
    if toleration.effect and toleration.effect not in effects:
        errors.append(FieldError(f"{path}.effect", f"{toleration.effect!r} is not one of "
                                                   f"{', '.join(effects)}"))
    return errors


def _constraint_errors(path: str, constraint: DeviceConstraint,
                       names: dict[str, set[str] | None]) -> list[FieldError]:
    errors = _references(f"{path}.requests", constraint.requests or [], names)
    attributes = [(f"{path}.{key}", value) for key, value in (
        ("matchAttribute", constraint.match_attribute),
        ("distinctAttribute", constraint.distinct_attribute)) if value is not None]
    if len(attributes) != 1:
        errors.append(FieldError(path, "exactly one of matchAttribute or distinctAttribute is "
                                       "required"))
    for where, attribute in attributes:
        problem = qualified_name_error(attribute)
        if problem is None and "/" not in attribute:
            problem = "must be fully qualified: a domain, '/' and a name (e.g. " \
                      "gpu.kubedra.io/model)"
        if problem is not None:
            errors.append(FieldError(where, f"{attribute!r}: {problem}"))
    return errors


def _references(path: str, references: Sequence[str],
                names: dict[str, set[str] | None]) -> list[FieldError]:
    errors = _too_many(path, len(references), DEVICE_REQUESTS_MAX_SIZE)
    for i, reference in enumerate(references):
        request, _, sub = reference.partition("/")
        subs = names.get(request)
        known = request in names and (not sub or (subs is not None and sub in subs))
        if reference.count("/") > 1 or not known:
            errors.append(FieldError(f"{path}[{i}]", f"{reference!r}: {_REF_MESSAGE}"))
    return errors
