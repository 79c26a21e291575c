// Command dra-reference-allocator runs upstream's structured allocator
// (k8s.io/dynamic-resource-allocation/structured, v0.37.2) on JSON scenarios, so that
// kubedra.allocation can be proven to decide exactly as a v1.37.2 kube-scheduler does.
//
// Usage:
//
//	dra-reference-allocator [allocate]  scenarios (JSON lines) on stdin, outcomes (JSON lines) on stdout
//	dra-reference-allocator features    the allocator features a default v1.37.2 kube-scheduler uses
//	dra-reference-allocator bench       one benchmark run (JSON object) on stdin, timings on stdout
//
// A scenario is {"name", "features", "node": {"name", "labels"}, "slices", "classes",
// "allocatedClaims", "claims", "taintRules"}; objects are resource.k8s.io/v1 JSON. "features"
// overrides the defaults by name (AdminAccess, PrioritizedList, PartitionableDevices,
// DeviceTaints, DeviceTaintRules, DeviceBindingAndStatus, ConsumableCapacity,
// FractionalCapacityRange). The outcome is {"name", "outcome": "allocated" | "unschedulable" |
// "error" | "timeout", "allocations", "message", "steps"}; steps is upstream's count of its
// search's steps (allocateOne calls).
//
// What the scheduler does around the allocator is reproduced here in a few lines because the
// upstream helpers are unexported: the allocated state from the claims' allocation results
// (foreachAllocatedDevice and GatherAllocatedState in
// pkg/scheduler/framework/plugins/dynamicresources), DeviceTaintRules appended to the devices'
// taints (applyPatches in dynamic-resource-allocation/resourceslice/tracker) and API defaulting of
// requests (pkg/apis/resource/v1/defaults.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	schedfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// featureSet is the allocator's Features plus the DeviceTaintRules gate (which decides whether
// the scheduler's slice tracker applies DeviceTaintRules). The fields of structured.Features
// differ by minor, so they are read and set by name (reflection); gates_*.go give each minor's
// defaults and the names older minors spell otherwise.
type featureSet struct {
	structured.Features
	DeviceTaintRules bool
}

// defaultFeatures are the allocator features of a kube-scheduler with default gates.
func defaultFeatures() featureSet {
	fts := schedfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	return featureSet{
		Features:         allocatorFeatures(fts),
		DeviceTaintRules: utilfeature.DefaultFeatureGate.Enabled(taintRulesGate),
	}
}

// toMap is every feature by name: the fields of structured.Features, the DeviceTaintRules gate
// and the names of aliases (featureAliases, set when all their fields are).
func (f featureSet) toMap() map[string]bool {
	found := map[string]bool{"DeviceTaintRules": f.DeviceTaintRules}
	value := reflect.ValueOf(f.Features)
	for i := 0; i < value.NumField(); i++ {
		if value.Field(i).Kind() == reflect.Bool {
			found[value.Type().Field(i).Name] = value.Field(i).Bool()
		}
	}
	for alias, names := range featureAliases {
		found[alias] = true
		for _, name := range names {
			found[alias] = found[alias] && found[name]
			delete(found, name)
		}
	}
	return found
}

// override sets features by name. A name this minor does not know may only be turned off
// (scenarios name the features of newer minors); turning it on is an error.
func (f *featureSet) override(overrides map[string]bool) error {
	value := reflect.ValueOf(&f.Features).Elem()
	for name, on := range overrides {
		names, ok := featureAliases[name]
		if !ok {
			names = []string{name}
		}
		for _, field := range names {
			switch target := value.FieldByName(field); {
			case field == "DeviceTaintRules":
				f.DeviceTaintRules = on
			case target.IsValid() && target.Kind() == reflect.Bool:
				target.SetBool(on)
			case on:
				return fmt.Errorf("unknown feature %q", name)
			}
		}
	}
	return nil
}

type nodeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (n nodeSpec) toNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
}

type inventory struct {
	Features        map[string]bool              `json:"features,omitempty"`
	Slices          []*resourceapi.ResourceSlice `json:"slices"`
	Classes         []*resourceapi.DeviceClass   `json:"classes"`
	AllocatedClaims []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	TaintRules      []*taintRule                 `json:"taintRules"`
}

// taintRule is the part of a resource.k8s.io/v1 DeviceTaintRule that the slice tracker applies
// (the API group's version of DeviceTaintRule differs by minor: v1alpha3, v1beta2, v1).
type taintRule struct {
	Spec struct {
		DeviceSelector *struct {
			Driver *string `json:"driver,omitempty"`
			Pool   *string `json:"pool,omitempty"`
			Device *string `json:"device,omitempty"`
		} `json:"deviceSelector,omitempty"`
		Taint resourceapi.DeviceTaint `json:"taint"`
	} `json:"spec"`
}

type scenario struct {
	inventory
	Name   string                       `json:"name"`
	Node   nodeSpec                     `json:"node"`
	Claims []*resourceapi.ResourceClaim `json:"claims"`
	// TimeoutSeconds, when set, cancels Allocate after that long, as the scheduler's filter
	// timeout does; the outcome is then "timeout".
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
}

type outcome struct {
	Name        string                         `json:"name"`
	Outcome     string                         `json:"outcome"`
	Allocations []resourceapi.AllocationResult `json:"allocations,omitempty"`
	Message     string                         `json:"message,omitempty"`
	// Steps is upstream's own count of the search's steps (allocateOne calls,
	// Stats.NumAllocateOneInvocations), also when the search timed out.
	Steps int64 `json:"steps"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	classes := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, class := range l {
		classes = append(classes, class)
	}
	return classes, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func newClassLister(classes []*resourceapi.DeviceClass) classLister {
	lister := make(classLister, len(classes))
	for _, class := range classes {
		lister[class.Name] = class
	}
	return lister
}

// defaultRequests applies the API server's defaulting of requests (allocationMode ExactCount,
// count 1), as the scheduler only ever sees stored, defaulted claims.
func defaultRequests(claim *resourceapi.ResourceClaim) {
	for i := range claim.Spec.Devices.Requests {
		request := &claim.Spec.Devices.Requests[i]
		if request.Exactly != nil {
			defaultMode(&request.Exactly.AllocationMode, &request.Exactly.Count)
		}
		for j := range request.FirstAvailable {
			sub := &request.FirstAvailable[j]
			defaultMode(&sub.AllocationMode, &sub.Count)
		}
	}
}

func defaultMode(mode *resourceapi.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

// allocatedState collects what the claims' allocation results hold, as the scheduler's
// allocatedDevices cache does: admin-access results do not count, results with a shareID are
// shared (with their consumed capacity) when consumable capacity is on, all others are dedicated.
type allocatedState struct {
	consumableCapacity bool
	state              structured.AllocatedState
}

func newAllocatedState(consumableCapacity bool) *allocatedState {
	return &allocatedState{
		consumableCapacity: consumableCapacity,
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[sharedDeviceKey](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
}

func (s *allocatedState) add(claim *resourceapi.ResourceClaim) {
	if claim.Status.Allocation == nil {
		return
	}
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.AdminAccess != nil && *result.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
		if s.consumableCapacity && result.ShareID != nil {
			s.state.AllocatedSharedDeviceIDs.Insert(makeSharedDeviceKey(id, result.ShareID))
			if result.ConsumedCapacity != nil {
				s.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
			}
			continue
		}
		s.state.AllocatedDevices.Insert(id)
	}
}

// clone copies the state; the allocator must not see later additions.
func (s *allocatedState) clone() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         s.state.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: s.state.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       s.state.AggregatedCapacity.Clone(),
	}
}

// patchSlices appends the taint of every matching DeviceTaintRule to the devices' taints, as the
// slice tracker does (applyPatches in dynamic-resource-allocation/resourceslice/tracker); a rule
// without deviceSelector matches every device up to 1.36 and none from 1.37
// (nilSelectorMatchesAll, gates_*.go).
func patchSlices(slices []*resourceapi.ResourceSlice, rules []*taintRule) []*resourceapi.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	patched := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, slice := range slices {
		slice = slice.DeepCopy()
		for _, rule := range rules {
			selector := rule.Spec.DeviceSelector
			if selector == nil && !nilSelectorMatchesAll {
				continue
			}
			if selector != nil && ((selector.Driver != nil && *selector.Driver != slice.Spec.Driver) ||
				(selector.Pool != nil && *selector.Pool != slice.Spec.Pool.Name)) {
				continue
			}
			for i := range slice.Spec.Devices {
				device := &slice.Spec.Devices[i]
				if selector != nil && selector.Device != nil && *selector.Device != device.Name {
					continue
				}
				device.Taints = append(device.Taints, rule.Spec.Taint)
			}
		}
		patched = append(patched, slice)
	}
	return patched
}

// prepared is everything NewAllocator needs, built once per inventory.
type prepared struct {
	features featureSet
	classes  classLister
	slices   []*allocatorSlice
	state    *allocatedState
	celCache *cel.Cache
}

func prepare(inv *inventory, celCache *cel.Cache) (*prepared, error) {
	fts := defaultFeatures()
	if err := fts.override(inv.Features); err != nil {
		return nil, err
	}
	slices := inv.Slices
	if fts.DeviceTaintRules {
		slices = patchSlices(slices, inv.TaintRules)
	}
	converted, err := allocatorSlices(slices)
	if err != nil {
		return nil, err
	}
	state := newAllocatedState(fts.ConsumableCapacity)
	for _, claim := range inv.AllocatedClaims {
		state.add(claim)
	}
	if celCache == nil {
		celCache = newCELCache(fts)
	}
	return &prepared{features: fts, classes: newClassLister(inv.Classes), slices: converted, state: state, celCache: celCache}, nil
}

// newCELCache is the scheduler's cache: 10 compiled expressions (dynamicresources.go New), its
// cel.Features (which differ by minor) set by name: EnableX from feature X.
func newCELCache(fts featureSet) *cel.Cache {
	var celFeatures cel.Features
	value := reflect.ValueOf(&celFeatures).Elem()
	named := fts.toMap()
	for i := 0; i < value.NumField(); i++ {
		name := strings.TrimPrefix(value.Type().Field(i).Name, "Enable")
		value.Field(i).SetBool(named[name])
	}
	return cel.NewCache(10, celFeatures)
}

func runScenario(ctx context.Context, sc *scenario) (out outcome) {
	out.Name = sc.Name
	defer func() {
		if r := recover(); r != nil {
			out = outcome{Name: sc.Name, Outcome: "panic", Message: fmt.Sprint(r)}
		}
	}()
	p, err := prepare(&sc.inventory, nil)
	if err != nil {
		return outcome{Name: sc.Name, Outcome: "invalid", Message: err.Error()}
	}
	for _, claim := range sc.Claims {
		defaultRequests(claim)
	}
	allocator, err := structured.NewAllocator(ctx, p.features.Features, p.state.clone(), p.classes, p.slices, p.celCache)
	if err != nil {
		return outcome{Name: sc.Name, Outcome: "error", Message: err.Error()}
	}
	if sc.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(sc.TimeoutSeconds*float64(time.Second)))
		defer cancel()
	}
	results, err := allocator.Allocate(ctx, sc.Node.toNode(), sc.Claims)
	out.Steps = allocateOneCalls(allocator)
	switch {
	case err != nil && ctx.Err() != nil:
		out.Outcome, out.Message = "timeout", err.Error()
	case err != nil && failedOnNode(err):
		out.Outcome, out.Message = "unschedulable", err.Error()
	case err != nil:
		out.Outcome, out.Message = "error", err.Error()
	case results == nil:
		out.Outcome = "unschedulable"
	default:
		out.Outcome, out.Allocations = "allocated", results
	}
	return out
}

// allocateOneCalls reads the allocator's Stats.NumAllocateOneInvocations. The incubating
// allocator has GetStats, but its result type is in an internal package, so it is read by
// reflection; -1 when the variant has no such statistic.
func allocateOneCalls(allocator structured.Allocator) int64 {
	method := reflect.ValueOf(allocator).MethodByName("GetStats")
	if !method.IsValid() {
		return -1
	}
	field := method.Call(nil)[0].FieldByName("NumAllocateOneInvocations")
	if !field.IsValid() {
		return -1
	}
	return field.Int()
}

func allocateLines(ctx context.Context, in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	writer := bufio.NewWriter(out)
	defer writer.Flush()
	encoder := json.NewEncoder(writer)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(line) == 0 {
			continue
		}
		var sc scenario
		var result outcome
		if err := json.Unmarshal(line, &sc); err != nil {
			result = outcome{Name: sc.Name, Outcome: "invalid", Message: err.Error()}
		} else {
			result = runScenario(ctx, &sc)
		}
		if err := encoder.Encode(result); err != nil {
			return err
		}
		// One outcome per scenario as soon as it is known, so that a caller can keep the
		// process open and send scenarios one by one.
		if err := writer.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}

// benchSpec is one benchmark run: claims are scheduled one after the other; for each claim the
// allocator is built (as in the scheduler's PreFilter) and Allocate runs on every node (Filter);
// the claim then goes to the first node that fits and counts as allocated for the next claims.
type benchSpec struct {
	inventory
	Nodes  []nodeSpec                   `json:"nodes"`
	Claims []*resourceapi.ResourceClaim `json:"claims"`
}

type benchClaim struct {
	Name          string                        `json:"name"`
	Node          string                        `json:"node,omitempty"`
	Allocation    *resourceapi.AllocationResult `json:"allocation,omitempty"`
	FeasibleNodes int                           `json:"feasibleNodes"`
	Seconds       float64                       `json:"seconds"`
}

type benchResult struct {
	Claims []benchClaim `json:"claims"`
}

// bench times, per claim, NewAllocator plus Allocate on every node, in process; decoding the
// JSON input and maintaining the allocated state (the scheduler's informer caches) are not timed.
func bench(ctx context.Context, in io.Reader, out io.Writer) error {
	var spec benchSpec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return err
	}
	p, err := prepare(&spec.inventory, nil)
	if err != nil {
		return err
	}
	nodes := make([]*v1.Node, len(spec.Nodes))
	for i, n := range spec.Nodes {
		nodes[i] = n.toNode()
	}
	var result benchResult
	for _, claim := range spec.Claims {
		defaultRequests(claim)
		state := p.state.clone()
		claims := []*resourceapi.ResourceClaim{claim}
		chosen := -1
		var allocation *resourceapi.AllocationResult
		feasible := 0
		start := time.Now()
		allocator, err := structured.NewAllocator(ctx, p.features.Features, state, p.classes, p.slices, p.celCache)
		if err != nil {
			return err
		}
		for i, node := range nodes {
			results, err := allocator.Allocate(ctx, node, claims)
			if err != nil && !failedOnNode(err) {
				return fmt.Errorf("claim %s, node %s: %w", claim.Name, node.Name, err)
			}
			if results != nil {
				feasible++
				if chosen < 0 {
					chosen, allocation = i, &results[0]
				}
			}
		}
		elapsed := time.Since(start)
		entry := benchClaim{Name: claim.Name, FeasibleNodes: feasible, Seconds: elapsed.Seconds()}
		if chosen >= 0 {
			entry.Node, entry.Allocation = nodes[chosen].Name, allocation
			allocated := claim.DeepCopy()
			allocated.Status.Allocation = allocation
			p.state.add(allocated)
		}
		result.Claims = append(result.Claims, entry)
	}
	return json.NewEncoder(out).Encode(result)
}

func main() {
	ctx := context.Background()
	mode := "allocate"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var err error
	switch mode {
	case "allocate":
		err = allocateLines(ctx, os.Stdin, os.Stdout)
	case "features":
		err = json.NewEncoder(os.Stdout).Encode(defaultFeatures().toMap())
	case "bench":
		err = bench(ctx, os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown mode %q (allocate, features, bench)", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dra-reference-allocator:", err)
		os.Exit(1)
	}
}
