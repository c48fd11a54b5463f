package iggybackend

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/gateway/records"
)

// The CPU kgate spends per batch on the Iggy data path, without the
// network: 1,000 records of 1 KiB, as kgate-bench sends them.

func benchRecords(n, size int) []records.Record {
	recs := make([]records.Record, n)
	now := time.Now().UnixMilli()
	for i := range recs {
		v := make([]byte, size)
		v[0] = byte(i)
		recs[i] = records.Record{Value: v, Timestamp: now}
	}
	return recs
}

// BenchmarkProducePath: Kafka batch → records → Iggy messages → one
// SendMessages frame, per dialect.
func BenchmarkProducePath(b *testing.B) {
	recs := benchRecords(1000, 1024)
	data, err := records.Builder{ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0}.Build(recs)
	if err != nil {
		b.Fatal(err)
	}
	ids := newIDSource()
	for _, d := range []iggy.Dialect{iggy.Current, iggy.Legacy} {
		b.Run(d.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				hdr, rs, err := records.Records(data, 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				msgs, err := EncodeBatch(rs, hdr, ids.forBatch(gatewayBatch(hdr)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := iggy.SendMessages(d, iggy.NamedID("kafka"), iggy.NamedID("t"), iggy.ToPartition(0), msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchPath: a PollMessages reply of 1,000 messages → polled
// messages → one Kafka batch.
func BenchmarkFetchPath(b *testing.B) {
	recs := benchRecords(1000, 1024)
	data, _ := records.Builder{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}.Build(recs)
	hdr, rs, _ := records.Records(data, 64<<20)
	msgs, _ := EncodeBatch(rs, hdr, newIDSource().forBatch(gatewayBatch(hdr)))
	body := legacyPollReply(msgs)
	// A fresh buffer each time (Read), and one reused as a fetch's pooled
	// buffers are (ReadInto).
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "reused"}[reuse], func(b *testing.B) {
			var buf []byte
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := iggy.DecodePollMessagesReply(iggy.Legacy, body)
				if err != nil {
					b.Fatal(err)
				}
				out, n, err := AppendBatch(buf[:0], r.Messages, 1<<30)
				if err != nil || n != len(msgs) {
					b.Fatal(n, err)
				}
				if reuse {
					buf = out
				}
			}
		})
	}
}

func gatewayBatch(hdr records.Header) gateway.ProduceBatch {
	return gateway.ProduceBatch{ProducerID: hdr.ProducerID, ProducerEpoch: hdr.ProducerEpoch, BaseSequence: hdr.BaseSequence}
}

// legacyPollReply is the body a legacy server answers a poll of msgs with.
func legacyPollReply(msgs []iggy.Message) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(msgs)-1))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msgs)))
	for i, m := range msgs {
		h, _ := iggy.EncodeUserHeaders(m.Headers)
		b = binary.LittleEndian.AppendUint64(b, 0)
		b = append(b, m.ID[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(i))
		b = binary.LittleEndian.AppendUint64(b, m.OriginTimestamp)
		b = binary.LittleEndian.AppendUint64(b, m.OriginTimestamp)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Payload)))
		b = binary.LittleEndian.AppendUint64(b, 0)
		b = append(b, m.Payload...)
		b = append(b, h...)
	}
	return b
}
