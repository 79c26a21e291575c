"""Hypothesis strategies for DeviceInventory content, valid and broken: device names,
qualified attribute names, attribute values of every type and of none or two types, capacities
and counters with valid and broken quantities, counter sets named or not, unknown drivers.
Used by the fuzz tests against the real API server (issue 13, item 4).
"""

from __future__ import annotations

from hypothesis import strategies as st

names = st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
                  st.text(alphabet="aZ_-.09", min_size=0, max_size=70))
qualified = st.one_of(st.sampled_from(["index", "model", "fuzz.kubedra.io/x"]),
                      st.text(alphabet="ab/._-9", min_size=0, max_size=70))
quantities = st.one_of(st.sampled_from(["1", "141Gi", "0", "-1", "1e3", "abc", "", "1.5"]),
                       st.text(alphabet="0123456789GiMk.-e", min_size=1, max_size=8))
attribute_values = st.one_of(
    st.builds(lambda v: {"int": v}, st.integers(-2**70, 2**70)),
    st.builds(lambda v: {"bool": v}, st.booleans()),
    st.builds(lambda v: {"string": v}, st.text(max_size=80)),
    st.builds(lambda v: {"version": v}, st.sampled_from(["1.2.3", "v1", "", "1.0.0-rc.1"])),
    st.just({}), st.builds(lambda v: {"int": 1, "string": v}, st.text(max_size=3)))
counters = st.dictionaries(st.sampled_from(["slots", "memory", "Bad_Name"]),
                           st.builds(lambda q: {"value": q}, quantities), max_size=2)
devices = st.fixed_dictionaries(
    {"name": names},
    optional={"attributes": st.dictionaries(qualified, attribute_values, max_size=3),
              "capacity": st.dictionaries(qualified, st.builds(lambda q: {"value": q},
                                                                quantities), max_size=2),
              "consumesCounters": st.lists(st.fixed_dictionaries(
                  {"counterSet": st.sampled_from(["set-a", "nowhere", ""]),
                   "counters": counters}), max_size=2)})
specs = st.fixed_dictionaries(
    {"driver": st.sampled_from(["pci.kubedra.io", "pci.kubedra.io", "Not A Driver"]),
     "devices": st.lists(devices, max_size=4)},
    optional={"counterSets": st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["set-a", "set-b", "Bad_Set"]), "counters": counters}),
        max_size=2)})

status_devices = st.builds(
    lambda device, extra: {**device, **extra}, devices, st.fixed_dictionaries({}, optional={
        "health": st.sampled_from(["Healthy", "Unhealthy", "Unknown", "Broken", ""]),
        "healthMessage": st.text(max_size=300),
        "healthTransitionTime": st.sampled_from(["2026-11-30T00:00:00Z", "yesterday", ""]),
        "bindsToNode": st.booleans(),
        "bindingConditions": st.lists(st.sampled_from(["attached", "Bad Name", ""]),
                                      max_size=5)}))
discovered = st.fixed_dictionaries(
    {"devices": st.lists(status_devices, max_size=4)},
    optional={"counterSets": st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["set-a", "set-b", "Bad_Set"]), "counters": counters}),
        max_size=2),
        "rejected": st.lists(st.one_of(
            st.fixed_dictionaries({"name": st.text(max_size=10), "field": st.text(max_size=10),
                                   "message": st.text(max_size=20)}),
            st.just({"name": "x"})), max_size=2),
        "backend": st.one_of(st.text(max_size=20), st.integers()),
        "bootID": st.text(max_size=40),
        "observedTime": st.sampled_from(["2026-11-30T00:00:00Z", "yesterday", ""])})
"""``status.discovered`` as a buggy or hostile node agent could write it."""


def operator_fields(slice_names: list[str]) -> st.SearchStrategy[dict[str, object]]:
    """The operator's fields of a DeviceInventory status, written by someone else (a hostile
    agent may write the whole status subresource): fake conditions, slice names (among them
    ``slice_names``, another inventory's), counts, allocations, and ``retained``, which the CRD
    does not check."""
    fake_conditions = st.lists(st.fixed_dictionaries({
        "type": st.sampled_from(["Published", "Ready", "Other"]),
        "status": st.sampled_from(["True", "False", "Maybe"]), "reason": st.just("Faked"),
        "message": st.text(max_size=20),
        "lastTransitionTime": st.sampled_from(["2026-11-30T00:00:00Z", "soon"])}),
        max_size=2, unique_by=lambda c: c["type"])
    retained = st.one_of(
        st.just({"devices": "all of them"}), st.just({"devices": [{"name": "Bad Name"}]}),
        st.builds(lambda d: {"devices": [d]}, devices),
        st.just({"sharedCounters": [{"name": "set-a", "counters": {"slots": {"value": "x"}}}]}),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
    return st.fixed_dictionaries({}, optional={
        "conditions": fake_conditions,
        "slices": st.lists(st.sampled_from([*slice_names, "nope", ""]), max_size=3),
        "deviceCount": st.one_of(st.integers(-5, 2**40), st.text(max_size=3)),
        "allocatedCount": st.integers(-5, 5),
        "observedGeneration": st.integers(-5, 2**40),
        "allocations": st.lists(st.fixed_dictionaries({
            "device": st.sampled_from(["good-0", "dev-0"]), "claim": st.just("default/x"),
            "claimUID": st.text(max_size=8), "request": st.just("r")}), max_size=2),
        "pool": st.fixed_dictionaries({"name": st.text(max_size=10),
                                       "generation": st.integers(-1, 9),
                                       "resourceSliceCount": st.integers(-1, 9)}),
        "retained": retained})
