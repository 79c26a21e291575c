//go:build kube_1_34 || kube_1_35 || kube_1_36

package main

// nilSelectorMatchesAll: up to 1.36 a DeviceTaintRule without deviceSelector matches every device
// (resourceslice/tracker/tracker.go: ptr.Deref(patch.Spec.DeviceSelector, {})).
const nilSelectorMatchesAll = true
