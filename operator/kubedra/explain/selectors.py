"""Why a CEL device selector accepts or rejects a device, in plain words.

A selector is split at its top-level ``&&`` (only when the expression has no top-level ``||``
or ``?:``, which bind looser), each conjunct is evaluated on the device with
:mod:`kubedra.cel`, and the first false one decides (CEL's ``&&`` is false as soon as one side
is). A deciding conjunct that compares one value of the device — ``device.capacity[D].id``,
``device.attributes[D].id`` (or ``[D]["id"]``), ``device.driver`` — with a literal
(``quantity("…")``, ``semver("…")``, a string, an int, a bool), through ``compareTo(…) OP n``,
``isGreaterThan``/``isLessThan`` or a comparison operator, is reported with both values
(``has 150754820096 bytes, less than the 151397597184 asked``). Anything else is quoted, with
the values of the device that it reads. The comparison is recomputed in Python and used only
when it agrees with CEL's answer, so an unusual expression is quoted rather than misexplained.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from kubedra.allocation import DeviceEntry
from kubedra.api.quantity import Quantity, QuantityError
from kubedra.api.resource import DeviceAttribute
from kubedra.cel import CELCompileError, CELRuntimeError, compile_selector
from kubedra.cel.device import split_qualified_name
from kubedra.cel.semver import Semver, SemverParseError, parse_semver

Value = Quantity | Semver | str | int | bool

_STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\''
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_REFERENCE = re.compile(
    rf"device\s*\.\s*(?P<kind>capacity|attributes)\s*\[\s*(?P<domain>{_STRING})\s*\]\s*"
    rf"(?:\.\s*(?P<id>{_IDENT})|\[\s*(?P<key>{_STRING})\s*\])")
_DRIVER = re.compile(r"device\s*\.\s*driver")
_HAS = re.compile(r"has\s*\((?P<ref>.*)\)")
_LITERAL_CALL = re.compile(rf"(?P<fn>quantity|semver)\s*\(\s*(?P<text>{_STRING})\s*\)")
_INT = re.compile(r"[+-]?\d+u?")
_OPERATORS = ("==", "!=", ">=", "<=", ">", "<")
_MIRRORED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
_NEGATED = {">": "<=", ">=": "<", "<": ">=", "<=": ">", "==": "!=", "!=": "=="}
_SIGNS_TO_RELATION = {frozenset({1}): ">", frozenset({0, 1}): ">=", frozenset({-1}): "<",
                      frozenset({-1, 0}): "<=", frozenset({0}): "==",
                      frozenset({-1, 1}): "!="}


# --- scanning CEL text ------------------------------------------------------------------------

def _scan(text: str) -> Iterator[tuple[int, int]]:
    """(index, depth) of every character outside string literals; depth counts open
    parentheses, brackets and braces before it."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        char = text[i]
        if char in "\"'":
            raw = i > 0 and text[i - 1] in "rR"
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else char
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += 1 if raw or text[i] != "\\" else 2
            i += len(quote)
            continue
        if char in ")]}":
            depth -= 1
        yield i, depth
        if char in "([{":
            depth += 1
        i += 1


def _top_level(text: str, token: str) -> list[int]:
    """Start positions of ``token`` outside parentheses and strings."""
    return [i for i, depth in _scan(text) if depth == 0 and text.startswith(token, i)]


def _strip_parens(text: str) -> str:
    """``text`` without parentheses that enclose all of it."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        closing = next((i for i, depth in _scan(text) if depth == 0 and i > 0
                        and text[i] == ")"), None)
        if closing != len(text) - 1:
            break
        text = text[1:-1].strip()
    return text


def split_conjuncts(expression: str) -> list[str]:
    """The top-level ``&&`` operands of a CEL expression, flattened (``(a && b) && c`` gives
    three); the whole expression when it has a top-level ``||`` or ``?:``."""
    text = _strip_parens(expression)
    if _top_level(text, "||") or _top_level(text, "?"):
        return [text]
    cuts = _top_level(text, "&&")
    if not cuts:
        return [text]
    parts, start = [], 0
    for cut in [*cuts, len(text)]:
        part = text[start:cut].strip()
        start = cut + 2
        parts.extend(split_conjuncts(part))
    return parts


# --- values of a device -----------------------------------------------------------------------

def _unquote(literal: str) -> str:
    body = literal[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


@dataclass(frozen=True)
class Reference:
    """A value of the device a selector reads: ``kind`` is ``capacity``, ``attribute`` or
    ``driver``; ``name`` the qualified name (``gpu.kubedra.io/memory``)."""

    kind: str
    domain: str
    ident: str

    @property
    def name(self) -> str:
        """The qualified name, or ``driver``."""
        return "driver" if self.kind == "driver" else f"{self.domain}/{self.ident}"

    def lookup(self, device: DeviceEntry) -> Value | None:
        """The device's value, or ``None`` when it has no such attribute or capacity."""
        if self.kind == "driver":
            return device.driver
        if self.kind == "capacity":
            for key, capacity in (device.capacity or {}).items():
                if split_qualified_name(key, device.driver) == (self.domain, self.ident):
                    return capacity.value
            return None
        for key, attribute in device.attributes.items():
            if split_qualified_name(key, device.driver) == (self.domain, self.ident):
                return _attribute_value(attribute)
        return None

    @property
    def counts_bytes(self) -> bool:
        """Whether the capacity is an amount of memory (shown in bytes)."""
        lowered = self.ident.lower()
        return self.kind == "capacity" and ("memory" in lowered or lowered.endswith("bytes"))


def _attribute_value(attribute: DeviceAttribute) -> Value | None:
    if attribute.string_value is not None:
        return attribute.string_value
    if attribute.bool_value is not None:
        return attribute.bool_value
    if attribute.int_value is not None:
        return attribute.int_value
    if attribute.version_value is not None:
        try:
            return parse_semver(attribute.version_value)
        except SemverParseError:
            return attribute.version_value
    return None


@functools.lru_cache(maxsize=1024)  # the text of a selector, parsed once per run
def _reference(text: str) -> Reference | None:
    text = _strip_parens(text)
    if _DRIVER.fullmatch(text):
        return Reference("driver", "", "driver")
    match = _REFERENCE.fullmatch(text)
    if match is None:
        return None
    kind = "capacity" if match["kind"] == "capacity" else "attribute"
    ident = match["id"] if match["id"] is not None else _unquote(match["key"])
    return Reference(kind, _unquote(match["domain"]), ident)


@functools.lru_cache(maxsize=1024)  # the text of a selector, parsed once per run
def _literal(text: str) -> tuple[Value, str] | None:
    """A literal's value and its text as written (``quantity("141Gi")`` → 141Gi)."""
    text = _strip_parens(text)
    call = _LITERAL_CALL.fullmatch(text)
    try:
        if call is not None:
            written = _unquote(call["text"])
            if call["fn"] == "quantity":
                return Quantity(written), written
            return parse_semver(written), written
    except (QuantityError, SemverParseError):
        return None
    if re.fullmatch(_STRING, text):
        return _unquote(text), text
    if _INT.fullmatch(text):
        return int(text.rstrip("u")), text
    if text in ("true", "false"):
        return text == "true", text
    return None


def format_value(value: Value) -> str:
    """A value as shown in explanations (quantities as their exact number when whole)."""
    if isinstance(value, Quantity):
        exact: Fraction = value.value
        return str(exact.numerator) if exact.denominator == 1 else value.canonical()
    if isinstance(value, Semver):
        pre = ".".join(str(p.num) if p.is_num else p.text for p in value.pre)
        return f"{value.major}.{value.minor}.{value.patch}" + (f"-{pre}" if pre else "")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


# --- comparisons ------------------------------------------------------------------------------

def _compare(left: Value, right: Value) -> int | None:
    """-1, 0 or 1, or ``None`` for values of different kinds."""
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return (left > right) - (left < right)
    if isinstance(left, Semver) and isinstance(right, Semver):
        return left.compare(right)
    if isinstance(left, bool) or isinstance(right, bool):
        return None if type(left) is not type(right) else (0 if left == right else 1)
    if isinstance(left, int) and isinstance(right, int):
        return (left > right) - (left < right)
    if isinstance(left, str) and isinstance(right, str):
        return (left > right) - (left < right)
    return None


def _holds(sign: int, relation: str) -> bool:
    return {">": sign > 0, ">=": sign >= 0, "<": sign < 0, "<=": sign <= 0, "==": sign == 0,
            "!=": sign != 0}[relation]


@dataclass(frozen=True)
class Comparison:
    """A conjunct comparing a value of the device with a literal.

    Attributes:
        reference: what of the device is compared.
        relation: what the selector requires, as ``device <relation> literal``.
        device_value: the device's value.
        asked: the literal's value; ``asked_text`` is the literal as written.
        holds: whether the device satisfies it.
    """

    reference: Reference
    relation: str
    device_value: Value
    asked: Value
    asked_text: str
    holds: bool

    def sentence(self) -> str:
        """``has 150754820096 bytes, less than the 151397597184 asked (…)``: what the device
        has, and how it relates to what the selector asks (without the device's name)."""
        value, asked = format_value(self.device_value), format_value(self.asked)
        ref = self.reference
        if ref.counts_bytes and isinstance(self.device_value, Quantity):
            have = f"{value} bytes"
        elif ref.kind == "capacity":
            have = f"{value} {ref.ident}"
        else:
            have = f"{ref.ident} {value}"
        bound = "allowed" if self.relation in ("<", "<=") else "asked"
        words = {
            (">=", False): f"less than the {asked} {bound}",
            (">", False): f"not more than the {asked} {bound}",
            ("<=", False): f"more than the {asked} {bound}",
            ("<", False): f"not less than the {asked} {bound}",
            ("==", False): f"not the {asked} {bound}",
            ("!=", False): "the value the selector excludes",
            (">=", True): f"at least the {asked} {bound}",
            (">", True): f"more than the {asked} {bound}",
            ("<=", True): f"at most the {asked} {bound}",
            ("<", True): f"less than the {asked} {bound}",
            ("==", True): "as asked",
            ("!=", True): f"not the excluded {asked}",
        }[(self.relation, self.holds)]
        text = f"has {have}, {words}"
        quantities = self.quantities()
        if quantities is not None:
            shown = self.relation if self.holds else _NEGATED[self.relation]
            text += f" ({ref.name}: {quantities[0]} {shown} {quantities[1]})"
        return text

    def quantities(self) -> tuple[str, str] | None:
        """For quantities, the device's value in the units of the literal (``143771Mi``
        beside ``141Gi``, whatever unit the device published) and the literal as written;
        else ``None``."""
        if not (isinstance(self.device_value, Quantity) and isinstance(self.asked, Quantity)):
            return None
        return (Quantity.from_value(self.device_value.value, self.asked.format).canonical(),
                self.asked_text)


def _method_call(text: str, names: tuple[str, ...]) -> tuple[str, str, str] | None:
    """``receiver.name(argument)`` spanning all of ``text``: (receiver, name, argument)."""
    if not text.endswith(")"):
        return None
    for i, depth in _scan(text):
        if depth != 0 or text[i] != ".":
            continue
        for name in names:
            opening = i + 1 + len(name)
            if text.startswith(name, i + 1) and text[opening:opening + 1] == "(":
                closing = next((j for j, d in _scan(text) if j > opening and d == 0
                                and text[j] == ")"), None)
                if closing == len(text) - 1:
                    return text[:i], name, text[opening + 1:-1]
    return None


def _binary(text: str) -> tuple[str, str, str] | None:
    """``left OP right`` with a top-level comparison operator."""
    for i, depth in _scan(text):
        if depth != 0:
            continue
        for op in _OPERATORS:  # two-character operators are tried first
            if text.startswith(op, i):
                return text[:i].strip(), op, text[i + len(op):].strip()
    return None


@functools.lru_cache(maxsize=1024)  # the text of a selector, parsed once per run
def _relation(text: str) -> tuple[str, str, str] | None:
    """(left operand, relation, right operand) of a comparison conjunct."""
    text = _strip_parens(text)
    negated = text.startswith("!") and not text.startswith("!=")
    if negated:
        text = _strip_parens(text[1:])
    found: tuple[str, str, str] | None = None
    binary = _binary(text)
    if binary is not None:
        left, op, right = binary
        call = _method_call(_strip_parens(left), ("compareTo",))
        if call is not None and _INT.fullmatch(right):
            bound = int(right.rstrip("u"))
            signs = frozenset(s for s in (-1, 0, 1) if _holds_int(s, op, bound))
            relation = _SIGNS_TO_RELATION.get(signs)
            if relation is not None:
                found = (call[0], relation, call[2])
        else:
            found = (left, op, right)
    else:
        call = _method_call(text, ("isGreaterThan", "isLessThan"))
        if call is not None:
            found = (call[0], ">" if call[1] == "isGreaterThan" else "<", call[2])
    if found is None:
        return None
    return (found[0], _NEGATED[found[1]], found[2]) if negated else found


def _holds_int(sign: int, op: str, bound: int) -> bool:
    return {">": sign > bound, ">=": sign >= bound, "<": sign < bound, "<=": sign <= bound,
            "==": sign == bound, "!=": sign != bound}[op]


def comparison(conjunct: str, device: DeviceEntry) -> Comparison | None:
    """The conjunct as a comparison of one device value with a literal, or ``None``."""
    found = _relation(conjunct)
    if found is None:
        return None
    left, relation, right = found
    reference, literal = _reference(left), _literal(right)
    if reference is None or literal is None:
        reference, literal = _reference(right), _literal(left)
        relation = _MIRRORED[relation]
    if reference is None or literal is None:
        return None
    value = reference.lookup(device)
    if value is None:
        return None
    sign = _compare(value, literal[0])
    if sign is None or (sign != 0 and relation not in ("==", "!=")
                        and isinstance(value, bool)):
        return None
    return Comparison(reference, relation, value, literal[0], literal[1],
                      _holds(sign, relation))


def references(text: str) -> list[Reference]:
    """Every device value ``text`` reads, in order, without repeats."""
    found: list[Reference] = []
    for match in _REFERENCE.finditer(text):
        ref = _reference(match.group(0))
        if ref is not None and ref not in found:
            found.append(ref)
    if _DRIVER.search(text) and Reference("driver", "", "driver") not in found:
        found.append(Reference("driver", "", "driver"))
    return found


# --- verdicts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SelectorFinding:
    """How one selector judged one device.

    Attributes:
        expression: the whole selector.
        conjunct: the deciding part: the first false conjunct, or the whole selector when it
            passes or cannot be split.
        passed: the selector's outcome; ``None`` when it failed with an error.
        comparison: the conjunct as a comparison with a literal, when it is one.
        values: ``name = value`` of each device value the conjunct reads (``unset`` when the
            device lacks it).
        error: the CEL error, when evaluation failed.
    """

    expression: str
    conjunct: str
    passed: bool | None
    comparison: Comparison | None
    values: tuple[str, ...]
    error: str | None = None

    def sentence(self) -> str:
        """What the device has compared with what the conjunct asks (no device name)."""
        if self.error is not None:
            return f"selector {self.expression!r} fails: {self.error}"
        if self.comparison is not None:
            return self.comparison.sentence()
        has = _HAS.fullmatch(self.conjunct)
        ref = _reference(has["ref"]) if has is not None else None
        if ref is not None:
            return f"has {'' if self.passed else 'no '}{ref.kind} {ref.name}"
        verb = "matches" if self.passed else "does not match"
        seen = f" ({', '.join(self.values)})" if self.values else ""
        return f"{verb} {self.conjunct}{seen}"


def _evaluate(expression: str, device: DeviceEntry) -> bool | str:
    """The outcome of an expression on the device, or the error text."""
    try:
        return compile_selector(expression).matches(device.cel_device())
    except (CELCompileError, CELRuntimeError) as err:
        return str(err)


def _values(conjunct: str, device: DeviceEntry) -> tuple[str, ...]:
    shown = []
    for ref in references(conjunct):
        value = ref.lookup(device)
        if isinstance(value, Quantity) and value.canonical() != format_value(value):
            shown.append(f"{ref.name} = {format_value(value)} ({value.canonical()})")
        else:
            shown.append(f"{ref.name} = {format_value(value) if value is not None else 'unset'}")
    return tuple(shown)


def _finding(expression: str, conjunct: str, passed: bool, device: DeviceEntry
             ) -> SelectorFinding:
    found = comparison(conjunct, device)
    if found is not None and found.holds != passed:
        found = None
    return SelectorFinding(expression, conjunct, passed, found, _values(conjunct, device))


@functools.lru_cache(maxsize=1024)
def _conjuncts(expression: str) -> tuple[str, ...]:
    return tuple(split_conjuncts(expression))


def judge(expression: str, device: DeviceEntry) -> SelectorFinding:
    """Why ``expression`` accepts or rejects ``device``: the first false conjunct when it
    rejects, else the whole expression."""
    outcome = _evaluate(expression, device)
    if isinstance(outcome, str):
        return SelectorFinding(expression, expression, None, None, (), error=outcome)
    if outcome:
        return _finding(expression, expression, True, device)
    for conjunct in _conjuncts(expression):
        part = False if conjunct == expression else _evaluate(conjunct, device)
        if part is False:
            return _finding(expression, conjunct, False, device)
    return _finding(expression, expression, False, device)


def judge_parts(expression: str, device: DeviceEntry) -> list[SelectorFinding]:
    """Every conjunct of a selector the device passes, each with its values (for an allocated
    device: why it fits)."""
    return [_finding(expression, part, True, device) if _evaluate(part, device) is True
            else judge(expression, device) for part in split_conjuncts(expression)]
