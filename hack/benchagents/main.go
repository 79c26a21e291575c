// benchagents: the node agents of bench/scale.py, cheap enough for thousands of nodes. For
// every node it creates the agent's Lease (kubedra-agent-<node>, holder the node) and renews
// it for as long as it runs, every lease-duration/3 seconds, spread evenly over the period, as
// every kubedra agent renews its own (kubedra.node: Settings.lease_duration). A renewal is one
// JSON merge patch of spec.renewTime: the same watch event for the operator as the agent's
// read-and-replace, one request fewer.
//
// A node whose previous renewal is still in flight skips its turn, counted late, as an agent
// renews once at a time; a renewal sent more than a third of a period after it was due is
// counted late too; one that the API server refuses or that fails is counted failed.
//
// Input: -nodes FILE, one node name per line. Output: -stats FILE, rewritten (whole, by a
// rename) every second and at the end: {"leases": created, "renewals": N, "late": N,
// "failed": N, "renewing": bool}; "renewing" turns true once every Lease exists. Ends on
// SIGTERM or SIGINT.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type counts struct {
	leases, renewals, late, failed atomic.Int64
	renewing                       atomic.Bool
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	nodesFile := flag.String("nodes", "", "file with one node name per line")
	statsFile := flag.String("stats", "", "file the counts are written to, every second")
	namespace := flag.String("namespace", "kubedra-system", "namespace of the agents' Leases")
	prefix := flag.String("prefix", "kubedra-agent-", "Lease name: prefix + node name")
	duration := flag.Int("lease-duration", 40, "leaseDurationSeconds; renewed every third of it")
	concurrency := flag.Int("concurrency", 16, "requests in flight at most")
	flag.Parse()
	if err := run(*kubeconfig, *nodesFile, *statsFile, *namespace, *prefix, *duration,
		*concurrency); err != nil {
		fmt.Fprintln(os.Stderr, "benchagents:", err)
		os.Exit(1)
	}
}

func readNodes(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var nodes []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if name := strings.TrimSpace(scanner.Text()); name != "" {
			nodes = append(nodes, name)
		}
	}
	return nodes, scanner.Err()
}

func run(kubeconfig, nodesFile, statsFile, namespace, prefix string, duration,
	concurrency int) error {
	nodes, err := readNodes(nodesFile)
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS = -1 // no client-side limit: N real agents each have their own
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	leases := kubernetes.NewForConfigOrDie(config).CoordinationV1().Leases(namespace)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var c counts
	done := make(chan struct{})
	go func() { // the stats file, every second and once at the end
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				writeStats(statsFile, &c)
				return
			case <-tick.C:
				writeStats(statsFile, &c)
			}
		}
	}()
	defer func() { stop(); <-done }()

	gate := make(chan struct{}, concurrency)
	now := func() *metav1.MicroTime { t := metav1.NowMicro(); return &t }
	var wg sync.WaitGroup
	for _, node := range nodes {
		gate <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-gate; wg.Done() }()
			holder, seconds := node, int32(duration)
			_, err := leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: prefix + node},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder,
					LeaseDurationSeconds: &seconds, AcquireTime: now(), RenewTime: now()},
			}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				fmt.Fprintf(os.Stderr, "benchagents: create lease of %s: %v\n", node, err)
				c.failed.Add(1)
				return
			}
			c.leases.Add(1)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	c.renewing.Store(true)

	period := time.Duration(duration) * time.Second / 3
	inFlight := make([]atomic.Bool, len(nodes))
	start := time.Now()
	for {
		for i, node := range nodes {
			due := start.Add(time.Duration(i) * period / time.Duration(len(nodes)))
			if delay := time.Until(due); delay > 0 {
				select {
				case <-ctx.Done():
					wg.Wait()
					return nil
				case <-time.After(delay):
				}
			} else if delay < -period/3 {
				c.late.Add(1)
			}
			if !inFlight[i].CompareAndSwap(false, true) { // still renewing: this turn is late
				c.late.Add(1)
				continue
			}
			wg.Add(1)
			go func() {
				defer func() { inFlight[i].Store(false); wg.Done() }()
				select {
				case gate <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-gate }()
				patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`,
					metav1.NowMicro().UTC().Format(metav1.RFC3339Micro))
				_, err := leases.Patch(ctx, prefix+node, types.MergePatchType, []byte(patch),
					metav1.PatchOptions{})
				if err != nil {
					if ctx.Err() == nil {
						c.failed.Add(1) // as an agent would, try again next period
					}
					return
				}
				c.renewals.Add(1)
			}()
		}
		start = start.Add(period)
	}
}

func writeStats(path string, c *counts) {
	out, _ := json.Marshal(map[string]any{
		"leases": c.leases.Load(), "renewals": c.renewals.Load(), "late": c.late.Load(),
		"failed": c.failed.Load(), "renewing": c.renewing.Load()})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err == nil {
		_ = os.Rename(tmp, path)
	}
}
