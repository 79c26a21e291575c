//go:build !kube_1_38

package main

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatorSlice is the ResourceSlice type structured.NewAllocator takes: resource.k8s.io/v1's
// up to 1.37.
type allocatorSlice = resourceapi.ResourceSlice

// allocatorSlices gives the slices as NewAllocator takes them (up to 1.37: unchanged).
func allocatorSlices(slices []*resourceapi.ResourceSlice) ([]*allocatorSlice, error) {
	return slices, nil
}

// sharedDeviceKey is an entry of AllocatedState.AllocatedSharedDeviceIDs: up to 1.37 one per
// share of a device (device and shareID).
type sharedDeviceKey = structured.SharedDeviceID

func makeSharedDeviceKey(id structured.DeviceID, shareID *types.UID) sharedDeviceKey {
	return structured.MakeSharedDeviceID(id, shareID)
}
