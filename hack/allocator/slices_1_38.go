//go:build kube_1_38

package main

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatorSlice is the ResourceSlice type structured.NewAllocator takes from 1.38: the
// allocator's own k8s.io/dynamic-resource-allocation/api type, with interned strings, that the
// scheduler's slice tracker lists (resourceslice/tracker ListPatchedResourceSlices).
type allocatorSlice = draapi.ResourceSlice

// allocatorSlices converts the slices as the tracker's informer does
// (draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice).
func allocatorSlices(slices []*resourceapi.ResourceSlice) ([]*allocatorSlice, error) {
	converted := make([]*allocatorSlice, len(slices))
	for i, slice := range slices {
		converted[i] = new(allocatorSlice)
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(slice, converted[i], nil); err != nil {
			return nil, err
		}
	}
	return converted, nil
}

// sharedDeviceKey is an entry of AllocatedState.AllocatedSharedDeviceIDs: from 1.38 the device
// that has at least one share (the scheduler inserts SharedDeviceID.GetDeviceID(),
// pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go GatherAllocatedState).
type sharedDeviceKey = structured.DeviceID

func makeSharedDeviceKey(id structured.DeviceID, _ *types.UID) sharedDeviceKey {
	return id
}
