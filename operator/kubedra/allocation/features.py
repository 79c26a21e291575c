"""The allocator features of a kube-scheduler (by default a v1.37.2 one; other minors'
defaults: :func:`features_for`).

``structured.Features`` in ``k8s.io/dynamic-resource-allocation/structured/internal/types.go``
decides which allocator variant upstream runs; the scheduler fills it from its feature gates in
``AllocatorFeatures`` (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``).
With the default gates of v1.37.2 (emulation version 1.37, minimum compatibility version 1.36)
AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints, DeviceBindingAndStatus and
ConsumableCapacity are on, FractionalCapacityRange is off (its on-by-default spec needs
``--min-compatibility-version=1.37``) and all alpha features are off, which selects the
*incubating* variant (``internal/incubating``). kubedra implements that variant only.

Other minors' default gates select other variants: 1.34's the *experimental* one
(DRAResourceClaimDeviceStatus is beta there, and only experimental supports DeviceStatus),
1.35's the *incubating* one, which there knows neither consumable capacity nor
``distinctAttribute`` nor ``bindsToNode`` (:attr:`AllocatorFeatures.runs_stable`). kubedra
decides them with incubating's search and the rules of :mod:`kubedra.allocation.versions`;
every variant before 1.36 tries pools in the order Go ranges over a map of them, which
differs run by run (:attr:`AllocatorFeatures.pools_in_random_order`, ``pool_order``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from kubedra.allocation.versions import (
    DEFAULT_VERSION,
    STABLE_VARIANT_KNOWS_BETA_FEATURES,
    KubeVersion,
    UnknownKubeVersionError,
)


class UnsupportedFeaturesError(ValueError):
    """The feature set would make upstream run a variant other than incubating."""


@dataclass(frozen=True, slots=True)
class AllocatorFeatures:
    """Feature switches of the allocator; the defaults are those of a v1.37.2 kube-scheduler.

    ``device_taint_rules`` is the ``DRADeviceTaintRules`` gate (``DRADeviceTaints`` in 1.34):
    whether the scheduler's slice tracker adds DeviceTaintRule taints to devices. The others
    mirror ``structured.Features``. ``version`` is the minor whose rules the allocator follows
    (:mod:`kubedra.allocation.versions`).
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = False
    version: KubeVersion = DEFAULT_VERSION
    variant: str = ""
    pool_order: tuple[tuple[str, str], ...] = ()
    """Where upstream tries pools in Go's map order (:attr:`pools_in_random_order`), the
    order of one of its runs: these ``(driver, pool)`` first, in this order, then the others
    by name (the default: all by name). Where upstream sorts pools, kubedra does too."""

    @property
    def pools_in_random_order(self) -> bool:
        """Whether upstream tries pools in Go's map order, which differs run by run, and a
        pool's slices in the order listed: the stable variant of every minor (``GatherPools``
        in ``structured/internal/stable/pools_stable.go``) and every variant before 1.36,
        whose ``pools_*.go`` has neither ``sortPoolsByID`` nor ``sortSlicesByName``. kubedra
        then tries pools by name (where several pools could serve a request its devices may
        differ from those of any one run) and slices as listed, those with binding conditions
        last where the variant is experimental (1.34 and 1.35 without :attr:`runs_stable`,
        ``slicesWithBindingConditions`` in ``pools_experimental.go``)."""
        return self.runs_stable or self.version.minor < 36

    @property
    def binding_pools_last(self) -> bool:
        """Whether pools with a device that has binding conditions are tried after the other
        pools (``poolHasBindingConditions``, ``resultWithBindingConditions`` in ``GatherPools``):
        where the variant knows DeviceBindingAndStatus, i.e. not where :attr:`runs_stable`.
        ``structured/internal/experimental/pools_experimental.go`` of every minor and
        ``incubating/pools_incubating.go`` from v0.36.3 put them last; ``stable/pools_stable.go``
        of every minor and ``incubating/pools_incubating.go`` of v0.34.4 and v0.35.4 (1.35's
        default variant) keep them where Go's map order puts them, so there a pool with a
        binding-condition device, which cannot be allocated with the feature off, may still
        be tried before the others for its other devices."""
        return not self.runs_stable

    @property
    def binds_to_node(self) -> bool:
        """Whether a ``bindsToNode`` device restricts the allocation to the node
        (``allocator_*.go``: ``if nodeName != nil || result[i].BindsToNode``): not where
        :attr:`runs_stable` (the stable variant of every minor does not read the field, nor
        does 1.35's incubating one); 1.34's default gates select its experimental variant,
        which reads it (DRAResourceClaimDeviceStatus is beta there)."""
        return not self.runs_stable

    @property
    def cel_sees_allow_multiple_allocations(self) -> bool:
        """Whether CEL's ``device.allowMultipleAllocations`` is the device's field (else always
        false): where the variant fills ``cel.Device.AllowMultipleAllocations``, i.e. not where
        :attr:`runs_stable` (``allocator_*.go``: experimental of every minor, incubating from
        1.36)."""
        return not self.runs_stable

    @property
    def runs_stable(self) -> bool:
        """Whether upstream runs a variant that knows neither ConsumableCapacity nor
        DeviceBindingAndStatus: ``variant`` says so, or, when empty, ``NewAllocator`` picks it
        because ConsumableCapacity, DeviceBindingAndStatus and FractionalCapacityRange are all
        off (``SupportedFeatures`` in ``allocator_*.go``; that variant is *stable* from 1.36,
        and *incubating* in 1.34 and 1.35, whose stable one supports no feature at all). On
        1.34 only DeviceBindingAndStatus named off (which turns DRAResourceClaimDeviceStatus,
        beta there, off too: :func:`from_gate_names`) selects it. kubedra then follows that
        variant's rules for what it does not know: capacity requests are ignored
        (``structured/internal/stable/allocator_stable.go`` reads none) and a
        ``distinctAttribute`` constraint is an "empty constraint" error. From 1.38 no variant is
        such (:data:`~kubedra.allocation.versions.STABLE_VARIANT_KNOWS_BETA_FEATURES`)."""
        if self.variant == "incubating" or (self.version.minor < 35
                                            and self.variant != "stable") \
                or self.version.follows(STABLE_VARIANT_KNOWS_BETA_FEATURES):
            return False
        return self.variant == "stable" or not (
            self.consumable_capacity or self.device_binding_and_status
            or self.fractional_capacity_range)

    @classmethod
    def from_gate_names(cls, overrides: Mapping[str, bool], *, allocator: str | None = None,
                        version: KubeVersion = DEFAULT_VERSION) -> AllocatorFeatures:
        """``version``'s defaults (:func:`features_for`) with some features set by their
        upstream names (``AdminAccess``, ``DeviceTaintRules``, ...), as in the scenarios of
        ``hack/allocator``. A feature that ``version`` does not have yet may be named off only.

        ``allocator`` names the variant upstream ran, where a scenario says so (those recorded
        from upstream's own test table run the incubating variant whatever their features); by
        default it is the one ``NewAllocator`` picks, stable or incubating, both decided as
        incubating (see the module's doc).

        Raises:
            UnsupportedFeaturesError: an unknown name, an alpha feature turned on, a feature
                turned on that ``version`` does not have, or a variant other than incubating
                named.
        """
        if allocator not in (None, "incubating"):
            raise UnsupportedFeaturesError(f"upstream's {allocator!r} allocator: kubedra "
                                           "implements 'incubating' only")
        by_name = {_gate_name(name): name for name in _GATES}
        changes: dict[str, bool] = {}
        for name, value in overrides.items():
            since = _ADDED_IN.get(by_name.get(name, ""), 0)
            if name in by_name and (version.minor >= since or not value):
                changes[by_name[name]] = value
            elif name in _ALPHA_ONLY and not value:
                continue
            elif name in by_name:
                raise UnsupportedFeaturesError(
                    f"feature {name!r} is not in Kubernetes {version} (from 1.{since})")
            else:
                raise UnsupportedFeaturesError(f"feature {name!r} is not supported by kubedra")
        variant = allocator or ""
        if version.minor < 35 and not variant and overrides.get("DeviceBindingAndStatus") is False \
                and not changes.get("consumable_capacity"):
            variant = "stable"  # DeviceStatus off too: 1.34's incubating variant, stable-like
        gates: dict[str, Any] = {**changes, "variant": variant}
        return replace(features_for(version), **gates)

    def gate_names(self) -> dict[str, bool]:
        """The features by their upstream names (the inverse of :meth:`from_gate_names`); those
        ``version`` does not have are left out."""
        return {_gate_name(name): getattr(self, name) for name in _GATES
                if self.version.minor >= _ADDED_IN.get(name, 0)}


_GATES = tuple(f.name for f in fields(AllocatorFeatures)
               if f.name not in ("version", "variant", "pool_order"))

_ADDED_IN = {"fractional_capacity_range": 37}
"""Features that older minors' allocators do not have, with the minor that added them."""

_OFF_BY_DEFAULT = {
    34: ("consumable_capacity", "device_binding_and_status", "device_taint_rules",
         "device_taints", "partitionable_devices"),
    35: ("consumable_capacity", "device_binding_and_status", "device_taint_rules",
         "device_taints", "partitionable_devices"),
    36: ("device_taint_rules",),
}
"""Per minor before 1.37, the features its scheduler has off with default gates (its
``pkg/features/kube_features.go``, as ``dra-reference-allocator-1.<minor> features`` prints)."""


_ON_BY_DEFAULT = {38: ("fractional_capacity_range",)}
"""Per minor after 1.37, the features its scheduler has on with default gates where 1.37's has
them off (v1.38.0-beta.0's ``pkg/features/kube_features.go``: DRAFractionalCapacityRange is GA
and on; as ``dra-reference-allocator-1.38 features`` prints)."""


def features_for(version: KubeVersion) -> AllocatorFeatures:
    """The allocator features of ``version``'s kube-scheduler with default gates."""
    gates: dict[str, Any] = dict.fromkeys(_OFF_BY_DEFAULT.get(version.minor, ()), False)
    gates.update(dict.fromkeys(_ON_BY_DEFAULT.get(version.minor, ()), True))
    return replace(AllocatorFeatures(version=version), **gates)


# Alpha features, off by default, that kubedra cannot turn on: up to 1.37 only the
# experimental variant has them; v0.38.0-beta.0's incubating one too (its SupportedFeatures).
_ALPHA_ONLY = frozenset({"CompatibilityGroups", "DerivedAttributes", "ListTypeAttributes",
                         "OptionalNodeOperations"})


def _gate_name(field_name: str) -> str:
    return "".join(part.capitalize() for part in field_name.split("_"))


DEFAULT_FEATURES = AllocatorFeatures()


def features_of_server(server_version: str) -> tuple[AllocatorFeatures, str]:
    """The allocator features of a cluster's scheduler from its API server's ``gitVersion``
    (``v1.36.3``; the scheduler is taken to run the server's minor with default gates), and
    a note when kubedra cannot decide as that minor: then it decides as 1.37 and the note
    says why ("" when it can)."""
    if not server_version:
        return DEFAULT_FEATURES, (f"the Kubernetes version is not known; deciding as "
                                  f"{DEFAULT_VERSION}'s scheduler")
    try:
        return features_for(KubeVersion.parse(server_version)), ""
    except UnknownKubeVersionError as err:
        return DEFAULT_FEATURES, f"{err}; deciding as {DEFAULT_VERSION}'s scheduler"
