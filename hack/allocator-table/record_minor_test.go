//go:build !kube_1_38

package kubedrarecord

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

// tableSlice is the ResourceSlice type the table gives its allocator factory up to 1.37:
// resource.k8s.io/v1's.
type tableSlice = resourceapi.ResourceSlice

// v1Slice is the slice as a scenario states it (up to 1.37: the same object).
func v1Slice(slice *tableSlice) (*resourceapi.ResourceSlice, error) {
	return slice.DeepCopy(), nil
}

// share is one entry of the allocated state's shared devices: the device and, up to 1.37,
// the share's ID (AllocatedSharedDeviceIDs holds one SharedDeviceID per share).
type share struct {
	device internal.DeviceID
	id     string
}

func sharedDevices(state internal.AllocatedState) []share {
	shares := make([]share, 0, len(state.AllocatedSharedDeviceIDs))
	for id := range state.AllocatedSharedDeviceIDs {
		shares = append(shares, share{device: id.GetDeviceID(), id: id.ShareID.String()})
	}
	return shares
}

// capacityName is a key of AllocatedState.AggregatedCapacity as a result's consumedCapacity
// names it (up to 1.37 the same resourceapi.QualifiedName).
func capacityName(_ internal.DeviceID, name resourceapi.QualifiedName) resourceapi.QualifiedName {
	return name
}
