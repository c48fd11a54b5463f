package gateway

import (
	"fmt"
	"sort"
	"strconv"
)

// topicConfig is one topic config kgate knows: its Kafka default and type
// (DescribeConfigs config types: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7 list).
type topicConfig struct {
	def      string
	typ      int8
	validate func(string) error
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %v", vals)
	}
}

const maxInt64 = int64(^uint64(0) >> 1)

// topicConfigs lists the topic configs kgate accepts. retention.ms,
// retention.bytes and segment.bytes are enforced; the rest are stored and
// reported so tools that set them keep working.
var topicConfigs = map[string]topicConfig{
	"cleanup.policy":                 {"delete", 7, oneOf("delete")},
	"compression.type":               {"producer", 2, oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
	"delete.retention.ms":            {"86400000", 5, intRange(0, maxInt64)},
	"file.delete.delay.ms":           {"60000", 5, intRange(0, maxInt64)},
	"flush.messages":                 {"9223372036854775807", 5, intRange(1, maxInt64)},
	"flush.ms":                       {"9223372036854775807", 5, intRange(0, maxInt64)},
	"index.interval.bytes":           {"4096", 3, intRange(0, 1<<31-1)},
	"max.compaction.lag.ms":          {"9223372036854775807", 5, intRange(1, maxInt64)},
	"max.message.bytes":              {"1048588", 3, intRange(0, 1<<31-1)},
	"message.timestamp.type":         {"CreateTime", 2, oneOf("CreateTime")},
	"min.cleanable.dirty.ratio":      {"0.5", 6, nil},
	"min.compaction.lag.ms":          {"0", 5, intRange(0, maxInt64)},
	"min.insync.replicas":            {"1", 3, intRange(1, 1<<31-1)},
	"preallocate":                    {"false", 1, oneOf("true", "false")},
	"retention.bytes":                {"-1", 5, intRange(-1, maxInt64)},
	"retention.ms":                   {"604800000", 5, intRange(-1, maxInt64)},
	"segment.bytes":                  {"67108864", 3, intRange(14, 1<<31-1)},
	"segment.index.bytes":            {"10485760", 3, intRange(4, 1<<31-1)},
	"segment.jitter.ms":              {"0", 5, intRange(0, maxInt64)},
	"segment.ms":                     {"604800000", 5, intRange(1, maxInt64)},
	"unclean.leader.election.enable": {"false", 1, oneOf("true", "false")},
}

// checkTopicConfigs validates configs given at create or alter time.
func checkTopicConfigs(cfg map[string]string) error {
	for k, v := range cfg {
		tc, ok := topicConfigs[k]
		if !ok {
			return fmt.Errorf("unknown topic config %q", k)
		}
		if tc.validate != nil {
			if err := tc.validate(v); err != nil {
				return fmt.Errorf("invalid value %q for %s: %v", v, k, err)
			}
		}
	}
	return nil
}

func topicConfigNames() []string {
	names := make([]string, 0, len(topicConfigs))
	for k := range topicConfigs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
