//go:build !kube_1_34

package main

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	schedfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// allocatorFeatures are the allocator features of a kube-scheduler with the gates fts (1.35 and
// newer: dynamicresources.AllocatorFeatures).
func allocatorFeatures(fts schedfeature.Features) structured.Features {
	return dynamicresources.AllocatorFeatures(fts)
}

// taintRulesGate decides whether the scheduler's slice tracker applies DeviceTaintRules.
const taintRulesGate = features.DRADeviceTaintRules

// featureAliases: names that stand for several fields of structured.Features (none after 1.34).
var featureAliases = map[string][]string{}

// failedOnNode: the error that means "does not fit on this node" (1.35 and newer).
func failedOnNode(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
