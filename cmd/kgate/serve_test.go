package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kgate/kgate/cluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runServe runs `kgate serve` with args until the returned stop is called.
func runServe(t *testing.T, args []string) (stop func()) {
	t.Helper()
	stop, cfg := startServe(t, args)
	awaitKafka(t, cfg.KafkaAddr)
	return stop
}

// startServe starts serve like runServe but returns once the admin listener
// is up: the Kafka listeners open only once the node is ready, which the
// first node of a cluster is not until the others have started.
func startServe(t *testing.T, args []string) (stop func(), cfg *config) {
	t.Helper()
	cfg, err := parseConfig(args, env())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	// Wait (bounded) for the admin listener.
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", cfg.AdminAddr, time.Second)
		if err == nil {
			nc.Close()
			return stop, cfg
		}
		select {
		case err := <-done:
			stopped = true
			cancel()
			t.Fatalf("serve exited before listening: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin listener %s never came up: %v", cfg.AdminAddr, err)
		}
	}
}

// awaitKafka waits (bounded) until the Kafka listener at addr accepts.
func awaitKafka(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kafka listener %s never came up: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeWithShortRaftTimeouts runs a node the way `kgate serve` wires it,
// with Raft timeouts below the defaults (as tests and small deployments set
// them), produces, restarts on the same data directory and reads back.
func TestServeWithShortRaftTimeouts(t *testing.T) {
	dir := t.TempDir()
	kafka := freeAddr(t)
	args := []string{
		"--data-dir", dir, "--kafka-addr", kafka, "--raft-addr", freeAddr(t),
		"--gossip-addr", freeAddr(t), "--admin-addr", freeAddr(t),
		"--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--log-level", "error",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	stop := runServe(t, args)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic("served"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, "served"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("kept")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
	stop()

	// The same data directory serves the record after a restart.
	runServe(t, args)
	cons, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"served": {0: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record not read back after restart")
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "kept" || recs[0].Offset != 0 {
				t.Fatalf("after restart: offset %d value %q", recs[0].Offset, recs[0].Value)
			}
			return
		}
	}
}

// TestServeStopsOnEntryItCannotApply: a node whose Raft log holds an entry
// this binary cannot apply (here a command kind from a newer kgate) stops:
// serve returns an error naming the entry's index and command, which main
// prints before exiting with status 1.
func TestServeStopsOnEntryItCannotApply(t *testing.T) {
	dir := t.TempDir()
	kafka := freeAddr(t)
	args := []string{
		"--data-dir", dir, "--kafka-addr", kafka, "--raft-addr", freeAddr(t),
		"--gossip-addr", freeAddr(t), "--admin-addr", freeAddr(t),
		"--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--log-level", "error",
	}
	cfg, err := parseConfig(args, env())
	if err != nil {
		t.Fatal(err)
	}
	stop := runServe(t, args)
	stop()

	// Append the entry to the stopped node's log, as a newer leader would
	// have replicated it.
	store, err := cluster.OpenLogStore(dir, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	bad := &raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: []byte{0, 1, 99, 1, 2, 3}}
	if err := store.StoreLog(bad); err != nil {
		t.Fatal(err)
	}
	store.Close()

	done := make(chan error, 1)
	go func() { done <- serve(context.Background(), cfg) }()
	select {
	case err := <-done:
		want := fmt.Sprintf("cannot apply Raft log entry %d (unknown kind 99 v1)", bad.Index)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("serve returned %v, want an error containing %q", err, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve kept running with an entry it cannot apply")
	}
}
