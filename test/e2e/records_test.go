package e2e

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The deterministic record convention shared by every client program (see
// test/clients/README.md). Record i is:
//
//	key       "key-<i>"
//	value     "value-<i>-" repeated and cut to 10 + (i*37)%491 bytes (10..500)
//	headers   [("h1", "v<i>"), ("h2", "")]
//	timestamp 1700000000000 + i ms (CreateTime)
//	partition i % 3
const (
	numPartitions   = 3
	totalRecords    = 10000
	baseTimestampMs = int64(1700000000000)

	// kcat can set neither per-record headers nor timestamps: each kcat
	// producer run sends one group of kcatHeaderGroup consecutive indexes of
	// one partition with the fixed headers h1=v<first index of the group>,
	// h2= and a timestamp chosen by librdkafka.
	kcatHeaderGroup = 100
)

type header struct{ Key, Value string }

// wantRecord is what record i must look like when read back.
type wantRecord struct {
	Index     int
	Partition int32
	Key       string
	Value     string
	Headers   []header
	// Timestamp in ms; 0 means "any create time within the test's window"
	// (for clients that cannot set timestamps).
	Timestamp int64
}

// gotRecord is a record as read back by some client.
type gotRecord struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []header
	Timestamp int64 // ms
}

func recordKey(i int) string { return "key-" + strconv.Itoa(i) }

func recordValueLen(i int) int { return 10 + (i*37)%491 }

func recordValue(i int) string {
	unit := "value-" + strconv.Itoa(i) + "-"
	n := recordValueLen(i)
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// genRecord is the standard convention.
func genRecord(i int) wantRecord {
	return wantRecord{
		Index:     i,
		Partition: int32(i % numPartitions),
		Key:       recordKey(i),
		Value:     recordValue(i),
		Headers:   []header{{"h1", "v" + strconv.Itoa(i)}, {"h2", ""}},
		Timestamp: baseTimestampMs + int64(i),
	}
}

// kcatRecord is the convention as far as kcat can follow it.
func kcatRecord(i int) wantRecord {
	w := genRecord(i)
	w.Headers[0].Value = "v" + strconv.Itoa(i-i%kcatHeaderGroup)
	w.Timestamp = 0
	return w
}

// checker verifies records of partitions 0..2 read from offset 0 against
// the expected records from..to-1: partition p must hold exactly the indexes
// i in [from, to) with i%3 == p, in increasing order, at offsets 0, 1, 2, ...
type checker struct {
	want         func(int) wantRecord
	from, to     int
	tsMin, tsMax int64 // window for wantRecord.Timestamp == 0
	got          [numPartitions]int
}

func newChecker(want func(int) wantRecord, from, to int, window time.Time) *checker {
	return &checker{
		want:  want,
		from:  from,
		to:    to,
		tsMin: window.Add(-time.Minute).UnixMilli(),
		tsMax: time.Now().Add(time.Hour).UnixMilli(),
	}
}

// firstIndex is the first record index of partition p in [from, to).
func (c *checker) firstIndex(p int) int {
	i := c.from
	for i%numPartitions != p {
		i++
	}
	return i
}

// expected is the number of records partition p must hold.
func (c *checker) expected(p int) int {
	i := c.firstIndex(p)
	if i >= c.to {
		return 0
	}
	return (c.to-1-i)/numPartitions + 1
}

func (c *checker) complete() bool {
	for p := range numPartitions {
		if c.got[p] < c.expected(p) {
			return false
		}
	}
	return true
}

func (c *checker) progress() string {
	parts := make([]string, numPartitions)
	for p := range numPartitions {
		parts[p] = fmt.Sprintf("p%d %d/%d", p, c.got[p], c.expected(p))
	}
	return strings.Join(parts, ", ")
}

func (c *checker) add(r gotRecord) error {
	p := int(r.Partition)
	if p < 0 || p >= numPartitions {
		return fmt.Errorf("record from unexpected partition %d (offset %d)", r.Partition, r.Offset)
	}
	n := c.got[p]
	if n >= c.expected(p) {
		return fmt.Errorf("partition %d: unexpected extra record at offset %d (key %q): want exactly %d records",
			p, r.Offset, r.Key, c.expected(p))
	}
	i := c.firstIndex(p) + n*numPartitions
	w := c.want(i)
	where := fmt.Sprintf("partition %d offset %d (record #%d there, expected index %d)", p, r.Offset, n, i)
	if r.Offset != int64(n) {
		return fmt.Errorf("%s: got offset %d, want %d (key %q)", where, r.Offset, n, r.Key)
	}
	if string(r.Key) != w.Key {
		return fmt.Errorf("%s: key %q, want %q", where, r.Key, w.Key)
	}
	if string(r.Value) != w.Value {
		return fmt.Errorf("%s: value %q (%d bytes), want %q (%d bytes)", where,
			abbrev(r.Value), len(r.Value), abbrev([]byte(w.Value)), len(w.Value))
	}
	if !headersEqual(r.Headers, w.Headers) {
		return fmt.Errorf("%s: headers %v, want %v", where, r.Headers, w.Headers)
	}
	if w.Timestamp != 0 && r.Timestamp != w.Timestamp {
		return fmt.Errorf("%s: timestamp %d, want %d", where, r.Timestamp, w.Timestamp)
	}
	if w.Timestamp == 0 && (r.Timestamp < c.tsMin || r.Timestamp > c.tsMax) {
		return fmt.Errorf("%s: timestamp %d outside the test's window [%d, %d]", where, r.Timestamp, c.tsMin, c.tsMax)
	}
	c.got[p]++
	return nil
}

func headersEqual(a, b []header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func abbrev(b []byte) []byte {
	if len(b) <= 40 {
		return b
	}
	return append(bytes.Clone(b[:37]), "..."...)
}
