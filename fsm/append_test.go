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
