"""The attach step's conditions (KEP-5007) and how an attacher is chosen."""

from __future__ import annotations

from typing import Any

import pytest

from kubedra.binding.attach import (
    AttachRequest,
    AttachResult,
    BindingCondition,
    ImmediateAttacher,
    binding_conditions,
    load_attacher,
)

RESULT: dict[str, Any] = {
    "request": "nic", "driver": "nic.kubedra.io", "pool": "fabric", "device": "nic-0",
    "bindingConditions": ["kubedra.io/attached", "kubedra.io/link-up"],
    "bindingFailureConditions": ["kubedra.io/attach-failed"]}


def test_attached_sets_every_binding_condition() -> None:
    assert binding_conditions(RESULT, AttachResult("Attached", "on port 7")) == [
        BindingCondition("kubedra.io/attached", "Attached", "on port 7"),
        BindingCondition("kubedra.io/link-up", "Attached", "on port 7")]


def test_failed_sets_the_failure_conditions_and_pending_sets_nothing() -> None:
    assert binding_conditions(RESULT, AttachResult("Failed", "port down")) == [
        BindingCondition("kubedra.io/attach-failed", "AttachFailed", "port down")]
    assert binding_conditions(RESULT, AttachResult("Pending", "waiting")) == []


async def test_default_attacher_attaches_at_once() -> None:
    attacher = load_attacher("immediate")
    assert isinstance(attacher, ImmediateAttacher)
    outcome = await attacher.attach(AttachRequest("ns", "c", "uid", "nic", "nic.kubedra.io",
                                                  "fabric", "nic-0"))
    assert outcome == AttachResult("Attached", "device nic-0 of pool fabric attached for "
                                   "claim ns/c")


def test_attacher_by_import_path() -> None:
    assert isinstance(load_attacher("kubedra.binding.attach:ImmediateAttacher"),
                      ImmediateAttacher)
    with pytest.raises(ValueError, match="use immediate or <module>:<class>"):
        load_attacher("fabric-manager")
