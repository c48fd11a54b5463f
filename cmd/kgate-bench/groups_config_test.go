package main

import (
	"io"
	"maps"
	"testing"
	"time"
)

func TestParseGroupsConfig(t *testing.T) {
	cfg, err := parseGroupsConfig("groups", nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.members != 10000 || cfg.groups != 1000 || cfg.window != time.Minute || cfg.target != 0 ||
		cfg.heartbeat != 3*time.Second || cfg.session != 45*time.Second || cfg.rebalance != time.Minute || !cfg.spread {
		t.Errorf("groups defaults: %+v", cfg)
	}
	if cfg, err := parseGroupsConfig("groups", []string{"-heartbeat-spread=false"}, io.Discard); err != nil || cfg.spread {
		t.Errorf("-heartbeat-spread=false: spread %v, %v", cfg.spread, err)
	}
	cfg, err = parseGroupsConfig("joinstorm", []string{"-brokers", "x:1", "-leader-pid", "42"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.members != 500 || cfg.groups != 1 || cfg.window != 0 || cfg.target != 4*time.Second || cfg.leaderPID != 42 || cfg.label != "x:1" {
		t.Errorf("joinstorm defaults: %+v", cfg)
	}
	for _, args := range [][]string{
		{"-groups", "0"},
		{"-members", "5", "-groups", "10"},
		{"-members-per-conn", "0"},
		{"-members-per-conn", "2"},
		{"-heartbeats-per-conn", "0"},
		{"-window", "-1s"},
		{"extra"},
	} {
		if _, err := parseGroupsConfig("groups", args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestParseFailoverConfig(t *testing.T) {
	cfg, err := parseFailoverConfig([]string{"-pids", "1=10, 2=20,3=30", "-restart", "start {id}"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int{1: 10, 2: 20, 3: 30}; !maps.Equal(cfg.pids, want) || cfg.kills != 20 || cfg.partitions != 6 {
		t.Errorf("got %+v", cfg)
	}
	for _, args := range [][]string{
		{"-pids", "1=10"},                  // no -restart
		{"-pids", "1:10", "-restart", "x"}, // bad map
		{"-pids", "1=-4", "-restart", "x"}, // bad pid
		{"-pids", "1=4", "-restart", "x", "-kills", "0"},
	} {
		if _, err := parseFailoverConfig(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestSampleQuantiles(t *testing.T) {
	p50, p99, m := sampleQuantiles([]float64{5, 1, 4, 2, 3})
	if p50 != 3 || p99 != 5 || m != 5 {
		t.Errorf("got %v %v %v", p50, p99, m)
	}
	if p50, _, _ := sampleQuantiles(nil); p50 != -1 {
		t.Errorf("empty: %v", p50)
	}
}
