"""Go's ``strconv.Quote``, for error messages that quote their input as upstream's do."""

from __future__ import annotations

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``strconv.Quote(text)``: double-quoted, with Go escapes for what is not printable.

    Printable characters (Python's ``str.isprintable``, which follows the same Unicode
    categories as Go's ``unicode.IsPrint`` for all but a few spaces) stay as they are; others
    become ``\\xNN`` (below 0x80), ``\\uNNNN`` or ``\\UNNNNNNNN``.
    """
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
