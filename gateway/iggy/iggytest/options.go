package iggytest

import (
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kgate/kgate/gateway/iggy"
)

// TLV value kinds (§4).
const (
	kindString uint8 = 2
	kindBool   uint8 = 3
	kindUint8  uint8 = 9
	kindUint32 uint8 = 11
	kindUint64 uint8 = 12
)

const (
	maxOptionEntries = 1024
	maxOptionsBytes  = 100_000
)

// parseOptions decodes a request options block (§4): TLV pairs to the end
// of the body, String keys, unique. Structural errors give 4 InvalidFormat,
// a block over the limits 4043.
func parseOptions(b []byte) ([]option, uint32) {
	if len(b) > maxOptionsBytes {
		return nil, codeOptionsBlockTooLarge
	}
	r := breader{b: b}
	var out []option
	seen := map[string]bool{}
	tlv := func() (uint8, []byte) {
		kind := r.u8()
		n := r.u32()
		if r.code == 0 && (kind < 1 || kind > 15 || n < 1 || n > 255) {
			r.fail(codeInvalidFormat)
		}
		return kind, r.take(int(min(n, 256)))
	}
	for r.code == 0 && r.remaining() > 0 {
		kk, key := tlv()
		vk, val := tlv()
		if r.code != 0 {
			return nil, codeInvalidFormat
		}
		if kk != kindString || !utf8.Valid(key) || seen[string(key)] {
			return nil, codeInvalidFormat
		}
		seen[string(key)] = true
		out = append(out, option{key: string(key), kind: vk, val: append([]byte(nil), val...)})
		if len(out) > maxOptionEntries {
			return nil, codeOptionsBlockTooLarge
		}
	}
	return out, 0
}

func encodeOptions(w *bwriter, opts []option) {
	lenAt := len(w.b)
	w.u32(0)
	for _, o := range opts {
		w.u8(kindString)
		w.u32(uint32(len(o.key)))
		w.bytes([]byte(o.key))
		w.u8(o.kind)
		w.u32(uint32(len(o.val)))
		w.bytes(o.val)
	}
	binary.LittleEndian.PutUint32(w.b[lenAt:], uint32(len(w.b)-lenAt-4))
}

// topicSettings are the settings a CreateTopic / UpdateTopic request sets.
type topicSettings struct {
	compression, expiry, maxSize       uint64
	hasCompression, hasExpiry, hasSize bool
	segmentSize                        uint64
}

// topicOptions interprets Current topic options (§5.3). update restricts
// the keys to the three UpdateTopic accepts.
func topicOptions(opts []option, update bool) (topicSettings, uint32) {
	ts := topicSettings{segmentSize: defaultSegment}
	for _, o := range opts {
		var ok bool
		switch o.key {
		case "compression_algorithm":
			ts.hasCompression = true
			switch {
			case o.kind == kindUint8 && len(o.val) == 1 && (o.val[0] == 1 || o.val[0] == 2):
				ts.compression, ok = uint64(o.val[0]), true
			case o.kind == kindString && strings.EqualFold(string(o.val), "none"):
				ts.compression, ok = 1, true
			case o.kind == kindString && strings.EqualFold(string(o.val), "gzip"):
				ts.compression, ok = 2, true
			}
		case "message_expiry":
			ts.hasExpiry = true
			ts.expiry, ok = u64Option(o, parseDuration)
		case "max_topic_size":
			ts.hasSize = true
			ts.maxSize, ok = u64Option(o, parseSize)
		case "segment_size", "size_of_messages_required_to_save":
			if update {
				return ts, codeUnsupportedOptionKey
			}
			var v uint64
			v, ok = u64Option(o, parseSize)
			if o.key == "segment_size" {
				ok = ok && v%512 == 0 && v >= 1<<20 && v <= 1<<30
				ts.segmentSize = v
			}
		case "enforce_fsync", "preallocate_segments":
			if update {
				return ts, codeUnsupportedOptionKey
			}
			ok = (o.kind == kindBool && len(o.val) == 1 && o.val[0] <= 1) ||
				(o.kind == kindString && (strings.EqualFold(string(o.val), "true") || strings.EqualFold(string(o.val), "false")))
		case "messages_required_to_save":
			if update {
				return ts, codeUnsupportedOptionKey
			}
			ok = o.kind == kindUint32 && len(o.val) == 4
		case "durability", "consumer_offset_durability":
			// Released 0.11.0 SDKs send both on every CreateTopic, as strings.
			if update {
				return ts, codeUnsupportedOptionKey
			}
			ok = o.kind == kindString && (strings.EqualFold(string(o.val), "replicated") || strings.EqualFold(string(o.val), "persisted"))
		default:
			return ts, codeUnsupportedOptionKey
		}
		if !ok {
			return ts, codeInvalidOptionValue
		}
	}
	return ts, 0
}

func u64Option(o option, parse func(string) (uint64, bool)) (uint64, bool) {
	switch o.kind {
	case kindUint64:
		if len(o.val) == 8 {
			return binary.LittleEndian.Uint64(o.val), true
		}
	case kindString:
		return parse(string(o.val))
	}
	return 0, false
}

// parseDuration parses humantime-like strings ("7 days", "1h 30m",
// "none") into µs.
func parseDuration(s string) (uint64, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "none", "never", "unlimited":
		return never, true
	}
	units := map[string]uint64{
		"us": 1, "µs": 1, "usec": 1, "micros": 1, "microsecond": 1, "microseconds": 1,
		"ms": 1e3, "msec": 1e3, "millis": 1e3, "millisecond": 1e3, "milliseconds": 1e3,
		"s": 1e6, "sec": 1e6, "secs": 1e6, "second": 1e6, "seconds": 1e6,
		"m": 60e6, "min": 60e6, "mins": 60e6, "minute": 60e6, "minutes": 60e6,
		"h": 3600e6, "hr": 3600e6, "hrs": 3600e6, "hour": 3600e6, "hours": 3600e6,
		"d": 86400e6, "day": 86400e6, "days": 86400e6,
		"w": 7 * 86400e6, "week": 7 * 86400e6, "weeks": 7 * 86400e6,
	}
	return parseAmounts(s, units)
}

// parseSize parses "1 GiB", "512 MB", "unlimited" into bytes.
func parseSize(s string) (uint64, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "none", "unlimited":
		return never, true
	}
	units := map[string]uint64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}
	return parseAmounts(s, units)
}

// parseAmounts sums "<number><unit>" groups, spaces optional.
func parseAmounts(s string, units map[string]uint64) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var total uint64
	for s != "" {
		s = strings.TrimLeft(s, " ")
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(s[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		s = strings.TrimLeft(s[i:], " ")
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') && s[j] != ' ' {
			j++
		}
		mul, ok := units[s[:j]]
		if !ok {
			return 0, false
		}
		s = s[j:]
		if n > never/mul || total > never-n*mul {
			return 0, false
		}
		total += n * mul
	}
	return total, true
}

// ---- response structures (§5.1, §13.5) ----

func writeStream(w *bwriter, d iggy.Dialect, s *stream) {
	size, count := s.stats()
	w.u32(s.id)
	w.u64(s.createdAt)
	w.u32(uint32(len(s.topics)))
	w.u64(size)
	w.u64(count)
	w.name(s.name)
	if d == iggy.Current {
		w.u32(0) // no stream options
	}
}

func writeTopic(w *bwriter, d iggy.Dialect, t *topic) {
	size, count := t.stats()
	w.u32(t.id)
	w.u64(t.createdAt)
	w.u32(uint32(len(t.partitions)))
	w.u64(t.expiry)
	w.u8(t.compression)
	w.u64(t.maxSize)
	if d == iggy.Legacy {
		w.u8(t.replication)
	}
	w.u64(size)
	w.u64(count)
	w.name(t.name)
	if d == iggy.Current {
		encodeOptions(w, t.options)
		w.u32(0) // derived options: none
	}
}

func writePartition(w *bwriter, p *partition) {
	w.u32(p.id)
	w.u64(p.createdAt)
	w.u32(1) // segments_count
	w.u64(p.currentOffset())
	w.u64(p.sizeBytes)
	w.u64(uint64(len(p.msgs)))
}

func writeTopicDetails(w *bwriter, d iggy.Dialect, t *topic) {
	writeTopic(w, d, t)
	for _, p := range t.partitions {
		writePartition(w, p)
	}
}

// mergeOptions replaces or appends the explicit options of an update.
func mergeOptions(old, upd []option) []option {
	out := append([]option(nil), old...)
	for _, u := range upd {
		replaced := false
		for i := range out {
			if out[i].key == u.key {
				out[i], replaced = u, true
			}
		}
		if !replaced {
			out = append(out, u)
		}
	}
	return out
}
