// slicepublisher: the Go peer of bench/scale.py. It publishes node-local pools through
// upstream's ResourceSlice controller (k8s.io/dynamic-resource-allocation/resourceslice
// v0.37.2) the way a DRA driver's kubelet plugin does: one controller per node, owned by the
// Node, each with its own ResourceSlice informer filtered to its node and driver. All
// controllers run in this one process, so its RSS and CPU are what the whole fleet of plugins
// spends together.
//
// Input (-pools FILE, JSON): {"driver": "...", "pools": [{"node": "...",
// "slices": [{"devices": [...], "sharedCounters": [...]}]}]}, devices and counter sets in
// resource.k8s.io/v1 form. On SIGTERM or SIGINT it stops every controller and prints one JSON
// line to stdout: {"creates": N, "updates": N, "deletes": N} summed over the controllers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

type input struct {
	Driver string `json:"driver"`
	Pools  []struct {
		Node   string `json:"node"`
		Slices []struct {
			Devices        []resourceapi.Device     `json:"devices"`
			SharedCounters []resourceapi.CounterSet `json:"sharedCounters"`
		} `json:"slices"`
	} `json:"pools"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	poolsFile := flag.String("pools", "", "JSON file with the pools to publish")
	// One client for all controllers; without a client-side rate limit by default, as each of
	// N real plugins has its own limiter and kubedra's operator has none.
	qps := flag.Float64("qps", -1, "client QPS shared by all controllers (negative: no limit)")
	burst := flag.Int("burst", 100, "client burst (with a positive -qps)")
	flag.Parse()
	if err := run(*kubeconfig, *poolsFile, float32(*qps), *burst); err != nil {
		fmt.Fprintln(os.Stderr, "slicepublisher:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, poolsFile string, qps float32, burst int) error {
	raw, err := os.ReadFile(poolsFile)
	if err != nil {
		return err
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("decode %s: %w", poolsFile, err)
	}
	raw = nil
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = qps, burst
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	controllers := make([]*resourceslice.Controller, len(in.Pools))
	errs := make([]error, len(in.Pools))
	var wg sync.WaitGroup
	for i := range in.Pools {
		pool := in.Pools[i]
		slices := make([]resourceslice.Slice, len(pool.Slices))
		for j, s := range pool.Slices {
			slices[j] = resourceslice.Slice{Devices: s.Devices, SharedCounters: s.SharedCounters}
		}
		wg.Add(1)
		// StartController waits for its informer to sync; start them side by side, as the
		// plugins of many nodes start.
		go func() {
			defer wg.Done()
			controllers[i], errs[i] = resourceslice.StartController(ctx, resourceslice.Options{
				DriverName: in.Driver,
				KubeClient: client,
				Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: pool.Node},
				Resources: &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
					pool.Node: {Slices: slices}}},
			})
		}()
	}
	wg.Wait()
	in.Pools = nil
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("controller %d: %w", i, err)
		}
	}
	fmt.Fprintf(os.Stderr, "slicepublisher: %d controllers started\n", len(controllers))
	<-ctx.Done()
	var total resourceslice.Stats
	for _, c := range controllers {
		c.Stop()
		s := c.GetStats()
		total.NumCreates += s.NumCreates
		total.NumUpdates += s.NumUpdates
		total.NumDeletes += s.NumDeletes
	}
	out, _ := json.Marshal(map[string]int64{
		"creates": total.NumCreates, "updates": total.NumUpdates, "deletes": total.NumDeletes})
	fmt.Println(string(out))
	return nil
}
