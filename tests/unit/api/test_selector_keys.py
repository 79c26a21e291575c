"""The pool selector: its keys, the labels slices carry, and clear errors for what is not a
label selector."""

from __future__ import annotations

import re

import click
import pytest

from kubedra.api.selector import pool_labels, selector_keys
from kubedra.settings import settings_from_flags


@pytest.mark.parametrize(("selector", "keys"), [
    ("", ()),
    ("kubedra.dev/shard=a", ("kubedra.dev/shard",)),
    ("kubedra.dev/shard in (a, b),zone!=z, !legacy", ("kubedra.dev/shard", "zone", "legacy")),
    ("a==1,a notin (2,3),b", ("a", "b")),
])
def test_keys(selector: str, keys: tuple[str, ...]) -> None:
    assert selector_keys(selector) == keys


@pytest.mark.parametrize("selector", ["a=b=c", "=x", "a in b", "!a=b", "a,,b", "a in (b"])
def test_not_a_selector(selector: str) -> None:
    with pytest.raises(ValueError, match="not a label selector requirement"):
        selector_keys(selector)


def test_slices_carry_the_inventory_labels_the_selector_names() -> None:
    labels = {"kubedra.dev/shard": "a", "team": "x"}
    assert pool_labels("kubedra.dev/shard in (a,b)", labels) == {"kubedra.dev/shard": "a"}
    assert pool_labels("kubedra.dev/shard=a,!legacy", labels) == {"kubedra.dev/shard": "a"}
    assert pool_labels("", labels) == {}
    assert pool_labels("kubedra.dev/shard", None) == {}


def test_the_setting_names_the_variable_and_the_requirement(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setenv("KUBEDRA_POOL_SELECTOR", "shard in a")
    with pytest.raises(click.ClickException) as err:
        settings_from_flags()
    assert err.value.message == (
        "invalid KUBEDRA_POOL_SELECTOR='shard in a': Value error, not a label selector "
        "requirement: 'shard in a' (give key, !key, key=value, key!=value, key in (a,b) or "
        "key notin (a,b))")
    monkeypatch.setenv("KUBEDRA_POOL_SELECTOR", " kubedra.dev/shard=a ")
    assert settings_from_flags().pool_selector == "kubedra.dev/shard=a"


@pytest.mark.parametrize(("selector", "error"), [
    ("Shard=A_", "'Shard=A_': 'A_' is not a label value"),
    ("shard in (a, b_)", "'shard in (a, b_)': 'b_' is not a label value"),
    ("x/y/z=1", "'x/y/z=1': the key 'x/y/z' is not a label key"),
    ("a" * 64 + "=b", f"the key '{'a' * 64}' is not a label key"),
    ("Bad_Prefix/shard", "the key 'Bad_Prefix/shard' is not a label key"),
])
def test_a_key_or_value_the_api_server_refuses_is_named(selector: str, error: str) -> None:
    """Before, these passed and the API server refused the watch: the operator logged six
    tracebacks and exited (once it hung)."""
    with pytest.raises(ValueError, match=re.escape(error)):
        selector_keys(selector)


def test_label_keys_and_values_at_their_limits_are_kept() -> None:
    assert selector_keys(f"{'a' * 63}={'b' * 63},Shard in (A.1, b-2, c_3),x=") == (
        "a" * 63, "Shard", "x")
