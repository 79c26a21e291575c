//go:build !kube_1_34 && !kube_1_35 && !kube_1_36

package main

// nilSelectorMatchesAll: from 1.37 a DeviceTaintRule without deviceSelector matches no device
// (resourceslice/tracker/tracker.go, kubernetes#141648).
const nilSelectorMatchesAll = false
