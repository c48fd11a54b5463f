package main

import (
	"io"
	"slices"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-brokers", "a:1, b:2", "-partitions", "1,8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.brokers, []string{"a:1", "b:2"}) || !slices.Equal(cfg.partitions, []int{1, 8}) {
		t.Errorf("brokers %q partitions %v", cfg.brokers, cfg.partitions)
	}
	if cfg.label != "a:1" || cfg.records != 100000 || cfg.duration != 0 || !cfg.idempotent() || cfg.lingerSet {
		t.Errorf("unexpected defaults: %+v", cfg)
	}

	cfg, err = parseConfig([]string{"-duration", "3s", "-acks", "1", "-linger", "0s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.records != 0 || cfg.duration != 3*time.Second || cfg.idempotent() || !cfg.lingerSet {
		t.Errorf("unexpected: %+v", cfg)
	}

	cfg, err = parseConfig([]string{"-txn-records", "100"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.transactional() || cfg.batchRecords() != 100 {
		t.Errorf("-txn-records 100: transactional %v, batch %d", cfg.transactional(), cfg.batchRecords())
	}
	cfg, err = parseConfig([]string{"-flush-records", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.transactional() || cfg.batchRecords() != 50 {
		t.Errorf("-flush-records 50: transactional %v, batch %d", cfg.transactional(), cfg.batchRecords())
	}

	cfg, err = parseConfig([]string{"-server-pid", "11, 12,13", "-replication-factor", "3", "-json-file", "r.json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.serverPIDs, []int{11, 12, 13}) || cfg.replicationFactor != 3 || cfg.jsonFile != "r.json" {
		t.Errorf("-server-pid 11,12,13: %v; -replication-factor 3: %d; -json-file: %q", cfg.serverPIDs, cfg.replicationFactor, cfg.jsonFile)
	}
	for _, pids := range []string{"0", "", "0,0"} {
		if cfg, err := parseConfig([]string{"-server-pid", pids}, io.Discard); err == nil && cfg.serverPIDs != nil {
			t.Errorf("-server-pid %q: pids %v", pids, cfg.serverPIDs)
		} else if err != nil && pids != "" {
			t.Errorf("-server-pid %q: %v", pids, err)
		}
	}
	if cfg, err := parseConfig(nil, io.Discard); err != nil || cfg.serverPIDs != nil || cfg.replicationFactor != 1 {
		t.Errorf("defaults: pids %v, replication factor %d, %v", cfg.serverPIDs, cfg.replicationFactor, err)
	}

	for _, args := range [][]string{
		{"-txn-records", "100", "-flush-records", "100"},
		{"-txn-records", "-1"},
		{"-txn-records", "100", "-acks", "1"},
		{"-flush-records", "100", "-acks", "none"},
		{"-records", "10", "-duration", "1s"},
		{"-partitions", "0"},
		{"-partitions", "1,x"},
		{"-acks", "2"},
		{"-compression", "brotli"},
		{"-producers", "0"},
		{"-brokers", ","},
		{"-server-pid", "-1"},
		{"-server-pid", "1,x"},
		{"-replication-factor", "0"},
		{"-replication-factor", "-2"},
		{"-replication-factor", "40000"},
		{"extra"},
	} {
		if _, err := parseConfig(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
