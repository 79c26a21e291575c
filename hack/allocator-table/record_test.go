// Package kubedrarecord records upstream's own allocator test table as kubedra corpus scenarios.
//
// hack/allocator-table/record.sh copies k8s.io/dynamic-resource-allocation (the version
// hack/allocator pins) from the Go module proxy into a build directory and puts this file into
// structured/internal/kubedrarecord there, the only place from which the internal table
// (structured/internal/allocatortesting) can be run. TestRecord runs the table's two entry
// points, TestAllocator and TestLexicographicalAllocator, through a factory that builds the
// variant the scheduler would run for the case's features (incubating where it supports them,
// experimental otherwise) and records each Allocate call: its inputs (features, node, slices,
// classes, allocated state, claims) and upstream's outcome, one JSON line per case, in the
// scenario format of hack/allocator (the allocated state as claims with allocation results).
// What differs by minor (the factory's slice type, the allocated state's shared devices) is in
// record_minor_test.go and, for 1.38 (build tag kube_1_38), record_minor_1_38_test.go.
// Nothing of upstream's code is copied into kubedra; the recorded cases are data.
package kubedrarecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured/internal"
	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
	"k8s.io/dynamic-resource-allocation/structured/internal/experimental"
	"k8s.io/dynamic-resource-allocation/structured/internal/incubating"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

type node struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type outcome struct {
	Outcome     string                         `json:"outcome"`
	Allocations []resourceapi.AllocationResult `json:"allocations,omitempty"`
	Message     string                         `json:"message,omitempty"`
	Steps       int64                          `json:"steps"`
}

type scenario struct {
	Name            string                       `json:"name"`
	Allocator       internal.AllocatorChannel    `json:"allocator"`
	Features        map[string]bool              `json:"features"`
	Node            node                         `json:"node"`
	Slices          []*resourceapi.ResourceSlice `json:"slices"`
	Classes         []*resourceapi.DeviceClass   `json:"classes"`
	AllocatedClaims []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	Claims          []*resourceapi.ResourceClaim `json:"claims"`
	Upstream        outcome                      `json:"upstream"`
	// NotRepresentable, when set, says why the scenario differs from what upstream's allocator
	// was given (then the case cannot be replayed from the scenario): a quantity JSON does not
	// keep, or a node with more than a name and labels.
	NotRepresentable string `json:"notRepresentable,omitempty"`
}

// recording wraps one allocator and records its Allocate call.
type recording struct {
	inner    internal.Allocator
	name     string
	scenario scenario
	record   func(scenario)
}

func (r *recording) Channel() internal.AllocatorChannel { return r.inner.Channel() }

func (r *recording) GetStats() internal.Stats {
	if extended, ok := r.inner.(internal.AllocatorExtended); ok {
		return extended.GetStats()
	}
	return internal.Stats{}
}

func (r *recording) Allocate(ctx context.Context, n *v1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	sc := r.scenario
	sc.Node = node{Name: n.Name, Labels: n.Labels}
	for _, claim := range claims {
		sc.Claims = append(sc.Claims, claim.DeepCopy())
	}
	results, err := r.inner.Allocate(ctx, n, claims)
	if ctx.Err() != nil {
		// The table's interrupt cases: not a decision, nothing to record.
		return results, err
	}
	sc.Upstream.Steps = r.GetStats().NumAllocateOneInvocations
	switch {
	case err != nil && errors.Is(err, internal.ErrFailedAllocationOnNode):
		sc.Upstream.Outcome, sc.Upstream.Message = "unschedulable", err.Error()
	case err != nil:
		sc.Upstream.Outcome, sc.Upstream.Message = "error", err.Error()
	case results == nil:
		sc.Upstream.Outcome = "unschedulable"
	default:
		sc.Upstream.Outcome = "allocated"
		shares := 0
		for _, result := range results {
			result := result.DeepCopy()
			// The share IDs upstream makes are random UUIDs: numbered, so that a
			// regeneration writes the same file.
			for i := range result.Devices.Results {
				if result.Devices.Results[i].ShareID != nil {
					uid := types.UID(fmt.Sprintf("upstream-share-%d", shares))
					result.Devices.Results[i].ShareID = &uid
					shares++
				}
			}
			sc.Upstream.Allocations = append(sc.Upstream.Allocations, *result)
		}
	}
	var lost []string
	if bare := (&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}); !apiequality.Semantic.DeepEqual(bare, n) {
		rest := n.DeepCopy()
		rest.Name, rest.Labels = "", nil
		restJSON, _ := json.Marshal(rest)
		var fields any
		_ = json.Unmarshal(restJSON, &fields)
		restJSON, _ = json.Marshal(pruned(fields))
		lost = append(lost, fmt.Sprintf("the node has more than a name and labels: %s", restJSON))
	}
	lostQuantities(reflect.ValueOf(sc.Slices), "slices", &lost)
	lostQuantities(reflect.ValueOf(sc.Claims), "claims", &lost)
	lostQuantities(reflect.ValueOf(sc.AllocatedClaims), "allocatedClaims", &lost)
	if len(lost) > 0 {
		sc.NotRepresentable = strings.Join(lost, "; ")
	}
	r.record(sc)
	return results, err
}

// pruned is a JSON value without its empty strings, zeros, falses, empty lists and objects.
func pruned(value any) any {
	switch v := value.(type) {
	case map[string]any:
		found := map[string]any{}
		for key, item := range v {
			if item = pruned(item); item != nil {
				found[key] = item
			}
		}
		if len(found) == 0 {
			return nil
		}
		return found
	case []any:
		if len(v) == 0 {
			return nil
		}
		return v
	case string, float64, bool:
		if reflect.ValueOf(v).IsZero() {
			return nil
		}
	}
	return value
}

var quantityType = reflect.TypeOf(resource.Quantity{})

// lostQuantities walks v and lists every resource.Quantity whose JSON form parses back to
// another value (resource.Quantity marshals some values, e.g. 1e21, wrongly).
func lostQuantities(v reflect.Value, path string, lost *[]string) {
	switch {
	case v.Type() == quantityType:
		q := v.Interface().(resource.Quantity)
		if back, err := resource.ParseQuantity(q.String()); err != nil || back.Cmp(q) != 0 {
			*lost = append(*lost, fmt.Sprintf("%s is %s, its JSON %q (resource.Quantity does not keep it)", path, q.AsDec().String(), q.String()))
		}
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		if !v.IsNil() {
			lostQuantities(v.Elem(), path, lost)
		}
	case v.Kind() == reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			lostQuantities(v.Index(i), fmt.Sprintf("%s[%d]", path, i), lost)
		}
	case v.Kind() == reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, key := range keys {
			lostQuantities(v.MapIndex(key), fmt.Sprintf("%s[%v]", path, key), lost)
		}
	case v.Kind() == reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if field := v.Type().Field(i); field.IsExported() {
				name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
				if name == "" {
					name = field.Name
				}
				lostQuantities(v.Field(i), path+"."+name, lost)
			}
		}
	}
}

// features lists every feature of internal.Features by its field name (the names of
// hack/allocator's scenarios), so that a scenario overrides all of the reference allocator's
// defaults; DeviceTaintRules is hack/allocator's own switch (the table has no DeviceTaintRules).
func features(f internal.Features) map[string]bool {
	found := map[string]bool{"DeviceTaintRules": false}
	v := reflect.ValueOf(f)
	for i := 0; i < v.NumField(); i++ {
		found[v.Type().Field(i).Name] = v.Field(i).Bool()
	}
	return found
}

// allocatedClaims turns the allocated state into one claim whose allocation results hold it,
// as the scheduler builds the state from claims (GatherAllocatedState): a dedicated device is a
// result without shareID, a share a result with its shareID, and a device's aggregated consumed
// capacity goes on its first share (or on a share of its own when the state has none for it).
func allocatedClaims(state internal.AllocatedState) []*resourceapi.ResourceClaim {
	var results []resourceapi.DeviceRequestAllocationResult
	add := func(id internal.DeviceID, share string) *resourceapi.DeviceRequestAllocationResult {
		result := resourceapi.DeviceRequestAllocationResult{
			Request: fmt.Sprintf("req-%d", len(results)),
			Driver:  id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String(),
		}
		if share != "" {
			uid := types.UID(share)
			result.ShareID = &uid
		}
		results = append(results, result)
		return &results[len(results)-1]
	}
	var dedicated []string
	for id := range state.AllocatedDevices {
		dedicated = append(dedicated, id.String())
	}
	sort.Strings(dedicated)
	for _, id := range dedicated {
		parts := strings.SplitN(id, "/", 3)
		add(internal.MakeDeviceID(parts[0], parts[1], parts[2]), "")
	}
	shares := sharedDevices(state)
	sort.Slice(shares, func(i, j int) bool {
		return shares[i].device.String()+"/"+shares[i].id < shares[j].device.String()+"/"+shares[j].id
	})
	byDevice := map[internal.DeviceID]int{}
	for _, share := range shares {
		id := share.id
		if id == "" {
			id = fmt.Sprintf("kubedra-recorded-share-%d", len(results))
		}
		add(share.device, id)
		if _, seen := byDevice[share.device]; !seen {
			byDevice[share.device] = len(results) - 1
		}
	}
	capacityDevices := make([]internal.DeviceID, 0, len(state.AggregatedCapacity))
	for id := range state.AggregatedCapacity {
		capacityDevices = append(capacityDevices, id)
	}
	sort.Slice(capacityDevices, func(i, j int) bool { return capacityDevices[i].String() < capacityDevices[j].String() })
	for _, id := range capacityDevices {
		consumed := map[resourceapi.QualifiedName]resource.Quantity{}
		for name, quantity := range state.AggregatedCapacity[id] {
			if quantity != nil {
				consumed[capacityName(id, name)] = quantity.DeepCopy()
			}
		}
		i, ok := byDevice[id]
		if !ok {
			add(id, fmt.Sprintf("kubedra-recorded-share-%d", len(results)))
			i = len(results) - 1
		}
		results[i].ConsumedCapacity = consumed
	}
	if len(results) == 0 {
		return nil
	}
	return []*resourceapi.ResourceClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "allocated", Namespace: "default"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}}
}

// testName is the name of the running (sub)test, read from the test logger in ctx
// (RunTestAllocator passes ktesting.NewTestContext(t)).
func testName(ctx context.Context) string {
	if underlier, ok := klog.FromContext(ctx).GetSink().(ktesting.Underlier); ok {
		if named, ok := underlier.GetUnderlying().(interface{ Name() string }); ok {
			return named.Name()
		}
	}
	return ""
}

func TestRecord(t *testing.T) {
	out := os.Getenv("KUBEDRA_TABLE_OUT")
	if out == "" {
		t.Skip("KUBEDRA_TABLE_OUT is not set (run hack/allocator-table/record.sh)")
	}
	var mutex sync.Mutex
	recorded := map[string]scenario{}
	record := func(sc scenario) {
		mutex.Lock()
		defer mutex.Unlock()
		if _, dup := recorded[sc.Name]; dup {
			t.Errorf("%s: more than one Allocate call", sc.Name)
		}
		recorded[sc.Name] = sc
	}
	newAllocator := func(ctx context.Context, f internal.Features, state internal.AllocatedState,
		classes internal.DeviceClassLister, slices []*tableSlice, celCache *cel.Cache,
	) (internal.Allocator, error) {
		var inner internal.Allocator
		var err error
		if incubating.SupportedFeatures.Set().IsSuperset(f.Set()) {
			inner, err = incubating.NewAllocator(ctx, f, state, classes, slices, celCache)
		} else {
			inner, err = experimental.NewAllocator(ctx, f, state, classes, slices, celCache)
		}
		if err != nil {
			return nil, err
		}
		listed, err := classes.List()
		if err != nil {
			return nil, err
		}
		sc := scenario{
			Name:            strings.TrimPrefix(testName(ctx), t.Name()+"/"),
			Allocator:       inner.Channel(),
			Features:        features(f),
			AllocatedClaims: allocatedClaims(state),
		}
		for _, class := range listed {
			sc.Classes = append(sc.Classes, class.DeepCopy())
		}
		for _, slice := range slices {
			stated, err := v1Slice(slice)
			if err != nil {
				return nil, err
			}
			sc.Slices = append(sc.Slices, stated)
		}
		return &recording{inner: inner, scenario: sc, record: record}, nil
	}
	t.Run("table", func(t *testing.T) {
		allocatortesting.TestAllocator(t, internal.FeaturesAll, newAllocator)
	})
	t.Run("lexicographical", func(t *testing.T) {
		allocatortesting.TestLexicographicalAllocator(t, internal.FeaturesAll, newAllocator)
	})

	names := make([]string, 0, len(recorded))
	for name := range recorded {
		names = append(names, name)
	}
	sort.Strings(names)
	file, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	encoder := json.NewEncoder(file)
	for _, name := range names {
		if err := encoder.Encode(recorded[name]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recorded %d Allocate calls into %s", len(names), out)
}
