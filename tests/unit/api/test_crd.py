"""The DeviceInventory CRD is generated from the models and kept in crds/."""

import re
from pathlib import Path

from click.testing import CliRunner

from kubedra.api.crd import inventory_crd, inventory_crd_yaml
from kubedra.api.names import LABEL_NAME_PATTERN, LABEL_VALUE_PATTERN
from kubedra.api.quantity import QUANTITY_PATTERN
from kubedra.api.time import TIME_PATTERN
from kubedra.cli import main

CRD_FILE = Path(__file__).resolve().parents[3] / "crds" / "deviceinventories.kubedra.io.yaml"


def test_crds_folder_matches_the_models() -> None:
    assert CRD_FILE.read_text() == inventory_crd_yaml(), (
        "crds/ is stale: run `kubedra crd > crds/deviceinventories.kubedra.io.yaml`")


def test_kubedra_crd_prints_it() -> None:
    result = CliRunner().invoke(main, ["crd"])
    assert result.exit_code == 0
    assert result.output == inventory_crd_yaml()


def test_printer_columns_and_short_name() -> None:
    version = inventory_crd()["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Driver", "Node", "Devices", "Allocated", "Ready", "Age"]
    assert inventory_crd()["spec"]["names"]["shortNames"] == ["dinv"]
    assert version["subresources"] == {"status": {}}


def test_device_schema_carries_api_limits() -> None:
    spec = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    device = spec["properties"]["devices"]["items"]
    assert device["properties"]["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert device["properties"]["name"]["maxLength"] == 63
    attribute = device["properties"]["attributes"]["additionalProperties"]
    assert attribute["x-kubernetes-validations"][0]["rule"] == (
        "(has(self.int) ? 1 : 0) + (has(self.bool) ? 1 : 0) + (has(self.string) ? 1 : 0) + "
        "(has(self.version) ? 1 : 0) + (has(self.ints) ? 1 : 0) + (has(self.bools) ? 1 : 0) + "
        "(has(self.strings) ? 1 : 0) + (has(self.versions) ? 1 : 0) == 1")
    assert attribute["properties"]["string"]["maxLength"] == 64
    assert attribute["properties"]["version"]["maxLength"] == 64
    bytes_rule = [{"rule": "size(bytes(self)) <= 64", "message": "may not be more than 64 bytes"}]
    assert attribute["properties"]["string"]["x-kubernetes-validations"] == bytes_rule
    assert attribute["properties"]["strings"]["items"] == {"type": "string", "maxLength": 64}
    consumption = device["properties"]["consumesCounters"]["items"]["properties"]["counters"]
    counter_set = spec["properties"]["counterSets"]["items"]["properties"]["counters"]
    assert (consumption["minProperties"], consumption["maxProperties"]) == (1, 32)
    assert (counter_set["minProperties"], counter_set["maxProperties"]) == (1, 32)
    assert device["x-kubernetes-validations"][0]["rule"] == (
        "(has(self.attributes) ? size(self.attributes) : 0) + "
        "(has(self.capacity) ? size(self.capacity) : 0) <= 32")
    assert device["properties"]["capacity"]["additionalProperties"]["properties"]["value"][
        "x-kubernetes-int-or-string"] is True


def test_a_quantity_field_has_the_quantity_grammar_as_its_pattern() -> None:
    """Every quantity (integer or string) carries ``QUANTITY_PATTERN``, so the API server
    refuses what kubedra's models would not read (``perPod: abc`` once reached the agent)."""
    spec = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]
    overhead = spec["properties"]["nodeAllocatableOverhead"]["additionalProperties"]
    per_pod = overhead["properties"]["perPod"]
    assert per_pod == {"x-kubernetes-int-or-string": True,
                       "anyOf": [{"type": "integer"}, {"type": "string"}],
                       "pattern": QUANTITY_PATTERN}
    capacity = spec["properties"]["devices"]["items"]["properties"]["capacity"]
    assert capacity["additionalProperties"]["properties"]["value"]["pattern"] == QUANTITY_PATTERN
    accepted = [v for v in ("256Mi", "0.5", "1e3", "+1", ".5", "500m", "abc", "1.5.5Mi", "1 Gi",
                            "Mi", "") if re.fullmatch(QUANTITY_PATTERN, v)]
    assert accepted == ["256Mi", "0.5", "1e3", "+1", ".5", "500m"]


def test_taints_and_binding_conditions_carry_the_label_rules() -> None:
    """What ``validateDeviceTaint`` and ``validateDeviceBindingParameters`` refuse is refused
    at admission (tests/integration/test_inventory_admission.py has the messages): a
    label key (pattern, at most 317 characters, CEL for the 253-character prefix and the
    63-character name), a label value, an effect of the three."""
    spec = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]
    taint = spec["properties"]["overrides"]["items"]["properties"]["taints"]["items"]
    key_rules = [{"rule": "self.indexOf('/') <= 253",
                  "message": "prefix part (before '/') must be no more than 253 characters"},
                 {"rule": "size(self) - self.indexOf('/') - 1 <= 63",
                  "message": "name part must be no more than 63 characters"}]
    assert taint["properties"]["key"] == {
        "type": "string", "maxLength": 317, "pattern": LABEL_NAME_PATTERN,
        "x-kubernetes-validations": key_rules}
    assert taint["properties"]["value"] == {
        "type": "string", "maxLength": 63, "pattern": LABEL_VALUE_PATTERN}
    assert taint["properties"]["effect"]["enum"] == ["None", "NoSchedule", "NoExecute"]
    assert taint["required"] == ["key", "effect"]
    device = spec["properties"]["devices"]["items"]["properties"]
    for field in ("bindingConditions", "bindingFailureConditions"):
        assert device[field]["items"] == {
            "type": "string", "maxLength": 317, "pattern": LABEL_NAME_PATTERN,
            "x-kubernetes-validations": key_rules}


def test_binding_conditions_carry_every_rule_of_the_api() -> None:
    """``validateDeviceBindingParameters`` (v1.37.2) at admission, for declared and discovered
    devices: a name once per list (a set), the lists together and apart, and kubedra's own
    rule that a node's own devices have none (tests/integration/test_inventory_admission.py
    has the API server's messages)."""
    schema = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec = schema["spec"]
    declared = spec["properties"]["devices"]["items"]
    discovered = schema["status"]["properties"]["discovered"]["properties"]["devices"]["items"]
    for device in (declared, discovered):
        for field in ("bindingConditions", "bindingFailureConditions"):
            assert device["properties"][field]["x-kubernetes-list-type"] == "set"
            assert device["properties"][field]["maxItems"] == 4
        assert [(r["fieldPath"], r["message"]) for r in device["x-kubernetes-validations"][1:]] == [
            (".bindingConditions", "bindingConditions are required to use "
                                   "bindingFailureConditions"),
            (".bindingFailureConditions", "bindingFailureConditions are required to use "
                                          "bindingConditions"),
            (".bindingFailureConditions", "bindingFailureConditions must not overlap with "
                                          "bindingConditions")]
    assert [r["message"] for r in spec["x-kubernetes-validations"]
            if r.get("fieldPath") == ".devices"] == [
        "binding conditions and bindsToNode are for network-attached pools (spec.nodeSelector "
        "or spec.allNodes), not a node's own devices"]


def test_an_override_taint_time_has_the_api_servers_grammar() -> None:
    spec = inventory_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"]
    taint = spec["properties"]["overrides"]["items"]["properties"]["taints"]["items"]
    assert taint["properties"]["timeAdded"] == {"type": "string", "pattern": TIME_PATTERN}
