//go:build kube_1_38

package kubedrarecord

import (
	resourceapi "k8s.io/api/resource/v1"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

// tableSlice is the ResourceSlice type the table gives its allocator factory from 1.38
// (allocatortesting.TestAllocator's newAllocator): k8s.io/dynamic-resource-allocation/api's,
// with interned strings.
type tableSlice = draapi.ResourceSlice

// v1Slice is the slice as a scenario states it: resource.k8s.io/v1, converted back
// (draapi.Convert_api_ResourceSlice_To_v1_ResourceSlice; hack/allocator's slices_1_38.go
// converts it forth).
func v1Slice(slice *tableSlice) (*resourceapi.ResourceSlice, error) {
	out := new(resourceapi.ResourceSlice)
	if err := draapi.Convert_api_ResourceSlice_To_v1_ResourceSlice(slice.DeepCopy(), out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// share is one entry of the allocated state's shared devices: from 1.38
// AllocatedSharedDeviceIDs holds the devices that have at least one share, not the shares, so
// the entry has no share ID (allocatedClaims numbers one).
type share struct {
	device internal.DeviceID
	id     string
}

func sharedDevices(state internal.AllocatedState) []share {
	shares := make([]share, 0, len(state.AllocatedSharedDeviceIDs))
	for id := range state.AllocatedSharedDeviceIDs {
		shares = append(shares, share{device: id})
	}
	return shares
}

// capacityName is a key of AllocatedState.AggregatedCapacity (from 1.38 a
// draapi.FullyQualifiedName) as a result's consumedCapacity names it: the identifier alone in
// the device's driver's domain, as schedulerapi.NewDeviceConsumedCapacity reads it back.
func capacityName(device internal.DeviceID, name draapi.FullyQualifiedName) resourceapi.QualifiedName {
	if name.Domain == device.Driver {
		return resourceapi.QualifiedName(name.Identifier.String())
	}
	return resourceapi.QualifiedName(name.String())
}
