package main

import (
	"encoding/binary"
	"strings"
	"testing"
)

func benchKey(producer uint32, seq uint64) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint32(k, producer)
	binary.BigEndian.PutUint64(k[4:], seq)
	return k
}

// The read back of a batch mode accepts each committed record once and
// fails on anything else: a record read twice, one of a transaction that
// did not commit, an unknown producer or a foreign key.
func TestKeyCheck(t *testing.T) {
	k := newKeyCheck([]int64{2, 1})
	for _, key := range [][]byte{benchKey(0, 0), benchKey(0, 1), benchKey(1, 0)} {
		if err := k.check(key); err != nil {
			t.Fatalf("committed record %x: %v", key, err)
		}
	}
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{benchKey(0, 1), "read twice"},
		{benchKey(1, 1), "not committed"},
		{benchKey(0, 1<<40), "not committed"},
		{benchKey(2, 0), "producer 2 of 2"},
		{nil, "0 bytes"},
		{[]byte("thirteen byte"), "13 bytes"},
	} {
		err := k.check(c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key %x: error %v, want one containing %q", c.key, err, c.want)
		}
	}
}
