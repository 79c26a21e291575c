//go:build kube_1_34

package main

import (
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/features"
	schedfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// allocatorFeatures are the allocator features of a v1.34 kube-scheduler with the gates fts (its
// PreFilter builds them inline, pkg/scheduler/framework/plugins/dynamicresources).
func allocatorFeatures(fts schedfeature.Features) structured.Features {
	return structured.Features{
		AdminAccess:          fts.EnableDRAAdminAccess,
		PrioritizedList:      fts.EnableDRAPrioritizedList,
		PartitionableDevices: fts.EnablePartitionableDevices,
		DeviceTaints:         fts.EnableDRADeviceTaints,
		DeviceBinding:        fts.EnableDRADeviceBindingConditions,
		DeviceStatus:         fts.EnableDRAResourceClaimDeviceStatus,
		ConsumableCapacity:   fts.EnableConsumableCapacity,
	}
}

// taintRulesGate: 1.34's slice tracker applies DeviceTaintRules with the DRADeviceTaints gate
// (pkg/scheduler/scheduler.go).
const taintRulesGate = features.DRADeviceTaints

// featureAliases: 1.34 has DeviceBinding and DeviceStatus where 1.35 has DeviceBindingAndStatus.
var featureAliases = map[string][]string{"DeviceBindingAndStatus": {"DeviceBinding", "DeviceStatus"}}

// failedOnNode: 1.34's Allocate says "does not fit" with no result and no error.
func failedOnNode(error) bool { return false }
