package iggybackend

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
)

// TopicMap is the --iggy-topic-map file: per Kafka topic, where it lives
// in Iggy and how a topic kgate creates is configured.
//
//	{"topics": {"orders": {"stream": "shop", "topic": "orders-v2",
//	  "compression": "gzip", "message_expiry": "168h", "max_topic_size": 10737418240}}}
type TopicMap struct {
	Topics map[string]TopicOverride `json:"topics"`
}

// TopicOverride is one topic's entry; every field is optional.
type TopicOverride struct {
	Stream string `json:"stream,omitempty"` // default: --iggy-stream
	Topic  string `json:"topic,omitempty"`  // Iggy topic name; default: the Kafka name
	// Compression of a created topic: "none" or "gzip".
	Compression string `json:"compression,omitempty"`
	// MessageExpiry of a created topic, a Go duration ("168h"); used when
	// CreateTopics gives no retention.ms.
	MessageExpiry string `json:"message_expiry,omitempty"`
	// MaxTopicSize of a created topic in bytes (0: Iggy's default).
	MaxTopicSize uint64 `json:"max_topic_size,omitempty"`

	expiry time.Duration
	comp   iggy.Compression
}

// LoadTopicMap reads and checks a mapping file.
func LoadTopicMap(path string) (TopicMap, error) {
	var m TopicMap
	raw, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, m.check()
}

func (m *TopicMap) check() error {
	targets := map[[2]string]string{}
	for name, o := range m.Topics {
		if !kafkaName.MatchString(name) {
			return fmt.Errorf("topic map: %q is not a valid Kafka topic name", name)
		}
		if len(o.Stream) > 255 || len(o.Topic) > 255 {
			return fmt.Errorf("topic map: %q: Iggy names are at most 255 bytes", name)
		}
		switch o.Compression {
		case "", "none":
			o.comp = iggy.CompressionNone
		case "gzip":
			o.comp = iggy.CompressionGzip
		default:
			return fmt.Errorf("topic map: %q: compression must be none or gzip, not %q", name, o.Compression)
		}
		if o.MessageExpiry != "" {
			d, err := time.ParseDuration(o.MessageExpiry)
			if err != nil || d <= 0 {
				return fmt.Errorf("topic map: %q: message_expiry %q is not a positive duration", name, o.MessageExpiry)
			}
			o.expiry = d
		}
		key := [2]string{o.Stream, o.topicOr(name)}
		if other, dup := targets[key]; dup {
			return fmt.Errorf("topic map: %q and %q map to the same Iggy topic", name, other)
		}
		targets[key] = name
		m.Topics[name] = o
	}
	return nil
}

func (o TopicOverride) streamOr(def string) string {
	if o.Stream != "" {
		return o.Stream
	}
	return def
}

func (o TopicOverride) topicOr(kafka string) string {
	if o.Topic != "" {
		return o.Topic
	}
	return kafka
}

// where gives the Iggy stream and topic of a Kafka topic.
func (m TopicMap) where(defStream, kafka string) (stream, topic string) {
	o := m.Topics[kafka]
	return o.streamOr(defStream), o.topicOr(kafka)
}

// kafkaName gives the Kafka name of an Iggy topic, false when the map
// sends that Kafka name elsewhere (the Iggy topic is then hidden).
func (m TopicMap) kafkaName(stream, iggyTopic string) (string, bool) {
	for name, o := range m.Topics {
		if o.streamOr(stream) == stream && o.topicOr(name) == iggyTopic {
			return name, true
		}
	}
	if o, ok := m.Topics[iggyTopic]; ok && (o.streamOr(stream) != stream || o.topicOr(iggyTopic) != iggyTopic) {
		return "", false
	}
	return iggyTopic, true
}

// topicConfig is the Iggy configuration of a new topic.
func (m TopicMap) topicConfig(kafka, iggyName string, partitions int32, retentionMs int64, hasRetention bool) iggy.TopicConfig {
	o := m.Topics[kafka]
	c := iggy.TopicConfig{Name: iggyName, PartitionsCount: uint32(partitions), Compression: o.comp,
		MaxTopicSize: o.MaxTopicSize, ReplicationFactor: 1}
	if c.Compression == 0 {
		c.Compression = iggy.CompressionNone
	}
	switch {
	case hasRetention:
		c.MessageExpiry = expiryMicros(retentionMs)
	case o.expiry > 0:
		c.MessageExpiry = uint64(o.expiry.Microseconds())
	}
	return c
}

// expiryMicros maps retention.ms to an Iggy message expiry: -1 is never.
func expiryMicros(ms int64) uint64 {
	if ms < 0 || ms > math.MaxInt64/1000 {
		return math.MaxUint64
	}
	return uint64(ms) * 1000
}
