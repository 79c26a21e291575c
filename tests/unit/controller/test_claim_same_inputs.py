"""``claims.same_inputs``: the claim the operator's ``status.devices`` write returned makes
its watch event an echo with nothing to reconcile only when nothing but ``status.devices``
(and the version) changed; an allocation, a reservation or anything else another writer
changed in between must be reconciled."""

from typing import Any

from kubedra.controller.claims import same_inputs

RESULT = {"request": "gpu", "driver": "gpu.kubedra.io", "pool": "n", "device": "gpu-0"}
READY = {"driver": "gpu.kubedra.io", "pool": "n", "device": "gpu-0", "conditions": [
    {"type": "Ready", "status": "True", "reason": "Allocated"}]}


def claim(rv: int = 10, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "u1",
                         "resourceVersion": str(rv)},
            "spec": {"devices": {"requests": [{"name": "gpu"}]}},
            "status": {"allocation": {"devices": {"results": [RESULT]}},
                       "reservedFor": [{"resource": "pods", "name": "p", "uid": "p1"}],
                       **status}}


def test_only_the_device_status_and_the_version_differ() -> None:
    written = claim(11, devices=[READY])
    written["metadata"]["managedFields"] = [{"manager": "kubedra-operator"}]
    assert same_inputs(claim(), written)


def test_what_another_writer_changed_in_between_is_not_the_same() -> None:
    before = claim()
    assert not same_inputs(before, claim(11, devices=[READY], reservedFor=[]))
    assert not same_inputs(before, claim(11, devices=[READY], allocation={"devices": {
        "results": [{**RESULT, "device": "gpu-1"}]}}))
    deleting = claim(11, devices=[READY])
    deleting["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    assert not same_inputs(before, deleting)
    other = claim(11, devices=[READY])
    other["metadata"]["uid"] = "u2"
    assert not same_inputs(before, other)


def test_annotations_the_cached_record_leaves_out_do_not_count() -> None:
    """The claim index keeps no annotations (kubedra.controller.kept) while the write's answer
    has them: an annotated claim's echo is still an echo (it never was, before the merge of
    the records and the claim echo)."""
    written = claim(11, devices=[READY])
    written["metadata"]["annotations"] = {"note": "set by an admin"}
    assert same_inputs(claim(), written)
