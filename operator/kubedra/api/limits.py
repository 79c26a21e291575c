"""Validation limits of ``resource.k8s.io/v1``.

Values are the constants in ``k8s.io/api/resource/v1/types.go`` (v0.37.2); see
``shared/reference/dra-api.md`` section 1.8.
"""

DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
RESOURCE_SLICE_MAX_DEVICES = 128
# devices per slice when any device has taints, consumesCounters or list attributes
RESOURCE_SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32
# scalar attributes count 1, list attributes one per item (1.36+)
RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE = 48
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64  # bytes of UTF-8 (Go len), not characters
DEVICE_TAINTS_MAX_LENGTH = 16
OPERATOR_TAINTS_MAX = 2
"""Taints the operator itself may add to one device: ``kubedra.io/unhealthy`` (or its
recovery hold-down) and ``kubedra.io/draining`` (kubedra's, not the API's)."""
OVERRIDE_TAINTS_MAX_LENGTH = DEVICE_TAINTS_MAX_LENGTH - OPERATOR_TAINTS_MAX
"""An override's taints: what a slice's device may carry less what the operator adds."""
RESOURCE_SLICE_MAX_COUNTER_SETS = 8
RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET = 32
RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE = 2
RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION = 32
DEVICE_REQUESTS_MAX_SIZE = 32
ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
DEVICE_SELECTORS_MAX_SIZE = 32
DEVICE_CONSTRAINTS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
DEVICE_TOLERATIONS_MAX_LENGTH = 16
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
ALLOCATED_DEVICE_STATUS_MAX_CONDITIONS = 8
ALLOCATED_DEVICE_STATUS_DATA_MAX_LENGTH = 10 * 1024
BINDING_CONDITIONS_MAX_SIZE = 4
BINDING_FAILURE_CONDITIONS_MAX_SIZE = 4
"""Binding conditions and failure conditions per device (KEP-5007, ``BindingConditionsMaxSize``,
``BindingFailureConditionsMaxSize``)."""
BINDING_CONDITIONS_NEED_FAILURES = "bindingFailureConditions are required to use bindingConditions"
BINDING_FAILURES_NEED_CONDITIONS = "bindingConditions are required to use bindingFailureConditions"
BINDING_OVERLAP = "bindingFailureConditions must not overlap with bindingConditions"
"""Upstream's messages for the rules of ``validateDeviceBindingParameters`` that span both
lists (pkg/apis/resource/validation/validation.go, v1.37.2): the CRD's rules and
:func:`kubedra.api.validation.binding_condition_errors` say the same."""
