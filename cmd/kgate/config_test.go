package main

import (
	"errors"
	"flag"
	"maps"
	"math"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// env returns a lookup over a fixed environment.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// quietStderr silences the flag package's usage output for one test.
func quietStderr(t *testing.T) {
	t.Helper()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = devNull
	t.Cleanup(func() {
		os.Stderr = old
		devNull.Close()
	})
}

func TestConnsPerIPOverrides(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := parseConfig([]string{"--max-connections-per-ip", "0", "--max-connections-per-ip-overrides", "127.0.0.1:5, [::1]:7"}, none)
	if err != nil {
		t.Fatal(err)
	}
	got, err := resolveConnsPerIPOverrides(t.Context(), cfg.ConnsPerIPOverrides)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]int{netip.MustParseAddr("127.0.0.1"): 5, netip.MustParseAddr("::1"): 7}
	if !maps.Equal(got, want) {
		t.Fatalf("overrides %v, want %v", got, want)
	}
	// A host name stands for the addresses it resolves to now.
	got, err = resolveConnsPerIPOverrides(t.Context(), "localhost:2")
	if err != nil {
		t.Fatal(err)
	}
	if got[netip.MustParseAddr("127.0.0.1")] != 2 {
		t.Fatalf("localhost:2 gave %v", got)
	}
	if connsPerIP(cfg.MaxConnsPerIP) != -1 || connsPerIP(math.MaxInt32) != 0 || connsPerIP(4) != 4 {
		t.Fatalf("gateway bounds for 0, 2^31-1, 4: %d %d %d", connsPerIP(0), connsPerIP(math.MaxInt32), connsPerIP(4))
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, env())
	if err != nil {
		t.Fatal(err)
	}
	// The documented defaults (README "Configuration").
	want := map[string]any{
		"NodeID":              1,
		"DataDir":             "kgate-data",
		"KafkaAddr":           "127.0.0.1:9092",
		"AdvertiseKafkaAddr":  "127.0.0.1:9092", // defaults to --kafka-addr
		"RaftAddr":            "127.0.0.1:9093",
		"GossipAddr":          "127.0.0.1:9094",
		"AdminAddr":           "127.0.0.1:9095",
		"Join":                "",
		"BootstrapExpect":     1,
		"Backend":             "embedded",
		"AutoCreateTopics":    true,
		"DefaultPartitions":   1,
		"MaxFrameBytes":       104857600,
		"MaxMessageBytes":     1048588,
		"MaxConnections":      10000,
		"MaxConnsPerIP":       2147483647,
		"ConnsPerIPOverrides": "",
		"IdleTimeout":         10 * time.Minute,
		"RequestReadTimeout":  30 * time.Second,
		"SegmentBytes":        int64(64 << 20),
		"RetentionCheck":      30 * time.Second,
		"RaftHeartbeat":       500 * time.Millisecond,
		"RaftElection":        500 * time.Millisecond,
		"RaftSnapshotEvery":   uint64(16384),
		"RaftDigestEvery":     uint64(0),
		"RaftTrailingLogs":    uint64(1024),
		"RaftSegmentBytes":    int64(64 << 20),
		"PartitionStorage":    "raft-log",
		"RaftRetainedBytes":   int64(1 << 30),
		"LogLevel":            "info",
		"LogFormat":           "text",
		"AdvertiseRaftAddr":   "127.0.0.1:9093", // defaults to --raft-addr
		"AdvertiseGossipAddr": "127.0.0.1:9094",
		"ConfigFile":          "",
		"Fsync":               true,
		"IggyAddr":            "127.0.0.1:8090",
		"IggyUser":            "iggy",
		"IggyPassword":        "iggy",
		"IggyStream":          "kafka",
		"IggyProtocol":        "auto",
		"IggyConnections":     8,
		"IggyPollInterval":    100 * time.Millisecond,
		"IggyTimeout":         5 * time.Second,
		"IggySaveEvery":       0,
		"MaxTxnTimeout":       15 * time.Minute,
		"TxnAbortCheck":       10 * time.Second,
		"TxnIDExpiration":     7 * 24 * time.Hour,
		"ProducerIDExpiry":    24 * time.Hour,
	}
	v := reflect.ValueOf(*c)
	for name, w := range want {
		f := v.FieldByName(name)
		if !f.IsValid() {
			t.Errorf("no setting %s", name)
			continue
		}
		if got := f.Interface(); got != w {
			t.Errorf("%s: default %v (%T), want %v (%T)", name, got, got, w, w)
		}
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	c, err := parseConfig(nil, env(
		"KGATE_NODE_ID", "7",
		"KGATE_DATA_DIR", "/var/lib/kgate",
		"KGATE_KAFKA_ADDR", "0.0.0.0:19092",
		"KGATE_ADVERTISE_KAFKA_ADDR", "kgate-7.example:19092",
		"KGATE_RAFT_ADDR", "10.0.0.7:9093",
		"KGATE_JOIN", "10.0.0.1:9094, 10.0.0.2:9094",
		"KGATE_BOOTSTRAP_EXPECT", "3",
		"KGATE_AUTO_CREATE_TOPICS", "false",
		"KGATE_DEFAULT_PARTITIONS", "6",
		"KGATE_IDLE_TIMEOUT", "90s",
		"KGATE_SEGMENT_BYTES", "1048576",
		"KGATE_RAFT_SNAPSHOT_THRESHOLD", "100",
		"KGATE_LOG_LEVEL", "debug",
		"KGATE_FSYNC", "false",
		"KGATE_TRANSACTIONAL_ID_EXPIRATION", "36h",
		"KGATE_PRODUCER_ID_EXPIRATION", "2h",
		"NODE_ID", "9", // not ours: no prefix
		"kgate_node_id", "9", // not ours: wrong case
	))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 7 || c.DataDir != "/var/lib/kgate" || c.KafkaAddr != "0.0.0.0:19092" ||
		c.AdvertiseKafkaAddr != "kgate-7.example:19092" || c.RaftAddr != "10.0.0.7:9093" ||
		c.Join != "10.0.0.1:9094, 10.0.0.2:9094" || c.BootstrapExpect != 3 || c.AutoCreateTopics ||
		c.DefaultPartitions != 6 || c.IdleTimeout != 90*time.Second || c.SegmentBytes != 1<<20 ||
		c.RaftSnapshotEvery != 100 || c.LogLevel != "debug" || c.Fsync || c.TxnIDExpiration != 36*time.Hour ||
		c.ProducerIDExpiry != 2*time.Hour {
		t.Fatalf("environment not applied: %+v", *c)
	}
	// Untouched settings keep their defaults.
	if c.GossipAddr != "127.0.0.1:9094" || c.MaxFrameBytes != 104857600 {
		t.Fatalf("defaults lost: %+v", *c)
	}
}

func TestConfigFlagsBeatEnvironment(t *testing.T) {
	c, err := parseConfig(
		[]string{"--node-id", "3", "--log-level=warn", "--auto-create-topics=true", "-kafka-addr", "127.0.0.1:29092"},
		env("KGATE_NODE_ID", "7", "KGATE_LOG_LEVEL", "debug", "KGATE_AUTO_CREATE_TOPICS", "false",
			"KGATE_KAFKA_ADDR", "127.0.0.1:19092", "KGATE_DATA_DIR", "/env/dir"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 3 || c.LogLevel != "warn" || !c.AutoCreateTopics || c.KafkaAddr != "127.0.0.1:29092" {
		t.Fatalf("flags did not win: %+v", *c)
	}
	if c.DataDir != "/env/dir" {
		t.Fatalf("environment for an unset flag lost: data dir %q", c.DataDir)
	}
	if c.AdvertiseKafkaAddr != "127.0.0.1:29092" {
		t.Fatalf("advertised address %q, want the --kafka-addr flag's", c.AdvertiseKafkaAddr)
	}
}

func TestConfigInvalidValuesNameTheFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		flag string // the error must contain it
	}{
		{"node id 0", []string{"--node-id", "0"}, nil, "--node-id"},
		{"negative node id", []string{"--node-id=-4"}, nil, "--node-id"},
		{"node id too large", []string{"--node-id", "2147483648"}, nil, "--node-id"},
		{"empty data dir", []string{"--data-dir", ""}, nil, "--data-dir"},
		{"kafka addr without port", []string{"--kafka-addr", "localhost"}, nil, "--kafka-addr"},
		{"kafka addr bad port", []string{"--kafka-addr", "127.0.0.1:99999"}, nil, "--kafka-addr"},
		{"raft addr no port", []string{"--raft-addr", "127.0.0.1:"}, nil, "--raft-addr"},
		{"gossip addr", []string{"--gossip-addr", "nope"}, nil, "--gossip-addr"},
		{"admin addr", []string{"--admin-addr", "1.2.3.4:x"}, nil, "--admin-addr"},
		{"advertise addr", []string{"--advertise-kafka-addr", "host"}, nil, "--advertise-kafka-addr"},
		{"join", []string{"--join", "10.0.0.1:9094,10.0.0.2"}, nil, "--join"},
		{"backend", []string{"--backend=foo"}, nil, "--backend"},
		{"bootstrap expect 0", []string{"--bootstrap-expect", "0"}, nil, "--bootstrap-expect"},
		{"default partitions", []string{"--default-partitions", "0"}, nil, "--default-partitions"},
		{"max frame bytes too small", []string{"--max-frame-bytes", "100"}, nil, "--max-frame-bytes"},
		{"max message over frame", []string{"--max-frame-bytes", "2048", "--max-message-bytes", "4096"}, nil, "--max-message-bytes"},
		{"max connections", []string{"--max-connections", "0"}, nil, "--max-connections"},
		{"max connections per ip", []string{"--max-connections-per-ip", "-1"}, nil, "--max-connections-per-ip"},
		{"max connections per ip 0 alone", []string{"--max-connections-per-ip", "0"}, nil, "--max-connections-per-ip"},
		{"per ip overrides", []string{"--max-connections-per-ip-overrides", "127.0.0.1"}, nil, "--max-connections-per-ip-overrides"},
		{"per ip overrides count", []string{"--max-connections-per-ip-overrides", "h:-2"}, nil, "--max-connections-per-ip-overrides"},
		{"idle timeout", []string{"--idle-timeout", "0s"}, nil, "--idle-timeout"},
		{"request read timeout", []string{"--request-read-timeout", "-1s"}, nil, "--request-read-timeout"},
		{"segment bytes", []string{"--segment-bytes", "10"}, nil, "--segment-bytes"},
		{"retention interval", []string{"--retention-check-interval", "-1s"}, nil, "--retention-check-interval"},
		{"raft heartbeat", []string{"--raft-heartbeat-timeout", "1ms"}, nil, "--raft-heartbeat-timeout"},
		{"raft election", []string{"--raft-election-timeout", "1ms"}, nil, "--raft-election-timeout"},
		{"raft election below heartbeat", []string{"--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "1s"}, nil, "--raft-election-timeout"},
		{"raft snapshot threshold", []string{"--raft-snapshot-threshold", "0"}, nil, "--raft-snapshot-threshold"},
		{"raft log segment bytes", []string{"--raft-log-segment-bytes", "100"}, nil, "--raft-log-segment-bytes"},
		{"raft retained bytes", []string{"--raft-retained-bytes", "0"}, nil, "--raft-retained-bytes"},
		{"log level", []string{"--log-level", "verbose"}, nil, "--log-level"},
		{"max transaction timeout", []string{"--max-transaction-timeout", "0s"}, nil, "--max-transaction-timeout"},
		{"transactional id expiration 0", []string{"--transactional-id-expiration", "0s"}, nil, "--transactional-id-expiration"},
		{"negative transactional id expiration", []string{"--transactional-id-expiration=-1h"}, nil, "--transactional-id-expiration"},
		{"producer id expiration 0", []string{"--producer-id-expiration", "0s"}, nil, "--producer-id-expiration"},
		{"transactional id expiration from env", nil, []string{"KGATE_TRANSACTIONAL_ID_EXPIRATION", "7"}, "--transactional-id-expiration"},
		{"bad env number", nil, []string{"KGATE_NODE_ID", "one"}, "--node-id"},
		{"bad env duration", nil, []string{"KGATE_IDLE_TIMEOUT", "10"}, "--idle-timeout"},
		{"bad env bool", nil, []string{"KGATE_AUTO_CREATE_TOPICS", "maybe"}, "--auto-create-topics"},
		{"env value invalid after parsing", nil, []string{"KGATE_BACKEND", "kafka"}, "--backend"},
		{"iggy addr", []string{"--backend", "iggy", "--iggy-addr", "iggy"}, nil, "--iggy-addr"},
		{"iggy user", []string{"--backend", "iggy", "--iggy-user", "ab"}, nil, "--iggy-user"},
		{"iggy password", []string{"--backend", "iggy", "--iggy-password", ""}, nil, "--iggy-password"},
		{"iggy stream", []string{"--backend", "iggy", "--iggy-stream", ""}, nil, "--iggy-stream"},
		{"iggy protocol", []string{"--backend", "iggy", "--iggy-protocol", "0.9"}, nil, "--iggy-protocol"},
		{"iggy connections", []string{"--backend", "iggy", "--iggy-connections", "0"}, nil, "--iggy-connections"},
		{"iggy poll interval", []string{"--backend", "iggy", "--iggy-poll-interval", "0s"}, nil, "--iggy-poll-interval"},
		{"iggy timeout", []string{"--backend", "iggy", "--iggy-timeout", "1ms"}, nil, "--iggy-timeout"},
		{"iggy messages required to save", []string{"--backend", "iggy", "--iggy-messages-required-to-save", "-1"}, nil, "--iggy-messages-required-to-save"},
		{"iggy tls ca missing", []string{"--backend", "iggy", "--iggy-tls-ca", "/no/such/ca.pem"}, nil, "--iggy-tls-ca"},
		{"iggy topic map missing", []string{"--backend", "iggy", "--iggy-topic-map", "/no/such/map.json"}, nil, "--iggy-topic-map"},
		{"iggy from env", nil, []string{"KGATE_BACKEND", "iggy", "KGATE_IGGY_PROTOCOL", "new"}, "--iggy-protocol"},
		{"env names its variable", nil, []string{"KGATE_MAX_FRAME_BYTES", "lots"}, "KGATE_MAX_FRAME_BYTES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, env(tc.env...))
			if err == nil {
				t.Fatalf("accepted %v %v", tc.args, tc.env)
			}
			if !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("error %q does not name %s", err, tc.flag)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestConfigUnparsableFlag(t *testing.T) {
	quietStderr(t)
	for _, args := range [][]string{{"--node-id", "abc"}, {"--no-such-flag"}, {"--idle-timeout", "soon"}} {
		_, err := parseConfig(args, env())
		if err == nil {
			t.Errorf("%v accepted", args)
			continue
		}
		if name := strings.TrimLeft(args[0], "-"); !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %q does not name the flag", args, err)
		}
	}
	if _, err := parseConfig([]string{"serve-extra"}, env()); err == nil || !strings.Contains(err.Error(), "serve-extra") {
		t.Errorf("stray argument: %v", err)
	}
	if _, err := parseConfig([]string{"-h"}, env()); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}
