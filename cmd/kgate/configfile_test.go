package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kgate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFilePrecedence: a flag beats the environment, which beats the
// file, which beats the default; every setting the file names applies.
func TestConfigFilePrecedence(t *testing.T) {
	path := writeConfig(t, `
node-id: 4
data-dir: /var/lib/kgate
kafka-addr: 127.0.0.1:19092
log-level: warn
log-format: json
idle-timeout: 90s
fsync: false
join:
  - 10.0.0.1:9094
  - 10.0.0.2:9094
bootstrap-expect: 3
transactional-id-expiration: 30m
producer-id-expiration: 90m
`)
	c, err := parseConfig([]string{"--config", path, "--log-level", "error"},
		env("KGATE_LOG_LEVEL", "debug", "KGATE_NODE_ID", "5"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LogLevel != "error" {
		t.Errorf("log-level %q: the flag must beat the environment and the file", c.LogLevel)
	}
	if c.NodeID != 5 {
		t.Errorf("node-id %d: the environment must beat the file", c.NodeID)
	}
	if c.DataDir != "/var/lib/kgate" || c.KafkaAddr != "127.0.0.1:19092" || c.LogFormat != "json" ||
		c.IdleTimeout != 90*time.Second || c.Fsync || c.Join != "10.0.0.1:9094,10.0.0.2:9094" || c.BootstrapExpect != 3 ||
		c.TxnIDExpiration != 30*time.Minute || c.ProducerIDExpiry != 90*time.Minute {
		t.Errorf("file not applied: %+v", *c)
	}
	if c.AdminAddr != "127.0.0.1:9095" {
		t.Errorf("admin-addr %q: a setting the file leaves out keeps its default", c.AdminAddr)
	}

	// KGATE_CONFIG names the file when --config does not.
	c, err = parseConfig(nil, env("KGATE_CONFIG", path))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 4 || c.LogLevel != "warn" {
		t.Errorf("KGATE_CONFIG not read: node-id %d log-level %q", c.NodeID, c.LogLevel)
	}
	// --config beats KGATE_CONFIG.
	other := writeConfig(t, "node-id: 9\n")
	c, err = parseConfig([]string{"--config=" + other}, env("KGATE_CONFIG", path))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 9 {
		t.Errorf("node-id %d: --config must win over KGATE_CONFIG", c.NodeID)
	}
}

// TestConfigFileErrorsNameTheKey: an unknown key, a bad value, a repeated
// key or a file that is not a mapping stops start-up with a line naming it.
func TestConfigFileErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"node-id: 1\nkafka-adr: 127.0.0.1:9092\n", `unknown key "kafka-adr"`},
		{"node-id: seven\n", `invalid value "seven" for --node-id`},
		{"idle-timeout: 10\n", `invalid value "10" for --idle-timeout`},
		{"log-format: xml\n", `invalid value "xml" for --log-format`},
		{"fsync: maybe\n", `invalid value "maybe" for --fsync`},
		{"node-id: 1\nnode-id: 2\n", `key "node-id" set twice`},
		{"- node-id\n", "must be a mapping"},
		{"join: {a: b}\n", "invalid value for --join"},
		{"config: other.yaml\n", `unknown key "config"`},
		{"node-id: [1\n", "kgate.yaml"},
	} {
		path := writeConfig(t, tc.body)
		_, err := parseConfig([]string{"--config", path}, env())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("file %q: error %v, want one containing %q", tc.body, err, tc.want)
		}
	}
	if _, err := parseConfig([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, env()); err == nil ||
		!strings.Contains(err.Error(), "--config") {
		t.Errorf("missing file: %v", err)
	}
	// An empty file sets nothing.
	if _, err := parseConfig([]string{"--config", writeConfig(t, "")}, env()); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

// TestConfigAdvertise: listeners may bind every interface only with an
// address to advertise; the advertised addresses default to the listen ones.
func TestConfigAdvertise(t *testing.T) {
	c, err := parseConfig([]string{
		"--kafka-addr", "0.0.0.0:9092", "--advertise-kafka-addr", "10.0.0.1:9092",
		"--raft-addr", "0.0.0.0:9093", "--advertise-raft-addr", "kgate-0.kgate:9093",
		"--gossip-addr", "[::]:9094", "--advertise-gossip-addr", "10.0.0.1:9094",
	}, env())
	if err != nil {
		t.Fatal(err)
	}
	if c.AdvertiseRaftAddr != "kgate-0.kgate:9093" || c.RaftAddr != "0.0.0.0:9093" || c.AdvertiseGossipAddr != "10.0.0.1:9094" {
		t.Errorf("advertise not applied: %+v", *c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--raft-addr", "0.0.0.0:9093"}, "--raft-addr 0.0.0.0:9093 binds every interface: set --advertise-raft-addr"},
		{[]string{"--gossip-addr", ":9094"}, "set --advertise-gossip-addr"},
		{[]string{"--kafka-addr", "0.0.0.0:9092"}, "set --advertise-kafka-addr"},
		{[]string{"--advertise-raft-addr", "0.0.0.0:9093"}, `invalid value "0.0.0.0:9093" for --advertise-raft-addr`},
		{[]string{"--advertise-gossip-addr", "nohost"}, `invalid value "nohost" for --advertise-gossip-addr`},
	} {
		if _, err := parseConfig(tc.args, env()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
