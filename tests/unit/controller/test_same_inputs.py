"""``fingerprint.same_inputs``: an allocations-only status write whose returned object holds
what the reconcile decided from (but the operator's own status fields) makes its watch event
an echo with nothing to reconcile; anything another writer changed in between must not."""

from typing import Any

from kubedra.controller.fingerprint import same_inputs


def inventory(rv: int = 10, **changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "n-gpu", "uid": "i1", "generation": 1, "resourceVersion": str(rv),
                     "labels": {"pool": "a"}},
        "spec": {"nodeName": "n"},
        "status": {"discovered": {"devices": [{"name": "gpu-0", "health": "Healthy"}],
                                  "observedTime": "2026-12-02T10:00:00Z"},
                   "allocations": []}}
    for path, value in changes.items():
        holder = obj
        *parents, last = path.split("__")
        for part in parents:
            holder = holder[part]
        holder[last] = value
    return obj


def test_only_the_operators_fields_and_the_version_differ() -> None:
    written = inventory(11, status__allocations=[{"device": "gpu-0"}],
                        status__allocatedCount=1,
                        metadata__managedFields=[{"manager": "kubedra-operator"}])
    assert same_inputs(inventory(), written)


def test_what_another_writer_changed_in_between_is_not_the_same() -> None:
    before = inventory()
    assert not same_inputs(before, inventory(11, status__discovered={"devices": []}))
    assert not same_inputs(before, inventory(11, spec={"nodeName": "m"}))
    assert not same_inputs(before, inventory(11, metadata__generation=2))
    assert not same_inputs(before, inventory(11, metadata__labels={"pool": "b"}))
    assert not same_inputs(before, inventory(11, status__retained={"devices": ["gpu-0"]}))


def test_annotations_the_cached_record_leaves_out_do_not_count() -> None:
    # the index keeps no annotations (kubedra.controller.kept), the write returns them: the
    # echo of an allocations-only write to an annotated inventory is still quiet
    written = inventory(11, status__allocations=[{"device": "gpu-0"}],
                        metadata__annotations={"note": "set by an admin"})
    assert same_inputs(inventory(), written)
