package fsm

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// TestLogAppendTimeStampsBatches: from LevelLogAppendTime on, an append to
// a topic with message.timestamp.type=LogAppendTime writes the batch marked
// as holding append times, stamped with the command's time and with a CRC
// that matches again (a Kafka client checks it), and answers that time; a
// CreateTime topic's batch, and any batch below the level, is written as
// sent. The command's own bytes are not touched.
func TestLogAppendTimeStampsBatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level Level
		typ   string
		stamp bool
	}{
		{"LogAppendTime topic", LevelLogAppendTime, "LogAppendTime", true},
		{"CreateTime topic", LevelLogAppendTime, "CreateTime", false},
		{"below the level", LevelPruneExtAborted, "LogAppendTime", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openFSM(t, t.TempDir())
			f.Apply(1, Encode(&SetFeatureLevel{Level: tc.level}))
			f.Apply(2, Encode(&CreateTopic{Name: "t", Partitions: 1, Configs: []Config{{"message.timestamp.type", tc.typ}}}))
			sent := fakeBatch(2, 1000, []byte("records"))
			cmd := &Append{NowMs: 1_700_000_000_123, Batches: []Batch{{Topic: "t", Data: sent, LastOffsetDelta: 1, MaxTimestamp: 1000, ProducerID: -1}}}
			res := f.Apply(3, EncodeAppend(cmd)).(*AppendResults).Results[0]
			if !bytes.Equal(cmd.Batches[0].Data, fakeBatch(2, 1000, []byte("records"))) {
				t.Fatal("the command's batch bytes were changed")
			}
			got, err := f.Partition("t", 0).Log.Read(0, 1<<20)
			if err != nil || len(got) != len(sent) {
				t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(sent))
			}
			attrs := binary.BigEndian.Uint16(got[21:])
			maxTs := int64(binary.BigEndian.Uint64(got[35:]))
			crcOK := binary.BigEndian.Uint32(got[17:]) == crc32.Checksum(got[21:], castagnoli)
			if tc.stamp {
				if res.LogAppendTime != cmd.NowMs || attrs&0x08 == 0 || maxTs != cmd.NowMs || !crcOK {
					t.Errorf("answered append time %d; stored attributes %#x, max timestamp %d, CRC matches %v; want the command's time %d, the append-time bit, a matching CRC",
						res.LogAppendTime, attrs, maxTs, crcOK, cmd.NowMs)
				}
				if at, err := f.Partition("t", 0).Log.FindTimestamp(cmd.NowMs); err != nil || len(at) == 0 {
					t.Errorf("no batch found by the append time: %v", err)
				}
				return
			}
			if res.LogAppendTime > 0 || !bytes.Equal(got[8:], sent[8:]) {
				t.Errorf("answered append time %d, stored bytes changed %v; want the batch as sent", res.LogAppendTime, !bytes.Equal(got[8:], sent[8:]))
			}
		})
	}
}

// TestDecodedBatchesSayWhereTheyAreInTheEntry: each batch of a decoded
// Append names where its bytes start in the entry, so the Raft log's copy
// of a batch can be found without decoding again, whatever the lengths of
// the topic names and batches before it.
func TestDecodedBatchesSayWhereTheyAreInTheEntry(t *testing.T) {
	cmd := &Append{NowMs: 7}
	for i, n := range []int{0, 1, 127, 128, 16 << 10, 300} {
		cmd.Batches = append(cmd.Batches, Batch{
			Topic: string(bytes.Repeat([]byte{'t'}, 1+i*70)), Partition: int32(i), ProducerID: -1,
			Data: fakeBatch(1, 1, bytes.Repeat([]byte{byte('a' + i)}, n)),
		})
	}
	for name, entry := range map[string][]byte{"EncodeAppend": EncodeAppend(cmd), "Encode": Encode(cmd)} {
		c, err := Decode(entry)
		if err != nil {
			t.Fatal(err)
		}
		got := c.(*Append)
		for i, b := range got.Batches {
			want := cmd.Batches[i].Data
			if b.DataPos <= 0 || b.DataPos+len(want) > len(entry) || !bytes.Equal(entry[b.DataPos:b.DataPos+len(want)], want) {
				t.Fatalf("%s: batch %d at %d of a %d-byte entry is not there", name, i, b.DataPos, len(entry))
			}
		}
	}
}
