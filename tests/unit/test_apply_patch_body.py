"""Server-side apply bodies read back as what was meant, whatever the strings hold (issue 13,
item 4: fuzzed inventory statuses found that one character beyond U+FFFF made the whole
apply fail with 400, "invalid Unicode character escape code")."""

from __future__ import annotations

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from kubedra.kube import apply_patch_body

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
"""Any text a Python string holds but lone surrogates (UTF-8 cannot hold them)."""


@given(obj=st.dictionaries(texts, st.one_of(texts, st.lists(texts, max_size=3)), max_size=4))
def test_a_body_reads_back_equal_as_yaml_and_as_json(obj: dict[str, object]) -> None:
    body = apply_patch_body(obj).decode()
    assert yaml.safe_load(body) == obj
    assert json.loads(body) == obj


def test_the_characters_yaml_refuses_are_escaped_and_the_others_are_utf8() -> None:
    assert apply_patch_body({"m": "GPU 😀 é \x85\x7f\u2028\ufffe\x00"}) == (
        '{"m": "GPU 😀 é \\u0085\\u007f\\u2028\\ufffe\\u0000"}'.encode())
