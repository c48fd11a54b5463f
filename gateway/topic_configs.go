package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DescribeConfigs config types used in the table below.
const (
	configBoolean int8 = 1
	configString  int8 = 2
	configInt     int8 = 3
	configLong    int8 = 5
	configDouble  int8 = 6
	configList    int8 = 7
)

// topicConfig is one topic config kgate knows: its Kafka default, type and
// the values kgate accepts (CreateTopics, AlterConfigs, IncrementalAlterConfigs).
type topicConfig struct {
	def      string
	typ      int8
	validate func(string) error
}

// internal reports whether DescribeConfigs and CreateTopics list the config
// only where the topic sets it, as Kafka lists its internal configs.
func (tc topicConfig) internal() bool { return tc.def == "" && tc.typ == configInt } // internal.segment.bytes

// isList reports whether IncrementalAlterConfigs may APPEND to or SUBTRACT
// from the config (Kafka allows that for LIST types only).
func (tc topicConfig) isList() bool { return tc.typ == configList }

// canonical is a value as Kafka parses, stores and describes it: trimmed,
// a number or boolean in its plain form ("007" is 7, "TRUE" true), a
// list's items trimmed and joined by commas. A value that does not parse
// is only trimmed, for the validator to refuse.
func (tc topicConfig) canonical(v string) string {
	v = strings.TrimSpace(v)
	switch tc.typ {
	case configBoolean:
		if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
			return strings.ToLower(v)
		}
	case configInt, configLong:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case configDouble:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out := strconv.FormatFloat(f, 'f', -1, 64)
			if !strings.Contains(out, ".") {
				out += ".0" // as Java prints a double
			}
			return out
		}
	case configList:
		return strings.Join(splitList(v), ",")
	}
	return v
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

func floatRange(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < lo || f > hi {
			return fmt.Errorf("must be a number in [%g, %g]", lo, hi)
		}
		return nil
	}
}

// listOf accepts a comma-separated list of allowed items, the empty one
// included (Kafka 4.3 takes an empty cleanup.policy: no cleanup at all).
func listOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, it := range splitList(v) {
			if oneOf(allowed...)(it) != nil {
				return fmt.Errorf("%q is not one of %v", it, allowed)
			}
		}
		return nil
	}
}

// either accepts what any of its validators accepts.
func either(vs ...func(string) error) func(string) error {
	return func(v string) error {
		var first error
		for _, f := range vs {
			err := f(v)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		return first
	}
}

// throttledReplicas accepts Kafka's throttled replica lists: empty, "*",
// or partition:broker pairs.
func throttledReplicas(v string) error {
	items := splitList(v)
	if len(items) == 1 && items[0] == "*" {
		return nil
	}
	for _, it := range items {
		p, b, ok := strings.Cut(it, ":")
		_, perr := strconv.ParseUint(p, 10, 31)
		_, berr := strconv.ParseUint(b, 10, 31)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("%q: must be empty, * or partition:broker pairs", v)
		}
	}
	return nil
}

// splitList splits a LIST config value as Kafka does: on commas, items
// trimmed, empty items dropped.
func splitList(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

const maxInt64 = int64(^uint64(0) >> 1)

// topicConfigs lists the topic configs kgate accepts, with Kafka 4's
// defaults and value checks. retention.ms, retention.bytes and
// segment.bytes are enforced, the message.timestamp ones apply on produce;
// the rest are stored and reported so tools that set them keep working
// (kgate keeps batches as their producer compressed them, so the codec
// levels change nothing, and it has no remote storage to enable).
var topicConfigs = map[string]topicConfig{
	// cleanup.policy=compact is accepted and never compacts: a compact-only
	// topic keeps every record (retention.ms and retention.bytes apply with
	// "delete" only, as in Kafka), which reads back as a log whose cleaner
	// has not run yet. Kafka Streams creates its changelogs so.
	// An empty policy keeps every record too, as on Kafka 4.3.
	"cleanup.policy":                          {"delete", configList, listOf("delete", "compact")},
	"compression.gzip.level":                  {"-1", configInt, either(oneOf("-1"), intRange(1, 9))},
	"compression.lz4.level":                   {"9", configInt, intRange(1, 17)},
	"compression.type":                        {"producer", configString, oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
	"compression.zstd.level":                  {"3", configInt, intRange(-131072, 22)},
	"delete.retention.ms":                     {"86400000", configLong, intRange(0, maxInt64)},
	"file.delete.delay.ms":                    {"60000", configLong, intRange(0, maxInt64)},
	"flush.messages":                          {"9223372036854775807", configLong, intRange(1, maxInt64)},
	"flush.ms":                                {"9223372036854775807", configLong, intRange(0, maxInt64)},
	"follower.replication.throttled.replicas": {"", configList, throttledReplicas},
	"index.interval.bytes":                    {"4096", configInt, intRange(0, 1<<31-1)},
	"leader.replication.throttled.replicas":   {"", configList, throttledReplicas},
	"local.retention.bytes":                   {"-2", configLong, intRange(-2, maxInt64)},
	"local.retention.ms":                      {"-2", configLong, intRange(-2, maxInt64)},
	"max.compaction.lag.ms":                   {"9223372036854775807", configLong, intRange(1, maxInt64)},
	"max.decompressed.message.bytes":          {"2147483639", configInt, intRange(1, 2147483639)},
	"max.message.bytes":                       {"1048588", configInt, intRange(0, 1<<31-1)},
	// A record more than after.max.ms ahead of the node's clock, or more
	// than before.max.ms behind it, is INVALID_TIMESTAMP (Kafka 4's
	// defaults: an hour ahead, any age).
	"message.timestamp.after.max.ms":  {"3600000", configLong, intRange(0, maxInt64)},
	"message.timestamp.before.max.ms": {"9223372036854775807", configLong, intRange(0, maxInt64)},
	"message.timestamp.type":          {"CreateTime", configString, oneOf("CreateTime", "LogAppendTime")},
	"min.cleanable.dirty.ratio":       {"0.5", configDouble, floatRange(0, 1)},
	"min.compaction.lag.ms":           {"0", configLong, intRange(0, maxInt64)},
	"min.insync.replicas":             {"1", configInt, intRange(1, 1<<31-1)},
	"preallocate":                     {"false", configBoolean, oneOf("true", "false")},
	"remote.log.copy.disable":         {"false", configBoolean, oneOf("true", "false")},
	"remote.log.delete.on.disable":    {"false", configBoolean, oneOf("true", "false")},
	"remote.storage.enable":           {"false", configBoolean, oneOf("false")},
	"retention.bytes":                 {"-1", configLong, intRange(-maxInt64-1, maxInt64)}, // any negative: no bound
	"retention.ms":                    {"604800000", configLong, intRange(-1, maxInt64)},
	"segment.bytes":                   {"67108864", configInt, intRange(1<<20, 1<<31-1)},
	// Kafka 4's way to smaller segments (tests, tools): it overrides
	// segment.bytes and is listed only where set.
	"internal.segment.bytes":         {"", configInt, intRange(14, 1<<31-1)}, // no default: internal
	"segment.index.bytes":            {"10485760", configInt, intRange(4, 1<<31-1)},
	"segment.jitter.ms":              {"0", configLong, intRange(0, maxInt64)},
	"segment.ms":                     {"604800000", configLong, intRange(1, maxInt64)},
	"unclean.leader.election.enable": {"false", configBoolean, oneOf("true", "false")},
}

// checkTopicConfigs validates configs given at create or alter time: each
// key and value, in sorted order (the error names the first bad one), and
// what this backend can keep: append times (LogAppendTime) only where it
// stamps them. Valid values are rewritten in their canonical form, which is
// what is stored.
func (s *Server) checkTopicConfigs(cfg map[string]string) error {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := checkTopicConfig(k, cfg[k]); err != nil {
			return err
		}
		cfg[k] = topicConfigs[k].canonical(cfg[k])
	}
	if cfg["message.timestamp.type"] == "LogAppendTime" {
		if ab, ok := s.backend.(AppendTimeBackend); !ok || !ab.AppendTimes() {
			return errors.New("message.timestamp.type: LogAppendTime needs the embedded backend with every node running a kgate that stamps append times")
		}
	}
	return nil
}

// checkTopicConfig validates one key and value.
func checkTopicConfig(key, value string) error {
	tc, ok := topicConfigs[key]
	if !ok {
		return fmt.Errorf("unknown topic config %q", key)
	}
	if tc.validate != nil {
		if err := tc.validate(tc.canonical(value)); err != nil {
			return fmt.Errorf("invalid value %q for %s: %v", value, key, err)
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

// alterAnswer is a per-resource answer to AlterConfigs or
// IncrementalAlterConfigs; nil means success.
type alterAnswer struct {
	code int16
	msg  string
}

func failAlter(code *kerr.Error, format string, args ...any) *alterAnswer {
	return &alterAnswer{code: code.Code, msg: fmt.Sprintf(format, args...)}
}

// fill sets a response resource's error code and message.
func (a *alterAnswer) fill(code *int16, msg **string) {
	if a == nil || a.code == 0 {
		return
	}
	*code = a.code
	m := a.msg
	*msg = &m
}

// resourceKey identifies a config resource, to find repeats in one request.
type resourceKey struct {
	typ  int8
	name string
}

// repeatedResources returns the resources named more than once.
func repeatedResources(keys []resourceKey) map[resourceKey]bool {
	seen := make(map[resourceKey]int, len(keys))
	for _, k := range keys {
		seen[k]++
	}
	rep := map[resourceKey]bool{}
	for k, n := range seen {
		if n > 1 {
			rep[k] = true
		}
	}
	return rep
}

// checkAlterResource answers what every config change shares: repeats,
// resource types kgate does not alter and the topic's existence. It returns
// the topic when a TOPIC resource passed, otherwise the answer to give.
// configNames are the names the resource alters.
func (s *Server) checkAlterResource(typ int8, name string, repeated bool, configNames []string) (TopicInfo, *alterAnswer) {
	if repeated {
		return TopicInfo{}, failAlter(kerr.InvalidRequest, "resource %q (type %d) appears more than once in the request", name, typ)
	}
	seen := make(map[string]bool, len(configNames))
	for _, n := range configNames {
		if seen[n] {
			return TopicInfo{}, failAlter(kerr.InvalidRequest, "config %q appears more than once for resource %q", n, name)
		}
		seen[n] = true
	}
	switch typ {
	case resourceTopic:
		if name == "" {
			return TopicInfo{}, failAlter(kerr.InvalidRequest, "default topic resources are not allowed")
		}
		if !validTopicName(name) {
			return TopicInfo{}, failAlter(kerr.InvalidTopicException, "%q is not a valid topic name", name)
		}
		info, ok := s.backend.Topic(name)
		if !ok {
			return TopicInfo{}, failAlter(kerr.UnknownTopicOrPartition, "unknown topic %q", name)
		}
		return info, nil
	case resourceBroker:
		if id, err := strconv.Atoi(name); name != "" && (err != nil || int32(id) != s.cluster.Self().ID) {
			return TopicInfo{}, failAlter(kerr.InvalidRequest, "broker %q is not this node (%d)", name, s.cluster.Self().ID)
		}
		if len(configNames) == 0 {
			return TopicInfo{}, &alterAnswer{} // nothing to change: success
		}
		// As Kafka answers for configs that are not dynamically updatable.
		return TopicInfo{}, failAlter(kerr.InvalidRequest,
			"kgate broker configs are static (set by command-line flags) and cannot be updated dynamically: %s", strings.Join(configNames, ", "))
	default:
		return TopicInfo{}, failAlter(kerr.InvalidRequest, "kgate alters topic configs only (resource type %d)", typ)
	}
}

// alterTopicConfigs validates the new full set of a topic's dynamic configs
// and, unless validateOnly, has the backend store it.
func (s *Server) alterTopicConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) *alterAnswer {
	if err := s.checkTopicConfigs(configs); err != nil {
		return failAlter(kerr.InvalidConfig, "%v", err)
	}
	if validateOnly {
		return nil
	}
	if err := s.backend.AlterTopicConfigs(ctx, name, configs); err != nil {
		return &alterAnswer{code: ErrorCode(err), msg: err.Error()}
	}
	return nil
}

// topicLong is a topic's long config: its own value, else the default.
func topicLong(info TopicInfo, name string) int64 {
	if v, ok := info.Configs[name]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	n, _ := strconv.ParseInt(topicConfigs[name].def, 10, 64)
	return n
}
