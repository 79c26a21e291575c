"""The allocator features of a v1.37.2 kube-scheduler.

``structured.Features`` in ``k8s.io/dynamic-resource-allocation/structured/internal/types.go``
decides which allocator variant upstream runs; the scheduler fills it from its feature gates in
``AllocatorFeatures`` (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``).
With the default gates of v1.37.2 (emulation version 1.37, minimum compatibility version 1.36)
AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints, DeviceBindingAndStatus and
ConsumableCapacity are on, FractionalCapacityRange is off (its on-by-default spec needs
``--min-compatibility-version=1.37``) and all alpha features are off, which selects the
*incubating* variant (``internal/incubating``). kubedra implements that variant only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace


class UnsupportedFeaturesError(ValueError):
    """The feature set would make upstream run a variant other than incubating."""


@dataclass(frozen=True, slots=True)
class AllocatorFeatures:
    """Feature switches of the allocator; the defaults are those of a v1.37.2 kube-scheduler.

    ``device_taint_rules`` is the ``DRADeviceTaintRules`` gate: whether the scheduler's slice
    tracker adds DeviceTaintRule taints to devices. The others mirror ``structured.Features``.
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = False

    @classmethod
    def from_gate_names(cls, overrides: Mapping[str, bool], *,
                        allocator: str | None = None) -> AllocatorFeatures:
        """The defaults with some features set by their upstream names (``AdminAccess``,
        ``DeviceTaintRules``, ...), as in the scenarios of ``hack/allocator``.

        ``allocator`` names the variant upstream ran, where a scenario says so (those recorded
        from upstream's own test table run the incubating variant whatever their features); by
        default it is the one ``NewAllocator`` picks: the first of stable, incubating and
        experimental that supports every enabled feature. Stable lacks exactly
        ConsumableCapacity, DeviceBindingAndStatus and FractionalCapacityRange
        (``SupportedFeatures`` in ``allocator_stable.go``).

        Raises:
            UnsupportedFeaturesError: an unknown name, an alpha feature turned on, or a variant
                other than incubating (named, or picked for the set).
        """
        if allocator not in (None, "incubating"):
            raise UnsupportedFeaturesError(f"upstream's {allocator!r} allocator: kubedra "
                                           "implements 'incubating' only")
        by_name = {_gate_name(f.name): f.name for f in fields(cls)}
        changes: dict[str, bool] = {}
        for name, value in overrides.items():
            if name in by_name:
                changes[by_name[name]] = value
            elif name in _ALPHA_ONLY and not value:
                continue
            else:
                raise UnsupportedFeaturesError(f"feature {name!r} is not supported by kubedra")
        features = replace(cls(), **changes)
        if allocator is None and not (features.consumable_capacity
                                      or features.device_binding_and_status
                                      or features.fractional_capacity_range):
            raise UnsupportedFeaturesError(
                "with ConsumableCapacity, DeviceBindingAndStatus and FractionalCapacityRange all "
                "off upstream runs its 'stable' allocator; kubedra implements 'incubating' only")
        return features

    def gate_names(self) -> dict[str, bool]:
        """The features by their upstream names (the inverse of :meth:`from_gate_names`)."""
        return {_gate_name(f.name): getattr(self, f.name) for f in fields(self)}


# Features of the experimental variant only; off by default, and kubedra cannot turn them on.
_ALPHA_ONLY = frozenset({"CompatibilityGroups", "DerivedAttributes", "ListTypeAttributes",
                         "OptionalNodeOperations"})


def _gate_name(field_name: str) -> str:
    return "".join(part.capitalize() for part in field_name.split("_"))


DEFAULT_FEATURES = AllocatorFeatures()
