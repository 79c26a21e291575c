"""What a kube-scheduler decides differently by Kubernetes minor: its default allocator features
and the rules its allocator changed, each named with the minor it starts at and where upstream
made it.

kubedra's allocator decides as the scheduler of one minor (:class:`KubeVersion`, carried by
:class:`kubedra.allocation.features.AllocatorFeatures`); :func:`features_for` gives that minor's
default features. The rules below are the differences that the differential corpus shows
between the reference allocators of 1.34 to 1.38 (``hack/allocator``, built per minor; 1.38's
from v1.38.0-beta.0, the newest 1.38 module the Go module proxy serves); a rule is followed from
its ``since`` minor on, the older behaviour before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class UnknownKubeVersionError(ValueError):
    """A Kubernetes version kubedra cannot decide as: not ``[v]1.<minor>[.<patch>...]``, or a
    minor outside :data:`SUPPORTED_MINORS`."""


@dataclass(frozen=True, slots=True, order=True)
class KubeVersion:
    """A Kubernetes minor (``1.37``); patch releases of a minor decide alike."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> KubeVersion:
        """``v1.36.3``, ``1.36``, ``v1.38.0-beta.0`` (a server's ``gitVersion`` or a flag).

        Raises:
            UnknownKubeVersionError: not a version, or a minor kubedra does not decide as.
        """
        found = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
        if found is None:
            raise UnknownKubeVersionError(f"{text!r} is not a Kubernetes version (e.g. 1.36)")
        version = cls(int(found[1]), int(found[2]))
        if version.minor not in SUPPORTED_MINORS or version.major != 1:
            raise UnknownKubeVersionError(
                f"Kubernetes {version} is not one kubedra decides as (1.{SUPPORTED_MINORS[0]} "
                f"to 1.{SUPPORTED_MINORS[-1]})")
        return version

    def follows(self, rule: VersionRule) -> bool:
        """Whether this minor's scheduler has the rule (its ``since`` minor or later).

        Compares the numbers itself rather than through the dataclass's ``>=`` (one call
        fewer: the allocator asks this several times per node and claim)."""
        since = rule.since
        return (self.major, self.minor) >= (since.major, since.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


SUPPORTED_MINORS = (34, 35, 36, 37, 38)
"""The minors whose reference allocator the corpus is recorded against (``resource.k8s.io/v1``
is GA from 1.34; 1.38's from v1.38.0-beta.0)."""

DEFAULT_VERSION = KubeVersion(1, 37)
"""The minor kubedra decides as when the cluster's is not known (an old dump)."""


@dataclass(frozen=True, slots=True)
class VersionRule:
    """One change of the scheduler's allocator: followed from ``since`` on; ``source`` is the
    upstream file (and pull request, where known) it comes from."""

    name: str
    since: KubeVersion
    source: str
    summary: str


CONFIG_FOR_ALL_REQUESTS_NAMES_NONE = VersionRule(
    "config-for-all-requests-names-none", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(Allocate: 'If a config applies to all requests, clear its Requests')",
    "an allocated configuration that applies to every request of the claim lists no requests "
    "(empty means all); before, it listed them")

CLAIM_CONFIG_ONCE = VersionRule(
    "claim-config-once", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(Allocate: 'break // We can stop checking after the first match')",
    "a claim's configuration naming several requests is copied into the allocation once; "
    "before, once per request of the claim it names")

TAINT_RULE_WITHOUT_SELECTOR_MATCHES_NONE = VersionRule(
    "taint-rule-without-selector-matches-none", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation resourceslice/tracker/tracker.go (applyPatches; "
    "kubernetes#141648)",
    "a DeviceTaintRule without spec.deviceSelector taints no device; before, every device")

SHARE_WITHOUT_CAPACITY_IS_IN_USE = VersionRule(
    "share-without-capacity-is-in-use", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(deviceCapacityInUse: 'A persisted allow-multiple allocation with no per-share capacity')",
    "an allocated share of a device that consumes no capacity counts as the device being in "
    "use, so a further share does not charge the device's counters again; before, only shares "
    "with consumed capacity did")

ALL_KEEPS_DEVICES_WITHOUT_ROOM = VersionRule(
    "all-keeps-devices-without-room", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(validateDeviceRequest: 'Static capacity only: remaining capacity is checked in "
    "allocateDevice so capacity-blocked matching devices stay in allDevices and All fails')",
    "allocationMode All counts every matching device whose capacity could serve the request, "
    "so a device without room left makes the request fail; before, such devices (and devices "
    "whose capacity check failed with an error) were left out and All took the others")

COMPATIBILITY_GROUPS_IGNORE_SLICE = VersionRule(
    "compatibility-groups-ignore-slice", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/pools_incubating.go "
    "(sliceUsesCompatibilityGroups, compatibility_groups.go)",
    "a slice whose devices' consumesCounters declare compatibilityGroups is left out (its pool "
    "then incomplete) when the incubating variant runs; before, the field was not known and "
    "the slice was used as any other")

DERIVED_ATTRIBUTES_REFUSED = VersionRule(
    "derived-attributes-refused", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(validateDeviceRequest: 'cannot handle request with derived attributes')",
    "a request with derivedAttributes is an error for the incubating variant; before, the "
    "field was not known and ignored")

DISTINCT_ATTRIBUTE_VALUES_COMPARED = VersionRule(
    "distinct-attribute-values-compared", KubeVersion(1, 35),
    "k8s.io/dynamic-resource-allocation structured/internal/experimental/constraint.go "
    "(matchesAttribute: v0.34.4 compares 'attribute.StringValue == attr.StringValue', the "
    "pointers; v0.35.4 their values)",
    "distinctAttribute compares the attribute values of devices; before (1.34's experimental "
    "variant, which its default gates select), it compared Go pointers, so two devices never "
    "had the same value and the constraint only required the attribute")

DISTINCT_ATTRIBUTE_EVERY_DEVICE = VersionRule(
    "distinct-attribute-every-device", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/constraint.go "
    "(v0.37.2: 'attributes []*resourceapi.DeviceAttribute'; up to v0.36.3 "
    "'attributes map[string]resourceapi.DeviceAttribute', by request name)",
    "distinctAttribute compares a device with every device already picked; before, with one "
    "value per request (the latest device's, forgotten when that device is taken back), so a "
    "third device could repeat the first's value")

CAPACITY_AMOUNTS_CHECKED = VersionRule(
    "capacity-amounts-checked", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/consumable_capacity.go "
    "(v0.37.2: errCapacityRequestNotRepresentable, errNegativeCapacity; v0.36.3 roundUpRange "
    "and violateValidRange compute with requestedVal.Value())",
    "a capacity request beyond int64 (or rounding up past it) and a negative consumed amount "
    "are errors; before, the amount was computed with Go's Quantity.Value(), 0 or wrapped "
    "beyond int64 (a request of 10E on a 1Gi..40Gi step-4Gi range consumes 5Gi), and a "
    "negative amount was taken as it is")

LIST_ATTRIBUTES_SEEN_BY_CEL = VersionRule(
    "list-attributes-seen-by-cel", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation cel/compile.go (getAttributeValue: v0.36.3 returns a "
    "list value only 'if c.features.EnableListTypeAttributes'; v0.37.2 always)",
    "a device with a list-typed attribute is given to CEL selectors with its lists; before, "
    "with DRAListTypeAttributes off (alpha, the default), such a device fails every selector "
    "with 'unsupported attribute value', which ends the attempt with an error (1.34 and 1.35 "
    "do not know list fields at all: the attribute has no value, with the same error)")

TAINT_EFFECT_NONE = VersionRule(
    "taint-effect-none", KubeVersion(1, 35),
    "k8s.io/kubernetes pkg/apis/resource/validation/validation.go (validDeviceTaintEffects: "
    "v1.34.4 NoSchedule and NoExecute; v1.35.4, v1.36.3 and v1.37.2 add None, with no gate; "
    "validateDeviceTaint and validateDeviceToleration check against it)",
    "a device taint and a request's toleration may have the effect None (a taint that only "
    "informs); before, the API server refused both")

TOLERATIONS_IN_RESULTS = VersionRule(
    "tolerations-in-results", KubeVersion(1, 35),
    "k8s.io/dynamic-resource-allocation structured/internal/experimental/allocator_experimental.go "
    "(Allocate: v0.35.4 sets 'Tolerations: internal.lookupRequest(claim).tolerations()' in "
    "each DeviceRequestAllocationResult; v0.34.4 does not)",
    "a device's allocation result carries its request's tolerations; before, none")

INVALID_POOL_SKIPPED = VersionRule(
    "invalid-pool-skipped", KubeVersion(1, 35),
    "k8s.io/dynamic-resource-allocation structured/internal/experimental/allocator_experimental.go "
    "(allocateOne, v0.34.4: 'If the pool is not valid, then fail now': return fmt.Errorf(\"pool "
    "%s is invalid: %s\"); v0.35.4: 'if pool.IsIncomplete || pool.IsInvalid { continue }')",
    "a pool found invalid is passed over when searching devices for an ExactCount request; "
    "before, reaching it was an error (in 1.34's map order of pools: kubedra reaches it first)")

INCOMPLETE_POOL_SKIPPED = VersionRule(
    "incomplete-pool-skipped", KubeVersion(1, 35),
    "k8s.io/dynamic-resource-allocation structured/internal/*/pools_*.go (GatherPools, v0.35.4: "
    "checkSlicesInPool; v0.34.4: 'pool.IsIncomplete = int64(len(pool.Slices)) != "
    "...ResourceSliceCount' over the node's slices only) and allocator_experimental.go "
    "(allocateOne, v0.34.4 skips no incomplete pool)",
    "an ExactCount request takes no device from an incomplete pool, and a pool's completeness "
    "counts its slices on every node (a newer generation elsewhere makes the node's slices "
    "obsolete); before, completeness counted only the node's slices, shared-counter slices "
    "among them with PartitionableDevices off (v0.35.4 leaves those out of the node's slices "
    "and counts them again in checkSlicesInPool), and only allocationMode All refused an "
    "incomplete pool")

ALL_SUBREQUEST_KEEPS_ITS_INDEX = VersionRule(
    "all-subrequest-keeps-its-index", KubeVersion(1, 36),
    "k8s.io/dynamic-resource-allocation structured/internal/*/allocator_*.go (allocateOne, "
    "the 'For \"all\" devices' branch: v0.34.4 and v0.35.4 go on with 'deviceIndices{claimIndex: "
    "r.claimIndex, requestIndex: r.requestIndex, deviceIndex: r.deviceIndex + 1}', without "
    "r.subRequestIndex; v0.36.3 keeps it)",
    "after each device of an allocationMode All subrequest the search goes on with the same "
    "subrequest; before, with the request's first subrequest at the next device index, so an "
    "All subrequest other than the first took one device and the rest of the request was "
    "the first subrequest's (done once its count is reached, its devices otherwise, a failure "
    "if it is an All without devices)")

COUNTER_SLICES_BY_NODE = VersionRule(
    "counter-slices-by-node", KubeVersion(1, 37),
    "k8s.io/dynamic-resource-allocation structured/internal/*/pools_*.go (GatherPools: v0.35.4 "
    "and v0.36.3 'Always include slices with SharedCounters since they are needed to use a "
    "pool regardless of their node selector'; v0.37.2 incubating and experimental decide by "
    "node selection for every slice, its stable variant still includes them)",
    "a slice with sharedCounters belongs to a node's pools only where its node selection "
    "matches the node (the pool's other slices are found when it looks incomplete); before "
    "(from 1.35, and in the stable variant of every minor), every such slice was added, so a "
    "newer generation of the pool's counters on another node made the node's slices "
    "out-dated and the pool incomplete (allocationMode All then fails with an error)")

ALL_UNUSABLE_POOL_FAILS_ON_NODE = VersionRule(
    "all-unusable-pool-fails-on-node", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(validateDeviceRequest, v0.38.0-beta.0: 'asks for all devices, but resource pool %s is "
    "currently being updated%w' ... internal.ErrFailedAllocationOnNode; kubernetes#141898)",
    "an allocationMode All request over an incomplete or invalid pool does not fit on this "
    "node, and the scheduler tries other nodes; before, it was an error that ended the whole "
    "scheduling attempt")

SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY = VersionRule(
    "shared-device-not-taken-exclusively", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(allocateDevice, v0.38.0-beta.0: 'A non-allow-multiple device can still carry a live share "
    "after an allowMultipleAllocations true->false update'; kubernetes#140798)",
    "a device that has shares (allocated or being allocated) is not allocated exclusively, as "
    "when its slice no longer allows multiple allocations; before, only an exclusive "
    "allocation made a device in use, so such a device was taken a second time")

VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR = VersionRule(
    "valueless-attribute-in-constraint-is-error", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(matchAttributeConstraint.add, v0.38.0-beta.0: 'Unknown value type, cannot match. Better "
    "stop instead of silently ignoring the device. This can be reached for list values') and "
    "constraint.go (distinctAttributeConstraint.add)",
    "a device whose constrained attribute has no scalar value (a list, with "
    "DRAListTypeAttributes off) is an error when a matchAttribute or distinctAttribute "
    "constraint looks at it, its first device too; before, such a device was taken as the "
    "constraint's first device and refused after it")

SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE = VersionRule(
    "skip-node-operations-not-allocatable", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(allocateDevice, v0.38.0-beta.0: 'Device requires optional node operations, but the "
    "optional node operations feature is not enabled'; v0.37.2's incubating variant does not "
    "read spec.skipNodeOperations, nor does beta.0's stable/allocator_stable.go)",
    "where upstream runs the incubating variant (a scenario naming it: from 1.38 the scheduler's "
    "default gates select the stable one, structured/allocator.go availableAllocators, and "
    "incubating only with an alpha gate on, which kubedra refuses), a device of a slice with "
    "skipNodeOperations is not allocatable with DRAOptionalNodeOperations off; before, and in "
    "1.38's stable variant, the field is ignored and the device allocated as any other")

VERSIONS_COMPARED_BY_PRECEDENCE = VersionRule(
    "versions-compared-by-precedence", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/allocator_incubating.go "
    "(matchAttributeConstraint.add, v0.38.0-beta.0: 'case semver.Version: ... "
    "existing.Equals(candidate)'), constraint.go (distinctAttributeConstraint.matchesAttribute) "
    "and api/conversion.go (attrValue: 'semver.New(*v.VersionValue)', nil where it fails); "
    "v0.37.2 compares '*attribute.VersionValue == *attr.VersionValue'",
    "matchAttribute and distinctAttribute compare version attributes as parsed semantic "
    "versions, build metadata ignored (1.0.0+a and 1.0.0+b match, are not distinct), and a "
    "version that does not parse has no value; before, they compared the texts")

CAPACITY_NAMES_QUALIFIED = VersionRule(
    "capacity-names-qualified", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/consumable_capacity.go "
    "(v0.38.0-beta.0: resolveCapacityRequests, capacityNameForStatus; kubernetes#142202), "
    "api/conversion.go (Convert_v1_To_api_DeviceCapacities: 'A fully-qualified entry for the "
    "same name, if already recorded, wins') and structured/schedulerapi/types.go "
    "(NewDeviceConsumedCapacity); v0.37.2 looks names up as spelled",
    "a capacity is known by its fully qualified name: a request for 'memory' matches a device's "
    "'<driver>/memory' and the other way round, a device spelling both keeps the qualified one, "
    "a request spelling one capacity both ways is an error, allocated shares are summed whatever "
    "their spelling, and a result names the capacity as the slice does; before, names matched "
    "only as spelled")

NEGATIVE_CAPACITY_REQUEST_IS_ERROR = VersionRule(
    "negative-capacity-request-is-error", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/incubating/consumable_capacity.go "
    "(calculateConsumedCapacity, v0.38.0-beta.0: 'Must be checked before rounding: the request "
    "policy can round a negative request up to a valid value')",
    "a negative capacity request is an error that ends the attempt; before, a validRange or "
    "validValues policy rounded it up (to min, or the first listed value) and the device was "
    "allocated")

STABLE_VARIANT_KNOWS_BETA_FEATURES = VersionRule(
    "stable-variant-knows-beta-features", KubeVersion(1, 38),
    "k8s.io/dynamic-resource-allocation structured/internal/stable/allocator_stable.go "
    "(SupportedFeatures, v0.38.0-beta.0: ConsumableCapacity, DeviceBindingAndStatus and "
    "FractionalCapacityRange; it reads bindsToNode, gives CEL allowMultipleAllocations, knows "
    "capacity requests and distinctAttribute) and pools_stable.go (sortPoolsByID), picked first "
    "by structured/allocator.go availableAllocators",
    "the stable variant, which the scheduler runs with its default gates, decides as the "
    "incubating one short of the alpha features, whatever of ConsumableCapacity, "
    "DeviceBindingAndStatus and FractionalCapacityRange is on; before, with all three off it "
    "ran a variant that knew none of them (pools in Go's map order, bindsToNode not read, "
    "capacity requests ignored, distinctAttribute an error)")

RULES = (TAINT_EFFECT_NONE, TOLERATIONS_IN_RESULTS, INVALID_POOL_SKIPPED, INCOMPLETE_POOL_SKIPPED,
         DISTINCT_ATTRIBUTE_VALUES_COMPARED, DISTINCT_ATTRIBUTE_EVERY_DEVICE,
         CAPACITY_AMOUNTS_CHECKED, LIST_ATTRIBUTES_SEEN_BY_CEL,
         CONFIG_FOR_ALL_REQUESTS_NAMES_NONE, CLAIM_CONFIG_ONCE,
         SHARE_WITHOUT_CAPACITY_IS_IN_USE, ALL_KEEPS_DEVICES_WITHOUT_ROOM,
         COMPATIBILITY_GROUPS_IGNORE_SLICE, DERIVED_ATTRIBUTES_REFUSED,
         TAINT_RULE_WITHOUT_SELECTOR_MATCHES_NONE, ALL_SUBREQUEST_KEEPS_ITS_INDEX,
         COUNTER_SLICES_BY_NODE, ALL_UNUSABLE_POOL_FAILS_ON_NODE,
         SHARED_DEVICE_NOT_TAKEN_EXCLUSIVELY, VALUELESS_ATTRIBUTE_IN_CONSTRAINT_IS_ERROR,
         SKIP_NODE_OPERATIONS_NOT_ALLOCATABLE, VERSIONS_COMPARED_BY_PRECEDENCE,
         CAPACITY_NAMES_QUALIFIED, NEGATIVE_CAPACITY_REQUEST_IS_ERROR,
         STABLE_VARIANT_KNOWS_BETA_FEATURES)
"""Every version-dependent rule kubedra follows, oldest first."""


def rules_of(version: KubeVersion) -> dict[str, bool]:
    """Per rule name, whether ``version``'s scheduler follows it."""
    return {rule.name: version.follows(rule) for rule in RULES}
