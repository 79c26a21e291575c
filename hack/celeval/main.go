// Command celeval evaluates DRA device selectors with upstream's CEL environment
// (k8s.io/dynamic-resource-allocation/cel at v0.37.2, the code a v1.37.2 kube-scheduler
// runs). It is the oracle for kubedra.cel's tests: it reads JSON cases, one per line,
// from stdin and writes one JSON result per line to stdout.
//
// Input:  {"expression": "...", "device": {"driver": "d", "allowMultipleAllocations": false,
//          "attributes": {"name": {"int": 1} | {"bool": true} | {"string": "s"} | {"version": "1.0.0"}},
//          "capacity": {"name": "10Gi"}}}
// Output: {"compileError": "..."} or {"runtimeError": "...", "cost": N} or {"matches": bool, "cost": N}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
)

type device struct {
	Driver                   string                                                 `json:"driver"`
	AllowMultipleAllocations *bool                                                  `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]string                   `json:"capacity"`
}

type input struct {
	Expression string `json:"expression"`
	Device     device `json:"device"`
}

type output struct {
	CompileError *string `json:"compileError,omitempty"`
	RuntimeError *string `json:"runtimeError,omitempty"`
	Matches      *bool   `json:"matches,omitempty"`
	Cost         *uint64 `json:"cost,omitempty"`
}

func main() {
	// The scheduler's cache: DRAConsumableCapacity is on by default in 1.37,
	// DRAListTypeAttributes (alpha) is off.
	cache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c input
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "bad input:", err)
			os.Exit(2)
		}
		var out output
		expr := cache.GetOrCompile(c.Expression)
		if expr.Error != nil {
			msg := expr.Error.Error()
			out.CompileError = &msg
		} else {
			capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
			for name, value := range c.Device.Capacity {
				capacity[name] = resourceapi.DeviceCapacity{Value: resource.MustParse(value)}
			}
			matches, details, err := expr.DeviceMatches(context.Background(), cel.Device{
				Driver:                   c.Device.Driver,
				AllowMultipleAllocations: c.Device.AllowMultipleAllocations,
				Attributes:               c.Device.Attributes,
				Capacity:                 capacity,
			})
			if details != nil {
				out.Cost = details.ActualCost()
			}
			if err != nil {
				msg := cel.EnhanceRuntimeError(err).Error()
				out.RuntimeError = &msg
			} else {
				out.Matches = &matches
			}
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(2)
	}
}
